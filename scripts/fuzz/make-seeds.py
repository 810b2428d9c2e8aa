#!/usr/bin/env python3
"""Writes the seed corpus of rpc-fuzz (scripts/fuzz/corpus/) from hand-encoded frames.

Each seed is: one byte choosing the read size (see Sources/rpc-fuzz/RPCFuzz.swift), then a
stream of length-prefixed auth.rpc.v1.Frame bodies (proto/auth/rpc/v1/envelope.proto).
Run it again after changing the envelope; the output is deterministic.
"""
import os
import struct
import sys


def varint(n):
    out = bytearray()
    n &= (1 << 64) - 1
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def field_varint(number, value):
    return varint(number << 3) + varint(value)


def field_bytes(number, value):
    if isinstance(value, str):
        value = value.encode()
    return varint(number << 3 | 2) + varint(len(value)) + value


def frame(kind_number, body):
    encoded = field_bytes(kind_number, body)
    return struct.pack(">I", len(encoded)) + encoded


def hello(service="gateway", timestamp=1732252800123):
    return frame(1, field_varint(1, 1) + field_bytes(2, service) + field_varint(3, timestamp)
                 + field_bytes(4, bytes(range(16))) + field_bytes(5, bytes(32)))


def metadata():
    entry = field_bytes(1, "x-tenant") + field_bytes(2, "acme")
    return (field_bytes(1, "9f1c") + field_bytes(2, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
            + field_bytes(4, "gateway") + field_bytes(5, "203.0.113.7") + field_bytes(6, entry) + field_bytes(6, entry))


def request(call_id, method="/auth.health.v1.Health/Check", payload=b"", timeout=1000000, with_metadata=False):
    body = field_varint(1, call_id) + field_bytes(2, method) + field_varint(3, timeout)
    if with_metadata:
        body += field_bytes(4, metadata())
    if payload:
        body += field_bytes(5, payload)
    return frame(3, body)


def response(call_id):
    violation = field_bytes(1, "refresh_token") + field_bytes(2, "invalid") + field_bytes(3, "bad")
    details = field_bytes(1, field_varint(1, 60)) + field_bytes(2, field_varint(1, 0)) + field_bytes(3, violation)
    status = field_varint(1, 16) + field_bytes(2, "The code has expired.") + field_bytes(3, "code_expired") + field_bytes(4, details)
    return frame(4, field_varint(1, call_id) + field_bytes(2, status) + field_bytes(3, b"\x08\x01"))


def main():
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
    os.makedirs(out, exist_ok=True)
    refresh = field_bytes(1, "rt_" + "A" * 43) + field_bytes(2, field_bytes(1, "iPhone") + field_bytes(2, "ios"))
    seeds = {
        "hello": [255] , "hello-request": [255], "hello-split-reads": [2], "calls-and-cancel": [16],
        "ping-goaway": [255], "response-status": [255], "session-refresh": [7], "hello-too-large": [255],
        "empty-frame": [255], "identity-signup": [255], "identity-idtoken": [5], "otp-start-check": [255],
        "session-check": [255],
    }
    # Requests of each service's hot methods (field numbers from proto/auth/*/v1/*.proto).
    signup = field_bytes(1, "Asha") + field_bytes(2, "asha@example.com") + field_bytes(3, "Correct-Horse-9") + field_bytes(4, "203.0.113.7")
    idtoken = field_varint(1, 1) + field_bytes(2, "eyJhbGciOiJFUzI1NiJ9.e30.c2ln") + field_bytes(3, "nonce-1") + field_bytes(4, "Asha")
    start = field_bytes(1, "+919999912345") + field_varint(2, 1) + field_bytes(3, "hi-IN") + field_bytes(4, "2001:db8::1")
    # CheckRequest with accepted_purposes packed (field 4) and then one unpacked element.
    check = (field_bytes(1, "0b5f9c7e-8a51-4a8e-9d2b-7f1c3e4d5a6b") + field_bytes(2, "123456")
             + field_bytes(4, bytes([1, 2, 3])) + field_varint(4, 4))
    check_session = field_bytes(1, "0b5f9c7e-8a51-4a8e-9d2b-7f1c3e4d5a6b") + field_bytes(2, "user-1")
    streams = {
        "hello": hello(),
        "hello-request": hello() + request(1),
        "hello-split-reads": hello("authctl") + request(1, with_metadata=True),
        "calls-and-cancel": hello() + request(1) + request(2, "/auth.session.v1.Session/Validate", b"\x0a\x03abc")
        + frame(5, field_varint(1, 1)) + request(3) + frame(8, field_varint(1, 3) + field_bytes(4, "client_closing")),
        "ping-goaway": hello() + frame(6, field_varint(1, 42)) + frame(8, field_varint(1, 0) + field_varint(2, 14) + field_bytes(4, "going_away")),
        "response-status": hello() + response(1),
        "session-refresh": hello() + request(1, "/auth.session.v1.Session/Refresh", refresh, with_metadata=True),
        "hello-too-large": struct.pack(">I", 1025) + b"\x0a" + b"\x00" * 1024,
        "empty-frame": hello() + struct.pack(">I", 0),
        "identity-signup": hello() + request(1, "/auth.identity.v1.Identity/SignUp", signup, with_metadata=True),
        "identity-idtoken": hello() + request(1, "/auth.identity.v1.Identity/SignInWithIDToken", idtoken),
        "otp-start-check": hello() + request(1, "/auth.otp.v1.OTP/Start", start) + request(3, "/auth.otp.v1.OTP/Check", check),
        "session-check": hello() + request(1, "/auth.session.v1.Session/CheckSession", check_session),
    }
    for name, stream in streams.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(bytes(seeds[name]) + stream)
    print(f"wrote {len(streams)} seeds to {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
