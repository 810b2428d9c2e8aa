"""Drives the Supabase door (/auth/v1) with Supabase's official Python client, supabase-auth
(pinned in requirements.txt), as an app written against Supabase would: the journeys of
docs/supabase.md that this backend serves so far. Exits 0 and prints one JSON line of what it
saw; any difference from what Supabase answers raises (exit 1).

    python journeys.py <gateway base URL> <email of a confirmed account> <its password>
    python journeys.py codes-send <base URL> <new email> <new phone> <another new email> <another new phone>
    python journeys.py codes-verify <base URL> <email> <its sign-up code> <phone> <its code> <other email> <its code> <other phone> <its code>
    python journeys.py id-token <base URL> <provider> <ID token> <raw nonce>
    python journeys.py oauth-url <base URL> <provider> <redirect_to>
    python journeys.py oauth-exchange <base URL> <code> <verifier> <provider to link> <redirect_to>
    python journeys.py identities <base URL> <access token> <refresh token>
    python journeys.py email-change-send <base URL> <email> <password> <new email> <another account's email>
    python journeys.py email-change-verify <base URL> <new email> <its code>
    python journeys.py rate-limit <base URL> <email>
    python journeys.py recover-send <base URL> <email of an account>
    python journeys.py recover-verify <base URL> <email> <its recovery code> <its password>
    python journeys.py link-signup <base URL> <new email> <redirect_to> <implicit|pkce>
    python journeys.py link-session <base URL> <the link's redirect (Location)> <email> [<verifier>]

The code journeys come in two steps because the codes reach the test's webhook receiver, not
this script: the test runs `codes-send`, reads the codes, then runs `codes-verify`.
"""
import json
import sys

from supabase_auth import SyncGoTrueClient
from supabase_auth.errors import AuthApiError


def client(base, flow_type="implicit"):
    return SyncGoTrueClient(
        url=base + "/auth/v1",
        headers={"apikey": "anon-key-of-the-tests", "Authorization": "Bearer anon-key-of-the-tests"},
        auto_refresh_token=False,
        persist_session=False,
        flow_type=flow_type,
    )


def expect_error(call, code, status):
    try:
        call()
    except AuthApiError as error:
        assert error.code == code, f"expected {code}, got {error.code} ({error.message})"
        assert error.status == status, f"expected HTTP {status} for {code}, got {error.status}"
        return error
    raise AssertionError(f"expected {code}, the call succeeded")


def codes_send(base, email, phone, otp_email, password_phone):
    """Sign-up (confirm first), a taken email, a weak password, a phone code, otp_disabled."""
    seen = {}
    auth = client(base)
    password = "Sign-Up-Password-7"
    signed_up = auth.sign_up(
        {"email": email, "password": password, "options": {"data": {"display_name": "Asha Rao"}}}
    )
    assert signed_up.session is None, "sign-up confirms the email first: no session"
    user = signed_up.user
    assert user is not None and user.email == email and user.email_confirmed_at is None
    assert user.user_metadata.get("display_name") == "Asha Rao", user.user_metadata
    seen["signup_identities"] = len(user.identities or [])

    # The same email again: answered like a new account (another id), nothing else told.
    taken = auth.sign_up({"email": email, "password": password})
    assert taken.session is None and taken.user is not None and taken.user.id != user.id
    assert taken.user.email == email and len(taken.user.identities or []) == seen["signup_identities"]
    seen["taken_email_answered_like_new"] = True

    # Not confirmed yet: email_not_confirmed.
    expect_error(
        lambda: auth.sign_in_with_password({"email": email, "password": password}), "email_not_confirmed", 400
    )

    # A weak password: 422 weak_password with its reasons.
    try:
        auth.sign_up({"email": "weak-" + email, "password": "short"})
        raise AssertionError("a weak password was accepted")
    except Exception as error:  # AuthWeakPasswordError is an AuthApiError with reasons
        assert getattr(error, "code", None) == "weak_password", repr(error)
        assert getattr(error, "status", None) == 422, repr(error)
        assert getattr(error, "reasons", None) == ["length"], repr(error)
    seen["weak_password"] = "weak_password"

    # A phone code, the phone written without its "+" as Supabase's clients allow.
    answer = auth.sign_in_with_otp({"phone": phone.lstrip("+")})
    assert answer.user is None and answer.session is None
    # An email code to a new address (create_user defaults to true).
    answer = auth.sign_in_with_otp({"email": otp_email})
    assert answer.user is None and answer.session is None
    # A phone sign-up with a password: no session until the phone's code is verified.
    signed_up = auth.sign_up({"phone": password_phone, "password": "Phone-Password-5"})
    assert signed_up.session is None and signed_up.user.phone == password_phone.lstrip("+")
    assert signed_up.user.phone_confirmed_at is None
    expect_error(
        lambda: auth.sign_in_with_password({"phone": password_phone, "password": "Phone-Password-5"}),
        "phone_not_confirmed",
        400,
    )
    # Codes to an unknown email with should_create_user false: otp_disabled.
    expect_error(
        lambda: auth.sign_in_with_otp(
            {"email": "nobody-" + email, "options": {"should_create_user": False}}
        ),
        "otp_disabled",
        422,
    )
    seen["otp_disabled"] = "otp_disabled"
    print(json.dumps(seen, sort_keys=True))


