"""Avro schemas: golden round trips, model/schema agreement, interop, evolution, bad bytes."""

from __future__ import annotations

import io
import json
from pathlib import Path

import avro.io
import avro.schema
import pytest
from avro.compatibility import ReaderWriterCompatibilityChecker, SchemaCompatibilityType

from rllm.errors import DecodeError, EncodeError, UnknownSchemaError
from rllm.kafka import ConfluentRegistry
from rllm.schemas import registry
from rllm.schemas.codec import SINGLE_OBJECT_MAGIC, AvroCodec
from rllm.schemas.convert import MODELS, from_json_dict, to_avro, to_json_dict
from rllm.schemas.types import SessionEvent, StepCaptured
from tests.samples import ENVELOPE, POLICY, SAMPLES, SERVED, STEP

GOLDEN = Path(__file__).parent / "golden"
codec = AvroCodec()


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_round_trip_matches_golden_bytes(name: str) -> None:
    sample = SAMPLES[name]
    data = codec.encode(sample)
    golden = (GOLDEN / f"{name}.bin").read_bytes()
    assert data == golden, f"{name}: encoding changed; old bytes must still decode"
    decoded = codec.decode(golden)
    assert decoded == sample
    assert type(decoded) is type(sample)


def test_every_record_has_a_sample_and_a_model() -> None:
    names = {n.rsplit(".", 1)[1] for n in registry.RECORD_NAMES}
    assert names == set(SAMPLES)
    assert set(MODELS) == set(registry.RECORD_NAMES)


@pytest.mark.parametrize("name", registry.RECORD_NAMES)
def test_model_fields_mirror_schema_fields_in_order(name: str) -> None:
    schema = registry.expanded(name)
    model = MODELS[name]
    assert [f["name"] for f in schema["fields"]] == list(model.model_fields)
    for field in schema["fields"]:
        assert field.get("doc"), f"{name}.{field['name']} has no doc"
        info = model.model_fields[field["name"]]
        if "default" in field:  # the model may add conveniences (now, empty usage), not drop one
            assert not info.is_required(), f"{name}.{field['name']} lost its default"


def _crc64_avro(data: bytes) -> bytes:
    """CRC-64-AVRO as the Avro specification writes it, little-endian."""
    empty = 0xC15D213AA4D7A795
    table = []
    for i in range(256):
        fp = i
        for _ in range(8):
            fp = (fp >> 1) ^ (empty & -(fp & 1))
        table.append(fp)
    fp = empty
    for byte in data:
        fp = (fp >> 8) ^ table[(fp ^ byte) & 0xFF]
    return fp.to_bytes(8, "little")


def _has_logical_types(name: str) -> bool:
    return "logicalType" in registry.schema_json(name)


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_single_object_header_is_magic_plus_crc64_fingerprint(name: str) -> None:
    from fastavro.schema import to_parsing_canonical_form

    data = codec.encode(SAMPLES[name])
    assert data[:2] == SINGLE_OBJECT_MAGIC == b"\xc3\x01"
    canonical = to_parsing_canonical_form(registry.expanded(name))
    assert data[2:10] == _crc64_avro(canonical.encode())
    assert "logicalType" not in canonical and "doc" not in canonical
    if not _has_logical_types(name):
        # The avro package agrees except where it keeps {"type": "long"} for a logical
        # type in the canonical form, against the spec's [PRIMITIVES] rule (Java writes "long").
        assert data[2:10] == avro.schema.parse(registry.schema_json(name)).fingerprint()


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_the_avro_reference_implementation_decodes_our_bytes(name: str) -> None:
    data = codec.encode(SAMPLES[name])
    schema = avro.schema.parse(registry.schema_json(name))
    reader = avro.io.DatumReader(schema)
    datum = reader.read(avro.io.BinaryDecoder(io.BytesIO(data[10:])))
    ours = codec.decode_dict(data)[1]
    assert datum.keys() == ours.keys()
    if name == "StepCaptured":
        assert datum["response_token_ids"] == STEP.response_token_ids
        assert datum["usage"] == {"prompt_tokens": 5, "completion_tokens": 3, "cached_tokens": 2}


def test_reference_implementation_bytes_decode_with_ours() -> None:
    schema = avro.schema.parse(registry.schema_json("StepCaptured"))
    buf = io.BytesIO()
    datum = to_avro(STEP)
    datum["started_at"] = STEP.started_at
    datum["api"], datum["token_status"] = "responses", "ok"
    avro.io.DatumWriter(schema).write(datum, avro.io.BinaryEncoder(buf))
    data = SINGLE_OBJECT_MAGIC + registry.fingerprint64(registry.expanded("StepCaptured"))
    data += buf.getvalue()
    assert codec.decode(data) == STEP


def test_confluent_framing_decodes_with_confluent_kafkas_own_deserializer() -> None:
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    # The registry double that confluent-kafka ships (a Confluent registry is a JVM
    # service that Maven Central does not serve).
    client = SchemaRegistryClient.new_client({"url": "mock://rllm-test"})
    framed = AvroCodec(ConfluentRegistry(client))
    data = framed.encode(ENVELOPE, topic="rllm.session-events")
    assert data[0] == 0 and len(data) > 5
    schema_id = int.from_bytes(data[1:5], "big")
    assert client.get_latest_version("rllm.session-events-value").schema_id == schema_id
    theirs = AvroDeserializer(client)(
        data, SerializationContext("rllm.session-events", MessageField.VALUE)
    )
    assert theirs["session_id"] == ENVELOPE.session_id
    assert theirs["payload"]["step_id"] == "step-1"
    assert framed.decode(data) == ENVELOPE
    # a codec without the id cached resolves it through the registry
    assert AvroCodec(ConfluentRegistry(client)).decode(data) == ENVELOPE


