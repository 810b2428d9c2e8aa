#!/usr/bin/env python3
"""Checks that the gateway's OpenAPI document holds the contract of tracker issue 11.

openapi-spec-validator says the document is valid OpenAPI 3.1; this says it is *our* API:
  - exactly the (method, path) pairs of the issue's routes table, each with a stable
    lowerCamelCase operationId;
  - each route's success status, and each error status the issue lists for it with the reasons
    it lists (as `error` values of that response's examples) and the exact app-facing messages;
  - 400/413/415/503 on every route with a JSON body, 429 `rate_limited` on every unauthenticated
    /v1 and /api route, 503 on every route backed by a service;
  - the session body's required keys, `token_type` enum [bearer], every key of `user` and of a
    session item required, unknown values nullable;
  - `bearerAuth` (HTTP bearer) on exactly the authenticated routes, each with 401 `invalid_token`;
  - `Retry-After` on every 429, `X-Request-Id` on every response (both required);
  - request bodies closed (`additionalProperties: false`) with snake_case members;
  - every example valid against its schema (this catches YAML that does not mean what it seems).

The Supabase door (`/auth/v1`, tag `supabase`, issue 22) follows Supabase's API, not these
conventions: its operations are checked against SUPABASE_ROUTES instead (each route once, its
success status, the error codes listed as `error_code` examples of SupabaseError answers,
X-Request-Id everywhere, `supabaseUser` security on exactly its authenticated routes).

Usage: check_contract.py [path/to/openapi.yaml]   (default: Sources/AuthGateway/openapi.yaml)
Prints one line per problem ("check_contract: FAIL: ...") and exits 1, or one OK line.
"""

import re
import sys
from pathlib import Path

import yaml
from jsonschema import Draft202012Validator, FormatChecker

ROOT = Path(__file__).resolve().parents[2]

