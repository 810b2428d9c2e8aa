-- NIST SP 800-63B's consecutive-failure limit (issue 19, item 6). `password_failures` counts the
-- failures of a window (10 in 15 minutes); a patient guesser who waits out each window is never
-- stopped by it. This counts the failed password attempts of an email since its last success,
-- with no window: at AUTH_IDENTITY_MAX_CONSECUTIVE_FAILURES (100) the password of that email is
-- locked (403 factor_locked) until a completed password reset or `authctl users unlock`. Keyed
-- like `password_failures` by SHA-256 of the email, for accounts or not.
CREATE TABLE password_consecutive_failures (
    email_hash bytea PRIMARY KEY,
    failures integer NOT NULL,
    last_failed_at timestamptz NOT NULL
);
