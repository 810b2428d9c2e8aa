#!/usr/bin/env python3
"""A small client for the auth RPC protocol, version 2 (docs/protocol.md).

Written only from docs/protocol.md and the .proto files under proto/, as a check that the
document is enough to build a client in another language.

Message classes are not hand-written: the .proto files are compiled to a descriptor set with
`protoc-c --descriptor_set_out` and the classes are built at run time with the `protobuf`
package (descriptor_pool + message_factory.GetMessageClass).

Library use:

    protos = Protos()                                   # compiles proto/ with protoc-c
    conn = Connection(protos, "127.0.0.1", 38081, service="authctl",
                      secret=secret_from_env(), server_name="identity")     # plaintext mode
    conn = Connection(protos, "127.0.0.1", 38081, service="authctl", secret=None,
                      tls=tls_context(cert, key, ca), server_name="identity")  # mutual TLS
    conn.connect()          # Challenge -> Hello -> HelloAck, server proof checked (or HelloRefused)
    resp = conn.call("/auth.health.v1.Health/Check", protos.message("auth.health.v1.HealthCheckRequest")())
    futs = [conn.call_async("/auth.health.v1.Health/Check", timeout=2.0) for _ in range(32)]
    conn.ping(42)
    conn.close()

CLI:

    rpc_client.py methods
    rpc_client.py ADDRESS health [--check-service NAME]
    rpc_client.py ADDRESS call METHOD [JSON] [--timeout S] [--request-id ID]
    rpc_client.py ADDRESS ping [PAYLOAD]

Plaintext mode: the secret comes from AUTH_RPC_SECRET (base64 of the shared secret). Mutual TLS:
AUTH_RPC_TLS_CERT, AUTH_RPC_TLS_KEY and AUTH_RPC_TLS_CA (PEM files). The caller's service name from
--service or AUTH_RPC_SERVICE (default "authctl"); the server expected with --server-name or
AUTH_RPC_SERVER_NAME (default: whichever service the Challenge names).
"""

from __future__ import annotations

import argparse
import base64
import binascii
import hashlib
import hmac
import json
import os
import select
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import Any, Callable, Optional

from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
PROTO_DIR = REPO / "proto"

PROTOCOL_VERSION = 2
DEFAULT_MAX_FRAME = 1 << 20           # 1 MiB, the documented default
HELLO_LABEL = b"auth-rpc-hello-v2"
HELLO_ACK_LABEL = b"auth-rpc-hello-ack-v2"
NONCE_LENGTH = 32
MAX_CALL_TIMEOUT_US = 120_000_000     # servers cut longer timeouts to 120 s

# gRPC status numbers (also in envelope.proto's StatusCode; kept here for readability).
OK, CANCELLED, UNKNOWN, INVALID_ARGUMENT, DEADLINE_EXCEEDED = 0, 1, 2, 3, 4
NOT_FOUND, ALREADY_EXISTS, PERMISSION_DENIED, RESOURCE_EXHAUSTED = 5, 6, 7, 8
FAILED_PRECONDITION, ABORTED, OUT_OF_RANGE, UNIMPLEMENTED, INTERNAL = 9, 10, 11, 12, 13
UNAVAILABLE, DATA_LOSS, UNAUTHENTICATED = 14, 15, 16


# --------------------------------------------------------------------------------------------
# Message classes from the .proto files
# --------------------------------------------------------------------------------------------

def compile_descriptor_set(proto_dir: Path = PROTO_DIR, out: Optional[Path] = None) -> bytes:
    """Runs protoc-c over every .proto under proto_dir and returns the FileDescriptorSet bytes."""
    files = sorted(str(p.relative_to(proto_dir)) for p in proto_dir.rglob("*.proto"))
    if not files:
        raise RuntimeError(f"no .proto files under {proto_dir}")
    with tempfile.TemporaryDirectory() as tmp:
        target = out or Path(tmp) / "descriptors.pb"
        cmd = ["protoc-c", f"--descriptor_set_out={target}", "--include_imports",
               f"--proto_path={proto_dir}", *files]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"protoc-c failed ({proc.returncode}): {proc.stderr.strip()}")
        return Path(target).read_bytes()


