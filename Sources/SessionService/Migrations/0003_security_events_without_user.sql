-- Security events that concern no user: signing-key rotation and rewrap, refused callers
-- (docs/session.md, "Security events"). Their user_id is NULL.
ALTER TABLE security_events ALTER COLUMN user_id DROP NOT NULL;

COMMENT ON TABLE security_events IS
    'kinds: refresh_token_reused, refresh_of_revoked_session, refresh_of_expired_session, '
    'signing_key_rotated, signing_keys_rewrapped, caller_not_allowed (docs/session.md)';
