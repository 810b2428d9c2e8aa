"""Drives the Supabase door (/auth/v1) with Supabase's official Python client, supabase-auth
(pinned in requirements.txt), as an app written against Supabase would: the journeys of
docs/supabase.md that this backend serves so far. Exits 0 and prints one JSON line of what it
saw; any difference from what Supabase answers raises (exit 1).

    python journeys.py <gateway base URL> <email of a confirmed account> <its password>
"""
import json
import sys

from supabase_auth import SyncGoTrueClient
from supabase_auth.errors import AuthApiError


def client(base):
    return SyncGoTrueClient(
        url=base + "/auth/v1",
        headers={"apikey": "anon-key-of-the-tests", "Authorization": "Bearer anon-key-of-the-tests"},
        auto_refresh_token=False,
        persist_session=False,
    )


def expect_error(call, code, status):
    try:
        call()
    except AuthApiError as error:
        assert error.code == code, f"expected {code}, got {error.code} ({error.message})"
        assert error.status == status, f"expected HTTP {status} for {code}, got {error.status}"
        return error
    raise AssertionError(f"expected {code}, the call succeeded")


def main():
    base, email, password = sys.argv[1:4]
    seen = {}
    auth = client(base)

    # A wrong password: 400 invalid_credentials, "Invalid login credentials" (seed 002 matches it).
    error = expect_error(
        lambda: auth.sign_in_with_password({"email": email, "password": "Not-The-Password-9"}),
        "invalid_credentials",
        400,
    )
    assert error.message == "Invalid login credentials", error.message
    seen["wrong_password"] = error.code

    # Password sign-in: a session whose user Supabase's models decode.
    signed_in = auth.sign_in_with_password({"email": email, "password": password})
    session, user = signed_in.session, signed_in.user
    assert session is not None and session.access_token and session.refresh_token
    assert session.expires_in > 0 and session.expires_at is not None
    assert user.email == email and user.aud == "authenticated" and user.role == "authenticated"
    assert user.email_confirmed_at is not None and user.is_anonymous is False
    assert user.app_metadata["provider"] == "email" and "email" in user.app_metadata["providers"]
    assert any(identity.provider == "email" for identity in user.identities or [])
    seen["user_id"] = user.id

    # The signed-in user, from the server.
    fetched = auth.get_user()
    assert fetched is not None and fetched.user.id == user.id

    # Refresh: new tokens; the old refresh token used again is refresh_token_already_used.
    refreshed = auth.refresh_session()
    assert refreshed.session is not None
    assert refreshed.session.refresh_token != session.refresh_token
    replay = client(base)
    expect_error(lambda: replay._refresh_access_token(session.refresh_token), "refresh_token_already_used", 400)
    seen["refresh_reuse"] = "refresh_token_already_used"

    # The reuse ended the family (our rule, docs/supabase.md): sign in again, then sign out
    # (global, the client's default); the token is then refused with bad_jwt.
    again = auth.sign_in_with_password({"email": email, "password": password})
    token = again.session.access_token
    auth.sign_out()
    expect_error(lambda: client(base).get_user(token), "bad_jwt", 403)
    seen["signed_out"] = True

    # An unknown grant: validation_failed.
    expect_error(
        lambda: auth._request("POST", "token", body={}, query=__import__("httpx").QueryParams(grant_type="magic")),
        "validation_failed",
        400,
    )
    print(json.dumps(seen, sort_keys=True))


if __name__ == "__main__":
    main()
