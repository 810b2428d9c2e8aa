#!/usr/bin/env python3
"""Generates the Swift side of the protobuf-c bridge from a FileDescriptorSet.

Called by scripts/generate-protos.sh, which runs protoc-c first. Inputs: the descriptor set that
protoc-c wrote (`--descriptor_set_out --include_imports --include_source_info`), the folder with
protoc-c's C output, and the list of .proto files (relative to proto/). Outputs, relative to the
repository root:

  Sources/CAuthProto/<path>.pb-c.c               protoc-c output, with a DO NOT EDIT line on top
  Sources/CAuthProto/include/<path>.pb-c.h       likewise
  Sources/CAuthProto/include/CAuthProto.h        umbrella header including every .pb-c.h
  Sources/CAuthProto/include/module.modulemap    its module map (SwiftPM refuses an umbrella header
                                                 with folders beside it unless the map is given)
  Sources/AuthProtobuf/Generated/<p_a_t_h>.pb.swift   Swift message and enum types
  Sources/AuthAPI/Generated/<p_a_t_h>.rpc.swift       Swift service stubs (files with a service)

With --check nothing is written: the expected output is compared with the tree and the script
exits 1 with a summary when they differ. Otherwise changed files are written (unchanged files are
left alone so their modification times do not trigger rebuilds) and stale generated files removed.

Anything the Swift bridge does not support fails with an error naming the file and the construct.
See docs/codegen.md.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

try:
    from google.protobuf import descriptor_pb2 as pb
except ImportError:  # pragma: no cover - the shell script installs it first
    sys.exit("generate_swift.py: the Python package 'protobuf' is missing (pip install -r scripts/codegen/requirements.txt)")

FDP = pb.FieldDescriptorProto

GENERATOR = "scripts/generate-protos.sh"

C_TARGET = "Sources/CAuthProto"
C_INCLUDE = "Sources/CAuthProto/include"
UMBRELLA = "Sources/CAuthProto/include/CAuthProto.h"
MODULE_MAP = "Sources/CAuthProto/include/module.modulemap"
REGISTRY = "Sources/CAuthProto/registry.c"
SWIFT_MESSAGES = "Sources/AuthProtobuf/Generated"
SWIFT_SERVICES = "Sources/AuthAPI/Generated"


class GeneratorError(Exception):
    pass


# --------------------------------------------------------------------------------------------
# Naming
# --------------------------------------------------------------------------------------------

# Words written in capitals when they are not the first word of a lowerCamelCase name
# (`call_id` -> `callID`), and always in an UpperCamelCase name.
ACRONYMS = {"id", "ip", "url", "uri", "jwt", "jwks", "http", "otp", "sms", "amr", "rsa", "ms", "us"}

# Swift keywords that must be escaped with backticks when used as an identifier.
SWIFT_KEYWORDS = {
    "associatedtype", "borrowing", "class", "consuming", "deinit", "enum", "extension", "fileprivate",
    "func", "import", "init", "inout", "internal", "let", "nonisolated", "open", "operator", "private",
    "precedencegroup", "protocol", "public", "rethrows", "static", "struct", "subscript", "typealias",
    "var", "break", "case", "catch", "continue", "default", "defer", "do", "else", "fallthrough",
    "for", "guard", "if", "in", "repeat", "return", "throw", "switch", "where", "while", "Any", "as",
    "await", "false", "is", "nil", "self", "Self", "super", "throws", "true", "try", "_",
}

# Names that would clash with members of the generated types or the runtime's protocols, or that
# backticks do not make usable. The generator refuses them instead of inventing a new name.
RESERVED_MEMBER_NAMES = {
    "self", "Self", "Type", "Protocol", "init", "deinit", "subscript", "hashValue", "hash",
    "serializedBytes", "withSerializedBytes", "protoMessageName",
}
RESERVED_ENUM_CASE_NAMES = RESERVED_MEMBER_NAMES | {"unrecognized", "rawValue", "allKnownCases"}
# A oneof becomes a nested enum type; these names would shadow types the generated code uses.
RESERVED_NESTED_TYPE_NAMES = {
    "String", "Bool", "Int", "Int32", "Int64", "UInt", "UInt8", "UInt32", "UInt64", "Float", "Double",
    "Array", "Optional", "Error", "Never", "Sendable", "Hashable", "Equatable", "R", "Self", "Type",
    "Protocol", "Swift", "ProtobufCMessage", "ProtobufCEnum", "ProtobufCError", "ProtobufCArena",
    "UnsafeRawBufferPointer", "UnsafePointer", "UnsafeMutablePointer",
}

# protoc-c appends "_" to C struct members named after these (c_helpers.cc, kKeywordList).
C_KEYWORDS = {
    "and", "and_eq", "asm", "auto", "bitand", "bitor", "bool", "break", "case", "catch", "char",
    "class", "compl", "const", "const_cast", "continue", "default", "delete", "do", "double",
    "dynamic_cast", "else", "enum", "explicit", "extern", "false", "float", "for", "friend", "goto",
    "if", "inline", "int", "long", "mutable", "namespace", "new", "not", "not_eq", "operator", "or",
    "or_eq", "private", "protected", "public", "register", "reinterpret_cast", "return", "short",
    "signed", "sizeof", "static", "static_cast", "struct", "switch", "template", "this", "throw",
    "true", "try", "typedef", "typeid", "typename", "union", "unsigned", "using", "virtual", "void",
    "volatile", "wchar_t", "while", "xor", "xor_eq",
}

_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def words(name: str) -> list[str]:
    """Splits snake_case, UPPER_SNAKE and CamelCase names into words."""
    out: list[str] = []
    for part in name.split("_"):
        out.extend(_WORD.findall(part))
    return out


def _capitalized(word: str) -> str:
    if word.lower() in ACRONYMS:
        return word.upper()
    return word[:1].upper() + word[1:].lower()


def lower_camel(name: str) -> str:
    ws = words(name)
    if not ws:
        raise GeneratorError(f"cannot make a Swift name from {name!r}")
    return ws[0].lower() + "".join(_capitalized(w) for w in ws[1:])


def upper_camel(name: str) -> str:
    ws = words(name)
    if not ws:
        raise GeneratorError(f"cannot make a Swift name from {name!r}")
    return "".join(_capitalized(w) for w in ws)


def upper_snake(name: str) -> str:
    return "_".join(w.upper() for w in words(name))


def swift_ident(name: str) -> str:
    return f"`{name}`" if name in SWIFT_KEYWORDS else name


def argument_label(escaped: str) -> str:
    """Argument labels at a call site need no backticks (Swift 6), except `inout`."""
    bare = escaped.strip("`")
    return escaped if bare == "inout" else bare


def swift_package_prefix(package: str) -> str:
    # Like swift-protobuf: each package component in UpperCamelCase, joined with "_".
    parts = []
    for comp in package.split("."):
        parts.append("".join(p[:1].upper() + p[1:] for p in comp.split("_") if p))
    return "_".join(parts)


# protoc-c's own name mangling (protoc-c/c_helpers.cc), reproduced so the Swift code can name the
# C symbols; every name is also checked against the generated header.

def c_camel_to_lower(name: str) -> str:
    was_upper = True
    out = ""
    for ch in name:
        is_upper = "A" <= ch <= "Z"
        if is_upper:
            if not was_upper:
                out += "_"
            out += ch.lower()
        else:
            out += ch
        was_upper = is_upper
    return out


def c_to_camel(name: str) -> str:
    out = ""
    next_upper = True
    for ch in name:
        if ch == "_":
            next_upper = True
        elif next_upper:
            out += ch.upper()
            next_upper = False
        else:
            out += ch
    return out


def c_full_name_to_c(full_name: str) -> str:
    return "__".join(c_to_camel(p) for p in full_name.split(".") if p)


def c_full_name_to_lower(full_name: str) -> str:
    return "__".join(c_camel_to_lower(p) for p in full_name.split(".") if p)


def c_field_name(name: str) -> str:
    lowered = name.lower()
    return lowered + "_" if lowered in C_KEYWORDS else lowered


# --------------------------------------------------------------------------------------------
# Model
# --------------------------------------------------------------------------------------------

SCALARS = {
    # proto type: (Swift type, Swift default)
    FDP.TYPE_DOUBLE: ("Double", "0"),
    FDP.TYPE_FLOAT: ("Float", "0"),
    FDP.TYPE_INT64: ("Int64", "0"),
    FDP.TYPE_SINT64: ("Int64", "0"),
    FDP.TYPE_SFIXED64: ("Int64", "0"),
    FDP.TYPE_UINT64: ("UInt64", "0"),
    FDP.TYPE_FIXED64: ("UInt64", "0"),
    FDP.TYPE_INT32: ("Int32", "0"),
    FDP.TYPE_SINT32: ("Int32", "0"),
    FDP.TYPE_SFIXED32: ("Int32", "0"),
    FDP.TYPE_UINT32: ("UInt32", "0"),
    FDP.TYPE_FIXED32: ("UInt32", "0"),
}


@dataclass
class EnumValue:
    proto_name: str
    number: int
    swift_case: str  # already escaped if needed
    doc: list[str]


@dataclass
class EnumType:
    full_name: str
    swift_name: str
    c_name: str
    values: list[EnumValue]
    doc: list[str]
    source: str

    @property
    def zero_case(self) -> str:
        return self.values[0].swift_case


@dataclass
class Field:
    proto_name: str
    number: int
    type: int
    repeated: bool
    type_name: str  # fully qualified with leading dot, for messages and enums
    swift_name: str  # escaped
    c_member: str  # escaped for use after `c.pointee.`
    c_count: str  # n_<member>, for repeated fields
    oneof: "Oneof | None"
    doc: list[str]


@dataclass
class Oneof:
    proto_name: str
    swift_property: str  # escaped
    swift_type: str
    c_case_member: str
    fields: list[Field]
    doc: list[str]


@dataclass
class Message:
    full_name: str
    swift_name: str
    c_name: str
    c_lower: str
    fields: list[Field]
    oneofs: list[Oneof]
    doc: list[str]
    source: str


@dataclass
class Method:
    proto_name: str
    swift_name: str
    input_type: str
    output_type: str
    doc: list[str]


@dataclass
class Service:
    full_name: str
    swift_name: str
    methods: list[Method]
    doc: list[str]


@dataclass
class ProtoFile:
    path: str
    package: str
    messages: list[Message] = field(default_factory=list)
    enums: list[EnumType] = field(default_factory=list)
    services: list[Service] = field(default_factory=list)


# --------------------------------------------------------------------------------------------
# Reading and validating the descriptors
# --------------------------------------------------------------------------------------------


def comments(fd: pb.FileDescriptorProto, path: list[int], trailing: bool = False) -> list[str]:
    for loc in fd.source_code_info.location:
        if list(loc.path) == path:
            text = loc.leading_comments
            if trailing and loc.trailing_comments:
                text = (text + "\n" if text else "") + loc.trailing_comments
            lines = text.rstrip("\n").split("\n") if text.strip() else []
            out = []
            for line in lines:
                out.append(line[1:] if line.startswith(" ") else line)
            while out and not out[-1].strip():
                out.pop()
            return out
    return []


def load(descriptor_set: Path, inputs: list[str]) -> list[ProtoFile]:
    fds = pb.FileDescriptorSet()
    fds.ParseFromString(descriptor_set.read_bytes())
    by_name = {f.name: f for f in fds.file}
    missing = [p for p in inputs if p not in by_name]
    if missing:
        raise GeneratorError(f"descriptor set lacks {missing}")
    input_set = set(inputs)

    # Every type in every input file, by fully qualified name.
    enums: dict[str, EnumType] = {}
    messages: dict[str, Message] = {}
    swift_names: dict[str, str] = {}

    def claim_swift_name(name: str, what: str) -> None:
        if name in swift_names:
            raise GeneratorError(f"{what} and {swift_names[name]} both become the Swift name {name}")
        swift_names[name] = what

    files: list[ProtoFile] = []
    for path in inputs:
        fd = by_name[path]
        where = f"proto/{path}"
        if fd.syntax != "proto3":
            syntax = fd.syntax or "proto2"
            raise GeneratorError(f"{where}: syntax {syntax!r} is not supported; only proto3 is")
        for dep in fd.dependency:
            if dep not in input_set:
                raise GeneratorError(
                    f"{where}: imports {dep}, which is not under proto/; only types from proto/ are supported"
                )
        if not fd.package:
            raise GeneratorError(f"{where}: a package declaration is required")
        if fd.extension:
            raise GeneratorError(f"{where}: extensions are not supported (extend {fd.extension[0].extendee})")
        prefix = swift_package_prefix(fd.package)
        pf = ProtoFile(path=path, package=fd.package)

        for i, ed in enumerate(fd.enum_type):
            full = f"{fd.package}.{ed.name}"
            et = build_enum(fd, ed, full, f"{prefix}_{ed.name}", [5, i], where)
            claim_swift_name(et.swift_name, full)
            enums[full] = et
            pf.enums.append(et)

        for i, md in enumerate(fd.message_type):
            full = f"{fd.package}.{md.name}"
            if md.nested_type:
                nested = md.nested_type[0]
                if nested.options.map_entry:
                    raise GeneratorError(f"{where}: {full}: map fields are not supported; use a repeated entry message")
                raise GeneratorError(
                    f"{where}: {full}: nested message types are not supported; declare {nested.name} at file level"
                )
            if md.enum_type:
                raise GeneratorError(
                    f"{where}: {full}: nested enums are not supported; declare {md.enum_type[0].name} at file level"
                )
            if md.extension or md.extension_range:
                raise GeneratorError(f"{where}: {full}: extensions are not supported")
            msg = Message(
                full_name=full,
                swift_name=f"{prefix}_{md.name}",
                c_name=c_full_name_to_c(full),
                c_lower=c_full_name_to_lower(full),
                fields=[],
                oneofs=[],
                doc=comments(fd, [4, i]),
                source=where,
            )
            claim_swift_name(msg.swift_name, full)
            messages[full] = msg
            pf.messages.append(msg)
        files.append(pf)

    # Fields and services need every type known first (files may import each other).
    for pf in files:
        fd = by_name[pf.path]
        where = f"proto/{pf.path}"
        for i, md in enumerate(fd.message_type):
            build_fields(fd, md, messages[f"{fd.package}.{md.name}"], [4, i], where, messages, enums)
        for i, sd in enumerate(fd.service):
            pf.services.append(build_service(fd, sd, [6, i], where, messages, swift_names))

    check_recursion(messages)
    return files


def build_enum(fd, ed, full: str, swift_name: str, path: list[int], where: str) -> EnumType:
    if ed.options.allow_alias:
        raise GeneratorError(f"{where}: {full}: enum aliases (allow_alias) are not supported")
    prefix = upper_snake(ed.name) + "_"
    values: list[EnumValue] = []
    seen_cases: dict[str, str] = {}
    seen_numbers: set[int] = set()
    for j, vd in enumerate(ed.value):
        name = vd.name
        if name.startswith(prefix) and len(name) > len(prefix) and not name[len(prefix)].isdigit():
            name = name[len(prefix):]
        case = lower_camel(name)
        if case in RESERVED_ENUM_CASE_NAMES:
            raise GeneratorError(f"{where}: {full}.{vd.name}: the Swift case name {case!r} is reserved")
        if case in seen_cases:
            raise GeneratorError(f"{where}: {full}: {vd.name} and {seen_cases[case]} both become case {case}")
        if vd.number in seen_numbers:
            raise GeneratorError(f"{where}: {full}: number {vd.number} is used twice")
        seen_cases[case] = vd.name
        seen_numbers.add(vd.number)
        values.append(EnumValue(vd.name, vd.number, swift_ident(case), comments(fd, path + [2, j], trailing=True)))
    if not values or values[0].number != 0:
        raise GeneratorError(f"{where}: {full}: the first value must be 0")
    return EnumType(full, swift_name, c_full_name_to_c(full), values, comments(fd, path), where)


def build_fields(fd, md, msg: Message, path: list[int], where: str, messages, enums) -> None:
    oneofs: list[Oneof] = []
    for k, od in enumerate(md.oneof_decl):
        swift_type = upper_camel(od.name)
        if swift_type in RESERVED_NESTED_TYPE_NAMES:
            raise GeneratorError(
                f"{where}: {msg.full_name}: oneof {od.name} would become the nested type {swift_type}, which is reserved"
            )
        prop = lower_camel(od.name)
        if prop in RESERVED_MEMBER_NAMES:
            raise GeneratorError(f"{where}: {msg.full_name}: oneof {od.name}: the Swift name {prop!r} is reserved")
        oneofs.append(
            Oneof(
                proto_name=od.name,
                swift_property=swift_ident(prop),
                swift_type=swift_type,
                c_case_member=swift_ident(c_camel_to_lower(od.name) + "_case"),
                fields=[],
                doc=comments(fd, path + [8, k]),
            )
        )
    seen: dict[str, str] = {o.swift_property.strip("`"): o.proto_name for o in oneofs}
    for j, f in enumerate(md.field):
        what = f"{where}: {msg.full_name}.{f.name}"
        if f.proto3_optional:
            raise GeneratorError(f"{what}: proto3 `optional` is not supported by protoc-c 1.4; use a message field or a oneof")
        if f.label == FDP.LABEL_REQUIRED:
            raise GeneratorError(f"{what}: required fields are not supported")
        if f.type == FDP.TYPE_GROUP:
            raise GeneratorError(f"{what}: groups are not supported")
        if f.HasField("default_value"):
            raise GeneratorError(f"{what}: default values are not supported")
        if f.HasField("extendee"):
            raise GeneratorError(f"{what}: extensions are not supported")
        if f.type in (FDP.TYPE_MESSAGE, FDP.TYPE_ENUM):
            target = f.type_name.lstrip(".")
            if f.type == FDP.TYPE_MESSAGE and target not in messages:
                raise GeneratorError(f"{what}: message type {target} is not declared in a file under proto/")
            if f.type == FDP.TYPE_ENUM and target not in enums:
                raise GeneratorError(f"{what}: enum type {target} is not declared in a file under proto/")
        name = lower_camel(f.name)
        if name in RESERVED_MEMBER_NAMES:
            raise GeneratorError(f"{what}: the Swift name {name!r} is reserved")
        if name in seen:
            raise GeneratorError(f"{what}: {f.name} and {seen[name]} both become the Swift name {name}")
        seen[name] = f.name
        cm = c_field_name(f.name)
        if cm == "base" or cm.endswith("_case"):
            raise GeneratorError(f"{what}: the field name clashes with a member protoc-c adds to the C struct")
        oneof = oneofs[f.oneof_index] if f.HasField("oneof_index") else None
        fld = Field(
            proto_name=f.name,
            number=f.number,
            type=f.type,
            repeated=f.label == FDP.LABEL_REPEATED,
            type_name=f.type_name.lstrip("."),
            swift_name=swift_ident(name),
            c_member=swift_ident(cm),
            c_count=swift_ident("n_" + cm),
            oneof=oneof,
            doc=comments(fd, path + [2, j], trailing=True),
        )
        msg.fields.append(fld)
        if oneof is not None:
            oneof.fields.append(fld)
    msg.oneofs = oneofs


def build_service(fd, sd, path: list[int], where: str, messages, swift_names) -> Service:
    full = f"{fd.package}.{sd.name}"
    swift_name = f"{swift_package_prefix(fd.package)}_{sd.name}"
    if swift_name in swift_names:
        raise GeneratorError(f"{where}: service {full} and {swift_names[swift_name]} both become {swift_name}")
    swift_names[swift_name] = full
    methods: list[Method] = []
    seen: dict[str, str] = {}
    for j, m in enumerate(sd.method):
        what = f"{where}: {full}.{m.name}"
        if m.client_streaming or m.server_streaming:
            raise GeneratorError(f"{what}: streaming rpcs are not supported; only unary")
        for t in (m.input_type, m.output_type):
            if t.lstrip(".") not in messages:
                raise GeneratorError(f"{what}: message type {t.lstrip('.')} is not declared in a file under proto/")
        name = lower_camel(m.name)
        if name in {"all", "registerMethods", "rpc", "init", "self", "Type", "Protocol", "allowedCallers"}:
            raise GeneratorError(f"{what}: the Swift name {name!r} is reserved")
        if name in seen:
            raise GeneratorError(f"{what}: {m.name} and {seen[name]} both become {name}")
        seen[name] = m.name
        methods.append(
            Method(
                proto_name=m.name,
                swift_name=swift_ident(name),
                input_type=messages[m.input_type.lstrip(".")].swift_name,
                output_type=messages[m.output_type.lstrip(".")].swift_name,
                doc=comments(fd, path + [2, j], trailing=True),
            )
        )
    return Service(full, swift_name, methods, comments(fd, path))


def check_recursion(messages: dict[str, Message]) -> None:
    # A Swift struct cannot contain itself through optionals and enum payloads; repeated fields
    # (arrays) would be fine, but are not needed yet either, so every cycle through a singular
    # message field or oneof member is refused.
    edges = {
        name: [f.type_name for f in msg.fields if f.type == FDP.TYPE_MESSAGE and not f.repeated]
        for name, msg in messages.items()
    }
    state: dict[str, int] = {}

    def visit(name: str, stack: list[str]) -> None:
        state[name] = 1
        for nxt in edges[name]:
            if state.get(nxt) == 1:
                cycle = stack[stack.index(nxt):] + [nxt] if nxt in stack else [name, nxt]
                raise GeneratorError(
                    f"{messages[name].source}: recursive messages are not supported: {' -> '.join(cycle)}"
                )
            if state.get(nxt) is None:
                visit(nxt, stack + [nxt])
        state[name] = 2

    for name in sorted(messages):
        if state.get(name) is None:
            visit(name, [name])


# --------------------------------------------------------------------------------------------
# Swift emission
# --------------------------------------------------------------------------------------------


class Writer:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.level = 0

    def __call__(self, line: str = "") -> None:
        self.lines.append(("    " * self.level + line) if line else "")

    def doc(self, lines: list[str]) -> None:
        for line in lines:
            self(("/// " + line).rstrip())

    def signature(self, head: str, params: list[str], tail: str) -> None:
        """`head(params)tail` on one line when it fits in 120 columns, else one parameter a line."""
        line = f"{head}({', '.join(params)}){tail}"
        if len("    " * self.level + line) <= 120:
            self(line)
            return
        self(f"{head}(")
        self.level += 1
        for i, p in enumerate(params):
            self(p + ("," if i < len(params) - 1 else ""))
        self.level -= 1
        self(f"){tail}")

    def indent(self) -> "Writer":
        self.level += 1
        return self

    def dedent(self) -> None:
        self.level -= 1

    def text(self) -> str:
        while self.lines and self.lines[-1] == "":
            self.lines.pop()
        return "\n".join(self.lines) + "\n"


def header(source: str, what: str) -> list[str]:
    return [
        f"// DO NOT EDIT — generated by {GENERATOR} from {source}.",
        f"// {what} See docs/codegen.md.",
        "",
    ]


class SwiftTypes:
    def __init__(self, messages: dict[str, Message], enums: dict[str, EnumType]) -> None:
        self.messages = messages
        self.enums = enums

    def element(self, f: Field) -> str:
        if f.type in SCALARS:
            return SCALARS[f.type][0]
        if f.type == FDP.TYPE_BOOL:
            return "Bool"
        if f.type == FDP.TYPE_STRING:
            return "String"
        if f.type == FDP.TYPE_BYTES:
            return "[UInt8]"
        if f.type == FDP.TYPE_ENUM:
            return self.enums[f.type_name].swift_name
        if f.type == FDP.TYPE_MESSAGE:
            return self.messages[f.type_name].swift_name
        raise GeneratorError(f"unsupported field type {f.type}")

    def declared(self, f: Field) -> str:
        el = self.element(f)
        if f.repeated:
            return f"[{el}]"
        if f.type == FDP.TYPE_MESSAGE:
            return f"{el}?"
        return el

    def default(self, f: Field) -> str:
        if f.repeated:
            return "[]"
        if f.type in SCALARS:
            return SCALARS[f.type][1]
        return {
            FDP.TYPE_BOOL: "false",
            FDP.TYPE_STRING: '""',
            FDP.TYPE_BYTES: "[]",
            FDP.TYPE_MESSAGE: "nil",
        }.get(f.type) or f".{self.enums[f.type_name].zero_case}"


def emit_enum(w: Writer, e: EnumType) -> None:
    w(f"// MARK: - {e.full_name}")
    w()
    w.doc(e.doc)
    w(f"public enum {e.swift_name}: ProtobufCEnum {{")
    w.indent()
    for v in e.values:
        w.doc(v.doc)
        w(f"case {v.swift_case}  // {v.proto_name} = {v.number}")
    w("/// A value this schema does not know; kept as is so that it survives a round trip.")
    w("case unrecognized(Int32)")
    w()
    w(f"/// The zero value, `.{e.zero_case.strip('`')}`.")
    w(f"public init() {{ self = .{e.zero_case} }}")
    w()
    w("public init(rawValue: Int32) {")
    w.indent()
    w("switch rawValue {")
    for v in e.values:
        w(f"case {v.number}: self = .{v.swift_case}")
    w("default: self = .unrecognized(rawValue)")
    w("}")
    w.dedent()
    w("}")
    w()
    w("public var rawValue: Int32 {")
    w.indent()
    w("switch self {")
    for v in e.values:
        w(f"case .{v.swift_case}: {v.number}")
    w("case .unrecognized(let value): value")
    w("}")
    w.dedent()
    w("}")
    w()
    w("/// Every value the schema declares, in declaration order.")
    w(f"public static let allKnownCases: [{e.swift_name}] = [")
    w.indent()
    for v in e.values:
        w(f".{v.swift_case},")
    w.dedent()
    w("]")
    w()
    w("// Equal when the numbers are equal, so `.unrecognized(0)` is `.{}`.".format(e.zero_case.strip("`")))
    w("public static func == (lhs: Self, rhs: Self) -> Bool { lhs.rawValue == rhs.rawValue }")
    w()
    w("public func hash(into hasher: inout Hasher) { hasher.combine(self.rawValue) }")
    w.dedent()
    w("}")
    w()


def member_order(msg: Message) -> list[Field | Oneof]:
    """Fields in declaration order, each oneof once, where its first member is declared."""
    out: list[Field | Oneof] = []
    for f in msg.fields:
        if f.oneof is None:
            out.append(f)
        elif f.oneof not in out:
            out.append(f.oneof)
    return out


def emit_message(w: Writer, msg: Message, types: SwiftTypes) -> None:
    name = msg.swift_name
    members = member_order(msg)
    w(f"// MARK: - {msg.full_name}")
    w()
    w.doc(msg.doc)
    w(f"public struct {name}: ProtobufCMessage {{")
    w.indent()
    for o in msg.oneofs:
        w.doc(o.doc)
        w(f"public enum {o.swift_type}: Sendable, Hashable {{")
        w.indent()
        for f in o.fields:
            w.doc(f.doc)
            w(f"case {f.swift_name}({types.element(f)})")
        w.dedent()
        w("}")
        w()
    w(f'public static let protoMessageName = "{msg.full_name}"')
    w()
    for m in members:
        if isinstance(m, Oneof):
            w.doc(m.doc)
            w(f"public var {m.swift_property}: {m.swift_type}? = nil")
        else:
            w.doc(m.doc)
            w(f"public var {m.swift_name}: {types.declared(m)} = {types.default(m)}")
    if members:
        w()
    w("public init() {}")
    if members:
        w()
        params = []
        for m in members:
            if isinstance(m, Oneof):
                params.append(f"{m.swift_property}: {m.swift_type}? = nil")
            else:
                params.append(f"{m.swift_name}: {types.declared(m)} = {types.default(m)}")
        w.signature("public init", params, " {")
        w.indent()
        for m in members:
            prop = m.swift_property if isinstance(m, Oneof) else m.swift_name
            w(f"self.{prop} = {prop}")
        w.dedent()
        w("}")
    w()
    w("public init(serializedBytes bytes: UnsafeRawBufferPointer) throws {")
    w.indent()
    w("self = try Self._decode(bytes)")
    w.dedent()
    w("}")
    w()
    # Inlinable so callers in other modules get it specialized for their `R`; the work is in the
    # non-generic `_encode`, which needs no generic metadata at run time.
    w("@inlinable")
    w("public func withSerializedBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {")
    w.indent()
    w("var result: R? = nil")
    w("try self._encode { result = try body($0) }")
    w("return result!")
    w.dedent()
    w("}")
    w()
    w("@usableFromInline")
    w("func _encode(_ body: (UnsafeRawBufferPointer) throws -> Void) throws {")
    w.indent()
    w("try self._encodeBridged(body)")
    w.dedent()
    w("}")
    w.dedent()
    w("}")
    w()

    # The bridge to the protoc-c struct.
    lc = msg.c_lower
    w(f"extension {name}: ProtobufCBridged {{")
    w.indent()
    w(f"typealias _CMessage = {msg.c_name}")
    w()
    w(f"static func _cInit(_ message: UnsafeMutablePointer<_CMessage>) {{")
    w.indent()
    w(f"{lc}__init(message)")
    w.dedent()
    w("}")
    w()
    w(f"static func _cUnpack(_ length: Int, _ data: UnsafePointer<UInt8>?) -> UnsafeMutablePointer<_CMessage>? {{")
    w.indent()
    w(f"{lc}__unpack(nil, length, data)")
    w.dedent()
    w("}")
    w()
    w(f"static func _cFreeUnpacked(_ message: UnsafeMutablePointer<_CMessage>) {{")
    w.indent()
    w(f"{lc}__free_unpacked(message, nil)")
    w.dedent()
    w("}")
    w()
    w(f"static func _cPackedSize(_ message: UnsafePointer<_CMessage>) -> Int {{")
    w.indent()
    w(f"{lc}__get_packed_size(message)")
    w.dedent()
    w("}")
    w()
    w(f"static func _cPack(_ message: UnsafePointer<_CMessage>, _ out: UnsafeMutablePointer<UInt8>) -> Int {{")
    w.indent()
    w(f"{lc}__pack(message, out)")
    w.dedent()
    w("}")
    w()

    # Decoding.
    w("init(_cMessage c: UnsafePointer<_CMessage>) throws {")
    w.indent()
    # Everything goes through the memberwise initializer, so no default value is stored first
    # and then released.
    if not members:
        w("_ = c")
        w("self.init()")
    for o in msg.oneofs:
        emit_oneof_decode(w, o, types)
    if members:
        args = [
            f"{argument_label(m.swift_property)}: {m.swift_property}"
            if isinstance(m, Oneof)
            else f"{argument_label(m.swift_name)}: {field_decode_expression(m, types)}"
            for m in members
        ]
        w.signature("self.init", args, "")
    w.dedent()
    w("}")
    w()

    # Encoding.
    w("func _fill(_ c: UnsafeMutablePointer<_CMessage>, arena: inout ProtobufCArena) throws {")
    w.indent()
    if not members:
        w("_ = c")
    for m in members:
        if isinstance(m, Oneof):
            emit_oneof_encode(w, m, types)
        else:
            emit_field_encode(w, m, types)
    w.dedent()
    w("}")
    w.dedent()
    w("}")
    w()


def _field_ref(f: Field) -> str:
    return f'Self.self, "{f.proto_name}"'


def field_decode_expression(f: Field, types: SwiftTypes) -> str:
    src = f"c.pointee.{f.c_member}"
    if f.repeated:
        n = f"c.pointee.{f.c_count}"
        if f.type in SCALARS:
            return f"_protobufCScalars({src}, count: {n})"
        if f.type == FDP.TYPE_BOOL:
            return f"_protobufCBools({src}, count: {n})"
        if f.type == FDP.TYPE_STRING:
            return f"try _protobufCStrings({src}, count: {n}, {_field_ref(f)})"
        if f.type == FDP.TYPE_BYTES:
            return f"_protobufCBytesArray({src}, count: {n})"
        if f.type == FDP.TYPE_ENUM:
            return f"_protobufCEnums({src}, count: {n})"
        return f"try _protobufCMessages({src}, count: {n})"
    if f.type in SCALARS:
        return src
    if f.type == FDP.TYPE_BOOL:
        return f"{src} != 0"
    if f.type == FDP.TYPE_STRING:
        return f"try _protobufCString({src}, {_field_ref(f)})"
    if f.type == FDP.TYPE_BYTES:
        return f"_protobufCBytes({src})"
    if f.type == FDP.TYPE_ENUM:
        return f"{types.element(f)}(rawValue: Int32(truncatingIfNeeded: {src}.rawValue))"
    return f"try _protobufCOptionalMessage({src}, as: {types.element(f)}.self)"


def emit_field_encode(w: Writer, f: Field, types: SwiftTypes) -> None:
    dst = f"c.pointee.{f.c_member}"
    src = f"self.{f.swift_name}"
    if f.repeated:
        n = f"c.pointee.{f.c_count}"
        w(f"if !{src}.isEmpty {{")
        w.indent()
        w(f"{n} = {src}.count")
        if f.type in SCALARS:
            w(f"{dst} = try arena.scalars({src}, {_field_ref(f)})")
        elif f.type == FDP.TYPE_BOOL:
            w(f"{dst} = try arena.bools({src}, {_field_ref(f)})")
        elif f.type == FDP.TYPE_STRING:
            w(f"{dst} = try arena.cStrings({src}, {_field_ref(f)})")
        elif f.type == FDP.TYPE_BYTES:
            w(f"{dst} = try arena.binaryDataArray({src}, {_field_ref(f)})")
        elif f.type == FDP.TYPE_ENUM:
            w(f"{dst} = try arena.enums({src}, {_field_ref(f)})")
        elif f.type == FDP.TYPE_MESSAGE:
            w(f"{dst} = try arena.messages({src}, {_field_ref(f)})")
        w.dedent()
        w("}")
        return
    if f.type in SCALARS:
        w(f"{dst} = {src}")
    elif f.type == FDP.TYPE_BOOL:
        w(f"{dst} = {src} ? 1 : 0")
    elif f.type == FDP.TYPE_STRING:
        # An empty string keeps protoc-c's default (its shared empty string) and is not sent.
        w(f"if !{src}.isEmpty {{")
        w.indent()
        w(f"{dst} = try arena.cString({src}, {_field_ref(f)})")
        w.dedent()
        w("}")
    elif f.type == FDP.TYPE_BYTES:
        w(f"if !{src}.isEmpty {{")
        w.indent()
        w(f"{dst} = try arena.binaryData({src}, {_field_ref(f)})")
        w.dedent()
        w("}")
    elif f.type == FDP.TYPE_ENUM:
        w(f"{dst} = .init(rawValue: .init(truncatingIfNeeded: {src}.rawValue))")
    elif f.type == FDP.TYPE_MESSAGE:
        w(f"if let value = {src} {{")
        w.indent()
        w(f"{dst} = try arena.message(value)")
        w.dedent()
        w("}")


def emit_oneof_decode(w: Writer, o: Oneof, types: SwiftTypes) -> None:
    """Declares a local named after the oneof's property holding the decoded member."""
    w(f"var {o.swift_property}: {o.swift_type}? = nil")
    w(f"switch c.pointee.{o.c_case_member}.rawValue {{")
    for f in o.fields:
        src = f"c.pointee.{f.c_member}"
        if f.type in SCALARS:
            value = src
        elif f.type == FDP.TYPE_BOOL:
            value = f"{src} != 0"
        elif f.type == FDP.TYPE_STRING:
            value = f"try _protobufCString({src}, {_field_ref(f)})"
        elif f.type == FDP.TYPE_BYTES:
            value = f"_protobufCBytes({src})"
        elif f.type == FDP.TYPE_ENUM:
            value = f"{types.element(f)}(rawValue: Int32(truncatingIfNeeded: {src}.rawValue))"
        else:
            value = f"try _protobufCMessage({src}, as: {types.element(f)}.self)"
        w(f"case {f.number}: {o.swift_property} = .{f.swift_name}({value})")
    w("default: break")
    w("}")


