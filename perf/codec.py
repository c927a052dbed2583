"""Encode+decode rate of a 2,500-token StepCaptured in its SessionEvent envelope, one core.

Prints one line per measurement and a JSON line last. Figures:
- encode_decode_per_s: wire path (Avro-shaped dict -> bytes -> dict), what the gateway,
  processors and sink do per event.
- model_encode_decode_per_s: with the pydantic models on both ends.
- encode_per_s / decode_per_s: each half of the wire path alone.
- array_int_encode_per_s: the same step with token IDs as Avro array<int> (DESIGN.md's
  comparison), to show what packing buys.
- fastavro_*: the same through fastavro alone, with the C fast path (rllm_avrofast, from
  native/avrofast) switched off, measured in alternating rounds in this process so both see
  the same machine load; speedup_* are the ratios (median of the rounds); accelerated says
  whether the fast path is installed; body_encode_decode_per_s is the fast path without the
  codec's framing and lookups.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import time
from collections.abc import Callable
from typing import Any
from unittest import mock

from fastavro import parse_schema, schemaless_writer

from rllm.schemas import fastpath, registry
from rllm.schemas.codec import AvroCodec
from rllm.schemas.convert import to_avro
from rllm.schemas.tokens import pack_logprobs, pack_tokens
from rllm.schemas.types import ApiKind, SessionEvent, StepCaptured, Usage


def _rate(fn: Callable[[], Any], seconds: float) -> float:
    n, t0 = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - t0) < seconds:
        for _ in range(200):
            fn()
        n += 200
    return n / elapsed


def _step(prompt_tokens: int, response_tokens: int) -> SessionEvent:
    step = StepCaptured(
        step_id="step-3",
        step_index=3,
        parent_step_id="step-2",
        api=ApiKind.CHAT,
        model="smollm2-135m",
        request_json=json.dumps({"messages": [{"role": "user", "content": "x" * 200}]}),
        response_json=json.dumps({"choices": [{"message": {"content": "y" * 200}}]}),
        prompt_token_ids=pack_tokens(range(prompt_tokens)),
        response_token_ids=pack_tokens(range(response_tokens)),
        response_logprobs=pack_logprobs([-0.5] * response_tokens),
        finish_reason="stop",
        sampling_params_json='{"temperature": 1.0}',
        policy_version=3,
        upstream="local",
        latency_ms=120.0,
        usage=Usage(prompt_tokens=prompt_tokens, completion_tokens=response_tokens),
    )
    return SessionEvent(
        event_id="e" * 32, session_id="run/task:1/0", run_id="run", producer="gateway", payload=step
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=2.0, help="time per measurement")
    parser.add_argument("--tokens", type=int, default=2500, help="prompt + response tokens")
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core

    response = min(500, args.tokens // 5)
    event = _step(args.tokens - response, response)
    codec = AvroCodec()
    datum = to_avro(event)
    data = codec.encode_dict("SessionEvent", datum)

    fast = fastpath.for_record("SessionEvent")
    figures: dict[str, Any] = {
        "tokens": args.tokens,
        "event_bytes": len(data),
        "accelerated": fast is not None,
    }
    paths: dict[str, Callable[[], Any]] = {
        "encode_decode_per_s": lambda: codec.decode_dict(codec.encode_dict("SessionEvent", datum)),
        "encode_per_s": lambda: codec.encode_dict("SessionEvent", datum),
        "decode_per_s": lambda: codec.decode_dict(data),
        "model_encode_decode_per_s": lambda: codec.decode(codec.encode(event)),
    }
    rounds = 3
    for key, fn in paths.items():
        ours, theirs = [], []
        for _ in range(rounds):  # alternate, so both paths see the same load
            ours.append(_rate(fn, args.seconds / rounds))
            with mock.patch.object(fastpath, "for_record", lambda name: None):
                theirs.append(_rate(fn, args.seconds / rounds))
        figures[key] = statistics.median(ours)
        figures[f"fastavro_{key}"] = statistics.median(theirs)
        ratios = [a / b for a, b in zip(ours, theirs, strict=True)]
        figures[f"speedup_{key.removesuffix('_per_s')}"] = round(statistics.median(ratios), 1)
    if fast is not None:
        figures["body_encode_decode_per_s"] = _rate(
            lambda: fast.decode(fast.encode(datum) or b""), args.seconds
        )

    # The same step with array<int> token IDs, for DESIGN.md's packed-vs-array comparison.
    array_schema = json.loads(registry.schema_json("StepCaptured"))
    for field in array_schema["fields"]:
        if field["name"] in ("prompt_token_ids", "response_token_ids"):
            field["type"], field["default"] = {"type": "array", "items": "int"}, []
        if field["name"] == "response_logprobs":
            field["type"], field["default"] = {"type": "array", "items": "float"}, []
    parsed = parse_schema(array_schema)
    step_datum = dict(datum["payload"][1])
    step_datum["prompt_token_ids"] = list(range(args.tokens - response))
    step_datum["response_token_ids"] = list(range(response))
    step_datum["response_logprobs"] = [-0.5] * response
    figures["array_int_encode_per_s"] = _rate(
        lambda: schemaless_writer(io.BytesIO(), parsed, step_datum), args.seconds
    )
    figures["packed_encode_per_s"] = _rate(
        lambda: codec.encode_dict("StepCaptured", datum["payload"][1]), args.seconds
    )

    rounded = {
        k: round(v) if isinstance(v, float) and not k.startswith("speedup_") else v
        for k, v in figures.items()
    }
    for key, value in rounded.items():
        text = f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else value
        print(f"{key:>38}: {text}{'x' if key.startswith('speedup_') else ''}")
    print(json.dumps(rounded))


if __name__ == "__main__":
    main()
