#!/usr/bin/env python3
"""Unit tests of the Swift generator: naming rules and the refusal of unsupported constructs.

Run: python3 scripts/codegen/test_generate_swift.py   (needs protoc-c and the `protobuf` package,
which scripts/generate-protos.sh installs). Swift output itself is covered by
Tests/AuthProtobufTests, which build against the generated code.
"""

import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import generate_swift as g  # noqa: E402


class NamingTests(unittest.TestCase):
    def test_lower_camel(self):
        cases = {
            "call_id": "callID",
            "end_user_ip": "endUserIP",
            "timestamp_unix_ms": "timestampUnixMS",
            "timeout_us": "timeoutUS",
            "idle_timeout_ms": "idleTimeoutMS",
            "id": "id",
            "jwks_url": "jwksURL",
            "request_id": "requestID",
            "max_frame_size": "maxFrameSize",
            "field_2": "field2",
            "Check": "check",
            "GetHTTPThing": "getHTTPThing",
            "INVALID_ARGUMENT": "invalidArgument",
            "NOT_SERVING": "notServing",
        }
        for proto, swift in cases.items():
            self.assertEqual(g.lower_camel(proto), swift, proto)

    def test_upper_camel(self):
        self.assertEqual(g.upper_camel("kind"), "Kind")
        self.assertEqual(g.upper_camel("second_choice"), "SecondChoice")
        self.assertEqual(g.upper_camel("user_id"), "UserID")

    def test_package_prefix(self):
        self.assertEqual(g.swift_package_prefix("auth.rpc.v1"), "Auth_Rpc_V1")
        self.assertEqual(g.swift_package_prefix("auth.otp_dispatch.v1"), "Auth_OtpDispatch_V1")

    def test_protoc_c_names(self):
        self.assertEqual(g.c_full_name_to_c("auth.rpc.v1.HelloAck"), "Auth__Rpc__V1__HelloAck")
        self.assertEqual(g.c_full_name_to_c("auth.otp_dispatch.v1.X"), "Auth__OtpDispatch__V1__X")
        self.assertEqual(g.c_full_name_to_lower("auth.rpc.v1.HelloAck"), "auth__rpc__v1__hello_ack")
        self.assertEqual(g.c_full_name_to_lower("a.HTTPRequest"), "a__httprequest")
        self.assertEqual(g.c_field_name("class"), "class_")
        self.assertEqual(g.c_field_name("Mixed_Case"), "mixed_case")

    def test_keywords_are_escaped(self):
        self.assertEqual(g.swift_ident("internal"), "`internal`")
        self.assertEqual(g.swift_ident("callID"), "callID")