def emit_oneof_encode(w: Writer, o: Oneof, types: SwiftTypes) -> None:
    w(f"switch self.{o.swift_property} {{")
    w("case nil:")
    w.indent()
    w("break")
    w.dedent()
    for f in o.fields:
        dst = f"c.pointee.{f.c_member}"
        w(f"case .{f.swift_name}(let value)?:")
        w.indent()
        w(f"c.pointee.{o.c_case_member} = .init(rawValue: {f.number})")
        # A set member is sent even when it holds the zero value, so strings and messages always
        # get a real (possibly empty) allocation: protobuf-c skips a NULL pointer.
        if f.type in SCALARS:
            w(f"{dst} = value")
        elif f.type == FDP.TYPE_BOOL:
            w(f"{dst} = value ? 1 : 0")
        elif f.type == FDP.TYPE_STRING:
            w(f"{dst} = try arena.cString(value, {_field_ref(f)})")
        elif f.type == FDP.TYPE_BYTES:
            w(f"{dst} = try arena.binaryData(value, {_field_ref(f)})")
        elif f.type == FDP.TYPE_ENUM:
            w(f"{dst} = .init(rawValue: .init(truncatingIfNeeded: value.rawValue))")
        else:
            w(f"{dst} = try arena.message(value)")
        w.dedent()
    w("}")


