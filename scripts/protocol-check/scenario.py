#!/usr/bin/env python3
"""Protocol scenario against a running auth RPC server (run by check.sh).

    scenario.py HOST:PORT        (plaintext: AUTH_RPC_SECRET = base64 of the shared secret;
                                  mutual TLS: AUTH_RPC_TLS_CERT/KEY/CA = PEM files, the caller's
                                  certificate naming AUTH_RPC_SERVICE)
    AUTH_RPC_SERVER_NAME         the service expected at HOST:PORT (e.g. identity)

Prints one line per check and a final `N passed, M failed`; exits 1 when any check failed.
"""

from __future__ import annotations

import os
import struct
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from rpc_client import (  # noqa: E402
    DEADLINE_EXCEEDED, INVALID_ARGUMENT, OK, RESOURCE_EXHAUSTED, UNAUTHENTICATED, UNAVAILABLE,
    UNIMPLEMENTED, Connection, HelloRefused, Protos, RpcError, ack_proof_is_valid, make_hello,
    parse_address, secret_from_env, tls_context, tls_from_env,
)

HEALTH = "/auth.health.v1.Health/Check"
SERVING = 1
CALLER = os.environ.get("AUTH_RPC_SERVICE", "protocol-check")
SERVER = os.environ.get("AUTH_RPC_SERVER_NAME") or None


class Failed(Exception):
    pass


def expect(cond: bool, what: str) -> None:
    if not cond:
        raise Failed(what)


