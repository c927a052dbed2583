"""The one prefix-delta rule (``rllm.schemas.delta``): prompts by parent key, requests by
prefix and suffix against the previous step, restored byte for byte, linear in size."""

from __future__ import annotations

import json
import random

import pytest

from rllm.processors.assemble import assemble_trajectory
from rllm.schemas.codec import AvroCodec
from rllm.schemas.convert import to_avro
from rllm.schemas.delta import (
    MIN_REQUEST_REUSE,
    encode_step_dicts,
    full_prompts,
    full_requests,
    request_delta,
    restore_step_dicts,
    restore_steps,
    unrestorable_prompts,
)
from rllm.schemas.tokens import pack_tokens, unpack_tokens
from rllm.schemas.types import ApiKind, StepCaptured
from tests.unit.processors.factory import task
from tests.unit.processors.long_session import CliSession

CODEC = AvroCodec()


def _step(i: int, prompt: list[int], response: list[int], **kw: object) -> StepCaptured:
    fields: dict[str, object] = {
        "step_id": f"s{i}",
        "step_index": i,
        "api": ApiKind.CHAT,
        "model": "m",
        "prompt_token_ids": pack_tokens(prompt),
        "response_token_ids": pack_tokens(response),
    }
    return StepCaptured.model_validate(fields | kw)


def _ids(prompts: list[bytes | None]) -> list[list[int] | None]:
    return [None if p is None else unpack_tokens(p).tolist() for p in prompts]


def test_prompts_restore_by_parent_key_including_n_choices_and_partial_prefixes() -> None:
    steps = [
        _step(0, [1, 2, 3], [4, 5]),
        # choice 1 of the same call: the same prompt, restored from choice 0 by key
        _step(1, [], [6], parent_step_id="s0", prompt_prefix_len=3),
        # the next turn extends choice 0 (not choice 1) by a tool output
        _step(2, [7], [8], parent_step_id="s0", prompt_prefix_len=5),
        # a prompt that re-renders the last answer: only 4 tokens of s2's are reused
        _step(3, [9, 9], [10], parent_step_id="s2", prompt_prefix_len=4),
    ]
    assert _ids(list(full_prompts(steps))) == [
        [1, 2, 3],
        [1, 2, 3],
        [1, 2, 3, 4, 5, 7],
        [1, 2, 3, 4, 9, 9],
    ]
    assert unrestorable_prompts(steps) == []


def test_a_missing_late_or_short_parent_is_unrestorable_and_so_are_its_children() -> None:
    steps = [
        _step(0, [1, 2], [3]),
        _step(1, [4], [5], parent_step_id="s0", prompt_prefix_len=4),  # parent has 3
        _step(2, [6], [7], parent_step_id="s1", prompt_prefix_len=1),  # parent unrestorable
        _step(3, [8], [9], parent_step_id="s4", prompt_prefix_len=1),  # parent comes later
        _step(4, [1], [2], parent_step_id="gone", prompt_prefix_len=1),
        _step(5, [3], [4], parent_step_id="s0", prompt_prefix_len=3),
    ]
    assert _ids(list(full_prompts(steps))) == [[1, 2], None, None, None, None, [1, 2, 3, 3]]
    assert unrestorable_prompts(steps) == ["s1", "s2", "s3", "s4"]
    restored, flags = restore_steps(steps)
    assert flags == ["unrestored_prompt"]
    assert restored[1] == steps[1] and restored[5].prompt_prefix_len == 0


def test_unrestorable_prompts_agrees_with_restoring_on_random_sessions() -> None:
    rng = random.Random(7)
    for _ in range(300):
        steps = []
        for i in range(rng.randint(1, 8)):
            parent = rng.choice([None, "gone", *(f"s{j}" for j in range(i + 2))])
            steps.append(
                _step(
                    i,
                    [rng.randint(0, 9) for _ in range(rng.randint(0, 3))],
                    [rng.randint(0, 9) for _ in range(rng.randint(0, 3))],
                    parent_step_id=parent,
                    prompt_prefix_len=rng.randint(0, 6) if parent else 0,
                )
            )
        nones = [s.step_id for s, p in zip(steps, full_prompts(steps), strict=True) if p is None]
        assert unrestorable_prompts(steps) == nones


