-- NIST SP 800-63B's consecutive-failure limit (issue 19, item 6). The wrong codes counted in
-- `limit_events` lock a destination for 15 minutes after 5 in 15 minutes; a patient guesser who
-- waits out each lock gets about 480 guesses a day. This counts a destination's wrong codes since
-- its last right one, with no window: at AUTH_OTP_MAX_CONSECUTIVE_FAILURES (100) the destination
-- answers 403 factor_locked until `authctl otp unlock`. A right code deletes the row; the purge
-- leaves it alone.
CREATE TABLE consecutive_failures (
    destination text PRIMARY KEY,
    failures integer NOT NULL,
    last_failed_at timestamptz NOT NULL
);
