"""The faust agents under ``agent.test_context()``: no broker, outputs captured by a sink."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from rllm.processors.app import Processors
from rllm.processors.assemble import assemble_trajectory
from rllm.processors.settings import ProcessorSettings
from rllm.processors.types import Output
from rllm.schemas.codec import AvroCodec
from rllm.schemas.delta import restore_steps
from rllm.schemas.types import DeadLetter, EpisodeAssembled, TrajectoryAssembled
from rllm.settings import KafkaSettings
from tests.unit.processors.factory import make_session, task

CODEC = AvroCodec()


class Captured:
    """The sink: every published (output, key, decoded record)."""

    def __init__(self) -> None:
        self.items: list[tuple[Output, bytes, object]] = []

    async def __call__(self, output: Output, key: bytes, value: bytes) -> None:
        self.items.append((output, key, CODEC.decode(value)))

    def of(self, output: Output) -> list[object]:
        return [r for o, _, r in self.items if o == output]


@pytest.fixture
async def procs() -> AsyncIterator[tuple[Processors, Captured]]:
    sink = Captured()
    p = Processors(
        ProcessorSettings(reward_wait_s=0),
        KafkaSettings(topic_prefix="unit."),
        app_id="unit-procs",
        partitions=(1, 1),
        sink=sink,
    )
    p.app.conf.store = "memory://"
    yield p, sink
    p.runner.close()
    # the consumer object test_context builds owns a never-started thread loop: close it
    consumer = p.app._consumer
    loop = getattr(getattr(consumer, "_thread", None), "thread_loop", None)
    if loop is not None and not loop.is_closed():
        loop.close()


async def test_assemble_score_group_through_agents(procs: tuple[Processors, Captured]) -> None:
    p, sink = procs
    the_task = task("t-7", answer="56")
    events = make_session(
        "s-a", the_task=the_task, rollout_index=0, group_size=2, answer="56"
    ) + make_session("s-b", the_task=the_task, rollout_index=1, group_size=2, answer="57")
    async with p.assemble.test_context() as agent:
        for ev in events:
            await agent.put(CODEC.encode(ev), key=ev.session_id.encode())
        await agent.put(CODEC.encode(events[1]), key=b"s-a")  # duplicate: ignored
    scoring = sink.of(Output.SCORING)
    assert [t.session_id for t in scoring] == ["s-a", "s-b"]  # type: ignore[attr-defined]  # the sink holds decoded records
    # the internal hop keeps prompts delta-encoded: 4x less to move for long sessions
    assert [s.prompt_prefix_len for s in scoring[0].steps] == [0, 7, 13]  # type: ignore[attr-defined]  # the sink holds decoded records
    async with p.score.test_context() as agent:
        for traj in scoring:
            await agent.put(CODEC.encode(traj), key=b"k")  # type: ignore[arg-type]  # the sink holds decoded records
        for _ in range(200):  # concurrent actors: wait until both were scored
            if len(sink.of(Output.TRAJECTORIES)) == 2:
                break
            await asyncio.sleep(0.01)
    trajs = sink.of(Output.TRAJECTORIES)
    assert all(isinstance(t, TrajectoryAssembled) for t in trajs)
    rewards = {t.session_id: t.reward for t in trajs}  # type: ignore[attr-defined]  # the sink holds decoded records
    full = {t.session_id: t for t in trajs}["s-a"]  # type: ignore[attr-defined]  # the sink holds decoded records
    assert [s.prompt_prefix_len for s in full.steps] == [0, 7, 13]  # carried once
    assert restore_steps(full.steps)[0] == list(assemble_trajectory(events[:5]).steps)
    assert rewards == {"s-a": 1.0, "s-b": 0.0}
    async with p.group.test_context() as agent:
        for traj in trajs:
            await agent.put(CODEC.encode(traj), key=b"run-1/t-7")  # type: ignore[arg-type]  # the sink holds decoded records
    (episode,) = sink.of(Output.EPISODES)
    assert isinstance(episode, EpisodeAssembled)
    assert episode.event_id == "ep:run-1/t-7"
    assert episode.rewards == (1.0, 0.0)
    # [1, 0]: (r - 0.5) / (unbiased std sqrt(0.5) + eps), as verl
    assert episode.advantages == pytest.approx((0.5**0.5, -(0.5**0.5)), abs=1e-5)
    assert not episode.is_partial and not episode.uniform_reward
    assert {t.session_id: t for t in episode.trajectories} == {t.session_id: t for t in trajs}  # type: ignore[attr-defined]  # as on rllm.trajectories


async def test_poison_goes_to_dead_letters_and_agent_keeps_going(
    procs: tuple[Processors, Captured],
) -> None:
    p, sink = procs
    events = make_session("s-ok", num_steps=1)
    async with p.assemble.test_context() as agent:
        await agent.put(b"\x00garbage", key=b"x")
        await agent.put(CODEC.encode(events[0]), key=b"wrong-key")
        for ev in events:
            await agent.put(CODEC.encode(ev), key=b"s-ok")
    letters = sink.of(Output.DEAD_LETTERS)
    assert len(letters) == 2
    first, second = letters
    assert isinstance(first, DeadLetter) and isinstance(second, DeadLetter)
    assert first.value == b"\x00garbage" and first.error_type == "UnknownSchemaError"
    assert "wrong-key" in second.reason and "s-ok" in second.reason
    assert [t.session_id for t in sink.of(Output.SCORING)] == ["s-ok"]  # type: ignore[attr-defined]  # the sink holds decoded records