def swift_messages_file(pf: ProtoFile, types: SwiftTypes) -> str:
    w = Writer()
    for line in header(f"proto/{pf.path}", "Swift message types over the protoc-c structs in CAuthProto."):
        w(line)
    w("internal import CAuthProto")
    w()
    for e in pf.enums:
        emit_enum(w, e)
    for m in pf.messages:
        emit_message(w, m, types)
    return w.text()


def emit_reasons(w: Writer, e: EnumType) -> None:
    """A service's `<Service>Reason` enum as the strings its errors carry: each value's name
    after the enum's prefix, lower-cased (`IDENTITY_REASON_INVALID_PHONE` is `invalid_phone`)."""
    w(f"/// The reasons this service's errors carry (`RPCStatus.reason`), from `{e.full_name}`.")
    w("public enum Reason {")
    w.indent()
    prefix = e.full_name.rsplit(".", 1)[-1]
    prefix = upper_snake(prefix) + "_"
    for v in e.values[1:]:
        if not v.proto_name.startswith(prefix):
            raise GeneratorError(f"{e.source}: {e.full_name}.{v.proto_name}: a reason must start with {prefix}")
        w.doc(v.doc)
        w(f'public static let {v.swift_case} = "{v.proto_name[len(prefix):].lower()}"')
    w(f"public static let all: [String] = [{', '.join(v.swift_case for v in e.values[1:])}]")
    w.dedent()
    w("}")