class Protos:
    """The protocol's message classes and the methods declared in the .proto files."""

    def __init__(self, proto_dir: Path = PROTO_DIR, descriptor_set: Optional[bytes] = None):
        data = descriptor_set if descriptor_set is not None else compile_descriptor_set(proto_dir)
        fds = descriptor_pb2.FileDescriptorSet.FromString(data)
        self.pool = descriptor_pool.DescriptorPool()
        for f in fds.file:          # --include_imports lists dependencies first
            self.pool.Add(f)
        self._classes: dict[str, type] = {}
        # "/auth.health.v1.Health/Check" -> (request class, response class)
        self.methods: dict[str, tuple[type, type]] = {}
        for f in fds.file:
            for svc in f.service:
                for m in svc.method:
                    path = f"/{f.package}.{svc.name}/{m.name}"
                    self.methods[path] = (self.message(m.input_type.lstrip(".")),
                                          self.message(m.output_type.lstrip(".")))
        self.Frame = self.message("auth.rpc.v1.Frame")
        self.Hello = self.message("auth.rpc.v1.Hello")
        self.Challenge = self.message("auth.rpc.v1.Challenge")
        self.Request = self.message("auth.rpc.v1.Request")
        self.Metadata = self.message("auth.rpc.v1.Metadata")
        self.Cancel = self.message("auth.rpc.v1.Cancel")
        self.Ping = self.message("auth.rpc.v1.Ping")
        self.Pong = self.message("auth.rpc.v1.Pong")
        self.GoAway = self.message("auth.rpc.v1.GoAway")
        self.Status = self.message("auth.rpc.v1.Status")
        self.Response = self.message("auth.rpc.v1.Response")
        self.HelloAck = self.message("auth.rpc.v1.HelloAck")
        self.MetadataEntry = self.message("auth.rpc.v1.MetadataEntry")
        self._status_enum = self.pool.FindEnumTypeByName("auth.rpc.v1.StatusCode")

    def message(self, full_name: str) -> type:
        cls = self._classes.get(full_name)
        if cls is None:
            cls = message_factory.GetMessageClass(self.pool.FindMessageTypeByName(full_name))
            self._classes[full_name] = cls
        return cls

    def code_name(self, code: int) -> str:
        v = self._status_enum.values_by_number.get(code)
        return v.name if v else f"CODE_{code}"

    def code_number(self, name_or_number: Any) -> int:
        if isinstance(name_or_number, int):
            return name_or_number
        return self._status_enum.values_by_name[str(name_or_number)].number


# --------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------

class RpcError(Exception):
    """A call that ended with a non-OK status. `local` is True when this client made the
    status up itself (its own deadline, a closed connection, a refused send)."""

    def __init__(self, code: int, message: str = "", reason: str = "", *,
                 details: Optional[dict] = None, local: bool = False,
                 code_name: Optional[str] = None, go_away: Any = None):
        self.code = code
        self.message = message
        self.reason = reason
        self.details = details or {}
        self.local = local
        self.code_name = code_name or str(code)
        self.go_away = go_away
        super().__init__(str(self))

    def __str__(self) -> str:
        s = f"{self.code_name}({self.code}) reason={self.reason!r} message={self.message!r}"
        if self.details:
            s += f" details={json.dumps(self.details, sort_keys=True)}"
        if self.local:
            s += " [client-side]"
        return s


class HelloRefused(RpcError):
    """The server answered Hello with GoAway (or closed without HelloAck)."""


class ConnectionClosed(RpcError):
    pass


def _status_details(status) -> dict:
    out: dict = {}
    if not status.HasField("details"):
        return out
    d = status.details
    if d.HasField("retry"):
        out["retry_after_seconds"] = d.retry.retry_after_seconds
    if d.HasField("attempts"):
        # present-with-0 ("no tries left") differs from absent: keep the distinction.
        out["attempts_remaining"] = d.attempts.attempts_remaining
    if len(d.field_violations):
        out["field_violations"] = [
            {"field": v.field, "reason": v.reason, "description": v.description}
            for v in d.field_violations]
    return out


# --------------------------------------------------------------------------------------------
# Credential
# --------------------------------------------------------------------------------------------

def decode_secret(text: str) -> bytes:
    """AUTH_RPC_SECRET is base64 of the secret; the MAC key is the decoded bytes."""
    t = "".join(text.split())
    try:
        key = base64.b64decode(t + "=" * (-len(t) % 4), validate=True)
    except binascii.Error:
        key = base64.urlsafe_b64decode(t + "=" * (-len(t) % 4))
    if len(key) < 32:
        raise ValueError(f"AUTH_RPC_SECRET decodes to {len(key)} bytes; at least 32 are required")
    return key


def secret_from_env(var: str = "AUTH_RPC_SECRET") -> bytes:
    v = os.environ.get(var)
    if not v:
        raise SystemExit(f"{var} is not set (base64 of the shared service secret)")
    return decode_secret(v)


def hello_signed_bytes(client: str, server: str, challenge_nonce: bytes, client_nonce: bytes) -> bytes:
    return (HELLO_LABEL + b"\x00" + client.encode("utf-8") + b"\x00" + server.encode("utf-8")
            + b"\x00" + challenge_nonce + client_nonce)


def hello_ack_signed_bytes(server: str, client: str, challenge_nonce: bytes, client_nonce: bytes) -> bytes:
    return (HELLO_ACK_LABEL + b"\x00" + server.encode("utf-8") + b"\x00" + client.encode("utf-8")
            + b"\x00" + challenge_nonce + client_nonce)


def make_hello(protos: Protos, secret: Optional[bytes], service: str, challenge, *,
               server_service: Optional[str] = None, nonce: Optional[bytes] = None,
               protocol_version: int = PROTOCOL_VERSION):
    """The Hello answering `challenge`. Plaintext mode (secret given): the MAC covers both names
    and both nonces. TLS mode (secret None): no MAC, the client certificate names the caller."""
    server = challenge.service if server_service is None else server_service
    n = os.urandom(NONCE_LENGTH) if nonce is None else nonce
    mac = b""
    if secret is not None:
        mac = hmac.new(secret, hello_signed_bytes(service, server, challenge.nonce, n), hashlib.sha256).digest()
    return protos.Hello(protocol_version=protocol_version, service=service, nonce=n, mac=mac,
                        server_service=server)