class Scenario:
    def __init__(self, address: str):
        self.host, self.port = parse_address(address)
        self.tls = tls_from_env()
        self.secret = None if self.tls else secret_from_env()
        self.P = Protos()
        self.HealthReq = self.P.message("auth.health.v1.HealthCheckRequest")
        self.passed = 0
        self.failed = 0

    def conn(self, **kw) -> Connection:
        return Connection(self.P, self.host, self.port, service=kw.pop("service", CALLER),
                          secret=kw.pop("secret", self.secret), tls=kw.pop("tls", self.tls),
                          server_name=kw.pop("server_name", SERVER), **kw)

    def connected(self) -> Connection:
        c = self.conn()
        c.connect()
        return c

    def run(self, name: str, fn) -> None:
        t0 = time.monotonic()
        try:
            note = fn()
            self.passed += 1
            print(f"PASS  {name} ({(time.monotonic() - t0) * 1000:.0f} ms){': ' + note if note else ''}",
                  flush=True)
        except Failed as e:
            self.failed += 1
            print(f"FAIL  {name}: {e}", flush=True)
        except (RpcError, OSError) as e:
            self.failed += 1
            print(f"FAIL  {name}: {type(e).__name__}: {e}", flush=True)
        except Exception as e:  # unexpected: show where
            self.failed += 1
            print(f"FAIL  {name}: {type(e).__name__}: {e}", flush=True)
            traceback.print_exc(limit=3, file=sys.stdout)

    def expect_status(self, err: RpcError, code: int, reason: str) -> None:
        expect(not err.local, f"status was made up by the client, not sent by the server: {err}")
        expect(err.code == code and err.reason == reason,
               f"expected {self.P.code_name(code)}/{reason}, got {err}")

    def expect_refused(self, conn: Connection, hello, code: int, reason: str) -> str:
        try:
            conn.connect(hello=hello)
        except HelloRefused as e:
            expect(e.go_away is not None, f"no GoAway, only: {e}")
            expect(e.code == code and e.reason == reason,
                   f"expected GoAway {self.P.code_name(code)}/{reason}, got {e}")
            expect(conn.fs.eof, "server did not close the connection after the GoAway")
            return f"GoAway {e.code_name}/{e.reason}, connection closed"
        conn.close()
        raise Failed("the server accepted the Hello (HelloAck)")

    # ---- checks ----------------------------------------------------------------------------

    def health_serving(self):
        with self.connected() as c:
            ack = c.hello_ack
            expect(ack.protocol_version == 2, f"HelloAck.protocol_version={ack.protocol_version}")
            expect(ack.max_frame_size > 0 and ack.max_concurrent_calls > 0,
                   f"HelloAck limits missing: {ack}")
            expect(len(c.challenge.nonce) == 32, f"Challenge.nonce has {len(c.challenge.nonce)} bytes")
            if self.tls is None:
                # connect() accepted the server's proof; a server without the secret could not make it.
                expect(ack_proof_is_valid(self.secret, ack, c.hello, c.challenge), "server proof")
                wrong = bytes(b ^ 0x5A for b in self.secret)
                expect(not ack_proof_is_valid(wrong, ack, c.hello, c.challenge), "proof checks nothing")
            else:
                expect(len(ack.mac) == 0, "HelloAck.mac set over TLS")
            resp = c.call(HEALTH, self.HealthReq(service=""), timeout=5.0)
            expect(resp.status == SERVING, f"status={resp.status}")
            return (f"server {ack.service!r}, max_frame_size={ack.max_frame_size}, "
                    f"max_concurrent_calls={ack.max_concurrent_calls}, idle_timeout_ms={ack.idle_timeout_ms}")

    def many_in_flight(self):
        with self.connected() as c:
            handles = c.call_many(HEALTH, [self.HealthReq() for _ in range(32)], timeout=5.0)
            ids = [h.call_id for h in handles]
            expect(len(set(ids)) == 32 and ids == sorted(ids), f"ids not increasing: {ids}")
            results = [h.result(10) for h in handles]
            expect(all(r.status == SERVING for r in results), "a call did not return SERVING")
            expect(c.open_calls == 0, f"{c.open_calls} calls still open")
            expect(c.late_responses == 0, f"{c.late_responses} unmatched responses")
            expect(not c.closed.is_set(), f"connection closed: {c.close_reason}")
            return f"call ids {ids[0]}..{ids[-1]} sent in one write, 32/32 answered"

    def deadline_exceeded(self):
        with self.connected() as c:
            try:
                c.call(HEALTH, self.HealthReq(), timeout_us=1, local_deadline=5.0)
            except RpcError as e:
                self.expect_status(e, DEADLINE_EXCEEDED, "deadline_exceeded")
                expect(not c.closed.is_set(), "connection closed")
                return f"{e.code_name}/{e.reason}"
            raise Failed("the call succeeded")

    def unknown_method(self):
        with self.connected() as c:
            try:
                c.call("/auth.health.v1.Health/NoSuchMethod", b"", timeout=5.0)
            except RpcError as e:
                self.expect_status(e, UNIMPLEMENTED, "unknown_method")
                # the connection stays usable
                expect(c.call(HEALTH, timeout=5.0).status == SERVING, "health after error")
                return f"{e.code_name}/{e.reason}"
            raise Failed("the call succeeded")

    def ping_pong(self):
        with self.connected() as c:
            payload = int.from_bytes(os.urandom(8), "big")
            rtt = c.ping(payload, timeout=5.0)   # waits for a Pong carrying this exact payload
            rtt0 = c.ping(0, timeout=5.0)        # 0 is the proto3 default: Pong{} on the wire
            return f"payload {payload:#x} echoed in {rtt * 1000:.1f} ms; payload 0 in {rtt0 * 1000:.1f} ms"

    def wrong_secret(self):
        c = self.conn()
        if self.tls is not None:
            # TLS: the caller is the name in the certificate; claiming another one is refused.
            return self.expect_refused(
                c, lambda ch: make_hello(self.P, None, "someone-else", ch, server_service=SERVER),
                UNAUTHENTICATED, "invalid_service_credential")
        bad = bytes(b ^ 0x5A for b in self.secret)
        return self.expect_refused(c, lambda ch: make_hello(self.P, bad, CALLER, ch, server_service=SERVER),
                                   UNAUTHENTICATED, "invalid_service_credential")

    def no_client_certificate(self):
        ca = os.environ["AUTH_RPC_TLS_CA"]
        c = self.conn(tls=tls_context(None, None, ca))
        try:
            c.connect()
        except HelloRefused as e:
            expect(e.local and c.challenge is None, f"refused, but after a Challenge: {e}")
            return "no Challenge: the server ended the handshake"
        except OSError as e:      # ssl.SSLError: the server's alert arrived during the handshake
            return f"TLS handshake refused: {e}"
        c.close()
        raise Failed("the server accepted a client without a certificate")

    def replay(self):
        first = self.conn()
        first.connect()
        try:
            captured = first.hello
            # The same Hello on a new connection: it answers the old connection's challenge.
            note = self.expect_refused(self.conn(), captured, UNAUTHENTICATED, "invalid_service_credential")
            expect(first.call(HEALTH, timeout=5.0).status == SERVING, "first connection broken")
        finally:
            first.close()
        return f"captured Hello on a new connection: {note}"

    def wrong_server(self):
        hello = (lambda ch: make_hello(self.P, self.secret, CALLER, ch, server_service="not-this-service"))
        return self.expect_refused(self.conn(), hello, UNAUTHENTICATED, "wrong_server")

    def oversize_frame(self):
        # (a) only the 4 length bytes: the server must close before reading any body
        with self.connected() as c:
            limit = c.max_frame_size
            c.fs.send_raw(struct.pack(">I", limit + 1))
            expect(c.wait_closed(3.0), "connection still open 3 s after an oversize length")
            g = c.go_away
            expect(g is not None, f"no GoAway before close ({c.close_reason})")
            expect(g.code == RESOURCE_EXHAUSTED and g.reason == "frame_too_large",
                   f"GoAway {self.P.code_name(g.code)}/{g.reason}")
        # (b) a real call whose frame is one byte over the limit, with the client-side check off:
        #     the pending call must fail (connection closed), not hang
        with self.connected() as c:
            limit = c.max_frame_size
            overhead = len(c.fs.encode(self.P.Frame(request=self.P.Request(
                call_id=1, method=HEALTH, timeout_us=5_000_000, payload=b"x" * limit)))) - 4 - limit
            payload = b"x" * (limit - overhead + 1)
            try:
                c.call_async(HEALTH, payload, timeout=5.0)   # enforce_limits=True refuses it locally
                raise Failed("client sent an oversize frame without complaint")
            except RpcError as e:
                expect(e.local and e.reason == "frame_too_large", f"local check: {e}")
            try:
                h = c.call_async(HEALTH, payload, timeout=5.0, enforce_limits=False)
                h.result(6)
                raise Failed("oversize call succeeded")
            except RpcError as e:
                expect(e.local and ((e.code, e.reason) == (RESOURCE_EXHAUSTED, "frame_too_large")
                                    or e.code == UNAVAILABLE), f"pending call ended with {e}")
                ended = f"{e.code_name}/{e.reason}"
            expect(c.wait_closed(3.0), "connection still open 3 s after an oversize frame")
            g = c.go_away
            return (f"length {limit + 1}: GoAway RESOURCE_EXHAUSTED/frame_too_large + close; "
                    f"whole oversize request: pending call failed ({ended}), connection closed"
                    + (f" after GoAway {self.P.code_name(g.code)}/{g.reason} last_call_id={g.last_call_id}"
                       if g else " (no GoAway seen)"))

    # ---- extra checks of documented behaviour --------------------------------------------

    def concurrency_limit(self):
        with self.connected() as c:
            n = c.max_concurrent_calls + 20
            handles = c.call_many(HEALTH, [self.HealthReq() for _ in range(n)], timeout=10.0,
                                  enforce_limits=False)
            ok = refused = 0
            for h in handles:
                try:
                    h.result(15)
                    ok += 1
                except RpcError as e:
                    self.expect_status(e, RESOURCE_EXHAUSTED, "too_many_concurrent_calls")
                    refused += 1
            expect(ok + refused == n, "not all answered")
            expect(ok >= c.max_concurrent_calls, f"only {ok} succeeded")
            expect(c.call(HEALTH, timeout=5.0).status == SERVING, "connection unusable afterwards")
            return f"{n} calls in one write: {ok} OK, {refused} RESOURCE_EXHAUSTED/too_many_concurrent_calls, connection still open"

    def invalid_metadata(self):
        with self.connected() as c:
            md = self.P.Metadata(caller_service=CALLER,
                                 extra=[self.P.MetadataEntry(key="Upper", value="v")])
            try:
                c.call(HEALTH, timeout=5.0, metadata=md)
            except RpcError as e:
                self.expect_status(e, INVALID_ARGUMENT, "invalid_metadata")
                return f"{e.code_name}/{e.reason}"
            raise Failed("accepted an upper-case metadata key")

    def client_go_away(self):
        c = self.connected()
        try:
            h = c.call_async(HEALTH, timeout=5.0)
            c.send_go_away()
            expect(h.result(5).status == SERVING, "open call not answered after client GoAway")
            expect(c.wait_closed(5.0), "server did not close after answering the open calls")
            try:
                c.call_async(HEALTH)
                raise Failed("client allowed a call after its GoAway")
            except RpcError as e:
                expect(e.local, str(e))
            return "open call answered, then the server closed"
        finally:
            c.close()

    def main(self) -> int:
        checks = [
            ("Health/Check returns SERVING", self.health_serving),
            ("32 calls in flight on one connection all answered", self.many_in_flight),
            ("timeout_us=1 gets DEADLINE_EXCEEDED", self.deadline_exceeded),
            ("unknown method gets UNIMPLEMENTED", self.unknown_method),
            ("Ping gets Pong with the same payload", self.ping_pong),
            ("wrong credential: GoAway UNAUTHENTICATED, connection closed", self.wrong_secret),
            ("Hello for another service: GoAway UNAUTHENTICATED/wrong_server", self.wrong_server),
        ]
        if self.tls is None:
            checks += [("captured Hello replayed on a new connection refused", self.replay)]
        else:
            checks += [("client without a certificate refused", self.no_client_certificate)]
        checks += [
            ("frame over the size limit closes the connection", self.oversize_frame),
            ("calls over max_concurrent_calls refused, connection kept", self.concurrency_limit),
            ("bad metadata key gets INVALID_ARGUMENT/invalid_metadata", self.invalid_metadata),
            ("client GoAway: open call answered, then close", self.client_go_away),
        ]
        mode = "mutual TLS" if self.tls else "plaintext"
        print(f"# target {self.host}:{self.port} ({mode}), caller {CALLER!r}, server {SERVER or '(any)'}")
        for name, fn in checks:
            self.run(name, fn)
        print(f"{self.passed} passed, {self.failed} failed")
        return 0 if self.failed == 0 else 1


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(Scenario(sys.argv[1]).main())
