"""Optional accelerated Avro body codec for the bundled records.

The C extension ``rllm_avrofast`` (``native/avrofast``, installed with
``pip install ./native/avrofast``) walks a node table compiled here from the expanded
``.avsc`` schemas. It writes exactly the bytes fastavro's ``schemaless_writer`` writes and
reads back what ``schemaless_reader(..., return_record_name=True,
return_record_name_override=True)`` returns. For any value it does not handle exactly (a
tuple where a list is expected, a naive datetime, a missing field without default, corrupt
bytes, ...) it steps aside: ``encode`` returns ``None`` and ``decode`` returns ``None``, and
the caller uses fastavro, which then gives the authoritative result or error.

Without the extension, or with ``RLLM_AVRO_FASTPATH=0``, ``for_record`` returns ``None``
and everything goes through fastavro.
"""

from __future__ import annotations

import importlib
import os
from functools import cache
from typing import Any

from rllm.errors import UnsupportedSchemaError
from rllm.schemas import registry

__all__ = ["AVAILABLE", "FastRecord", "compile_schema", "for_record"]

_ABI = 1  # node-table format this module writes; rllm_avrofast.ABI must match

_native: Any
try:  # the accelerator is optional
    _native = importlib.import_module("rllm_avrofast")
except ImportError:  # pragma: no cover - depends on the install
    _native = None
if getattr(_native, "ABI", None) != _ABI:  # pragma: no cover - a stale build
    _native = None

AVAILABLE = _native is not None and os.environ.get("RLLM_AVRO_FASTPATH", "1") != "0"

_PRIMITIVE_KINDS = ("null", "boolean", "int", "long", "float", "double", "bytes", "string")
_KIND = {
    "null": 0,
    "boolean": 1,
    "int": 2,
    "long": 3,
    "float": 4,
    "double": 5,
    "bytes": 6,
    "string": 7,
    "timestamp-micros": 8,
    "enum": 9,
    "record": 10,
    "array": 11,
    "map": 12,
    "union": 13,
}


class _Compiler:
    """Turns an expanded schema into the flat node table ``rllm_avrofast.Program`` takes."""

    def __init__(self) -> None:
        self.nodes: list[tuple[Any, ...] | None] = []
        self.named: dict[str, int] = {}

    def _add(self, spec: tuple[Any, ...] | None) -> int:
        self.nodes.append(spec)
        return len(self.nodes) - 1

    @staticmethod
    def _full(name: str, namespace: str) -> str:
        return name if "." in name or not namespace else f"{namespace}.{name}"

    def node(self, schema: Any, namespace: str) -> int:
        if isinstance(schema, str):
            if schema in _PRIMITIVE_KINDS:
                return self._add((_KIND[schema],))
            full = self._full(schema, namespace)
            if full not in self.named:
                raise UnsupportedSchemaError(f"reference to unknown type {schema!r}")
            return self.named[full]
        if isinstance(schema, list):
            return self._union(schema, namespace)
        if not isinstance(schema, dict):
            raise UnsupportedSchemaError(f"not a schema: {schema!r}")
        kind = schema.get("type")
        logical = schema.get("logicalType")
        if isinstance(kind, (dict, list)):
            return self.node(kind, namespace)
        if logical is not None:
            if kind == "long" and logical == "timestamp-micros":
                return self._add((_KIND["timestamp-micros"],))
            raise UnsupportedSchemaError(f"logical type {logical!r} on {kind!r}")
        if kind in _PRIMITIVE_KINDS:
            return self._add((_KIND[kind],))
        if kind == "enum":
            full = self._full(schema["name"], schema.get("namespace", namespace))
            self.named[full] = idx = self._add((_KIND["enum"], tuple(schema["symbols"])))
            return idx
        if kind == "record":
            ns = schema.get("namespace", namespace)
            full = self._full(schema["name"], ns)
            if "." in schema["name"]:
                ns = schema["name"].rsplit(".", 1)[0]
            self.named[full] = idx = self._add(None)  # reserved: fields may refer back
            fields = []
            for field in schema["fields"]:
                child = self.node(field["type"], ns)
                has_default = "default" in field
                fields.append((field["name"], child, has_default, field.get("default")))
            self.nodes[idx] = (_KIND["record"], tuple(fields))
            return idx
        if kind == "array":
            return self._add((_KIND["array"], self.node(schema["items"], namespace)))
        if kind == "map":
            return self._add((_KIND["map"], self.node(schema["values"], namespace)))
        raise UnsupportedSchemaError(f"type {kind!r}")

    def _union(self, branches: list[Any], namespace: str) -> int:
        # fastavro (return_record_name + _override) returns (name, value) for a record or
        # a by-name reference, unless the union holds exactly one of those.
        taggable = []
        members = []
        for branch in branches:
            if isinstance(branch, str) and branch not in _PRIMITIVE_KINDS:
                name, tag = self._full(branch, namespace), True
            elif isinstance(branch, dict) and branch.get("type") in ("record", "enum", "fixed"):
                name = self._full(branch["name"], branch.get("namespace", namespace))
                tag = branch["type"] == "record"
            elif isinstance(branch, dict):
                name, tag = str(branch.get("type")), False
                if not isinstance(branch.get("type"), str):
                    raise UnsupportedSchemaError("nested union")
            elif isinstance(branch, list):
                raise UnsupportedSchemaError("nested union")
            else:
                name, tag = str(branch), False
            taggable.append(tag)
            members.append((name, self.node(branch, namespace)))
        single = sum(taggable) == 1
        specs = tuple(
            (name, child, name if tag and not single else None)
            for (name, child), tag in zip(members, taggable, strict=True)
        )
        return self._add((_KIND["union"], specs))


def compile_schema(schema: Any) -> tuple[tuple[tuple[Any, ...], ...], int]:
    """The node table and root index of an expanded schema.

    Raises:
        UnsupportedSchemaError: for constructs the accelerator leaves to fastavro (fixed, logical
            types other than timestamp-micros, nested unions, unknown references).
    """
    compiler = _Compiler()
    root = compiler.node(schema, "")
    nodes = tuple(n for n in compiler.nodes if n is not None)
    if len(nodes) != len(compiler.nodes):
        raise UnsupportedSchemaError("unfinished record")
    return nodes, root


class FastRecord:
    """Encoder/decoder of one bundled record's Avro body through ``rllm_avrofast``."""

    def __init__(self, name: str, schema: Any) -> None:
        if _native is None:
            raise UnsupportedSchemaError("rllm_avrofast is not installed")
        nodes, self.root = compile_schema(schema)
        self.name = name
        self._program = _native.Program(nodes)

    def encode(self, datum: Any, prefix: bytes = b"") -> bytes | None:
        """``prefix`` + the Avro body of ``datum``, or ``None`` when fastavro must do it."""
        result: bytes | None = self._program.encode(self.root, datum, prefix)
        return result

    def decode(self, data: bytes, offset: int = 0) -> tuple[dict[str, Any], int] | None:
        """``(datum, end offset)`` of the body at ``data[offset:]``, or ``None`` if fastavro
        must decode it (corrupt, truncated or unusual bytes)."""
        try:
            result: tuple[dict[str, Any], int] = self._program.decode(self.root, data, offset)
        except (ValueError, OverflowError, UnicodeDecodeError):
            return None
        return result


@cache
def for_record(name: str) -> FastRecord | None:
    """The accelerated codec of a bundled record, or ``None`` where fastavro does the work."""
    if not AVAILABLE:
        return None
    full = registry.full_name(name)
    try:
        return FastRecord(full, registry.expanded(full))
    except UnsupportedSchemaError:
        return None