# The routes table of issue 11: success status, and the error statuses it lists with their
# reasons. `auth`: the route takes `Authorization: Bearer`. `body`: it takes a JSON body.
# `service`: it calls a service (so it may answer 503).
ROUTES = {
    ("post", "/v1/otp/send"): dict(success="200", body=True, errors={
        "400": ["invalid_phone", "invalid_email"], "404": ["account_not_found"],
        "409": ["account_exists"], "429": ["rate_limited", "too_many_attempts", "country_throttled"]}),
    ("post", "/v1/otp/resend"): dict(success="200", body=True, errors={
        "404": ["verification_not_found"], "429": ["resend_too_soon", "rate_limited"]}),
    # Issue 21 §3: Twilio's delivery reports.
    # `form`: an application/x-www-form-urlencoded body; `limited=False`: no per-IP budget.
    ("post", "/v1/hooks/twilio/status"): dict(
        success="204", body=True, form=True, limited=False, errors={"403": ["invalid_signature"]}),
    # Issue 21 §3: "SMS not received?".
    ("get", "/v1/otp/{verification_id}"): dict(success="200", errors={
        "404": ["verification_not_found"], "429": ["rate_limited"]}),
    ("post", "/v1/otp/verify"): dict(success="200", body=True, errors={
        "401": ["invalid_code"], "410": ["code_expired"], "429": ["too_many_attempts"],
        "404": ["verification_not_found"]}),
    ("post", "/v1/signup"): dict(success="201", body=True, errors={
        "422": ["validation_failed"], "409": ["email_taken"]}),
    ("post", "/v1/login"): dict(success="200", body=True, errors={
        "401": ["invalid_credentials"], "429": ["too_many_attempts", "rate_limited"]}),
    ("post", "/api/auth/login"): dict(success="200", body=True, errors={
        "401": ["invalid_credentials"], "429": ["too_many_attempts", "rate_limited"]}),
    ("post", "/v1/idtoken"): dict(success="200", body=True, errors={
        "401": ["invalid_id_token"], "400": ["provider_not_enabled"]}),
    # Issue 21 §1: browser sign-in (the authorization-code flow with PKCE through the backend).
    ("get", "/v1/oauth/{provider}/authorize"): dict(success="302", errors={
        "400": ["invalid_request", "redirect_not_allowed", "provider_not_enabled"]}),
    ("get", "/v1/oauth/{provider}/callback"): dict(success="302", errors={"400": ["invalid_state", "invalid_request"]}),
    ("post", "/v1/oauth/{provider}/callback"): dict(success="302", body=True, form=True, errors={
        "400": ["invalid_state"]}),
    ("post", "/v1/oauth/token"): dict(success="200", body=True, errors={"400": ["invalid_grant"]}),
    ("post", "/v1/me/identities/{provider}/authorize"): dict(success="200", body=True, auth=True, errors={
        "400": ["redirect_not_allowed", "provider_not_enabled"]}),
    # Issue 21 §2: adding or changing the account's phone or email.
    ("post", "/v1/me/contact"): dict(success="200", body=True, auth=True, errors={
        "400": ["invalid_email", "invalid_request"], "409": ["contact_taken"], "429": ["rate_limited"]}),
    ("post", "/v1/me/contact/verify"): dict(success="200", body=True, auth=True, errors={
        "401": ["invalid_code"], "404": ["verification_not_found"], "409": ["contact_taken"], "410": ["code_expired"],
        "429": ["too_many_attempts"]}),
    ("post", "/v1/password/reset"): dict(success="202", body=True, errors={"429": ["rate_limited"]}),
    ("post", "/v1/password/reset/confirm"): dict(success="200", body=True, errors={
        "401": ["invalid_code"], "410": ["code_expired"], "429": ["too_many_attempts"],
        "404": ["verification_not_found"], "422": ["validation_failed"]}),
    ("post", "/v1/me/password"): dict(success="204", body=True, auth=True, errors={
        "401": ["invalid_credentials"], "422": ["validation_failed"], "429": ["too_many_attempts"]}),
    ("post", "/v1/token/refresh"): dict(success="200", body=True, errors={
        "401": ["invalid_refresh_token", "refresh_token_reused", "session_expired", "session_revoked"]}),
    ("post", "/v1/logout"): dict(success="204", body=True, auth=True, errors={
        "400": ["invalid_request"], "401": ["invalid_token", "invalid_refresh_token"], "429": ["rate_limited"]}),
    ("get", "/v1/session"): dict(success="200", auth=True, errors={}),
    ("get", "/v1/me"): dict(success="200", auth=True, errors={}),
    ("patch", "/v1/me"): dict(success="200", body=True, auth=True, errors={"422": ["validation_failed"]}),
    ("delete", "/v1/me"): dict(success="204", auth=True, errors={}),
    ("get", "/v1/sessions"): dict(success="200", auth=True, errors={}),
    ("get", "/v1/me/identities"): dict(success="200", auth=True, errors={}),  # issue 21 §2
    ("post", "/v1/me/identities"): dict(success="200", body=True, auth=True, errors={
        "409": ["identity_already_linked"]}),
    ("delete", "/v1/me/identities/{provider}"): dict(success="204", auth=True, errors={
        "404": ["identity_not_found"], "409": ["last_identity"]}),
    ("delete", "/v1/sessions/{id}"): dict(success="204", auth=True, errors={"404": []}),
    ("get", "/.well-known/jwks.json"): dict(success="200", errors={"503": []}),
    ("get", "/health/live"): dict(success="200", service=False, errors={}),
    ("get", "/health/ready"): dict(success="200", errors={"503": []}),
    ("get", "/openapi.json"): dict(success="200", service=False, errors={}),
}

# The Supabase door (issue 22; docs/supabase.md): success status, the error codes each listed
# status must show, and whether the route takes the user's token.
SUPABASE_ROUTES = {
    ("get", "/auth/v1/health"): dict(success="200", errors={}),
    ("get", "/auth/v1/.well-known/jwks.json"): dict(success="200", errors={"503": []}),
    ("get", "/auth/v1/settings"): dict(success="200", errors={"503": []}),
    ("post", "/auth/v1/signup"): dict(success="200", errors={
        "400": ["validation_failed"], "422": ["weak_password", "anonymous_provider_disabled"],
        "429": ["over_request_rate_limit"]}),
    ("post", "/auth/v1/token"): dict(success="200", errors={
        "400": ["invalid_credentials", "email_not_confirmed", "refresh_token_not_found", "refresh_token_already_used",
                "validation_failed", "provider_disabled", "bad_oidc_token"],
        "404": ["flow_state_not_found"], "429": ["over_request_rate_limit"]}),
    ("post", "/auth/v1/otp"): dict(success="200", errors={
        "422": ["otp_disabled"], "429": ["over_sms_send_rate_limit", "over_email_send_rate_limit"]}),
    ("get", "/auth/v1/verify"): dict(success="303", errors={
        "400": ["validation_failed"], "429": ["over_request_rate_limit"]}),
    ("post", "/auth/v1/verify"): dict(success="200", errors={"403": ["otp_expired"], "429": ["over_request_rate_limit"]}),
    ("post", "/auth/v1/resend"): dict(success="200", errors={"400": ["validation_failed"]}),
    ("post", "/auth/v1/recover"): dict(success="200", errors={"400": ["validation_failed"]}),
    ("get", "/auth/v1/user"): dict(success="200", auth=True, errors={}),
    ("put", "/auth/v1/user"): dict(success="200", auth=True, errors={
        "400": ["current_password_required", "current_password_mismatch"], "422": ["weak_password"]}),
    ("post", "/auth/v1/logout"): dict(success="204", auth=True, errors={}),
    ("get", "/auth/v1/authorize"): dict(success="302", errors={"400": ["provider_disabled"]}),
    ("get", "/auth/v1/user/identities/authorize"): dict(success="200", auth=True, errors={}),
    ("delete", "/auth/v1/user/identities/{identity_id}"): dict(success="200", auth=True, errors={
        "404": ["identity_not_found"], "422": ["single_identity_not_deletable"]}),
}