def codes_verify(base, email, email_code, phone, phone_code, otp_email, otp_code, password_phone, password_phone_code):
    """verifyOtp for the sign-up's email and the phone code; a wrong code; resend."""
    seen = {}
    auth = client(base)
    wrong = "000000" if phone_code != "000000" else "000001"
    expect_error(
        lambda: auth.verify_otp({"phone": phone, "token": wrong, "type": "sms"}), "otp_expired", 403
    )
    confirmed = auth.verify_otp({"email": email, "token": email_code, "type": "signup"})
    assert confirmed.session is not None and confirmed.user.email == email
    assert confirmed.user.email_confirmed_at is not None
    assert confirmed.user.user_metadata.get("display_name") == "Asha Rao"
    # Confirmed: the password signs in now.
    signed_in = client(base).sign_in_with_password({"email": email, "password": "Sign-Up-Password-7"})
    assert signed_in.session is not None
    seen["signup_confirmed"] = True

    by_phone = auth.verify_otp({"phone": phone, "token": phone_code, "type": "sms"})
    assert by_phone.session is not None and by_phone.user.phone == phone.lstrip("+")
    assert by_phone.user.phone_confirmed_at is not None
    # A code is spent once.
    expect_error(
        lambda: auth.verify_otp({"phone": phone, "token": phone_code, "type": "sms"}), "otp_expired", 403
    )
    seen["phone_signed_in"] = True

    by_email = client(base).verify_otp({"email": otp_email, "token": otp_code, "type": "email"})
    assert by_email.session is not None and by_email.user.email == otp_email
    assert by_email.user.email_confirmed_at is not None
    seen["email_signed_in"] = True

    confirmed_phone = client(base).verify_otp({"phone": password_phone, "token": password_phone_code, "type": "sms"})
    assert confirmed_phone.session is not None and confirmed_phone.user.phone_confirmed_at is not None
    by_password = client(base).sign_in_with_password(
        {"phone": password_phone.lstrip("+"), "password": "Phone-Password-5"}
    )
    assert by_password.session is not None and by_password.user.id == confirmed_phone.user.id
    seen["phone_password"] = True

    answer = auth.resend({"type": "sms", "phone": phone})
    assert answer.user is None and answer.session is None
    seen["resent"] = True
    print(json.dumps(seen, sort_keys=True))


def id_token(base, provider, token, nonce):
    """signInWithIdToken with the raw nonce (the token carries its SHA-256), then again: replayed."""
    auth = client(base)
    signed_in = auth.sign_in_with_id_token({"provider": provider, "token": token, "nonce": nonce})
    assert signed_in.session is not None and signed_in.user is not None
    assert provider in signed_in.user.app_metadata["providers"], signed_in.user.app_metadata
    error = expect_error(
        lambda: auth.sign_in_with_id_token({"provider": provider, "token": token, "nonce": nonce}),
        "bad_oidc_token",
        400,
    )
    print(json.dumps({"id_token": provider, "replay": error.code}, sort_keys=True))


def oauth_url(base, provider, redirect_to):
    """signInWithOAuth (PKCE): the URL the app opens, and the verifier the client kept."""
    auth = client(base, flow_type="pkce")
    started = auth.sign_in_with_oauth({"provider": provider, "options": {"redirect_to": redirect_to}})
    assert started.provider == provider and "/auth/v1/authorize?" in started.url
    verifier = auth._storage.get_item(f"{auth._storage_key}-code-verifier")
    assert verifier, "the client kept no PKCE verifier"
    print(json.dumps({"url": started.url, "verifier": verifier}))


