-- The otp-dispatch service's schema (docs/otp.md). Runs with search_path set to the service's
-- schema; every statement of the service names its tables with that schema.

-- One row per code flow (Start, then its Resends). The code itself is never stored here: only
-- HMAC-SHA256(key, verification id || code), the key derived from AUTH_OTP_SECRET.
CREATE TABLE verifications (
    id uuid PRIMARY KEY,
    channel text NOT NULL CHECK (channel IN ('sms', 'email')),
    -- Normalized: E.164 for SMS, lower-cased email address.
    destination text NOT NULL CHECK (octet_length(destination) BETWEEN 1 AND 320),
    -- SMS only: the country calling code ('91'), for the allow/deny lists and the pumping guard.
    calling_code text NOT NULL DEFAULT '',
    purpose text NOT NULL CHECK (purpose IN ('login', 'signup', 'verify', 'password_reset')),
    locale text NOT NULL,
    client_ip text NOT NULL DEFAULT '',
    code_mac bytea NOT NULL CHECK (octet_length(code_mac) = 32),
    created_at timestamptz NOT NULL,
    -- Expiry of the current code (a resend moves it).
    expires_at timestamptz NOT NULL,
    -- When the current code was issued (start or last resend): the resend spacing counts from it.
    last_sent_at timestamptz NOT NULL,
    resends integer NOT NULL DEFAULT 0 CHECK (resends >= 0),
    -- pending: the code may be checked; verified: consumed by a right code; failed: killed by
    -- the wrong code that locked the destination.
    status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'verified', 'failed')),
    verified_at timestamptz,
    -- A configured test destination: fixed code, no limits, never sent.
    test_destination boolean NOT NULL DEFAULT false
);

CREATE INDEX verifications_expires_at_idx ON verifications (expires_at);
-- The SMS-pumping guard counts the last hour's codes and verifications per calling code.
CREATE INDEX verifications_calling_code_created_idx ON verifications (calling_code, created_at)
    WHERE channel = 'sms' AND NOT test_destination;

-- Everything a limit counts within a sliding window: starts per destination and per client
-- IP, resends per destination, wrong codes per destination. Counted (and inserted) under a
-- transaction-scoped advisory lock on the key, so concurrent calls cannot overshoot.
CREATE TABLE limit_events (
    kind text NOT NULL CHECK (kind IN ('start_destination', 'start_ip', 'resend', 'wrong_code')),
    key text NOT NULL,
    occurred_at timestamptz NOT NULL
);

CREATE INDEX limit_events_kind_key_idx ON limit_events (kind, key, occurred_at);
CREATE INDEX limit_events_occurred_at_idx ON limit_events (occurred_at);

-- A destination locked after too many wrong codes: checks and starts for it are refused until
-- locked_until.
CREATE TABLE destination_locks (
    destination text PRIMARY KEY,
    locked_until timestamptz NOT NULL
);

-- The transactional outbox: one row per message to send, written in the same transaction as
-- the verification (or resend) it carries. Dispatchers claim rows with FOR UPDATE SKIP LOCKED.
CREATE TABLE messages (
    id uuid PRIMARY KEY,
    verification_id uuid NOT NULL REFERENCES verifications (id) ON DELETE CASCADE,
    channel text NOT NULL CHECK (channel IN ('sms', 'email')),
    destination text NOT NULL,
    calling_code text NOT NULL DEFAULT '',
    -- The code in clear, only while the message may still be sent: wiped (NULL) once it was
    -- sent, dead-lettered or superseded by a resend.
    code text,
    purpose text NOT NULL,
    locale text NOT NULL,
    created_at timestamptz NOT NULL,
    -- queued: waiting (first try or retry at next_attempt_at); sending: claimed by a worker
    -- until claimed_until (after that any worker may claim it again); sent: a provider accepted
    -- it; delivered / failed: terminal (failed = dead letter, or the provider reported failure);
    -- superseded: a resend replaced it before it was sent.
    state text NOT NULL DEFAULT 'queued'
        CHECK (state IN ('queued', 'sending', 'sent', 'delivered', 'failed', 'superseded')),
    -- Which provider of the channel: 0 the primary, 1 the secondary (failover).
    provider_index integer NOT NULL DEFAULT 0,
    provider text NOT NULL DEFAULT '',
    -- Attempts with the current provider (a claim counts as one).
    attempts integer NOT NULL DEFAULT 0,
    total_attempts integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL,
    claimed_until timestamptz,
    claimed_by text,
    last_error text NOT NULL DEFAULT '',
    provider_message_id text,
    updated_at timestamptz NOT NULL,
    sent_at timestamptz,
    CHECK (state IN ('queued', 'sending') OR code IS NULL)
);

-- What the dispatchers look for: due queued messages and expired claims.
CREATE INDEX messages_due_idx ON messages (next_attempt_at) WHERE state = 'queued';
CREATE INDEX messages_claimed_idx ON messages (claimed_until) WHERE state = 'sending';
CREATE INDEX messages_verification_idx ON messages (verification_id, created_at);
CREATE INDEX messages_provider_message_id_idx ON messages (provider_message_id)
    WHERE provider_message_id IS NOT NULL;