def check_supabase_route(doc, method, path, operation):
    """One operation of the Supabase door against SUPABASE_ROUTES."""
    where = f"{method.upper()} {path}"
    route = SUPABASE_ROUTES.get((method, path))
    if route is None:
        fail(f"{where}: not a route of the Supabase door (SUPABASE_ROUTES)")
        return
    if operation.get("tags") != ["supabase"]:
        fail(f"{where}: tags {operation.get('tags')!r}, the door's are ['supabase']")
    responses = operation.get("responses", {})
    if route["success"] not in responses:
        fail(f"{where}: no {route['success']} response")
    expected = dict(route["errors"])
    if route.get("auth"):
        expected.setdefault("401", ["no_authorization"])
        expected.setdefault("403", ["bad_jwt"])
    for status, codes in expected.items():
        response = responses.get(status)
        if response is None:
            fail(f"{where}: no {status} response")
            continue
        content = (response.get("content") or {}).get("application/json", {})
        found = {v.get("error_code") for v in example_values(content) if isinstance(v, dict)}
        for code in codes:
            if code not in found:
                fail(f"{where} {status}: no example with error_code {code!r}")
    for status, response in responses.items():
        if not (response.get("headers") or {}).get("X-Request-Id", {}).get("required"):
            fail(f"{where} {status}: no required X-Request-Id header")
        if status.startswith(("4", "5")):
            content = (response.get("content") or {}).get("application/json", {})
            if "oneOf" not in content.get("schema", {}):
                fail(f"{where} {status}: the body is not the SupabaseError schema")
        for media in (response.get("content") or {}).values():
            validator = Draft202012Validator(media.get("schema", {}), format_checker=FormatChecker())
            for value in example_values(media):
                for error in validator.iter_errors(value):
                    fail(f"{where} {status}: example {value!r} does not match its schema: {error.message}")
    security = operation.get("security") or []
    has_user = any("supabaseUser" in requirement for requirement in security)
    if bool(route.get("auth")) != has_user:
        fail(f"{where}: supabaseUser security {'missing' if route.get('auth') else 'on a route without a user'}")


# The exact app-facing messages issue 11 gives, by (route or None for every route, reason).
MESSAGES = {
    ("/v1/otp/send", "account_not_found"): "No account found. Create one?",
    (None, "invalid_code"): "Invalid code. Please try again.",
    (None, "code_expired"): "This code has expired. Please request a new one.",
    ("/v1/otp/verify", "too_many_attempts"): "Too many attempts. Please try again in 15 minutes.",
    ("/v1/password/reset/confirm", "too_many_attempts"): "Too many attempts. Please try again in 15 minutes.",
    (None, "email_taken"): "This email is already registered. Try logging in instead.",
    ("/v1/login", "invalid_credentials"): "Invalid email or password",
    ("/api/auth/login", "invalid_credentials"): "Invalid email or password",
    (None, "invalid_id_token"): "Authentication verification failed. Please try again.",
}
MESSAGE_PATTERNS = {
    "provider_not_enabled": r"^(Apple|Google|Facebook) Sign-In is not configured\. Please use email/password\.$",
}

SESSION_KEYS = {"access_token", "token_type", "expires_in", "refresh_token", "user", "is_new_user"}
USER_KEYS = {"id", "phone", "email", "name", "photo_url", "onboarding_completed", "email_verified",
             "phone_verified", "created_at"}
