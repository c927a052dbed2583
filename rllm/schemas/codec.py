"""Avro wire codec: single-object encoding by default, Confluent framing with a registry.

Single-object encoding (Avro spec): ``C3 01`` + 8-byte little-endian CRC-64-AVRO
fingerprint of the writer schema + the Avro binary body. Confluent framing: ``00`` +
4-byte big-endian registry schema id + body. ``decode`` tells them apart by the first byte.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Protocol

from fastavro import parse_schema, schemaless_reader, schemaless_writer

from rllm.errors import DecodeError, EncodeError, UnknownSchemaError
from rllm.schemas import fastpath, registry
from rllm.schemas.convert import from_avro, to_avro
from rllm.schemas.topics import TOPICS
from rllm.schemas.types import Record

__all__ = ["CONFLUENT_MAGIC", "SINGLE_OBJECT_MAGIC", "AvroCodec", "SchemaRegistry"]

SINGLE_OBJECT_MAGIC = b"\xc3\x01"
CONFLUENT_MAGIC = b"\x00"
_TOPIC_RECORDS = frozenset(spec.record for spec in TOPICS)
"""Records that are some topic's own (``TopicSpec.record``): registered as ``<topic>-value``."""


class SchemaRegistry(Protocol):
    """A schema registry as the codec sees it: Avro schemas as JSON text under subjects.
    ``rllm.kafka.ConfluentRegistry`` adapts Confluent's client (``make_codec`` builds it)."""

    def register(self, subject: str, schema_json: str) -> int:
        """Register ``schema_json`` (Avro) under ``subject``; return its schema id."""
        ...

    def schema_json(self, schema_id: int) -> str:
        """The Avro schema (JSON text) registered with ``schema_id``."""
        ...


@contextmanager
def _avro_errors(action: str, name: str) -> Iterator[None]:
    """Translate fastavro's errors into ours, naming the record."""
    try:
        yield
    except (UnknownSchemaError, DecodeError, EncodeError):
        raise
    except (
        ValueError,
        TypeError,
        KeyError,
        AttributeError,
        IndexError,
        EOFError,
        OverflowError,
    ) as exc:  # OverflowError: e.g. a corrupt timestamp past year 9999
        cls = EncodeError if action == "encode" else DecodeError
        raise cls(f"cannot {action} {name}: {type(exc).__name__}: {exc}") from exc