def swift_services_file(pf: ProtoFile) -> str:
    w = Writer()
    for line in header(f"proto/{pf.path}", "Typed service stubs over AuthRPC."):
        w(line)
    w("import AuthProtobuf")
    w("import AuthRPC")
    w()
    for s in pf.services:
        w(f"// MARK: - {s.full_name}")
        w()
        w.doc(s.doc)
        w(f"public enum {s.swift_name} {{")
        w.indent()
        w(f'public static let serviceName = "{s.full_name}"')
        w()
        w("public enum Method {")
        w.indent()
        for m in s.methods:
            w(f'public static let {m.swift_name} = MethodDescriptor(service: "{s.full_name}", method: "{m.proto_name}")')
        w(f"public static let all: [MethodDescriptor] = [{', '.join(m.swift_name for m in s.methods)}]")
        w.dedent()
        w("}")
        w()
        reasons = next((e for e in pf.enums if e.full_name == f"{s.full_name}Reason"), None)
        if reasons is not None:
            emit_reasons(w, reasons)
            w()
        w("/// Who may call each method of the service. The initializer takes one value per method,")
        w("/// so a method added to the .proto cannot be served before its callers are decided.")
        w("public struct AllowedCallersByMethod: Sendable {")
        w.indent()
        for m in s.methods:
            w(f"public var {m.swift_name}: AllowedCallers")
        w()
        w.signature("public init", [f"{argument_label(m.swift_name)}: AllowedCallers" for m in s.methods], " {")
        w.indent()
        for m in s.methods:
            w(f"self.{m.swift_name} = {m.swift_name}")
        w.dedent()
        w("}")
        w.dedent()
        w("}")
        w()
        w("public protocol ServiceProtocol: RegistrableRPCService {")
        w.indent()
        w("/// Who may call each method; checked against the authenticated caller before a handler runs.")
        w("var allowedCallers: AllowedCallersByMethod { get }")
        w()
        for i, m in enumerate(s.methods):
            if i:
                w()
            w.doc(m.doc)
            w.signature(
                f"func {m.swift_name}",
                [f"request: {m.input_type}", "context: ServerContext"],
                f" async throws -> {m.output_type}",
            )
        w.dedent()
        w("}")
        w()
        w("public struct Client: Sendable {")
        w.indent()
        w("public let rpc: RPCClient")
        w()
        w("public init(wrapping rpc: RPCClient) { self.rpc = rpc }")
        for m in s.methods:
            w()
            w.doc(m.doc)
            w.signature(
                f"public func {m.swift_name}",
                [f"_ request: {m.input_type}", "options: CallOptions = CallOptions()"],
                f" async throws -> {m.output_type} {{",
            )
            w.indent()
            w(f"try await self.rpc.unary(Method.{m.swift_name}, request: request, options: options)")
            w.dedent()
            w("}")
        w.dedent()
        w("}")
        w.dedent()
        w("}")
        w()
        w(f"extension {s.swift_name}.ServiceProtocol {{")
        w.indent()
        w("public func registerMethods(with router: inout RPCRouter) {")
        w.indent()
        w("let allowed = self.allowedCallers")
        for m in s.methods:
            opening = f"router.register({s.swift_name}.Method.{m.swift_name}, allowedCallers: allowed.{m.swift_name}) {{"
            params = f"(request: {m.input_type}, context: ServerContext) in"
            if len("    " * w.level + opening + " " + params) <= 120:
                w(f"{opening} {params}")
                w.indent()
            else:
                w(opening)
                w.indent()
                w(params)
            w(f"try await self.{m.swift_name}(request: request, context: context)")
            w.dedent()
            w("}")
        w.dedent()
        w("}")
        w.dedent()
        w("}")
        w()
    return w.text()


