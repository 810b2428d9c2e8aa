-- Issue 22: a confirmation link followed by a client using PKCE ends in a one-time code of
-- oauth_codes like a browser sign-in's (IssueSignInCode), with provider 'email_link'.
ALTER TABLE oauth_codes DROP CONSTRAINT oauth_codes_provider_check;
ALTER TABLE oauth_codes ADD CONSTRAINT oauth_codes_provider_check
    CHECK (provider IN ('apple', 'google', 'facebook', 'email_link'));