USER_NULLABLE = {"phone", "email", "name", "photo_url"}
SESSION_ITEM_KEYS = {"id", "amr", "device", "ip", "created_at", "last_refreshed_at", "expires_at", "current", "device_name", "platform"}
VERIFICATION_KEYS = {"verification_id", "channel", "destination", "expires_in", "resend_after",
                     "attempts_remaining"}
ENUMS = {
    "Purpose": ["login", "signup", "auto"],
    "Scope": ["local", "global", "others"],
    "Provider": ["apple", "google", "facebook"],
    "Channel": ["sms", "email"],
    "Amr": ["otp_sms", "otp_email", "pwd", "oidc_apple", "oidc_google", "oidc_facebook"],
}
HTTP_METHODS = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}

problems = []


def fail(message):
    problems.append(message)


def resolve(doc, node, seen=()):
    """The node with every local $ref replaced by its target (siblings of a $ref kept)."""
    if isinstance(node, dict):
        if "$ref" in node and isinstance(node["$ref"], str):
            ref = node["$ref"]
            if not ref.startswith("#/") or ref in seen:
                raise ValueError(f"unsupported or cyclic $ref {ref}")
            target = doc
            for part in ref[2:].split("/"):
                target = target[part.replace("~1", "/").replace("~0", "~")]
            merged = dict(resolve(doc, target, seen + (ref,)))
            for key, value in node.items():
                if key != "$ref":
                    merged[key] = resolve(doc, value, seen)
            return merged
        return {key: resolve(doc, value, seen) for key, value in node.items()}
    if isinstance(node, list):
        return [resolve(doc, item, seen) for item in node]
    return node


def types_of(schema):
    t = schema.get("type")
    return set(t) if isinstance(t, list) else {t}


def example_values(media):
    values = [e.get("value") for e in (media.get("examples") or {}).values() if isinstance(e, dict)]
    if "example" in media:
        values.append(media["example"])
    return values


def check_request_schema(where, schema):
    if schema.get("type") != "object":
        fail(f"{where}: the request body is not an object")
        return
    if schema.get("additionalProperties") is not False:
        fail(f"{where}: the request body does not have additionalProperties: false")
    for name in schema.get("properties", {}):
        if not re.fullmatch(r"[a-z][a-z0-9]*(_[a-z0-9]+)*", name):
            fail(f"{where}: request member {name!r} is not snake_case")
    for name in schema.get("required", []):
        if name not in schema.get("properties", {}):
            fail(f"{where}: required member {name!r} is not among the properties")


