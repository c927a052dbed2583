"""The C fast path (rllm_avrofast) writes and reads exactly what fastavro does.

Set RLLM_AVRO_FASTPATH=0 to run the suite on a machine without the accelerator (these
tests then skip); otherwise a missing or broken build fails here.
"""

from __future__ import annotations

import io
import os
import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta, timezone
from functools import partial
from typing import Any
from unittest import mock

import pytest
from fastavro import parse_schema, schemaless_reader, schemaless_writer

from rllm.errors import DecodeError, UnsupportedSchemaError
from rllm.schemas import fastpath, registry
from rllm.schemas.codec import AvroCodec
from rllm.schemas.convert import to_avro
from rllm.schemas.types import ApiKind
from tests.samples import ENVELOPE, SAMPLES

if os.environ.get("RLLM_AVRO_FASTPATH") == "0":
    pytest.skip("accelerator switched off (RLLM_AVRO_FASTPATH=0)", allow_module_level=True)

_STRINGS = ["", "a", "héllo wörld", "日本語テキスト", "emoji 🚀🔥", "\x00nul", "x" * 300]
_INTS = [0, 1, -1, 63, 64, -64, -65, 8191, -8192, 2**31 - 1, -(2**31)]
_LONGS = [*_INTS, 2**31, -(2**31) - 1, 2**53 + 1, 2**63 - 1, -(2**63)]
_DOUBLES = [0.0, -0.0, 1.5, -2.25e-300, 1e308, float("inf"), float("-inf"), 0.1]


def _reference_bytes(schema: Any, datum: Any) -> bytes:
    buf = io.BytesIO()
    schemaless_writer(buf, schema, datum)
    return buf.getvalue()


def _reference_datum(schema: Any, data: bytes) -> Any:
    return schemaless_reader(
        io.BytesIO(data), schema, None, return_record_name=True, return_record_name_override=True
    )