# --------------------------------------------------------------------------------------------
# C output
# --------------------------------------------------------------------------------------------


def check_c_symbols(pf: ProtoFile, header_text: str) -> None:
    """Fails if a C name the Swift code relies on is missing from protoc-c's header."""
    def need(symbol: str, what: str) -> None:
        if not re.search(r"\b" + re.escape(symbol) + r"\b", header_text):
            raise GeneratorError(
                f"proto/{pf.path}: {what}: protoc-c's header has no {symbol!r}; the name mangling in "
                f"scripts/codegen/generate_swift.py no longer matches this protoc-c"
            )

    for e in pf.enums:
        need(e.c_name, e.full_name)
    for m in pf.messages:
        need(m.c_name, m.full_name)
        for fn in ("init", "unpack", "free_unpacked", "get_packed_size", "pack"):
            need(f"{m.c_lower}__{fn}", m.full_name)
        for f in m.fields:
            need(f.c_member.strip("`"), f"{m.full_name}.{f.proto_name}")
            if f.repeated:
                need(f.c_count.strip("`"), f"{m.full_name}.{f.proto_name}")
        for o in m.oneofs:
            need(o.c_case_member.strip("`"), f"{m.full_name}.{o.proto_name}")


def c_banner(path: str, protoc_c_version: str) -> str:
    return f"/* DO NOT EDIT — generated by {GENERATOR} from proto/{path} with {protoc_c_version}. */\n"


