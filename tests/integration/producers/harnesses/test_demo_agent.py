"""The agent demo (``rllm-cli demo --agent bash``'s work) on the real broker with a tiny
budget: generated tasks run by the bash harness in real local sandboxes, a real gateway in
front of the local model server (a tiny random model), a real processors worker, the local
backend; two updates, each adopted by the server before the next batch and the "after"."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from rllm.app.demo import run_demo
from rllm.sandboxes import SandboxSettings
from rllm.schemas.codec import AvroCodec
from rllm.schemas.policy import PolicyUpdated
from rllm.schemas.topics import EPISODES, POLICY_UPDATES
from rllm.schemas.types import EpisodeAssembled
from rllm.settings import KafkaSettings
from tests.integration.app.fixtures import LoopStack, short_demo_config
from tests.integration.helpers import read_all
from tests.integration.producers.harnesses.helpers import needs_local_sandbox

RUN = "demo-agent-test"

pytestmark = needs_local_sandbox


@pytest.fixture
def tiny_model(tmp_path: Path) -> Path:
    """The tiny model with room for the bash harness's prompts (its char-level tokenizer
    makes a token of every character: 512 positions would not hold two turns)."""
    from rllm.models.tiny import tiny_model_dir

    directory = tiny_model_dir(tmp_path / "tiny-model")
    config = json.loads((directory / "config.json").read_text())
    (directory / "config.json").write_text(json.dumps({**config, "max_position_embeddings": 4096}))
    return directory


@pytest.mark.timeout(300)
def test_agent_demo_updates_twice_and_evaluates_the_adopted_version(
    kafka: KafkaSettings,
    tiny_model: Path,
    loop_stack: Callable[..., LoopStack],
    sandbox_settings: SandboxSettings,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RLLM_SANDBOX_HOME", str(sandbox_settings.home))
    monkeypatch.setenv("RLLM_SANDBOX_BACKEND", "local")
    stack = loop_stack("demo-admin-key", run_id=RUN)
    lines: list[str] = []
    try:
        report = run_demo(
            short_demo_config(
                RUN,
                stack.gateway.url,
                tiny_model,
                tmp_path,
                agent="bash",
                tasks=8,
                held_out=2,
                max_turns=2,
                batch_size=1,
            ),
            kafka,
            say=lines.append,
        )
    finally:
        stack.close()

    progress = [line.split(":")[0] for line in lines if line.startswith("batch ")]
    assert progress == ["batch 1, update 1/2", "batch 2, update 2/2"], lines
    codec = AvroCodec()
    updates = [codec.decode(m.value()) for m in read_all(kafka, kafka.topic(POLICY_UPDATES))]
    versions = [u.version for u in updates if isinstance(u, PolicyUpdated) and u.run_id == RUN]
    assert versions == [0, 1, 2], versions  # v0 announced, then one per update
    assert stack.engine.version == 2  # the server adopted the last one ...
    assert (report.before.policy_run, report.before.policy_version) == (RUN, 0)
    assert (report.after.policy_run, report.after.policy_version) == (RUN, 2)  # ... and served it
    episodes = [codec.decode(m.value()) for m in read_all(kafka, kafka.topic(EPISODES))]
    ours = [e for e in episodes if isinstance(e, EpisodeAssembled) and e.run_id == RUN]
    assert len(ours) == 2 and not {e.task.task_id for e in ours} & set(report.held_out_ids)
    trajectories = [t for e in ours for t in e.trajectories]
    assert len(trajectories) == 4  # 2 tasks x group 2, one trajectory per rollout ...
    assert {len(t.steps) for t in trajectories} == {2}  # ... of both model calls
    assert {t.reward for t in trajectories} == {0.0}  # the verifier's, never missing
    assert (report.before.tasks, report.after.tasks) == (2, 2)
    assert re.fullmatch(
        r"held-out reward: before 0\.00 -> after 0\.00 \(2 held-out shell-basics with harness "
        r"bash tasks; policy 0 \(run demo-agent-test\) -> 2 \(run demo-agent-test\)\)",
        report.line(),
    ), report.line()
    assert report.plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