def oauth_exchange(base, code, verifier, link_provider, redirect_to):
    """exchangeCodeForSession, then linkIdentity's URL for another provider."""
    auth = client(base, flow_type="pkce")
    exchanged = auth.exchange_code_for_session({"auth_code": code, "code_verifier": verifier})
    session, user = exchanged.session, exchanged.user
    assert session is not None and user is not None
    # The same code again: spent.
    expect_error(
        lambda: client(base, flow_type="pkce").exchange_code_for_session(
            {"auth_code": code, "code_verifier": verifier}
        ),
        "flow_state_not_found",
        404,
    )
    linking = auth.link_identity({"provider": link_provider, "options": {"redirect_to": redirect_to}})
    assert "/" in linking.url
    print(
        json.dumps(
            {
                "email": user.email,
                "providers": user.app_metadata["providers"],
                "access_token": session.access_token,
                "refresh_token": session.refresh_token,
                "link_url": linking.url,
            }
        )
    )


def identities(base, access_token, refresh_token):
    """getUserIdentities, unlinkIdentity of a provider, and of an email (refused)."""
    auth = client(base)
    auth.set_session(access_token, refresh_token)
    listed = auth.get_user_identities().identities
    providers = sorted(identity.provider for identity in listed)
    google = next(identity for identity in listed if identity.provider == "google")
    auth.unlink_identity(google)
    after = sorted(identity.provider for identity in auth.get_user_identities().identities)
    email = next(identity for identity in listed if identity.provider == "email")
    expect_error(lambda: auth.unlink_identity(email), "validation_failed", 422)
    print(json.dumps({"before": providers, "after": after}))


def email_change_send(base, email, password, new_email, taken_email):
    """updateUser({email}): a code to the new email; another account's email: email_exists."""
    auth = client(base)
    auth.sign_in_with_password({"email": email, "password": password})
    expect_error(lambda: auth.update_user({"email": taken_email}), "email_exists", 422)
    answered = auth.update_user({"email": new_email})
    # The account keeps its email until the new one is proved.
    assert answered.user.email == email, answered.user.email
    print(json.dumps({"requested": True}))


def email_change_verify(base, new_email, code):
    """verifyOtp of type email_change: the new email is the account's, and a session answers."""
    changed = client(base).verify_otp({"email": new_email, "token": code, "type": "email_change"})
    assert changed.session is not None and changed.user.email == new_email, changed
    assert changed.user.email_confirmed_at is not None
    print(json.dumps({"changed": True}))


def rate_limit(base, email):
    """Password sign-ins past the per-IP budget: over_request_rate_limit (429), with Retry-After."""
    auth = client(base)
    for attempt in range(20):
        try:
            auth.sign_in_with_password({"email": email, "password": "Not-The-Password-9"})
        except AuthApiError as error:
            if error.code == "over_request_rate_limit":
                assert error.status == 429, error.status
                print(json.dumps({"limited_after": attempt}))
                return
            assert error.code == "invalid_credentials", error.code
    raise AssertionError("20 sign-ins were not limited")


def recover_send(base, email):
    """resetPasswordForEmail for an account's email and for an unknown one: the same answer."""
    auth = client(base)
    auth.reset_password_for_email(email)
    auth.reset_password_for_email("nobody-" + email)
    print(json.dumps({"recover_sent": True}))


def recover_verify(base, email, code, old_password):
    """verifyOtp of type recovery, then updateUser's password rules and metadata."""
    seen = {}
    auth = client(base)
    recovered = auth.verify_otp({"email": email, "token": code, "type": "recovery"})
    assert recovered.session is not None and recovered.user.email == email
    new_password = "Recovered-Password-8"
    updated = auth.update_user({"password": new_password})
    assert updated.user.email == email
    expect_error(
        lambda: client(base).sign_in_with_password({"email": email, "password": old_password}),
        "invalid_credentials",
        400,
    )
    ordinary = client(base)
    ordinary.sign_in_with_password({"email": email, "password": new_password})
    seen["recovered"] = True

    # A session that is not a recovery's needs the current password.
    expect_error(lambda: ordinary.update_user({"password": "Another-Password-9"}), "current_password_required", 400)
    expect_error(
        lambda: ordinary.update_user({"password": "Another-Password-9", "current_password": "Wrong-Password-1"}),
        "current_password_mismatch",
        400,
    )
    changed = ordinary.update_user({"password": "Another-Password-9", "current_password": new_password})
    assert changed.user.id == updated.user.id
    seen["current_password_rules"] = True

    renamed = ordinary.update_user({"data": {"display_name": "Asha Renamed"}})
    assert renamed.user.user_metadata.get("display_name") == "Asha Renamed", renamed.user.user_metadata
    seen["metadata_updated"] = True
    print(json.dumps(seen, sort_keys=True))