def umbrella(files: list[ProtoFile]) -> str:
    lines = [
        f"/* DO NOT EDIT — generated by {GENERATOR} from proto/. */",
        "/* Umbrella header of the CAuthProto module: every protoc-c header. See docs/codegen.md. */",
        "#ifndef CAUTHPROTO_H",
        "#define CAUTHPROTO_H",
        "",
    ]
    for pf in sorted(files, key=lambda p: p.path):
        lines.append(f'#include "{pf.path[:-len(".proto")]}.pb-c.h"')
    lines += [
        "",
        "/* Every service and message descriptor of proto/ (registry.c), for code that works from the",
        " * descriptors alone (authctl's JSON conversion): `*count` gets the number of entries. */",
        "const ProtobufCServiceDescriptor *const *auth_proto_service_descriptors(size_t *count);",
        "const ProtobufCMessageDescriptor *const *auth_proto_message_descriptors(size_t *count);",
        "",
        "#endif /* CAUTHPROTO_H */",
        "",
    ]
    return "\n".join(lines)


def registry(files: list[ProtoFile]) -> str:
    services = [s.full_name for pf in files for s in pf.services]
    messages = [m.full_name for pf in files for m in pf.messages]
    lines = [
        f"/* DO NOT EDIT — generated by {GENERATOR} from proto/. */",
        "/* Every descriptor of proto/, in file order (declared in CAuthProto.h). */",
        '#include "CAuthProto.h"',
        "",
    ]
    for kind, names, function in (
        ("ServiceDescriptor", services, "auth_proto_service_descriptors"),
        ("MessageDescriptor", messages, "auth_proto_message_descriptors"),
    ):
        array = f"{function}_list"
        lines.append(f"static const ProtobufC{kind} *const {array}[] = {{")
        lines += [f"    &{c_full_name_to_lower(n)}__descriptor," for n in names] or ["    NULL,"]
        lines += [
            "};",
            "",
            f"const ProtobufC{kind} *const *{function}(size_t *count) {{",
            f"    *count = {len(names)};",
            f"    return {array};",
            "}",
            "",
        ]
    return "\n".join(lines)


