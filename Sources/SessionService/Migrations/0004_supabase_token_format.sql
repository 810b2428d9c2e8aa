-- Issue 22: the Supabase door's sessions mint access tokens with the claims Supabase's clients
-- read (docs/session.md, "Access tokens"). The format, and the email and phone those tokens
-- carry (as at sign-in), are the session's, so that every refresh mints the same shape.
ALTER TABLE sessions ADD COLUMN token_format text NOT NULL DEFAULT 'standard'
    CHECK (token_format IN ('standard', 'supabase'));
ALTER TABLE sessions ADD COLUMN claims_email text NOT NULL DEFAULT '' CHECK (octet_length(claims_email) <= 320);
ALTER TABLE sessions ADD COLUMN claims_phone text NOT NULL DEFAULT '' CHECK (octet_length(claims_phone) <= 32);
