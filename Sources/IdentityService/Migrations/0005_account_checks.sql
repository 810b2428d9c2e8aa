-- Issue 23 §4: the account-existence budget (answers that tell whether an account exists:
-- ContactExists and SignUp with account_check), per client IP per hour, counted here so that
-- every replica of the gateway and of identity spends one budget. Keyed by the SHA-256 of the
-- address's rate-limit key (an IPv6 /64): no address is stored. Rows older than the hour are
-- deleted by later checks.
CREATE TABLE account_checks (
    ip_hash bytea NOT NULL,
    checked_at timestamptz NOT NULL
);
CREATE INDEX account_checks_ip ON account_checks (ip_hash, checked_at);
CREATE INDEX account_checks_expiry ON account_checks (checked_at);