MODULE_MAP_TEXT = f"""\
// DO NOT EDIT — generated by {GENERATOR}.
// SwiftPM only accepts folders beside an umbrella header when the module map is given.
module CAuthProto {{
    umbrella header "CAuthProto.h"
    export *
}}
"""


# --------------------------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------------------------


def expected_outputs(descriptor_set: Path, c_dir: Path, inputs: list[str], protoc_c_version: str) -> dict[str, str]:
    files = load(descriptor_set, inputs)
    messages = {m.full_name: m for pf in files for m in pf.messages}
    enums = {e.full_name: e for pf in files for e in pf.enums}
    types = SwiftTypes(messages, enums)
    out: dict[str, str] = {}
    for pf in files:
        stem = pf.path[: -len(".proto")]
        c_src = (c_dir / f"{stem}.pb-c.c").read_text()
        c_hdr = (c_dir / f"{stem}.pb-c.h").read_text()
        check_c_symbols(pf, c_hdr)
        banner = c_banner(pf.path, protoc_c_version)
        out[f"{C_TARGET}/{stem}.pb-c.c"] = banner + c_src
        out[f"{C_INCLUDE}/{stem}.pb-c.h"] = banner + c_hdr
        flat = stem.replace("/", "_")
        out[f"{SWIFT_MESSAGES}/{flat}.pb.swift"] = swift_messages_file(pf, types)
        if pf.services:
            out[f"{SWIFT_SERVICES}/{flat}.rpc.swift"] = swift_services_file(pf)
    out[UMBRELLA] = umbrella(files)
    out[REGISTRY] = registry(files)
    out[MODULE_MAP] = MODULE_MAP_TEXT
    return out


