-- The session service's schema (docs/session.md). Runs with search_path set to the service's
-- schema; every statement of the service names its tables with that schema.

-- One row per signed-in device. The refresh-token chain of a session is serialized by
-- `generation`: a refresh succeeds only by moving it from the presented token's generation to
-- the next one in a single compare-and-set statement.
CREATE TABLE sessions (
    id uuid PRIMARY KEY,
    user_id text NOT NULL CHECK (octet_length(user_id) BETWEEN 1 AND 128),
    amr text[] NOT NULL CHECK (cardinality(amr) BETWEEN 1 AND 8),
    device_platform text NOT NULL DEFAULT '',
    device_name text NOT NULL DEFAULT '',
    device_user_agent text NOT NULL DEFAULT '',
    -- Where the session started, and where it was last refreshed from.
    client_ip text NOT NULL DEFAULT '',
    last_client_ip text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL,
    last_refreshed_at timestamptz,
    -- Absolute end of the session (created_at + session lifetime, 30 days by default).
    expires_at timestamptz NOT NULL,
    -- Expiry of the current refresh token: min(its issue + 7 days, expires_at). A session is
    -- live while revoked_at IS NULL AND refresh_expires_at > now.
    refresh_expires_at timestamptz NOT NULL,
    revoked_at timestamptz,
    revoke_reason text,
    generation bigint NOT NULL DEFAULT 0 CHECK (generation >= 0),
    CHECK ((revoked_at IS NULL) = (revoke_reason IS NULL)),
    CHECK (refresh_expires_at <= expires_at)
) WITH (fillfactor = 90);

-- ListSessions and RevokeAll look at a user's sessions that are not revoked.
CREATE INDEX sessions_user_id_live_idx ON sessions (user_id) WHERE revoked_at IS NULL;
-- Clean-up of dead sessions.
CREATE INDEX sessions_refresh_expires_at_idx ON sessions (refresh_expires_at);

-- Every refresh token ever issued, by SHA-256 of its 32 raw bytes; the token itself is never
-- stored. Old tokens stay so that presenting one again is recognised as reuse.
CREATE TABLE refresh_tokens (
    token_hash bytea PRIMARY KEY CHECK (octet_length(token_hash) = 32),
    session_id uuid NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    generation bigint NOT NULL CHECK (generation >= 0),
    issued_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    -- Set when the token was exchanged for its successor.
    used_at timestamptz,
    successor_hash bytea CHECK (octet_length(successor_hash) = 32),
    -- The successor pair (refresh token + access token), AES-256-GCM under a key derived from
    -- the master key and THIS token, so only a holder of this token can open it: a racing or
    -- retried refresh inside the grace window gets the same pair back.
    successor_sealed bytea,
    -- One token per generation of a session: a fork cannot be stored.
    UNIQUE (session_id, generation),
    CHECK ((used_at IS NULL) = (successor_hash IS NULL)),
    CHECK ((used_at IS NULL) = (successor_sealed IS NULL))
) WITH (fillfactor = 90);

-- Access-token signing keys (ES256). The private scalar is wrapped with AES-256-GCM under a key
-- derived from AUTH_MASTER_KEY, with the kid in the additional data.
CREATE TABLE signing_keys (
    kid text PRIMARY KEY CHECK (octet_length(kid) BETWEEN 1 AND 64),
    algorithm text NOT NULL CHECK (algorithm = 'ES256'),
    private_key_sealed bytea NOT NULL,
    public_jwk text NOT NULL,
    -- Published in the JWKS from created_at; signs from signs_from (after the publish delay).
    created_at timestamptz NOT NULL,
    signs_from timestamptz NOT NULL CHECK (signs_from >= created_at),
    -- Set when a newer key takes over: the newer key's signs_from.
    signs_until timestamptz,
    -- signs_until + access-token lifetime + clock skew: after it the key is out of the JWKS.
    retire_after timestamptz,
    CHECK ((signs_until IS NULL) = (retire_after IS NULL))
);

-- At most one key without an end: two replicas bootstrapping at once cannot both succeed.
CREATE UNIQUE INDEX signing_keys_one_open_key_idx ON signing_keys ((true)) WHERE signs_until IS NULL;

-- Things a security team wants to see: refresh-token reuse (a stolen token), ...
CREATE TABLE security_events (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    session_id uuid,
    user_id text NOT NULL,
    kind text NOT NULL,
    occurred_at timestamptz NOT NULL,
    client_ip text NOT NULL DEFAULT '',
    details jsonb NOT NULL DEFAULT '{}'
);

CREATE INDEX security_events_user_id_idx ON security_events (user_id, occurred_at);
CREATE INDEX security_events_session_id_idx ON security_events (session_id);
