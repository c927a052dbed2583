"""Conversion between the pydantic event models and Avro-shaped dicts.

The only shape difference is the ``SessionEvent.payload`` union of records, which Avro
writers need as ``(record name, dict)`` so no branch is guessed.
"""

from __future__ import annotations

import base64
from datetime import datetime
from enum import StrEnum
from typing import Any

from rllm.errors import DecodeError, UnknownSchemaError
from rllm.schemas import policy, registry
from rllm.schemas import types as t
from rllm.schemas.tokens import pack_logprobs, pack_tokens, unpack_logprobs, unpack_tokens

__all__ = ["MODELS", "from_avro", "from_json_dict", "to_avro", "to_json_dict"]

MODELS: dict[str, type[t.AvroRecord]] = {
    cls.avro_name: cls
    for cls in (
        t.SessionEvent,
        t.SessionOpened,
        t.StepCaptured,
        t.SessionClosed,
        t.RewardAssigned,
        t.TrajectoryAssembled,
        t.EpisodeAssembled,
        policy.PolicyUpdated,
        policy.PolicyServed,
        t.DeadLetter,
        t.Task,
        t.Usage,
        t.StepError,
    )
}


def to_avro(record: t.AvroRecord) -> dict[str, Any]:
    """The Avro-shaped dict of a pydantic event."""
    datum = record.model_dump()
    if isinstance(record, t.SessionEvent):
        datum["payload"] = (record.payload.avro_name, datum["payload"])
    return datum


def from_avro(name: str, datum: dict[str, Any]) -> Any:
    """Build the pydantic event of record ``name`` from an Avro-shaped dict."""
    cls = MODELS.get(name)
    if cls is None:
        raise UnknownSchemaError(f"no event model for Avro record {name!r}")
    if cls is t.SessionEvent:
        payload = datum["payload"]
        if isinstance(payload, tuple):
            pname, pdatum = payload
            datum = {**datum, "payload": MODELS[pname].model_validate(pdatum)}
    return cls.model_validate(datum)


_TOKEN_FIELDS = {"prompt_token_ids", "response_token_ids"}
_LOGPROB_FIELDS = {"response_logprobs"}


def _jsonable(value: Any, field: str = "") -> Any:
    if isinstance(value, t.AvroRecord):
        out = {k: _jsonable(getattr(value, k), k) for k in type(value).model_fields}
        if isinstance(value, t.SessionEvent):
            out["payload"] = {"type": type(value.payload).__name__, **out["payload"]}
        return out
    if isinstance(value, bytes):
        if field in _TOKEN_FIELDS:
            return unpack_tokens(value).tolist()
        if field in _LOGPROB_FIELDS:
            return [float(x) for x in unpack_logprobs(value)]
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, StrEnum):
        return value.value
    if isinstance(value, (tuple, list)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    return value


def to_json_dict(record: t.AvroRecord) -> dict[str, Any]:
    """A JSON-ready dict of an event: token arrays as lists of numbers, other bytes base64.

    ``SessionEvent.payload`` carries a ``type`` key naming its record. ``from_json_dict``
    reads this shape back.
    """
    result: dict[str, Any] = _jsonable(record)
    return result


def _unjson(cls: type[t.AvroRecord], data: Any) -> Any:
    if not isinstance(data, dict):
        return data
    out = dict(data)
    for name, info in cls.model_fields.items():
        if name not in out:
            continue
        value = out[name]
        if name in _TOKEN_FIELDS and isinstance(value, list):
            out[name] = pack_tokens(value)
        elif name in _LOGPROB_FIELDS and isinstance(value, list):
            out[name] = pack_logprobs(value)
        elif info.annotation in (bytes, bytes | None) and isinstance(value, str):
            out[name] = base64.b64decode(value, validate=True)
        elif name == "payload" and isinstance(value, dict):
            kind = value.get("type")
            model = MODELS.get(f"rllm.events.{kind}") if isinstance(kind, str) else None
            if model is None or model not in (
                t.SessionOpened,
                t.StepCaptured,
                t.SessionClosed,
                t.RewardAssigned,
            ):
                raise DecodeError(
                    f"payload.type must be SessionOpened, StepCaptured, SessionClosed or "
                    f"RewardAssigned, got {kind!r}"
                )
            out[name] = _unjson(model, {k: v for k, v in value.items() if k != "type"})
        elif name in ("steps", "trajectories") and isinstance(value, list):
            sub = t.StepCaptured if name == "steps" else t.TrajectoryAssembled
            out[name] = [_unjson(sub, v) for v in value]
    return out


def from_json_dict(name: str, data: dict[str, Any]) -> Any:
    """Build an event from the JSON shape ``to_json_dict`` writes.

    Raises:
        pydantic.ValidationError or ValueError: naming the field that does not fit.
    """
    cls = MODELS.get(registry.full_name(name))
    if cls is None:
        raise UnknownSchemaError(f"no event model named {name!r}")
    return cls.model_validate(_unjson(cls, data))
