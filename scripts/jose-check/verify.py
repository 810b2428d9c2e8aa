#!/usr/bin/env python3
"""Verifies one of our access tokens with an independent JOSE library (joserfc) against the
JWK Set the session service publishes (GetJWKS). Exit 0 and "verified" when the token is an
ES256 JWT with typ at+jwt, a kid found in the set, a valid signature, the expected iss and
aud, not expired, with sub, sid, jti and iat; exit 1 with the reason otherwise.

Install the library first: scripts/jose-check/install.sh (a venv under .data/).

  .data/jose-venv/bin/python scripts/jose-check/verify.py \
      --jwks jwks.json --issuer auth.session --audience auth.api --token eyJ...
"""
import argparse
import json
import sys

from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jwks", required=True, help="file holding the JWK Set JSON")
    parser.add_argument("--token", required=True, help="the access token (compact JWS)")
    parser.add_argument("--issuer", required=True)
    parser.add_argument("--audience", required=True)
    args = parser.parse_args()

    with open(args.jwks, encoding="utf-8") as f:
        jwks = json.load(f)
    for key in jwks.get("keys", []):
        if "d" in key:
            print("the JWKS publishes a private key", file=sys.stderr)
            return 1
    key_set = KeySet.import_key_set(jwks)

    try:
        # Only ES256: a token claiming another algorithm (none, HS256, ...) is refused.
        token = jwt.decode(args.token, key_set, algorithms=["ES256"])
    except (JoseError, ValueError) as error:
        print(f"signature check failed: {error!r}", file=sys.stderr)
        return 1

    header = token.header
    if header.get("typ") != "at+jwt":
        print(f"typ is {header.get('typ')!r}, not 'at+jwt'", file=sys.stderr)
        return 1
    if header.get("alg") != "ES256" or not header.get("kid"):
        print(f"unexpected header {header!r}", file=sys.stderr)
        return 1
    if header["kid"] not in {k.get("kid") for k in jwks.get("keys", [])}:
        print("kid not in the JWKS", file=sys.stderr)
        return 1

    registry = jwt.JWTClaimsRegistry(
        iss={"essential": True, "value": args.issuer},
        aud={"essential": True, "value": args.audience},
        sub={"essential": True},
        sid={"essential": True},
        jti={"essential": True},
        iat={"essential": True},
        exp={"essential": True},
    )
    try:
        registry.validate(token.claims)
    except JoseError as error:
        print(f"claims check failed: {error!r}", file=sys.stderr)
        return 1
    print(f"verified kid={header['kid']} sub={token.claims['sub']} sid={token.claims['sid']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