def is_generated(rel: str) -> bool:
    if rel in (UMBRELLA, MODULE_MAP, REGISTRY):
        return True
    if rel.startswith(C_INCLUDE + "/"):
        return rel.endswith(".pb-c.h")
    if rel.startswith(C_TARGET + "/"):
        return rel.endswith(".pb-c.c")
    if rel.startswith(SWIFT_MESSAGES + "/"):
        return rel.endswith(".pb.swift")
    if rel.startswith(SWIFT_SERVICES + "/"):
        return rel.endswith(".rpc.swift")
    return False


def existing_outputs(root: Path) -> dict[str, str]:
    found: dict[str, str] = {}
    for top in (C_TARGET, SWIFT_MESSAGES, SWIFT_SERVICES):
        base = root / top
        if not base.is_dir():
            continue
        for dirpath, _, filenames in os.walk(base):
            for fn in filenames:
                rel = (Path(dirpath) / fn).relative_to(root).as_posix()
                if is_generated(rel):
                    found[rel] = (root / rel).read_text(errors="replace")
    return found


def check(root: Path, expected: dict[str, str]) -> int:
    actual = existing_outputs(root)
    missing = sorted(set(expected) - set(actual))
    stale = sorted(set(actual) - set(expected))
    changed = sorted(p for p in expected if p in actual and actual[p] != expected[p])
    if not (missing or stale or changed):
        print(f"generate-protos: generated code is up to date ({len(expected)} files)")
        return 0
    print("generate-protos: generated code is out of date; run scripts/generate-protos.sh and commit the result")
    for p in missing:
        print(f"  missing: {p}")
    for p in stale:
        print(f"  stale (no longer generated): {p}")
    for p in changed:
        print(f"  differs: {p}")
    budget = 200
    for p in changed:
        diff = list(
            difflib.unified_diff(
                actual[p].splitlines(), expected[p].splitlines(), f"a/{p}", f"b/{p}", lineterm="", n=2
            )
        )
        for line in diff[:budget]:
            print(line)
        budget -= len(diff)
        if budget <= 0:
            print("  … (diff cut)")
            break
    return 1


def write(root: Path, expected: dict[str, str]) -> None:
    actual = existing_outputs(root)
    written = removed = 0
    for rel, text in sorted(expected.items()):
        if actual.get(rel) == text:
            continue
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        written += 1
        print(f"  wrote {rel}")
    for rel in sorted(set(actual) - set(expected)):
        (root / rel).unlink()
        removed += 1
        print(f"  removed stale {rel}")
        # Drop folders left empty under the C target (e.g. a removed package).
        parent = (root / rel).parent
        tops = {root / top for top in (C_TARGET, C_INCLUDE, SWIFT_MESSAGES, SWIFT_SERVICES)}
        while parent not in tops and not any(parent.iterdir()):
            parent.rmdir()
            parent = parent.parent
    unchanged = len(expected) - written
    print(f"generate-protos: {written} written, {unchanged} unchanged, {removed} removed")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--descriptor-set", required=True, type=Path)
    ap.add_argument("--c-out", required=True, type=Path, help="protoc-c's --c_out folder")
    ap.add_argument("--root", required=True, type=Path, help="repository root")
    ap.add_argument("--protoc-c-version", required=True)
    ap.add_argument("--check", action="store_true")
    ap.add_argument("protos", nargs="+", help="proto files relative to proto/")
    args = ap.parse_args()
    try:
        expected = expected_outputs(args.descriptor_set, args.c_out, sorted(args.protos), args.protoc_c_version)
    except GeneratorError as e:
        print(f"generate-protos: error: {e}", file=sys.stderr)
        return 2
    if args.check:
        return check(args.root, expected)
    write(args.root, expected)
    return 0


if __name__ == "__main__":
    sys.exit(main())