def main():
    spec_path = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "Sources/AuthGateway/openapi.yaml"
    try:
        raw = yaml.safe_load(spec_path.read_text())
    except (OSError, yaml.YAMLError) as error:
        print(f"check_contract: FAIL: cannot read {spec_path}: {error}")
        return 1
    doc = resolve(raw, raw)

    if raw.get("openapi") != "3.1.0":
        fail(f"openapi is {raw.get('openapi')!r}, not '3.1.0'")
    if raw.get("info", {}).get("version") != "1.0.0":
        fail(f"info.version is {raw.get('info', {}).get('version')!r}, not '1.0.0'")
    if "docs/gateway.md" not in raw.get("info", {}).get("description", ""):
        fail("info.description does not point to docs/gateway.md")
    if raw.get("security"):
        fail("a global `security` is set: security must be on exactly the authenticated operations")
    scheme = raw.get("components", {}).get("securitySchemes", {}).get("bearerAuth", {})
    if scheme.get("type") != "http" or str(scheme.get("scheme", "")).lower() != "bearer":
        fail("components.securitySchemes.bearerAuth is not an HTTP bearer scheme")

    # --- the routes -----------------------------------------------------------------------------
    operations = {}
    supabase_operations = 0
    for path, item in doc.get("paths", {}).items():
        for method, operation in item.items():
            if method not in HTTP_METHODS:
                continue
            if path.startswith("/auth/v1/"):
                check_supabase_route(doc, method, path, operation)
                supabase_operations += 1
            else:
                operations[(method, path)] = operation
    documented = {key for key in SUPABASE_ROUTES if key[1] in doc.get("paths", {}) and key[0] in doc["paths"][key[1]]}
    for key in sorted(set(SUPABASE_ROUTES) - documented):
        fail(f"{key[0].upper()} {key[1]}: a route of the Supabase door missing from the document")
    for key in ROUTES:
        if key not in operations:
            fail(f"{key[0].upper()} {key[1]}: missing (a route of issue 11)")
    for key in operations:
        if key not in ROUTES:
            fail(f"{key[0].upper()} {key[1]}: not a route of issue 11")

    operation_ids = {}
    checked_responses = 0
    for (method, path), operation in operations.items():
        where = f"{method.upper()} {path}"
        route = ROUTES.get((method, path))
        op_id = operation.get("operationId")
        if not op_id or not re.fullmatch(r"[a-z][a-zA-Z0-9]*", op_id):
            fail(f"{where}: operationId {op_id!r} is missing or not lowerCamelCase")
        elif op_id in operation_ids:
            fail(f"{where}: operationId {op_id!r} also used by {operation_ids[op_id]}")
        else:
            operation_ids[op_id] = where
        responses = operation.get("responses", {})

        # Every response: X-Request-Id; every 429: Retry-After and retry_after; examples valid.
        for status, response in responses.items():
            checked_responses += 1
            headers = response.get("headers", {})
            if not headers.get("X-Request-Id", {}).get("required"):
                fail(f"{where} {status}: no required X-Request-Id header")
            if status == "429":
                retry = headers.get("Retry-After", {})
                if not retry.get("required") or retry.get("schema", {}).get("type") != "integer":
                    fail(f"{where} 429: no required integer Retry-After header")
            for media_type, media in (response.get("content") or {}).items():
                schema = media.get("schema")
                if schema is None:
                    fail(f"{where} {status} {media_type}: no schema")
                    continue
                validator = Draft202012Validator(schema, format_checker=FormatChecker())
                for value in example_values(media):
                    for error in validator.iter_errors(value):
                        fail(f"{where} {status}: example {value!r} does not match its schema: {error.message}")
                    if status == "429" and isinstance(value, dict) and "retry_after" not in value:
                        fail(f"{where} 429: example {value.get('error')!r} has no retry_after")
            # Error answers are the Error schema (readiness's 503 is its health report).
            if status.startswith(("4", "5")) and (method, path) != ("get", "/health/ready"):
                content = (response.get("content") or {}).get("application/json", {})
                if content.get("schema", {}).get("required", [])[:2] != ["error", "message"]:
                    fail(f"{where} {status}: the body is not the Error schema (error, message)")
                for value in example_values(content):
                    reason = value.get("error") if isinstance(value, dict) else None
                    message = value.get("message") if isinstance(value, dict) else None
                    expected = MESSAGES.get((path, reason), MESSAGES.get((None, reason)))
                    if expected is not None and message != expected:
                        fail(f"{where} {status} {reason}: message {message!r}, issue 11 says {expected!r}")
                    unknown = set(value) - set(content.get("schema", {}).get("properties", {})) if isinstance(value, dict) else set()
                    if unknown:
                        fail(f"{where} {status} {reason}: example has members the Error schema lacks: {sorted(map(str, unknown))}")
                    pattern = MESSAGE_PATTERNS.get(reason)
                    if pattern and not re.fullmatch(pattern, message or ""):
                        fail(f"{where} {status} {reason}: message {message!r} does not match {pattern!r}")
                    if reason == "invalid_code" and "attempts_remaining" not in value:
                        fail(f"{where} {status} invalid_code: example without attempts_remaining")
                    if reason == "validation_failed" and not value.get("fields"):
                        fail(f"{where} {status} validation_failed: example without fields")

        if route is None:
            continue
        success = route["success"]
        if success not in responses:
            fail(f"{where}: no {success} (its success status in issue 11)")
        elif success == "204" and responses[success].get("content"):
            fail(f"{where}: 204 with a body")
        for status in responses:
            if status.startswith("2") and status != success:
                fail(f"{where}: success status {status}, issue 11 says {success}")

        expected = {status: list(reasons) for status, reasons in route["errors"].items()}
        if route.get("body"):
            for status in ("400", "413", "415"):
                expected.setdefault(status, [])
            expected["400"] = sorted(set(expected["400"]) | {"invalid_request"})
        if route.get("auth"):
            expected.setdefault("401", [])
            expected["401"] = expected["401"] + ["invalid_token"]
        elif path.startswith(("/v1/", "/api/")) and route.get("limited", True):
            expected.setdefault("429", [])
            expected["429"] = sorted(set(expected["429"]) | {"rate_limited"})
        if route.get("service", True):
            expected.setdefault("503", [])
        for status, reasons in sorted(expected.items()):
            if status not in responses:
                fail(f"{where}: no {status} response (issue 11: {', '.join(reasons) or 'listed'})")
                continue
            content = (responses[status].get("content") or {}).get("application/json", {})
            found = {v.get("error") for v in example_values(content) if isinstance(v, dict)}
            for reason in reasons:
                if reason not in found:
                    fail(f"{where} {status}: no example with error {reason!r} (issue 11 lists it)")
        if path == "/health/live" and "503" in responses:
            fail(f"{where}: liveness never answers 503")

        # Security on exactly the authenticated routes.
        security = operation.get("security") or []
        has_bearer = any("bearerAuth" in requirement for requirement in security)
        if route.get("auth") and not has_bearer:
            fail(f"{where}: authenticated in issue 11 but has no bearerAuth security")
        if not route.get("auth") and security:
            fail(f"{where}: not authenticated in issue 11 but has security {security}")

        # Request bodies.
        body = operation.get("requestBody")
        if route.get("form"):
            if not body or "application/x-www-form-urlencoded" not in body.get("content", {}) or not body.get("required"):
                fail(f"{where}: no required application/x-www-form-urlencoded request body")
        elif route.get("body"):
            if not body or "application/json" not in body.get("content", {}):
                fail(f"{where}: no application/json request body")
            else:
                check_request_schema(where, body["content"]["application/json"].get("schema", {}))
                if (method, path) != ("post", "/v1/logout") and not body.get("required"):
                    fail(f"{where}: the request body is not required")
        elif body:
            fail(f"{where}: a request body, issue 11 gives none")

    # --- the shared schemas ------------------------------------------------------------------------
    schemas = doc.get("components", {}).get("schemas", {})
    for name, values in ENUMS.items():
        if schemas.get(name, {}).get("enum") != values:
            fail(f"components.schemas.{name}: enum {schemas.get(name, {}).get('enum')!r}, expected {values!r}")
    for name in ("Session", "SignUpSession"):
        session = schemas.get(name, {})
        required = set(session.get("required", []))
        if not SESSION_KEYS <= required:
            fail(f"components.schemas.{name}: required lacks {sorted(SESSION_KEYS - required)}")
        if session.get("properties", {}).get("token_type", {}).get("enum") != ["bearer"]:
            fail(f"components.schemas.{name}: token_type is not enum [bearer]")
        user = session.get("properties", {}).get("user", {})
        if set(user.get("required", [])) != USER_KEYS:
            fail(f"components.schemas.{name}.user: required is {sorted(user.get('required', []))}, expected {sorted(USER_KEYS)}")
        for key in USER_NULLABLE:
            if "null" not in types_of(user.get("properties", {}).get(key, {})):
                fail(f"components.schemas.{name}.user.{key}: not nullable")
    if "verification_id" not in schemas.get("SignUpSession", {}).get("required", []):
        fail("components.schemas.SignUpSession: verification_id is not required")
    item = schemas.get("SessionItem", {})
    if set(item.get("required", [])) != SESSION_ITEM_KEYS:
        fail(f"components.schemas.SessionItem: required is {sorted(item.get('required', []))}, expected {sorted(SESSION_ITEM_KEYS)}")
    if "null" not in types_of(item.get("properties", {}).get("last_refreshed_at", {})):
        fail("components.schemas.SessionItem.last_refreshed_at: not nullable (null when never refreshed)")
    verification = schemas.get("Verification", {})
    if set(verification.get("required", [])) != VERIFICATION_KEYS:
        fail(f"components.schemas.Verification: required is {sorted(verification.get('required', []))}, expected {sorted(VERIFICATION_KEYS)}")
    error = schemas.get("Error", {})
    if error.get("required") != ["error", "message"] or not {"retry_after", "attempts_remaining", "fields"} <= set(error.get("properties", {})):
        fail("components.schemas.Error: must require error and message and have retry_after, attempts_remaining, fields")
    send = schemas.get("OtpSendRequest", {}).get("properties", {})
    if send.get("purpose", {}).get("default") != "auto":
        fail("components.schemas.OtpSendRequest.purpose: default is not auto")
    logout = schemas.get("LogoutRequest", {}).get("properties", {})
    if logout.get("scope", {}).get("default") != "local":
        fail("components.schemas.LogoutRequest.scope: default is not local")

    if problems:
        for problem in problems:
            print(f"check_contract: FAIL: {problem}")
        print(f"check_contract: {len(problems)} problem(s) in {spec_path}")
        return 1
    print(
        f"check_contract: OK - {len(operations)} operations, {checked_responses} responses hold issue 11's contract;"
        f" {supabase_operations} Supabase-door operations hold issue 22's"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
