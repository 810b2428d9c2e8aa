-- Browser sign-in (issue 21; docs/identity.md, "Browser sign-in"). A flow StartOAuth began and
-- the provider's callback finishes, keyed by SHA-256 of the `state` sent to the provider: single
-- use (FinishOAuth deletes it), 10 minutes. In PostgreSQL so that any replica finishes a flow
-- another started.
CREATE TABLE oauth_flows (
    state_hash bytea PRIMARY KEY,
    provider text NOT NULL CHECK (provider IN ('apple', 'google', 'facebook')),
    -- Where the app is sent back, as the app gave it (on AUTH_OAUTH_REDIRECT_URLS).
    redirect_to text NOT NULL,
    -- The app's own state, given back as is.
    app_state text NOT NULL,
    -- The app's PKCE challenge (S256), checked by ExchangeOAuthCode.
    code_challenge text NOT NULL,
    -- The nonce the provider's ID token must carry (as sent: hashed for Apple).
    nonce text NOT NULL,
    -- PKCE toward the provider ('' when it is not sent one).
    provider_code_verifier text NOT NULL,
    -- Set: the flow links the provider to this user instead of signing in.
    link_user_id uuid,
    expires_at timestamptz NOT NULL
);
CREATE INDEX oauth_flows_expiry ON oauth_flows (expires_at);

-- The one-time code FinishOAuth gave the app, by SHA-256: single use (ExchangeOAuthCode deletes
-- it), 5 minutes, bound to the app's PKCE challenge.
CREATE TABLE oauth_codes (
    code_hash bytea PRIMARY KEY,
    user_id uuid NOT NULL REFERENCES users (id),
    provider text NOT NULL CHECK (provider IN ('apple', 'google', 'facebook')),
    code_challenge text NOT NULL,
    -- The sign-in made the user (is_new_user).
    created boolean NOT NULL,
    expires_at timestamptz NOT NULL
);
CREATE INDEX oauth_codes_expiry ON oauth_codes (expires_at);