def ack_proof_is_valid(secret: bytes, ack, hello, challenge) -> bool:
    """Plaintext mode: whether HelloAck.mac proves that the server holds the secret."""
    expected = hmac.new(secret, hello_ack_signed_bytes(hello.server_service, hello.service,
                                                       challenge.nonce, hello.nonce), hashlib.sha256).digest()
    return hmac.compare_digest(expected, bytes(ack.mac))


def tls_context(cert: Optional[str], key: Optional[str], ca: str) -> ssl.SSLContext:
    """Mutual TLS 1.3: our certificate (if any) and the CA that signs the services' certificates.
    The server's certificate must name the server_hostname given to wrap_socket."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.load_verify_locations(cafile=ca)
    if cert:
        ctx.load_cert_chain(certfile=cert, keyfile=key)
    return ctx


def tls_from_env() -> Optional[ssl.SSLContext]:
    cert, key, ca = (os.environ.get(v) for v in ("AUTH_RPC_TLS_CERT", "AUTH_RPC_TLS_KEY", "AUTH_RPC_TLS_CA"))
    if not (cert or key or ca):
        return None
    if not (cert and key and ca):
        raise SystemExit("set all of AUTH_RPC_TLS_CERT, AUTH_RPC_TLS_KEY and AUTH_RPC_TLS_CA (PEM files)")
    return tls_context(cert, key, ca)


# --------------------------------------------------------------------------------------------
# Framing
# --------------------------------------------------------------------------------------------

class FrameTooLarge(Exception):
    pass


class FrameSocket:
    """Length-prefixed Frame I/O on a TCP socket. recv_frame is for one reader only."""

    def __init__(self, protos: Protos, sock: socket.socket, max_recv_frame: int = DEFAULT_MAX_FRAME):
        self.protos = protos
        self.sock = sock
        self.max_recv_frame = max_recv_frame
        self._buf = bytearray()
        self._send_lock = threading.Lock()
        self.eof = False

    def encode(self, frame) -> bytes:
        body = frame.SerializeToString()
        return struct.pack(">I", len(body)) + body

    def send_frame(self, frame) -> None:
        self.send_raw(self.encode(frame))

    def send_raw(self, data: bytes) -> None:
        with self._send_lock:
            self.sock.sendall(data)

    def _fill(self, deadline: Optional[float]) -> bool:
        """Reads more bytes. False on timeout; sets eof on end of stream."""
        wait = None if deadline is None else max(0.0, deadline - time.monotonic())
        # TLS: decrypted bytes may wait inside the SSL object where select() cannot see them.
        buffered = isinstance(self.sock, ssl.SSLSocket) and self.sock.pending() > 0
        if not buffered:
            r, _, _ = select.select([self.sock], [], [], wait)
            if not r:
                return False
        try:
            chunk = self.sock.recv(65536)
        except ssl.SSLWantReadError:
            return True       # a TLS record not complete yet (e.g. a session ticket)
        except (ConnectionResetError, OSError):
            chunk = b""
        if not chunk:
            self.eof = True
            return True
        self._buf += chunk
        return True

    def recv_frame(self, timeout: Optional[float] = None):
        """Next Frame; None when the stream ended or on timeout (check .eof).
        Raises FrameTooLarge before reading a body longer than max_recv_frame."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if len(self._buf) >= 4:
                (n,) = struct.unpack(">I", self._buf[:4])
                if n > self.max_recv_frame:
                    raise FrameTooLarge(n)
                if len(self._buf) >= 4 + n:
                    body = bytes(self._buf[4:4 + n])
                    del self._buf[:4 + n]
                    frame = self.protos.Frame()
                    frame.ParseFromString(body)   # DecodeError propagates
                    return frame
            if self.eof:
                return None
            if not self._fill(deadline):
                return None


def parse_address(addr: str) -> tuple[str, int]:
    if addr.isdigit():
        return "127.0.0.1", int(addr)
    if addr.startswith("["):
        host, _, port = addr[1:].partition("]:")
        return host, int(port)
    host, _, port = addr.rpartition(":")
    return host or "127.0.0.1", int(port)


# --------------------------------------------------------------------------------------------
# Connection
# --------------------------------------------------------------------------------------------

class _Call:
    __slots__ = ("call_id", "method", "resp_cls", "future", "deadline")

    def __init__(self, call_id, method, resp_cls, deadline):
        self.call_id = call_id
        self.method = method
        self.resp_cls = resp_cls
        self.future: Future = Future()
        self.deadline = deadline


class CallHandle:
    def __init__(self, conn: "Connection", call: _Call):
        self._conn = conn
        self.call_id = call.call_id
        self.future = call.future

    def result(self, timeout: Optional[float] = None):
        return self.future.result(timeout)

    def cancel(self) -> None:
        self._conn.cancel(self.call_id)