def test_request_delta_keeps_the_new_messages_between_a_shared_prefix_and_suffix() -> None:
    tools = '"tools":[' + "x" * 400 + "]}"
    old = '{"messages":[{"role":"system","content":"' + "s" * 300 + '"}],' + tools
    new = old.replace("}],", '},{"role":"user","content":"hi"}],')
    p, s, middle = request_delta(old, new)
    assert middle == ',{"role":"user","content":"hi"}'
    assert old[:p] + middle + old[len(old) - s :] == new
    assert request_delta("x" * (MIN_REQUEST_REUSE - 1), "x" * MIN_REQUEST_REUSE) == (
        0,
        0,
        "x" * MIN_REQUEST_REUSE,
    )
    # prefix and suffix never overlap, whatever repeats
    for a, b in [("a" * 600, "a" * 900), ("a" * 900, "a" * 600), ("ab" * 400, "ab" * 300 + "é")]:
        p, s, middle = request_delta(a, b)
        assert p + s <= min(len(a), len(b)) and a[:p] + middle + a[len(a) - s :] == b


def test_request_delta_round_trips_random_unicode_edits() -> None:
    rng = random.Random(3)
    alphabet = 'ab{}",:é漢🙂'
    for _ in range(300):
        base = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 9000)))
        cut = rng.randint(0, len(base))
        new = base[:cut] + "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 50)))
        new += base[cut + rng.randint(0, 20) :]
        p, s, middle = request_delta(base, new)
        assert base[:p] + middle + base[len(base) - s :] == new


def test_requests_restore_against_the_step_before_and_refuse_impossible_lengths() -> None:
    steps = [
        _step(0, [1], [2], request_json="ABCDEFGH"),
        _step(1, [1], [2], request_json="xy", request_prefix_len=3, request_suffix_len=2),
        _step(2, [1], [2], request_json="", request_prefix_len=7),
        _step(3, [1], [2], request_json="z", request_prefix_len=99),
        _step(4, [1], [2], request_json="q", request_suffix_len=1),
    ]
    assert list(full_requests(steps)) == ["ABCDEFGH", "ABCxyGH", "ABCxyGH", None, None]
    assert list(full_requests(steps[1:2])) == [None]  # a delta needs a step before it
    _, flags = restore_steps(steps)
    assert flags == ["unrestored_request"]


def test_encoding_then_restoring_gives_back_the_same_bytes_and_encoding_is_idempotent() -> None:
    session = CliSession("a", task("t"), steps=12, context=6_000, system_tokens=1_500)
    full = assemble_trajectory(list(session.events()))  # restored
    assert all(s.prompt_prefix_len == 0 and s.request_prefix_len == 0 for s in full.steps)
    d = to_avro(full)
    assert encode_step_dicts(d["steps"]) == []
    small = CODEC.encode_dict("TrajectoryAssembled", d)
    assert [s["prompt_prefix_len"] > 0 for s in d["steps"]] == [False] + [True] * 11
    assert all(s["request_prefix_len"] > 0 and s["request_suffix_len"] > 0 for s in d["steps"][1:])
    assert CODEC.encode(assemble_trajectory(list(session.events()), restore=False)) == small
    assert encode_step_dicts(d["steps"]) == []
    assert CODEC.encode_dict("TrajectoryAssembled", d) == small
    assert restore_step_dicts(d["steps"]) == []
    assert CODEC.encode_dict("TrajectoryAssembled", d) == CODEC.encode(full)
    assert len(small) < len(CODEC.encode(full)) / 3


def test_an_encoded_session_grows_linearly_with_its_steps() -> None:
    def size(steps: int) -> int:
        s = CliSession("a", task("t"), steps=steps, context=40 * steps, system_tokens=400)
        return len(CODEC.encode(assemble_trajectory(list(s.events()), restore=False)))

    small, large = size(50), size(200)
    assert 3.5 < large / small < 4.5  # 4x the tokens: 4x the bytes (full prompts: ~16x)


@pytest.mark.parametrize("steps", [1, 3])
def test_a_short_request_is_left_whole(steps: int) -> None:
    body = json.dumps({"messages": [{"role": "user", "content": "7*8?"}]})
    d = [to_avro(_step(i, [1], [2], request_json=body)) for i in range(steps)]
    encode_step_dicts(d)
    assert [s["request_json"] for s in d] == [body] * steps