def test_a_second_record_on_a_topic_gets_a_subject_of_its_own() -> None:
    """A registry refuses two record types under one subject (NAME_MISMATCH): the gateways'
    PolicyServed beside the trainer's PolicyUpdated on rllm.policy-updates."""
    from confluent_kafka.schema_registry import SchemaRegistryClient

    client = SchemaRegistryClient.new_client({"url": "mock://rllm-test-subjects"})
    framed = AvroCodec(ConfluentRegistry(client))
    topic = "rllm.policy-updates"
    updated = framed.encode(POLICY, topic=topic)
    served = framed.encode(SERVED, topic=topic)
    assert sorted(client.get_subjects()) == [
        "rllm.policy-updates-rllm.events.PolicyServed",
        "rllm.policy-updates-value",
    ]
    ids = [int.from_bytes(d[1:5], "big") for d in (updated, served)]
    assert ids[0] != ids[1]
    assert client.get_latest_version("rllm.policy-updates-value").schema_id == ids[0]
    fresh = AvroCodec(ConfluentRegistry(client))
    assert (fresh.decode(updated), fresh.decode(served)) == (POLICY, SERVED)


def test_confluent_framed_bytes_without_a_registry_name_the_schema_id() -> None:
    with pytest.raises(UnknownSchemaError, match="schema id 7"):
        codec.decode(b"\x00\x00\x00\x00\x07abc")


def _evolved_step_schema() -> dict[str, object]:
    schema = json.loads(registry.schema_json("StepCaptured"))
    schema["fields"].append(
        {"name": "reasoning_tokens", "type": "int", "default": 0, "doc": "added in a later version"}
    )
    return schema


def test_reader_with_an_added_defaulted_field_reads_old_bytes() -> None:
    from fastavro import parse_schema, schemaless_reader

    old = codec.encode(STEP)
    new_reader = parse_schema(_evolved_step_schema())
    datum = schemaless_reader(io.BytesIO(old[10:]), registry.parsed("StepCaptured"), new_reader)
    assert datum["reasoning_tokens"] == 0
    assert datum["step_id"] == "step-1"


def test_bytes_from_a_newer_writer_decode_once_its_schema_is_known() -> None:
    from fastavro import parse_schema, schemaless_writer

    newer = _evolved_step_schema()
    buf = io.BytesIO()
    datum = to_avro(STEP) | {"reasoning_tokens": 9}
    schemaless_writer(buf, parse_schema(newer), datum)
    data = SINGLE_OBJECT_MAGIC + registry.fingerprint64(newer) + buf.getvalue()
    with pytest.raises(UnknownSchemaError, match=registry.fingerprint64(newer).hex()):
        AvroCodec().decode(data)
    assert AvroCodec(writer_schemas=(newer,)).decode(data) == STEP


@pytest.mark.parametrize(
    "snapshot",
    sorted((GOLDEN / "schemas").glob("v*/*.json")),
    ids=lambda p: f"{p.parent.name}/{p.stem}",
)
def test_current_schemas_read_every_released_version(snapshot: Path) -> None:
    old = avro.schema.parse(snapshot.read_text())
    name = snapshot.stem
    current = avro.schema.parse(registry.schema_json(name))
    result = ReaderWriterCompatibilityChecker().get_compatibility(current, old)
    assert result.compatibility == SchemaCompatibilityType.compatible, result.messages


def test_unknown_fingerprint_is_named() -> None:
    data = SINGLE_OBJECT_MAGIC + bytes.fromhex("0102030405060708") + b"\x00"
    with pytest.raises(UnknownSchemaError, match="0102030405060708"):
        codec.decode(data)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "empty"),
        (b'{"json": true}', "7b226a73"),
        (b"\xc3\x01\x01", "truncated"),
        (codec.encode(STEP)[:-40], "cannot decode rllm.events.StepCaptured"),
        (codec.encode(STEP) + b"\x00", "trailing"),
    ],
)
def test_corrupt_bytes_raise_decode_error_with_reason(data: bytes, message: str) -> None:
    with pytest.raises(DecodeError, match=message):
        codec.decode(data)


def test_encoding_a_bad_record_names_it() -> None:
    with pytest.raises(EncodeError, match="StepCaptured"):
        codec.encode_dict("StepCaptured", {"step_id": "x"})
    with pytest.raises(UnknownSchemaError, match="Nope"):
        codec.encode_dict("Nope", {})


def test_json_view_round_trips_and_shows_tokens_as_numbers() -> None:
    view = to_json_dict(ENVELOPE)
    assert view["payload"]["type"] == "StepCaptured"
    assert view["payload"]["prompt_token_ids"] == [7, 8, 9]
    assert view["payload"]["response_logprobs"] == [-0.5, -0.25, -0.125]
    again = from_json_dict("SessionEvent", json.loads(json.dumps(view)))
    assert again == ENVELOPE
    assert isinstance(again, SessionEvent) and isinstance(again.payload, StepCaptured)


def test_json_view_refuses_an_unknown_payload_type() -> None:
    view = to_json_dict(ENVELOPE)
    view["payload"]["type"] = "Bogus"
    with pytest.raises(ValueError, match="'Bogus'"):
        from_json_dict("SessionEvent", view)