def link_signup(base, email, redirect_to, flow_type):
    """signUp with emailRedirectTo: the email then carries a confirmation link (the test reads
    it from the webhook). With PKCE, the verifier the client kept for the exchange."""
    auth = client(base, flow_type=flow_type)
    signed_up = auth.sign_up(
        {"email": email, "password": "Link-Password-8", "options": {"email_redirect_to": redirect_to}}
    )
    assert signed_up.session is None and signed_up.user.email == email
    verifier = auth._storage.get_item(f"{auth._storage_key}-code-verifier") or ""
    assert (verifier != "") == (flow_type == "pkce"), verifier
    print(json.dumps({"verifier": verifier}))


def link_session(base, location, email, verifier=""):
    """Where the followed link sent the browser, read as the client reads it: the session in
    the fragment (implicit), or a code exchangeCodeForSession redeems (PKCE)."""
    if verifier:
        auth = client(base, flow_type="pkce")
        code = __import__("urllib.parse").parse.parse_qs(__import__("urllib.parse").parse.urlparse(location).query)
        exchanged = auth.exchange_code_for_session({"auth_code": code["code"][0], "code_verifier": verifier})
        session = exchanged.session
    else:
        session, redirect_type = client(base)._get_session_from_url(location)
        assert redirect_type == "signup", redirect_type
    assert session is not None and session.user.email == email
    assert session.user.email_confirmed_at is not None
    # Confirmed: the password signs in now.
    signed_in = client(base).sign_in_with_password({"email": email, "password": "Link-Password-8"})
    assert signed_in.session is not None
    print(json.dumps({"confirmed": True, "user_id": session.user.id}))


def main():
    commands = {
        "link-signup": link_signup,
        "link-session": link_session,
        "codes-send": codes_send,
        "codes-verify": codes_verify,
        "id-token": id_token,
        "oauth-url": oauth_url,
        "oauth-exchange": oauth_exchange,
        "identities": identities,
        "email-change-send": email_change_send,
        "email-change-verify": email_change_verify,
        "rate-limit": rate_limit,
        "recover-send": recover_send,
        "recover-verify": recover_verify,
    }
    if sys.argv[1] in commands:
        return commands[sys.argv[1]](*sys.argv[2:])
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

    # The access token's claims, verified locally against the JWK Set (getClaims).
    claims = auth.get_claims()["claims"]
    assert claims["sub"] == user.id and claims["role"] == "authenticated" and claims["aal"] == "aal1"
    assert claims["session_id"] and claims["email"] == email and claims["is_anonymous"] is False
    assert [entry["method"] for entry in claims["amr"]] == ["password"], claims["amr"]
    assert isinstance(claims["exp"], int) and isinstance(claims["iat"], int)
    seen["claims_verified"] = True

    # What this backend does not do answers as Supabase does with it disabled.
    expect_error(lambda: client(base).sign_in_anonymously(), "anonymous_provider_disabled", 422)
    expect_error(lambda: auth.mfa.enroll({"factor_type": "totp"}), "mfa_totp_enroll_not_enabled", 422)
    expect_error(lambda: auth.admin.list_users(), "not_admin", 403)
    seen["disabled_features"] = True

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

    # The other scopes, with three sessions: `others` ends every session but the caller's,
    # `local` the caller's only.
    first, second, third = client(base), client(base), client(base)
    for each in (first, second, third):
        each.sign_in_with_password({"email": email, "password": password})
    first_token = first.get_session().access_token
    third_token = third.get_session().access_token
    second.sign_out({"scope": "others"})
    expect_error(lambda: client(base).get_user(first_token), "bad_jwt", 403)
    expect_error(lambda: client(base).get_user(third_token), "bad_jwt", 403)
    assert second.get_user() is not None
    second_token = second.get_session().access_token
    kept = client(base)
    kept.sign_in_with_password({"email": email, "password": password})
    second.sign_out({"scope": "local"})
    expect_error(lambda: client(base).get_user(second_token), "bad_jwt", 403)
    assert kept.get_user() is not None
    seen["scopes"] = ["global", "others", "local"]

    # An unknown grant: validation_failed.
    expect_error(
        lambda: auth._request("POST", "token", body={}, query=__import__("httpx").QueryParams(grant_type="magic")),
        "validation_failed",
        400,
    )
    print(json.dumps(seen, sort_keys=True))


if __name__ == "__main__":
    main()
