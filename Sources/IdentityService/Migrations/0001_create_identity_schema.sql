-- The identity service's schema (docs/identity.md). Runs with search_path set to the service's
-- schema; every statement of the service names its tables with that schema.

-- One row per account. A deleted account keeps its row as a tombstone (id, created_at,
-- deleted_at) with every personal field cleared, so its id is never reused and the audit trail
-- still points somewhere.
CREATE TABLE users (
    id uuid PRIMARY KEY,
    -- E.164; unique among accounts that have one.
    phone text CHECK (phone ~ '^\+[1-9][0-9]{7,14}$'),
    -- Stored lower-cased; unique among accounts that have one.
    email text CHECK (email = lower(email) AND octet_length(email) <= 255),
    phone_verified boolean NOT NULL DEFAULT false,
    email_verified boolean NOT NULL DEFAULT false,
    display_name text NOT NULL DEFAULT '',
    photo_url text NOT NULL DEFAULT '',
    onboarding_completed boolean NOT NULL DEFAULT false,
    -- scrypt PHC string, or NULL for accounts without a password.
    password_hash text,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    deleted_at timestamptz,
    CHECK (deleted_at IS NULL OR (phone IS NULL AND email IS NULL AND password_hash IS NULL
        AND display_name = '' AND photo_url = ''))
);
CREATE UNIQUE INDEX users_phone_key ON users (phone) WHERE phone IS NOT NULL;
CREATE UNIQUE INDEX users_email_key ON users (email) WHERE email IS NOT NULL;

-- A provider account (Apple, Google, Facebook) linked to a user. Deleted with the user.
CREATE TABLE provider_identities (
    provider text NOT NULL CHECK (provider IN ('apple', 'google', 'facebook')),
    subject text NOT NULL CHECK (octet_length(subject) BETWEEN 1 AND 255),
    user_id uuid NOT NULL REFERENCES users (id),
    -- The email the provider gave when the identity was linked (lower-cased), or NULL.
    email text,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (provider, subject)
);
CREATE INDEX provider_identities_user ON provider_identities (user_id);

-- Failed password sign-ins, by SHA-256 of the lower-cased email (also for emails without an
-- account, so the lockout tells nothing about which emails exist). Rows older than the window
-- are deleted as new failures arrive and on success.
CREATE TABLE password_failures (
    email_hash bytea NOT NULL,
    failed_at timestamptz NOT NULL
);
CREATE INDEX password_failures_email ON password_failures (email_hash, failed_at);

-- ID tokens already used to sign in (provider + jti, or + SHA-256 of the token when it has no
-- jti), kept until the token expires so it cannot be replayed.
CREATE TABLE used_id_tokens (
    provider text NOT NULL,
    token_key text NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (provider, token_key)
);
CREATE INDEX used_id_tokens_expiry ON used_id_tokens (expires_at);

-- Append-only audit trail. Never holds a password, code or token; `details` holds no personal
-- data either. The only change allowed to a row is clearing its client_ip (account deletion).
CREATE TABLE audit_events (
    id bigserial PRIMARY KEY,
    user_id uuid,
    kind text NOT NULL,
    method text NOT NULL DEFAULT '',
    occurred_at timestamptz NOT NULL,
    client_ip text NOT NULL DEFAULT '',
    request_id text NOT NULL DEFAULT '',
    caller text NOT NULL DEFAULT ''
);
CREATE INDEX audit_events_user ON audit_events (user_id, occurred_at DESC, id DESC);

CREATE FUNCTION audit_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' OR TG_OP = 'TRUNCATE' THEN
        RAISE EXCEPTION 'audit_events is append-only' USING ERRCODE = 'check_violation';
    END IF;
    IF NEW.client_ip <> '' OR (NEW.id, NEW.user_id, NEW.kind, NEW.method, NEW.occurred_at, NEW.request_id, NEW.caller)
        IS DISTINCT FROM (OLD.id, OLD.user_id, OLD.kind, OLD.method, OLD.occurred_at, OLD.request_id, OLD.caller) THEN
        RAISE EXCEPTION 'audit_events is append-only' USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER audit_events_append_only BEFORE UPDATE OR DELETE ON audit_events
    FOR EACH ROW EXECUTE FUNCTION audit_events_append_only();
CREATE TRIGGER audit_events_no_truncate BEFORE TRUNCATE ON audit_events
    FOR EACH STATEMENT EXECUTE FUNCTION audit_events_append_only();