class _Gen:
    """Random Avro-shaped data for an expanded schema; ``i`` cycles enum symbols."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.i = seed
        self.named: dict[str, Any] = {}

    def value(self, schema: Any, ns: str = "") -> Any:
        rng = self.rng
        if isinstance(schema, list):
            branch = schema[rng.randrange(len(schema))]
            value = self.value(branch, ns)
            records = [b for b in schema if isinstance(b, dict) and b.get("type") == "record"]
            if isinstance(branch, dict) and branch.get("type") == "record" and len(records) > 1:
                return (f"{branch.get('namespace', ns)}.{branch['name']}", value)
            return value
        if isinstance(schema, str):
            if "." in schema or schema[:1].isupper():
                return self.value(self.named[schema if "." in schema else f"{ns}.{schema}"], ns)
            schema = {"type": schema}
        kind, logical = schema["type"], schema.get("logicalType")
        if logical == "timestamp-micros":
            micros = rng.randrange(-62135596800 * 10**6, 253402300799 * 10**6)
            if rng.random() < 0.2:
                return micros
            return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=micros)
        if kind in ("record", "enum"):
            ns = schema.get("namespace", ns)
            self.named[f"{ns}.{schema['name']}"] = schema
        match kind:
            case "null":
                return None
            case "boolean":
                return rng.random() < 0.5
            case "int":
                return rng.choice([*_INTS, rng.randrange(-(2**31), 2**31)])
            case "long":
                return rng.choice([*_LONGS, rng.randrange(-(2**63), 2**63)])
            case "double" | "float":
                return rng.choice(_DOUBLES) if kind == "double" else rng.choice([0.5, -1.0])
            case "string":
                return rng.choice(_STRINGS)
            case "bytes":
                return rng.randbytes(rng.choice([0, 1, 7, 4000]))
            case "enum":
                self.i += 1
                return schema["symbols"][self.i % len(schema["symbols"])]
            case "array":
                return [self.value(schema["items"], ns) for _ in range(rng.choice([0, 1, 3, 70]))]
            case "map":
                n = rng.choice([0, 1, 5])
                return {
                    rng.choice(_STRINGS) + str(k): self.value(schema["values"], ns)
                    for k in range(n)
                }
            case "record":
                return {f["name"]: self.value(f["type"], ns) for f in schema["fields"]}
        raise AssertionError(f"unexpected schema {schema!r}")


@pytest.mark.parametrize("name", registry.RECORD_NAMES)
def test_every_bundled_record_is_accelerated(name: str) -> None:
    assert fastpath.AVAILABLE, "rllm_avrofast is not importable: pip install ./native/avrofast"
    assert fastpath.for_record(name) is not None


@pytest.mark.parametrize("name", registry.RECORD_NAMES)
def test_generated_records_match_fastavro_byte_for_byte(name: str) -> None:
    fast = fastpath.for_record(name)
    assert fast is not None
    parsed = registry.parsed(name)
    for seed in range(40):
        datum = _Gen(seed).value(registry.expanded(name))
        ours = fast.encode(datum, b"HDR")
        assert ours is not None, f"{name} seed {seed}: fast path refused {datum!r:.300}"
        reference = _reference_bytes(parsed, datum)
        assert ours == b"HDR" + reference, f"{name} seed {seed}"
        decoded = fast.decode(ours, 3)
        assert decoded is not None
        assert decoded == (_reference_datum(parsed, reference), len(ours))


def test_every_enum_symbol_and_union_branch_of_the_envelope() -> None:
    fast = fastpath.for_record("SessionEvent")
    assert fast is not None
    parsed, base = registry.parsed("SessionEvent"), to_avro(ENVELOPE)
    seen: set[tuple[str, str, str]] = set()
    for name, sample in SAMPLES.items():
        if name not in ("SessionOpened", "StepCaptured", "SessionClosed", "RewardAssigned"):
            continue
        for symbol_i in range(5):
            payload = _Gen(symbol_i).value(registry.expanded(name), "rllm.events")
            payload = to_avro(sample) | {k: v for k, v in payload.items() if k != "task"}
            if name == "StepCaptured":
                payload["api"] = [
                    "chat",
                    "completions",
                    "responses",
                    "anthropic_messages",
                    "generate",
                ][symbol_i]
                payload["token_status"] = ["ok", "missing"][symbol_i % 2]
                seen.add((name, payload["api"], payload["token_status"]))
            datum = base | {"payload": (f"rllm.events.{name}", payload)}
            data = fast.encode(datum)
            assert data == _reference_bytes(parsed, datum)
            assert fast.decode(data) == (_reference_datum(parsed, data), len(data))
    assert len(seen) == 5


def test_huge_and_empty_values() -> None:
    fast = fastpath.for_record("TrajectoryAssembled")
    assert fast is not None
    datum = _Gen(1).value(registry.expanded("TrajectoryAssembled"))
    step = _Gen(2).value(registry.expanded("StepCaptured"))
    step["prompt_token_ids"] = random.Random(3).randbytes(4 << 20)
    for steps, flags in (([], []), ([step] * 3, ["f"] * 20_000), ([step], ["ü" * 5000])):
        datum |= {"steps": steps, "flags": flags, "reward_signals": {}}
        data = fast.encode(datum)
        reference = _reference_bytes(registry.parsed("TrajectoryAssembled"), datum)
        assert data == reference
        assert fast.decode(data) == (
            _reference_datum(registry.parsed("TrajectoryAssembled"), reference),
            len(data),
        )


def test_nan_and_non_utc_timestamps_match() -> None:
    fast = fastpath.for_record("StepCaptured")
    assert fast is not None
    datum = to_avro(SAMPLES["StepCaptured"])
    datum["latency_ms"] = float("nan")
    datum["started_at"] = datetime(2024, 3, 1, 12, 0, tzinfo=timezone(timedelta(hours=-7)))
    assert fast.encode(datum) == _reference_bytes(registry.parsed("StepCaptured"), datum)


def _other_schema() -> dict[str, Any]:
    return {
        "type": "record",
        "name": "Other",
        "namespace": "x",
        "fields": [
            {"name": "f", "type": "float"},
            {"name": "m", "type": {"type": "map", "values": ["null", "long"]}},
            {"name": "e", "type": ["null", {"type": "enum", "name": "E", "symbols": ["A", "B"]}]},
            {
                "name": "r",
                "type": [
                    "null",
                    {"type": "record", "name": "R", "fields": [{"name": "n", "type": "int"}]},
                    "x.E",
                ],
            },
            {"name": "a", "type": {"type": "array", "items": ["null", "x.R"]}},
        ],
    }


def test_a_schema_with_floats_maps_and_named_unions() -> None:
    schema = _other_schema()
    fast, parsed = fastpath.FastRecord("x.Other", schema), parse_schema(_other_schema())
    datums = [
        {
            "f": 0.5,
            "m": {"k": 1, "é": -(2**40), "n": None},
            "e": "B",
            "r": ("x.R", {"n": -3}),
            "a": [None, {"n": 7}],
        },
        {"f": -1.0, "m": {}, "e": None, "r": ("x.E", "A"), "a": []},
        {"f": 3.0, "m": {"k": 2}, "e": "A", "r": None, "a": [{"n": 2**31 - 1}]},
    ]
    for datum in datums:
        data = fast.encode(datum)
        assert data == _reference_bytes(parsed, datum)
        assert fast.decode(data) == (_reference_datum(parsed, data), len(data))
    # a union of several types without tuple notation is left to fastavro
    assert fast.encode(datums[0] | {"r": {"n": 1}}) is None
    assert fast.encode(datums[0] | {"m": {"k": "s"}}) is None


def test_unsupported_schemas_stay_on_fastavro() -> None:
    with pytest.raises(UnsupportedSchemaError, match="fixed"):
        fastpath.compile_schema({"type": "fixed", "name": "F", "size": 4})
    with pytest.raises(UnsupportedSchemaError, match="decimal"):
        fastpath.compile_schema({"type": "bytes", "logicalType": "decimal", "precision": 4})


@contextmanager
def _fastavro_only() -> Iterator[None]:
    with mock.patch.object(fastpath, "for_record", lambda name: None):
        yield


def _outcome(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except Exception as exc:
        return (type(exc), str(exc))


class _MyDatetime(datetime):
    pass


def _odd(datum: dict[str, Any]) -> Iterator[dict[str, Any]]:
    step = datum["payload"][1]

    def with_step(**kw: Any) -> dict[str, Any]:
        return datum | {"payload": ("rllm.events.StepCaptured", step | kw)}

    yield datum | {"payload": ("StepCaptured", step)}  # short name: fastavro refuses
    yield datum | {"payload": step}  # no tuple: fastavro picks the branch
    yield datum | {"emitted_at": datetime(2024, 1, 1)}  # naive: fastavro uses local time
    yield datum | {"emitted_at": 2**70}
    yield {k: v for k, v in datum.items() if k != "producer"}  # defaulted field missing
    yield {k: v for k, v in datum.items() if k != "run_id"}  # required field missing
    yield with_step(model=ApiKind.CHAT, finish_reason=ApiKind.GENERATE)  # str subclasses
    yield with_step(started_at=_MyDatetime(2024, 1, 1, tzinfo=UTC))
    yield with_step(step_index=True)
    yield with_step(step_index=2**40)
    yield with_step(latency_ms=3)
    yield with_step(ttft_ms=7)
    yield with_step(model="bad \udc80 surrogate")
    yield with_step(prompt_token_ids=bytearray(b"abcd"))
    yield with_step(api="nope")
    yield with_step(error={"kind": "k", "message": "m"})
    yield with_step(error={"kind": "k", "message": "m", "status_code": 1.5})
    yield with_step(usage={"prompt_tokens": 1})


def test_unusual_values_give_exactly_fastavros_result() -> None:
    codec = AvroCodec()
    for i, odd in enumerate(_odd(to_avro(ENVELOPE))):
        ours = _outcome(partial(codec.encode_dict, "SessionEvent", odd))
        with _fastavro_only():
            theirs = _outcome(partial(codec.encode_dict, "SessionEvent", odd))
        assert ours == theirs, f"case {i}"


def test_truncated_bytes_raise_decode_error_naming_the_record() -> None:
    codec = AvroCodec()
    data = codec.encode(ENVELOPE)
    for cut in range(10, len(data)):
        with pytest.raises(DecodeError, match=r"cannot decode rllm\.events\.SessionEvent"):
            codec.decode_dict(data[:cut])


def test_corrupt_bytes_decode_as_fastavro_decodes_them() -> None:
    codec, rng = AvroCodec(), random.Random(7)
    data = bytearray(
        codec.encode_dict("SessionEvent", _Gen(5).value(registry.expanded("SessionEvent")))
    )
    for _ in range(400):
        bad = bytearray(data)
        for _ in range(rng.choice([1, 3])):
            bad[rng.randrange(10, len(bad))] = rng.randrange(256)
        ours = _outcome(partial(codec.decode_dict, bytes(bad)))
        with _fastavro_only():
            theirs = _outcome(partial(codec.decode_dict, bytes(bad)))
        assert ours == theirs or repr(ours) == repr(theirs)  # NaN != NaN
        if isinstance(ours, tuple) and isinstance(ours[0], type):
            assert issubclass(ours[0], DecodeError) and "SessionEvent" in ours[1]


def test_the_codec_works_the_same_without_the_accelerator() -> None:
    codec = AvroCodec()
    fast_bytes = {name: codec.encode(sample) for name, sample in SAMPLES.items()}
    with _fastavro_only():
        for name, sample in SAMPLES.items():
            assert codec.encode(sample) == fast_bytes[name]
            assert codec.decode(fast_bytes[name]) == sample
