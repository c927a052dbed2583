"""The examples (plain openai, LangGraph, OpenAI Agents SDK) through a real gateway."""

from __future__ import annotations

import importlib
from collections import defaultdict

import pytest

from rllm.producers.evaluation import run_tasks
from rllm.producers.sdk import GatewayClient
from rllm.schemas.codec import AvroCodec
from rllm.schemas.topics import SESSION_EVENTS
from rllm.schemas.types import SessionStatus
from rllm.settings import KafkaSettings
from tests.fakes.upstream import ThreadedServer
from tests.integration.helpers import read_all


@pytest.mark.parametrize(
    ("module", "calls"),
    [
        ("examples.openai_agent", 2),
        ("examples.langgraph_agent", 2),
        ("examples.openai_agents_sdk", 1),
    ],
)
async def test_example_agent_runs_in_gateway_sessions(
    module: str, calls: int, gateway: ThreadedServer, kafka: KafkaSettings
) -> None:
    agent = importlib.import_module(module).agent
    tasks = importlib.import_module("examples._run").TASKS
    client = GatewayClient(gateway.url)
    try:
        results = await run_tasks(
            tasks, agent, client, run_id=f"run-{agent.name}", model="m", sampling={"max_tokens": 16}
        )
    finally:
        await client.aclose()
    assert [o.status for o, _ in results] == [SessionStatus.OK, SessionStatus.OK], [
        o.error for o, _ in results
    ]
    assert all(o.answer and o.answer.startswith("ok:") for o, _ in results)
    assert [o.num_steps for o, _ in results] == [calls, calls]

    codec = AvroCodec()
    steps = defaultdict(list)
    for msg in read_all(kafka, kafka.topic(SESSION_EVENTS)):
        ev = codec.decode(msg.value())
        if type(ev.payload).__name__ == "StepCaptured":
            steps[ev.session_id].append(ev.payload)
    assert len(steps) == 2
    for session_steps in steps.values():
        assert [s.step_index for s in session_steps] == list(range(calls))
        assert all(len(s.response_ids) > 0 for s in session_steps)
        if calls == 2:  # the second turn extends the first: only the suffix is carried
            assert session_steps[1].prompt_prefix_len > 0
            assert session_steps[1].parent_step_id == session_steps[0].step_id
