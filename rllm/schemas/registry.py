"""The bundled Avro schemas: loaded from ``avro/*.avsc``, expanded, fingerprinted.

Each ``.avsc`` file holds one named type (``rllm.events.<Name>.avsc``) and refers to
others by name. ``expanded(name)`` inlines every referenced definition once, giving a
stand-alone schema that any Avro implementation (and a schema registry) accepts.
``avro/released/v*/`` keeps the expanded schemas of earlier releases, so bytes written
before a field was added still decode (``released``).
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from fastavro import parse_schema
from fastavro.schema import fingerprint, to_parsing_canonical_form

from rllm.errors import UnknownSchemaError

__all__ = [
    "NAMESPACE",
    "RECORD_NAMES",
    "RELEASED_DIR",
    "SCHEMA_DIR",
    "expanded",
    "fingerprint64",
    "full_name",
    "parsed",
    "released",
    "schema_json",
]

NAMESPACE = "rllm.events"
SCHEMA_DIR = Path(__file__).parent / "avro"
RELEASED_DIR = SCHEMA_DIR / "released"
_PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}


def full_name(name: str) -> str:
    """``StepCaptured`` → ``rllm.events.StepCaptured``; full names pass through."""
    return name if "." in name else f"{NAMESPACE}.{name}"


@cache
def _definitions() -> dict[str, dict[str, Any]]:
    defs: dict[str, dict[str, Any]] = {}
    for path in sorted(SCHEMA_DIR.glob("*.avsc")):
        schema = json.loads(path.read_text())
        defs[full_name(schema["name"])] = schema
    return defs


RECORD_NAMES: tuple[str, ...] = tuple(
    sorted(n for n, s in _definitions().items() if s["type"] == "record")
)


def _expand(schema: Any, defs: dict[str, dict[str, Any]], seen: set[str]) -> Any:
    if isinstance(schema, str):
        if schema in _PRIMITIVES:
            return schema
        name = full_name(schema)
        if name in seen:
            return name
        if name not in defs:
            raise UnknownSchemaError(f"schema refers to unknown type {schema!r}")
        return _expand(defs[name], defs, seen)
    if isinstance(schema, list):
        return [_expand(s, defs, seen) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    kind = schema.get("type")
    if kind in ("record", "enum", "fixed"):
        seen.add(full_name(schema["name"]))
    if kind == "record":
        out["fields"] = [{**f, "type": _expand(f["type"], defs, seen)} for f in schema["fields"]]
    elif kind == "array":
        out["items"] = _expand(schema["items"], defs, seen)
    elif kind == "map":
        out["values"] = _expand(schema["values"], defs, seen)
    elif isinstance(kind, (dict, list)):
        out["type"] = _expand(kind, defs, seen)
    return out


@cache
def expanded(name: str) -> dict[str, Any]:
    """The stand-alone schema of a named type, with every reference inlined once.

    Raises:
        UnknownSchemaError: if no bundled schema has that name.
    """
    defs = _definitions()
    key = full_name(name)
    if key not in defs:
        raise UnknownSchemaError(
            f"no bundled Avro schema named {name!r}; known: {', '.join(sorted(defs))}"
        )
    result: dict[str, Any] = _expand(defs[key], defs, set())
    return result


def schema_json(name: str) -> str:
    """The expanded schema as a JSON string (for registries and other Avro libraries)."""
    return json.dumps(expanded(name))


@cache
def parsed(name: str) -> Any:
    """The fastavro-parsed schema of a named type."""
    return parse_schema(expanded(name))


def fingerprint64(schema: dict[str, Any]) -> bytes:
    """CRC-64-AVRO fingerprint of a schema's Parsing Canonical Form, little-endian bytes."""
    hex_le = fingerprint(to_parsing_canonical_form(schema), "CRC-64-AVRO")
    return bytes.fromhex(hex_le)


@cache
def released() -> tuple[dict[str, Any], ...]:
    """The expanded schemas of every earlier release (``avro/released/v*/<name>.json``),
    oldest first; those equal to a current schema are included too."""
    paths = sorted(RELEASED_DIR.glob("v*/*.json"), key=lambda p: (int(p.parent.name[1:]), p.name))
    return tuple(json.loads(p.read_text()) for p in paths)
