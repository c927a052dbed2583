"""SFT from the event log on the real broker: session events -> `rllm-cli replay --source
topic` -> `rllm-cli train sft --data-file` -> PolicyUpdated on rllm.policy-updates."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from click.testing import CliRunner

from rllm.cli.main import cli
from rllm.kafka import EventPublisher, make_codec
from rllm.schemas import policy
from rllm.schemas import types as t
from rllm.schemas.tokens import pack_logprobs, pack_tokens
from rllm.schemas.topics import POLICY_UPDATES, SESSION_EVENTS
from rllm.settings import KafkaSettings
from tests.integration.helpers import read_all
from tests.samples import CLOSED, OPENED, REWARD, STEP, session_events


def _step(sid: str, i: int, prompt: list[int], resp: list[int], prefix: int = 0) -> t.StepCaptured:
    return STEP.model_copy(
        update={
            "step_id": f"{sid}/st{i}",
            "step_index": i,
            "parent_step_id": f"{sid}/st{i - 1}" if prefix else None,
            "prompt_token_ids": pack_tokens(prompt),
            "prompt_prefix_len": prefix,
            "response_token_ids": pack_tokens(resp),
            "response_logprobs": pack_logprobs([-1.0] * len(resp)),
        }
    )


def _session(sid: str, reward: float, steps: list[t.StepCaptured]) -> list[t.SessionEvent]:
    payloads: list[t.SessionPayload] = [
        OPENED,
        *steps,
        REWARD.model_copy(update={"reward": reward, "is_correct": reward >= 1.0}),
        CLOSED,
    ]
    return session_events(sid, "rollouts", payloads)


def test_replayed_sessions_train_and_publish_policy_versions(
    kafka: KafkaSettings,
    make_topics: Callable[..., list[str]],
    tiny_model: Path,
    tmp_path: Path,
) -> None:
    make_topics(partitions=2)
    good = _session(
        "good",
        1.0,
        [
            _step("good", 0, [5, 6, 7], [8, 9]),
            _step("good", 1, [10, 11, 12], [13, 14, 15], prefix=5),
        ],
    )
    good2 = _session("good2", 1.0, [_step("good2", 0, [20, 21, 22, 23], [30, 31, 32, 33])])
    bad = _session("bad", 0.0, [_step("bad", 0, [5, 6], [40, 41, 42])])
    with EventPublisher(kafka) as pub:
        for ev in [*good, *bad, *good2]:
            pub.publish_sync(SESSION_EVENTS, ev.session_id, ev)

    env = {"RLLM_BOOTSTRAP_SERVERS": None, "RLLM_TOPIC_PREFIX": None, "RLLM_LOSS": None}
    broker = ["-b", kafka.bootstrap_servers, "--topic-prefix", kafka.topic_prefix]
    out = tmp_path / "sft.jsonl"
    replayed = CliRunner(env=env).invoke(
        cli, ["replay", "--source", "topic", "--min-reward", "1", "--out", str(out), *broker]
    )
    assert replayed.exit_code == 0, replayed.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted((r["session_id"], r["step_index"]) for r in rows) == [
        ("good", 0),
        ("good", 1),
        ("good2", 0),
    ]

    trained = CliRunner(env=env).invoke(
        cli,
        [
            "train",
            "sft",
            "--loss",
            "sft",
            "--data-file",
            str(out),
            "--model",
            str(tiny_model),
            "--run-id",
            "sft-run",
            "--checkpoint-dir",
            str(tmp_path / "ckpt"),
            "--lr",
            "0.01",
            "--batch-size",
            "2",
            "--epochs",
            "3",
            *broker,
        ],
    )
    assert trained.exit_code == 0, trained.output
    assert "3 rows -> 2 sequences (9 loss tokens per epoch" in trained.output
    assert "trained 3 update(s), 27 tokens; policy version 3" in trained.output
    assert "3 PolicyUpdated published" in trained.output

    codec = make_codec(kafka)
    events = [codec.decode(m.value() or b"") for m in read_all(kafka, kafka.topic(POLICY_UPDATES))]
    assert all(isinstance(e, policy.PolicyUpdated) for e in events)
    updates = [e for e in events if isinstance(e, policy.PolicyUpdated)]
    assert [(e.event_id, e.version, e.num_tokens) for e in updates] == [
        ("sft-run/v1", 1, 9),
        ("sft-run/v2", 2, 9),
        ("sft-run/v3", 3, 9),
    ]
    assert all(e.run_id == "sft-run" and e.backend == "local" for e in updates)
    assert updates[2].checkpoint_uri.endswith("/sft-run/v000003")
    losses = [e.metrics["loss"] for e in updates]
    assert losses[2] < losses[1] < losses[0]