class AvroCodec:
    """Encodes and decodes events against the bundled schemas.

    Args:
        registry_client: a schema registry (``SchemaRegistry``); when given, ``encode``
            frames with its schema ids and ``decode`` resolves ids through it. A topic's
            own record (``TopicSpec.record``) is registered under ``<topic>-value``; another
            record on it (``PolicyServed`` on ``rllm.policy-updates``) under
            ``<topic>-<record name>``, as a registry refuses two record types under one
            subject.
        writer_schemas: older schemas (JSON dicts) whose single-object fingerprints should
            still decode; they are resolved against the current schema of the same name.
            The bundled earlier releases (``registry.released``) always decode.
    """

    def __init__(
        self,
        registry_client: SchemaRegistry | None = None,
        writer_schemas: tuple[Mapping[str, Any], ...] = (),
    ) -> None:
        self._registry = registry_client
        self._by_fp: dict[bytes, tuple[str, Any]] = {}
        self._fp: dict[str, bytes] = {}
        for name in registry.RECORD_NAMES:
            fp = registry.fingerprint64(registry.expanded(name))
            self._by_fp[fp] = (name, registry.parsed(name))
            self._fp[name] = fp
        for schema in (*registry.released(), *writer_schemas):
            self.add_writer_schema(schema)
        self._ids: dict[tuple[str, str], int] = {}
        self._by_id: dict[int, tuple[str, Any]] = {}

    def add_writer_schema(self, schema: Mapping[str, Any]) -> bytes:
        """Accept single-object bytes written with an older version of a bundled record."""
        name = registry.full_name(str(schema["name"]))
        fp = registry.fingerprint64(dict(schema))
        if fp not in self._by_fp:  # a current schema keeps its own (fast path) entry
            self._by_fp[fp] = (name, parse_schema(dict(schema)))
        return fp

    # encoding -------------------------------------------------------------------------

    def encode(self, record: Record, topic: str | None = None) -> bytes:
        """Encode a pydantic event; framed for the registry when one is configured."""
        return self.encode_dict(record.avro_name, to_avro(record), topic=topic)

    def encode_dict(self, name: str, datum: Mapping[str, Any], topic: str | None = None) -> bytes:
        """Encode a record given as an Avro-shaped dict (the fast path)."""
        name = registry.full_name(name)
        if name not in self._fp:
            raise UnknownSchemaError(f"no bundled Avro schema named {name!r}")
        if self._registry is not None and topic is not None:
            header = CONFLUENT_MAGIC + self._schema_id(topic, name).to_bytes(4, "big")
        else:
            header = SINGLE_OBJECT_MAGIC + self._fp[name]
        fast = fastpath.for_record(name)
        if fast is not None and (data := fast.encode(datum, header)) is not None:
            return data  # same bytes as fastavro's; None means "let fastavro do it"
        buf = io.BytesIO()
        buf.write(header)
        with _avro_errors("encode", name):
            schemaless_writer(buf, registry.parsed(name), datum)
        return buf.getvalue()

    def _schema_id(self, topic: str, name: str) -> int:
        key = (topic, name)
        if key not in self._ids:
            assert self._registry is not None
            subject = f"{topic}-value" if name in _TOPIC_RECORDS else f"{topic}-{name}"
            schema_id = self._registry.register(subject, registry.schema_json(name))
            self._ids[key] = schema_id
            self._by_id[schema_id] = (name, registry.parsed(name))
        return self._ids[key]

    # decoding -------------------------------------------------------------------------

    def decode(self, data: bytes) -> Any:
        """Decode bytes into the pydantic event they hold."""
        name, datum = self.decode_dict(data)
        with _avro_errors("decode", name):
            return from_avro(name, datum)

    def decode_dict(self, data: bytes) -> tuple[str, dict[str, Any]]:
        """Decode bytes into ``(record full name, Avro-shaped dict)``.

        Raises:
            DecodeError: for bytes that are not framed Avro or do not fit the schema.
            UnknownSchemaError: for a fingerprint or schema id nobody knows.
        """
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise DecodeError(f"expected bytes, got {type(data).__name__}")
        data = bytes(data)
        if data[:2] == SINGLE_OBJECT_MAGIC:
            if len(data) < 10:
                raise DecodeError(f"single-object header truncated: {len(data)} bytes")
            fp = data[2:10]
            if fp not in self._by_fp:
                raise UnknownSchemaError(
                    f"unknown Avro schema fingerprint {fp.hex()} (CRC-64-AVRO, little-endian); "
                    "the writer used a schema this version of rllm does not bundle"
                )
            name, writer = self._by_fp[fp]
            start = 10
        elif data[:1] == CONFLUENT_MAGIC and len(data) >= 5:
            schema_id = int.from_bytes(data[1:5], "big")
            name, writer = self._registry_schema(schema_id)
            start = 5
        else:
            raise DecodeError(
                f"not an Avro event: first bytes {data[:4].hex() or '(empty)'} are neither "
                "single-object (c301) nor Confluent (00) framing"
            )
        reader = registry.parsed(name) if name in self._fp else None
        fast = fastpath.for_record(name) if writer is reader else None
        decoded = fast.decode(data, start) if fast is not None else None
        if decoded is not None:
            fast_datum, end = decoded
            if end != len(data):
                raise DecodeError(
                    f"cannot decode {name}: {len(data) - end} trailing bytes after the record"
                )
            return name, fast_datum
        body = data[start:]  # fastavro: other writer schemas, or bytes the fast path refused
        buf = io.BytesIO(body)
        with _avro_errors("decode", name):
            datum = schemaless_reader(
                buf,
                writer,
                reader if reader is not writer else None,
                return_record_name=True,
                return_record_name_override=True,
            )
        if buf.tell() != len(body):
            raise DecodeError(
                f"cannot decode {name}: {len(body) - buf.tell()} trailing bytes after the record"
            )
        if not isinstance(datum, dict):
            raise DecodeError(f"cannot decode {name}: not a record")
        return name, datum

    def _registry_schema(self, schema_id: int) -> tuple[str, Any]:
        if schema_id in self._by_id:
            return self._by_id[schema_id]
        if self._registry is None:
            raise UnknownSchemaError(
                f"Confluent-framed event with schema id {schema_id}, but no schema registry "
                "is configured (set RLLM_SCHEMA_REGISTRY_URL)"
            )
        try:
            text = self._registry.schema_json(schema_id)
        except Exception as exc:
            raise UnknownSchemaError(
                f"schema id {schema_id} not found in the schema registry: {exc}"
            ) from exc
        raw = json.loads(text)
        name = registry.full_name(raw["name"])
        entry = (name, parse_schema(raw))
        self._by_id[schema_id] = entry
        return entry