class Connection:
    """One client connection: Hello/HelloAck, then many unary calls in flight.

    A background thread reads frames, answers server Pings, matches Responses to calls by
    call_id, enforces the client-side deadline of each call (sending Cancel), and keeps the
    connection alive (Ping after `keepalive_s` of silence, close after `dead_s`)."""

    def __init__(self, protos: Protos, host: str, port: int, *, service: str, secret: Optional[bytes],
                 tls: Optional[ssl.SSLContext] = None, server_name: Optional[str] = None,
                 connect_timeout: float = 5.0, hello_timeout: float = 5.0,
                 max_recv_frame: int = DEFAULT_MAX_FRAME,
                 keepalive_s: float = 30.0, dead_s: float = 60.0,
                 local_grace_s: float = 0.5, log: Optional[Callable[[str], None]] = None):
        self.protos = protos
        self.host, self.port = host, port
        self.service = service
        self.secret = secret
        self.tls = tls
        self.server_name = server_name       # the service we mean to reach; None = the Challenge's
        self.challenge = None
        self.hello = None
        self.connect_timeout = connect_timeout
        self.hello_timeout = hello_timeout
        self.max_recv_frame = max_recv_frame
        self.keepalive_s = keepalive_s
        self.dead_s = dead_s
        self.local_grace_s = local_grace_s
        self.log = log or (lambda s: None)

        self.fs: Optional[FrameSocket] = None
        self.hello_ack = None
        self.go_away = None              # GoAway received from the server
        self.sent_go_away = False
        self.closed = threading.Event()
        self.close_reason = ""
        self.late_responses = 0          # responses for calls no longer open (cancelled/timed out)
        self._lock = threading.Lock()    # guards _calls, _next_id, _pings; held while sending a Request
        self._calls: dict[int, _Call] = {}
        self._pings: dict[int, list[Future]] = {}
        self._next_id = 1
        self._reader: Optional[threading.Thread] = None
        self._last_heard = time.monotonic()
        self._ping_sent_at: Optional[float] = None

    # ---- connection start ------------------------------------------------------------------

    def open_socket(self) -> FrameSocket:
        sock = socket.create_connection((self.host, self.port), timeout=self.connect_timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.tls is not None:
            if self.server_name is None:
                self.tls.check_hostname = False    # no name to check: any certificate of the CA
            # Raises ssl.SSLError when the server's certificate is not from the CA or does not
            # name server_name.
            sock = self.tls.wrap_socket(sock, server_hostname=self.server_name)
        sock.settimeout(10.0)            # for sends: a peer not reading for 10 s is dead
        self.fs = FrameSocket(self.protos, sock, self.max_recv_frame)
        return self.fs

    def connect(self, hello=None):
        """Reads the server's Challenge, sends Hello (a fresh answer unless given; `hello` may
        also be a function of the challenge) and waits for HelloAck, whose proof it checks in
        plaintext mode. Raises HelloRefused with the server's GoAway code/reason when refused."""
        fs = self.open_socket()
        deadline = time.monotonic() + self.hello_timeout
        frame = fs.recv_frame(timeout=self.hello_timeout)
        if frame is None or frame.WhichOneof("kind") != "challenge":
            self._close_socket()
            got = "the connection closed" if frame is None else f"a {frame.WhichOneof('kind')!r} frame"
            raise HelloRefused(UNAVAILABLE, f"expected Challenge, got {got}", "no_challenge", local=True,
                               code_name="UNAVAILABLE")
        challenge = self.challenge = frame.challenge
        if challenge.protocol_version != PROTOCOL_VERSION:
            self._close_socket()
            raise HelloRefused(FAILED_PRECONDITION, f"server speaks protocol version {challenge.protocol_version}",
                               "unsupported_protocol_version", local=True, code_name="FAILED_PRECONDITION")
        if self.server_name is not None and challenge.service != self.server_name:
            self._close_socket()
            raise HelloRefused(UNAUTHENTICATED, f"expected {self.server_name}, the server is {challenge.service}",
                               "wrong_server", local=True, code_name="UNAUTHENTICATED")
        if hello is None:
            hello = make_hello(self.protos, None if self.tls else self.secret, self.service, challenge,
                               server_service=self.server_name)
        elif callable(hello):
            hello = hello(challenge)
        self.hello = hello
        fs.send_frame(self.protos.Frame(hello=hello))
        while True:
            left = deadline - time.monotonic()
            frame = fs.recv_frame(timeout=max(0.0, left)) if left > 0 else None
            if frame is None:
                self._close_socket()
                why = "connection closed before HelloAck" if fs.eof else "no HelloAck in time"
                raise HelloRefused(UNAVAILABLE, why, "no_hello_ack", local=True,
                                   code_name="UNAVAILABLE")
            kind = frame.WhichOneof("kind")
            if kind == "hello_ack":
                self.hello_ack = frame.hello_ack
                break
            if kind == "go_away":
                g = frame.go_away
                self.go_away = g
                # the server closes after a refusing GoAway: wait for the end of the stream
                self._drain_until_eof(1.0)
                self._close_socket()
                raise HelloRefused(g.code, g.message, g.reason, go_away=g,
                                   code_name=self.protos.code_name(g.code))
            if kind == "ping":   # not expected before HelloAck, but answering is harmless
                fs.send_frame(self.protos.Frame(pong=self.protos.Pong(payload=frame.ping.payload)))
                continue
            self._close_socket()
            raise HelloRefused(INTERNAL, f"unexpected {kind!r} frame before HelloAck",
                               "protocol_violation", local=True, code_name="INTERNAL")
        ack = self.hello_ack
        if ack.protocol_version != PROTOCOL_VERSION:
            self._close_socket()
            raise HelloRefused(FAILED_PRECONDITION,
                               f"server speaks protocol version {ack.protocol_version}",
                               "unsupported_protocol_version", local=True,
                               code_name="FAILED_PRECONDITION")
        if ack.service != hello.server_service:
            self._close_socket()
            raise HelloRefused(UNAUTHENTICATED, f"HelloAck names {ack.service!r}", "wrong_server",
                               local=True, code_name="UNAUTHENTICATED")
        # Plaintext: the server proves it holds the secret too. (TLS: its certificate did.)
        if self.tls is None and not ack_proof_is_valid(self.secret, ack, hello, challenge):
            self._close_socket()
            raise HelloRefused(UNAUTHENTICATED, "the server did not prove that it holds the secret",
                               "invalid_server_credential", local=True, code_name="UNAUTHENTICATED")
        self._last_heard = time.monotonic()
        self._reader = threading.Thread(target=self._read_loop, name="rpc-reader", daemon=True)
        self._reader.start()
        return ack

    def _drain_until_eof(self, timeout: float) -> bool:
        """Reads and drops frames until the peer closes; True when it did within timeout."""
        assert self.fs is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                f = self.fs.recv_frame(timeout=max(0.0, deadline - time.monotonic()))
            except Exception:
                return False
            if f is None and self.fs.eof:
                return True
        return False

    # ---- limits announced by the server ----------------------------------------------------

    @property
    def max_frame_size(self) -> int:
        return self.hello_ack.max_frame_size if self.hello_ack and self.hello_ack.max_frame_size else DEFAULT_MAX_FRAME

    @property
    def max_concurrent_calls(self) -> int:
        return self.hello_ack.max_concurrent_calls if self.hello_ack and self.hello_ack.max_concurrent_calls else 256

    @property
    def open_calls(self) -> int:
        with self._lock:
            return len(self._calls)

    # ---- calls -----------------------------------------------------------------------------

    def _local_error(self, code: int, message: str, reason: str, **kw) -> RpcError:
        return RpcError(code, message, reason, local=True, code_name=self.protos.code_name(code), **kw)

    def _build(self, method: str, request, payload, timeout, timeout_us, metadata, local_deadline):
        req_cls, resp_cls = self.protos.methods.get(method, (None, None))
        if payload is None:
            if request is None:
                payload = b"" if req_cls is None else req_cls().SerializeToString()
            elif isinstance(request, (bytes, bytearray)):
                payload = bytes(request)
            else:
                payload = request.SerializeToString()
        if timeout_us is None:
            timeout_us = 0 if not timeout else max(1, int(timeout * 1_000_000))
        if local_deadline is None:
            local_deadline = None if not timeout_us else timeout_us / 1e6 + self.local_grace_s
        deadline = None if local_deadline is None else time.monotonic() + local_deadline
        req = self.protos.Request(method=method, timeout_us=timeout_us, payload=payload)
        if metadata is not None:
            req.metadata.CopyFrom(metadata)
        return req, resp_cls, deadline

    def _check_usable(self) -> None:
        if self.hello_ack is None:
            raise self._local_error(FAILED_PRECONDITION, "not connected (no HelloAck yet)", "not_connected")
        if self.closed.is_set():
            raise self._local_error(UNAVAILABLE, f"connection closed: {self.close_reason}", "connection_closed")
        if self.go_away is not None or self.sent_go_away:
            raise self._local_error(UNAVAILABLE, "connection is going away; use a new one", "going_away")

    def call_many(self, method: str, requests: list, *, timeout: Optional[float] = 5.0,
                  timeout_us: Optional[int] = None, metadata=None,
                  local_deadline: Optional[float] = None,
                  enforce_limits: bool = True) -> list[CallHandle]:
        """Starts len(requests) calls with a single write, so that all are in flight at once."""
        self._check_usable()
        built = [self._build(method, r, None, timeout, timeout_us, metadata, local_deadline)
                 for r in requests]
        handles = []
        with self._lock:
            if enforce_limits and len(self._calls) + len(built) > self.max_concurrent_calls:
                raise self._local_error(RESOURCE_EXHAUSTED,
                                        f"{len(self._calls)} open + {len(built)} new calls exceed the server's "
                                        f"{self.max_concurrent_calls}", "too_many_concurrent_calls")
            chunks = []
            for req, resp_cls, deadline in built:
                req.call_id = self._next_id
                self._next_id += 1
                data = self.fs.encode(self.protos.Frame(request=req))
                if enforce_limits and len(data) - 4 > self.max_frame_size:
                    raise self._local_error(RESOURCE_EXHAUSTED, "request frame too large", "frame_too_large")
                call = _Call(req.call_id, method, resp_cls, deadline)
                self._calls[call.call_id] = call
                handles.append(CallHandle(self, call))
                chunks.append(data)
            try:
                self.fs.send_raw(b"".join(chunks))
            except OSError as e:
                for h in handles:
                    self._calls.pop(h.call_id, None)
                raise self._local_error(UNAVAILABLE, f"send failed: {e}", "connection_closed")
        return handles

    def call_async(self, method: str, request=None, *, payload: Optional[bytes] = None,
                   timeout: Optional[float] = 5.0, timeout_us: Optional[int] = None,
                   metadata=None, local_deadline: Optional[float] = None,
                   enforce_limits: bool = True) -> CallHandle:
        """Starts a call. `timeout` (seconds) is sent as timeout_us (0/None = no deadline);
        `timeout_us` overrides what is sent. The client stops waiting `local_grace_s` after the
        deadline (sending Cancel) unless `local_deadline` (seconds) says otherwise.
        `request` is a message, bytes, or None (the method's empty request)."""
        self._check_usable()
        req, resp_cls, deadline = self._build(method, request, payload, timeout, timeout_us,
                                              metadata, local_deadline)
        with self._lock:
            if enforce_limits and len(self._calls) >= self.max_concurrent_calls:
                raise self._local_error(RESOURCE_EXHAUSTED,
                                        f"{len(self._calls)} calls already open (server allows {self.max_concurrent_calls})",
                                        "too_many_concurrent_calls")
            call_id = self._next_id
            self._next_id += 1
            req.call_id = call_id
            data = self.fs.encode(self.protos.Frame(request=req))
            if enforce_limits and len(data) - 4 > self.max_frame_size:
                raise self._local_error(RESOURCE_EXHAUSTED,
                                        f"request frame of {len(data) - 4} bytes exceeds the server's {self.max_frame_size}",
                                        "frame_too_large")
            call = _Call(call_id, method, resp_cls, deadline)
            self._calls[call_id] = call
            # Sent while holding the lock so that ids go out strictly increasing.
            try:
                self.fs.send_raw(data)
            except OSError as e:
                del self._calls[call_id]
                raise self._local_error(UNAVAILABLE, f"send failed: {e}", "connection_closed")
        return CallHandle(self, call)

    def call(self, method: str, request=None, **kw):
        """Unary call; returns the decoded response (bytes for methods not in the .proto
        files) or raises RpcError."""
        return self.call_async(method, request, **kw).result()

    def cancel(self, call_id: int) -> bool:
        """Abandons a call: sends Cancel; the server sends no Response for it."""
        with self._lock:
            call = self._calls.pop(call_id, None)
        if call is None:
            return False
        try:
            self.fs.send_frame(self.protos.Frame(cancel=self.protos.Cancel(call_id=call_id)))
        except OSError:
            pass
        if not call.future.done():
            call.future.set_exception(self._local_error(CANCELLED, "cancelled by the client", "cancelled"))
        return True

    def ping(self, payload: Optional[int] = None, timeout: float = 5.0) -> float:
        """Sends Ping and waits for the Pong with the same payload; returns the round trip (s)."""
        if payload is None:
            payload = int.from_bytes(os.urandom(8), "big")
        fut: Future = Future()
        with self._lock:
            self._pings.setdefault(payload, []).append(fut)
        t0 = time.monotonic()
        self.fs.send_frame(self.protos.Frame(ping=self.protos.Ping(payload=payload)))
        try:
            fut.result(timeout)
        except FutureTimeout:
            with self._lock:
                lst = self._pings.get(payload, [])
                if fut in lst:
                    lst.remove(fut)
            raise self._local_error(DEADLINE_EXCEEDED, f"no Pong for payload {payload} in {timeout}s", "ping_timeout")
        return time.monotonic() - t0

    def send_go_away(self, message: str = "client done") -> None:
        """Tells the server this client sends no more calls; it closes once they are answered."""
        with self._lock:
            last = self._next_id - 1
            self.sent_go_away = True
        self.fs.send_frame(self.protos.Frame(go_away=self.protos.GoAway(
            last_call_id=last, code=OK, message=message, reason="going_away")))

    def wait_closed(self, timeout: Optional[float] = None) -> bool:
        return self.closed.wait(timeout)

    def close(self) -> None:
        self._shutdown("closed by the client")
        if self._reader is not None and self._reader is not threading.current_thread():
            self._reader.join(2.0)

    # ---- reader ----------------------------------------------------------------------------

    def _close_socket(self) -> None:
        if self.fs is not None:
            try:
                self.fs.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            try:
                self.fs.sock.close()
            except OSError:
                pass

    def _shutdown(self, reason: str) -> None:
        with self._lock:
            if self.closed.is_set():
                return
            self.close_reason = reason
            self.closed.set()
            calls = list(self._calls.values())
            self._calls.clear()
            pings = [f for lst in self._pings.values() for f in lst]
            self._pings.clear()
        self._close_socket()
        g = self.go_away
        for c in calls:
            if not c.future.done():
                code, rsn = UNAVAILABLE, "connection_closed"
                msg = f"connection closed before the response: {reason}"
                c.future.set_exception(self._local_error(code, msg, rsn, go_away=g))
        for f in pings:
            if not f.done():
                f.set_exception(self._local_error(UNAVAILABLE, "connection closed", "connection_closed"))

    def _send_protocol_error(self, code: int, reason: str, message: str) -> None:
        try:
            self.fs.send_frame(self.protos.Frame(go_away=self.protos.GoAway(
                last_call_id=0, code=code, message=message, reason=reason)))
        except OSError:
            pass

    def _read_loop(self) -> None:
        fs = self.fs
        try:
            while not self.closed.is_set():
                try:
                    frame = fs.recv_frame(timeout=0.05)
                except FrameTooLarge as e:
                    self._send_protocol_error(RESOURCE_EXHAUSTED, "frame_too_large",
                                              f"frame of {e.args[0]} bytes")
                    self._shutdown(f"server sent a frame of {e.args[0]} bytes (limit {fs.max_recv_frame})")
                    return
                except Exception as e:  # DecodeError and friends
                    self._send_protocol_error(INVALID_ARGUMENT, "malformed_frame", str(e))
                    self._shutdown(f"malformed frame from server: {e}")
                    return
                now = time.monotonic()
                if frame is None:
                    if fs.eof:
                        why = "server closed the connection"
                        if self.go_away is not None:
                            why += f" after GoAway {self.protos.code_name(self.go_away.code)} {self.go_away.reason!r}"
                        self._shutdown(why)
                        return
                    self._tick(now)
                    continue
                self._last_heard = now
                self._ping_sent_at = None
                self._dispatch(frame)
                self._tick(now)
        except Exception as e:  # pragma: no cover - unexpected
            self._shutdown(f"reader failed: {e!r}")

    def _tick(self, now: float) -> None:
        # client-side deadlines
        expired = []
        with self._lock:
            for c in self._calls.values():
                if c.deadline is not None and now >= c.deadline:
                    expired.append(c)
            for c in expired:
                del self._calls[c.call_id]
        for c in expired:
            try:
                self.fs.send_frame(self.protos.Frame(cancel=self.protos.Cancel(call_id=c.call_id)))
            except OSError:
                pass
            if not c.future.done():
                c.future.set_exception(self._local_error(
                    DEADLINE_EXCEEDED, "no response by the deadline (client gave up, sent Cancel)",
                    "deadline_exceeded"))
        # keepalive
        silent = now - self._last_heard
        if silent >= self.dead_s:
            self._shutdown(f"nothing heard from the server for {silent:.0f}s")
        elif silent >= self.keepalive_s and self._ping_sent_at is None:
            self._ping_sent_at = now
            try:
                self.fs.send_frame(self.protos.Frame(ping=self.protos.Ping(payload=int(now * 1000))))
            except OSError:
                pass

    def _dispatch(self, frame) -> None:
        P = self.protos
        kind = frame.WhichOneof("kind")
        if kind == "response":
            r = frame.response
            with self._lock:
                call = self._calls.pop(r.call_id, None)
            if call is None:
                self.late_responses += 1
                self.log(f"response for call {r.call_id} that is not open (cancelled or timed out)")
                return
            if r.HasField("status") and r.status.code != OK:
                s = r.status
                call.future.set_exception(RpcError(
                    s.code, s.message, s.reason, details=_status_details(s),
                    code_name=P.code_name(s.code)))
                return
            if call.resp_cls is None:
                call.future.set_result(bytes(r.payload))
                return
            try:
                msg = call.resp_cls()
                msg.ParseFromString(r.payload)
            except Exception as e:
                call.future.set_exception(self._local_error(
                    INTERNAL, f"response payload does not parse: {e}", "malformed_response"))
                return
            call.future.set_result(msg)
        elif kind == "pong":
            with self._lock:
                lst = self._pings.get(frame.pong.payload)
                fut = lst.pop(0) if lst else None
                if lst == []:
                    self._pings.pop(frame.pong.payload, None)
            if fut is not None and not fut.done():
                fut.set_result(True)
        elif kind == "ping":
            try:
                self.fs.send_frame(P.Frame(pong=P.Pong(payload=frame.ping.payload)))
            except OSError:
                pass
        elif kind == "go_away":
            g = frame.go_away
            self.go_away = g
            self.log(f"GoAway last_call_id={g.last_call_id} {P.code_name(g.code)} "
                     f"reason={g.reason!r} message={g.message!r}")
            # Calls above last_call_id were not started and never will be: fail them now
            # (they are safe to retry on another connection). The rest are still answered.
            with self._lock:
                dropped = [c for cid, c in self._calls.items() if cid > g.last_call_id]
                for c in dropped:
                    del self._calls[c.call_id]
            # A graceful GoAway (shutdown: UNAVAILABLE/going_away) means "retry elsewhere"; any
            # other code is the server refusing this connection (protocol error, limit), and the
            # calls end with that code and reason.
            graceful = g.code in (OK, UNAVAILABLE)
            for c in dropped:
                if not c.future.done():
                    if graceful:
                        err = self._local_error(
                            UNAVAILABLE, f"not started by the server (GoAway last_call_id={g.last_call_id}); safe to retry",
                            "going_away", go_away=g)
                    else:
                        err = self._local_error(
                            g.code, f"connection closed by the server: {g.message}", g.reason, go_away=g)
                    c.future.set_exception(err)
        elif kind is None:
            # An unknown frame kind is treated like a malformed frame (protocol.md §9).
            self._send_protocol_error(INVALID_ARGUMENT, "malformed_frame", "frame with no known kind")
            self._shutdown("server sent a frame with no known kind")
        else:
            self._send_protocol_error(INVALID_ARGUMENT, "protocol_violation",
                                      f"unexpected {kind} frame from a server")
            self._shutdown(f"server sent a {kind} frame")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# --------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------

HEALTH_CHECK = "/auth.health.v1.Health/Check"


def _connect_from_args(protos: Protos, args) -> Connection:
    host, port = parse_address(args.address)
    tls = tls_from_env()
    conn = Connection(protos, host, port, service=args.service,
                      secret=None if tls else secret_from_env(), tls=tls,
                      server_name=args.server_name or None,
                      log=(lambda s: print(f"# {s}", file=sys.stderr)) if args.verbose else None)
    ack = conn.connect()
    if args.verbose:
        print(f"# HelloAck: service={ack.service!r} max_frame_size={ack.max_frame_size} "
              f"max_concurrent_calls={ack.max_concurrent_calls} idle_timeout_ms={ack.idle_timeout_ms}",
              file=sys.stderr)
    return conn


def _print_error(e: RpcError) -> int:
    print(f"error: {e}", file=sys.stderr)
    return e.code if 0 < e.code < 125 else 1


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description="auth RPC protocol v2 client")
    ap.add_argument("--service", default=os.environ.get("AUTH_RPC_SERVICE", "authctl"),
                    help="this caller's service name sent in Hello (default: $AUTH_RPC_SERVICE or authctl)")
    ap.add_argument("--server-name", default=os.environ.get("AUTH_RPC_SERVER_NAME", ""),
                    help="the service expected at ADDRESS (default: $AUTH_RPC_SERVER_NAME, else whichever answers)")
    ap.add_argument("-v", "--verbose", action="store_true")
    ap.add_argument("address", nargs="?", help="HOST:PORT of the server (or just PORT)")
    ap.add_argument("command", nargs="?", default="health", choices=["health", "call", "ping", "methods"])
    ap.add_argument("rest", nargs="*")
    ap.add_argument("--timeout", type=float, default=5.0, help="call deadline in seconds (0 = none)")
    ap.add_argument("--check-service", default="", help="HealthCheckRequest.service")
    ap.add_argument("--request-id", default="", help="Metadata.request_id")
    args = ap.parse_args(argv)

    protos = Protos()
    if args.address == "methods" or args.command == "methods":
        for m in sorted(protos.methods):
            print(m)
        return 0
    if not args.address:
        ap.error("address is required")

    try:
        conn = _connect_from_args(protos, args)
    except RpcError as e:
        return _print_error(e)
    with conn:
        md = None
        if args.request_id:
            md = protos.Metadata(request_id=args.request_id, caller_service=args.service)
        try:
            if args.command == "health":
                req = protos.message("auth.health.v1.HealthCheckRequest")(service=args.check_service)
                resp = conn.call(HEALTH_CHECK, req, timeout=args.timeout, metadata=md)
                print(json_format.MessageToJson(resp, always_print_fields_with_no_presence=True).strip())
                return 0 if resp.status == 1 else 1
            if args.command == "ping":
                payload = int(args.rest[0]) if args.rest else None
                rtt = conn.ping(payload, timeout=args.timeout or 5.0)
                print(f"pong in {rtt * 1000:.2f} ms")
                return 0
            if args.command == "call":
                if not args.rest:
                    ap.error("call needs METHOD [JSON]")
                method = args.rest[0]
                body = args.rest[1] if len(args.rest) > 1 else "{}"
                req_cls, _ = protos.methods.get(method, (None, None))
                if req_cls is None:
                    print(f"# {method} is not in the .proto files; sending an empty payload", file=sys.stderr)
                    req = b""
                else:
                    req = json_format.Parse(body, req_cls())
                resp = conn.call(method, req, timeout=args.timeout, metadata=md)
                if isinstance(resp, bytes):
                    print(resp.hex())
                else:
                    print(json_format.MessageToJson(resp, always_print_fields_with_no_presence=True).strip())
                return 0
        except RpcError as e:
            return _print_error(e)
    return 0


if __name__ == "__main__":
    sys.exit(main())