class RefusalTests(unittest.TestCase):
    """Each construct the bridge does not support fails with an error naming it."""

    def load(self, files: dict[str, str], inputs: list[str] | None = None):
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            for name, text in files.items():
                (root / name).parent.mkdir(parents=True, exist_ok=True)
                (root / name).write_text(text)
            out = root / "set.pb"
            names = sorted(inputs or files)
            proc = subprocess.run(
                ["protoc-c", f"--proto_path={root}", f"--descriptor_set_out={out}", "--include_imports",
                 "--include_source_info", *names],
                capture_output=True,
                text=True,
            )
            if proc.returncode != 0:
                raise RuntimeError(proc.stderr)
            return g.load(out, names)

    def load_descriptor(self, fd):
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "set.pb"
            path.write_bytes(g.pb.FileDescriptorSet(file=[fd]).SerializeToString())
            return g.load(path, [fd.name])

    def refuse(self, body: str, expected: str, header: str = 'syntax = "proto3";\npackage t.v1;\n', others=None):
        files = {"t/v1/t.proto": header + body, **(others or {})}
        with self.assertRaises(g.GeneratorError) as ctx:
            self.load(files, inputs=["t/v1/t.proto"])
        self.assertIn(expected, str(ctx.exception))
        self.assertIn("proto/t/v1/t.proto", str(ctx.exception))

    def test_accepts_plain_proto3(self):
        files = self.load({"t/v1/t.proto": 'syntax = "proto3";\npackage t.v1;\nmessage M { string a = 1; }\n'})
        self.assertEqual(files[0].messages[0].swift_name, "T_V1_M")

    def test_proto2(self):
        self.refuse("message M { optional int32 a = 1; }", "syntax 'proto2'", header='syntax = "proto2";\npackage t.v1;\n')

    def test_proto3_optional(self):
        self.refuse("message M { optional int32 a = 1; }", "proto3 `optional`")

    def test_map(self):
        self.refuse("message M { map<string, string> a = 1; }", "map fields")

    def test_nested_message(self):
        self.refuse("message M { message N {} N n = 1; }", "nested message types")

    def test_nested_enum(self):
        self.refuse("message M { enum E { A = 0; } E e = 1; }", "nested enums")

    def test_recursion(self):
        self.refuse("message A { B b = 1; } message B { A a = 1; }", "recursive messages")
        self.refuse("message A { oneof k { A self_ref = 1; } }", "recursive messages")

    def test_streaming(self):
        self.refuse("message M {} service S { rpc R(stream M) returns (M); }", "streaming rpcs")
        self.refuse("message M {} service S { rpc R(M) returns (stream M); }", "streaming rpcs")

    def test_import_outside_proto(self):
        # As for google/protobuf/*.proto: a dependency that is not one of the inputs from proto/.
        self.refuse(
            'import "outside/o.proto";\nmessage M { o.O t = 1; }',
            "not under proto/",
            others={"outside/o.proto": 'syntax = "proto3";\npackage o;\nmessage O {}\n'},
        )

    def test_extensions(self):
        # proto3 only allows extending descriptor options (an import from outside proto/, refused
        # above), so the check is exercised with a hand-built descriptor.
        fd = g.pb.FileDescriptorProto(name="t/v1/t.proto", package="t.v1", syntax="proto3")
        fd.extension.add(name="x", number=50000, extendee=".google.protobuf.FieldOptions", type=5, label=1)
        with self.assertRaises(g.GeneratorError) as ctx:
            self.load_descriptor(fd)
        self.assertIn("extensions are not supported", str(ctx.exception))

    def test_alias(self):
        self.refuse("enum E { option allow_alias = true; A = 0; B = 0; }", "allow_alias")

    def test_reserved_names(self):
        self.refuse("message M { int32 hash_value = 1; }", "reserved")
        self.refuse("enum E { E_ZERO = 0; UNRECOGNIZED = 1; }", "reserved")
        self.refuse("message M { oneof string { int32 a = 1; } }", "reserved")

    def test_name_collisions(self):
        # protoc already refuses most clashes (JSON names, enum prefixes); the generator's own
        # check is exercised with a hand-built descriptor.
        fd = g.pb.FileDescriptorProto(name="t/v1/t.proto", package="t.v1", syntax="proto3")
        m = fd.message_type.add(name="M")
        m.field.add(name="user_id", number=1, type=5, label=1)
        m.field.add(name="user_iD", number=2, type=5, label=1)
        with self.assertRaises(g.GeneratorError) as ctx:
            self.load_descriptor(fd)
        self.assertIn("both become the Swift name userID", str(ctx.exception))

    def test_service_reasons(self):
        # An enum named <Service>Reason becomes the service's reason strings in its stubs.
        body = (
            "message Q {}\n"
            "enum ThingReason {\n  THING_REASON_UNSPECIFIED = 0;\n"
            "  // NOT_FOUND. No such thing.\n  THING_REASON_THING_NOT_FOUND = 1;\n"
            "  THING_REASON_INVALID_ID_TOKEN = 2;\n}\n"
            "service Thing { rpc Get(Q) returns (Q); }\n"
        )
        files = self.load({"t/v1/t.proto": 'syntax = "proto3";\npackage t.v1;\n' + body})
        text = g.swift_services_file(files[0])
        self.assertIn("public enum Reason {", text)
        self.assertIn('/// NOT_FOUND. No such thing.\n        public static let thingNotFound = "thing_not_found"', text)
        self.assertIn('public static let invalidIDToken = "invalid_id_token"', text)
        self.assertIn("public static let all: [String] = [thingNotFound, invalidIDToken]", text)
        self.assertNotIn("unspecified", text)

    def test_package_required(self):
        self.refuse("message M {}", "package declaration is required", header='syntax = "proto3";\n')


if __name__ == "__main__":
    unittest.main(verbosity=1)
