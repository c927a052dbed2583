"""One session lifecycle for every rollout: an agent function's and a harness's both open,
close and take the gateway's token totals in ``Rollout.run`` (issue 35: harness evals
printed ``tokens in/out 0/0``)."""

from __future__ import annotations

from typing import Any

from rllm.benchmarks.harbor import load_task, to_task
from rllm.benchmarks.harbor.verifier import VerifierResult
from rllm.producers.evaluation import run_tasks, summarize
from rllm.producers.harnesses import HarnessRollout, get_harness, verifier_evaluator
from rllm.producers.harnesses.types import CloseReason, HarnessRun
from rllm.producers.sdk import AgentAnswer, Rollout, rollout
from rllm.producers.sdk.client import GatewayClient
from rllm.schemas.convert import from_json_dict
from rllm.schemas.types import RewardAssigned, SessionEvent, SessionStatus, Task
from tests.paths import HARBOR_TASKS as TASKS


class FakeGateway(GatewayClient):
    """The real client over an in-memory gateway (its ``_open_many`` and ``_close_many``);
    every close reports 3 steps, 120 in, 45 out."""

    def __init__(self) -> None:
        super().__init__("http://gateway.invalid", admin_key="admin")
        self.opened: list[dict[str, Any]] = []
        self.closed: list[tuple[str, SessionStatus, Any, str | None, list[SessionEvent]]] = []

    async def _open_many(self, bodies: list[dict[str, Any]]) -> list[dict[str, Any]]:
        answers = []
        for body in bodies:
            self.opened.append({**body, "task": body["task"]["task_id"]})
            sid = f"s{len(self.opened)}"
            answers.append(
                {"session_id": sid, "base_url": f"{self.url}/s/{sid}/v1", "api_key": "key"}
            )
        return answers

    async def _close_many(self, bodies: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for b in bodies:
            events = [from_json_dict(SessionEvent.avro_name, e) for e in b.get("events", [])]
            self.closed.append(
                (b["session_id"], SessionStatus(b["status"]), b["output"], b["error"], events)
            )
        return [{"num_steps": 3, "prompt_tokens": 120, "completion_tokens": 45} for _ in bodies]


def _harness_rollout(reward: float) -> HarnessRollout:
    rollout_ = HarnessRollout(get_harness("bash"), backend=None)  # type: ignore[arg-type]  # never reached

    async def run(task: Any, **kw: Any) -> HarnessRun:
        verifier = VerifierResult(
            reward=reward,
            values={"reward": reward},
            ok=True,
            error=None,
            stdout_tail="",
            timed_out=False,
            duration_s=0.5,
        )
        return HarnessRun("bash", task.name, CloseReason.OK, agent_exit_code=0, verifier=verifier)

    rollout_.runner.run = run  # type: ignore[method-assign]  # the sandbox part is not this test's
    return rollout_


def test_the_harness_uses_the_one_lifecycle() -> None:
    assert "run" not in vars(HarnessRollout), "HarnessRollout must not write its own lifecycle"
    assert HarnessRollout.run is Rollout.run


async def test_a_harness_rollout_carries_the_gateways_token_totals() -> None:
    gateway = FakeGateway()
    task = to_task(load_task(TASKS / "hello-file"), "b")
    results = await run_tasks(
        [task],
        _harness_rollout(1.0),
        gateway,  # type: ignore[arg-type]  # a stand-in with the client's session calls
        run_id="r",
        model="m",
        attempts=2,
        evaluator=verifier_evaluator,
    )
    outcomes = [o for o, _ in results]
    assert [(o.num_steps, o.prompt_tokens, o.completion_tokens) for o in outcomes] == [
        (3, 120, 45),
        (3, 120, 45),
    ]
    summary = summarize("r", "b", "m", results, 2, 1.0)
    assert (summary.prompt_tokens, summary.completion_tokens) == (240, 90)
    assert "tokens in/out 240/90" in str(summary)
    assert [o["metadata"]["harness"] for o in gateway.opened] == ["bash", "bash"]
    # the evaluator's reward is published once with the close, not the rollout's own too
    for _, status, output, error, events in gateway.closed:
        assert (status, output["reward"], error) == (SessionStatus.OK, 1.0, None)
        assert [type(e.payload) for e in events] == [RewardAssigned]


async def test_without_an_evaluator_the_harness_publishes_the_verifiers_reward() -> None:
    gateway = FakeGateway()
    task = to_task(load_task(TASKS / "hello-file"), "b")
    outcome = await _harness_rollout(0.0).run(task, gateway, run_id="r", model="m")  # type: ignore[arg-type]  # a stand-in with the client's session calls
    assert (outcome.status, outcome.num_steps, outcome.prompt_tokens) == (SessionStatus.OK, 3, 120)
    ((sid, _, _, _, events),) = gateway.closed
    assert [(e.session_id, e.payload.reward) for e in events] == [(sid, 0.0)]  # type: ignore[union-attr]  # only RewardAssigned events are collected


async def test_an_agent_that_reports_its_usage_keeps_it() -> None:
    @rollout
    def agent(task: Task, config: Any) -> AgentAnswer:
        return AgentAnswer("42", prompt_tokens=7, completion_tokens=2)

    @rollout
    def silent(task: Task, config: Any) -> str:
        return "42"

    gateway = FakeGateway()
    reported = await agent.run(Task(task_id="t"), gateway, run_id="r", model="m")  # type: ignore[arg-type]  # a stand-in with the client's session calls
    counted = await silent.run(Task(task_id="t"), gateway, run_id="r", model="m")  # type: ignore[arg-type]  # a stand-in with the client's session calls
    assert (reported.num_steps, reported.prompt_tokens, reported.completion_tokens) == (3, 7, 2)
    assert (counted.num_steps, counted.prompt_tokens, counted.completion_tokens) == (3, 120, 45)
    assert [o["metadata"] for o in gateway.opened] == [{}, {}]


async def test_a_failing_agent_closes_its_session_with_the_error() -> None:
    @rollout
    def broken(task: Task, config: Any) -> str:
        raise RuntimeError("no answer")

    gateway = FakeGateway()
    outcome = await broken.run(Task(task_id="t"), gateway, run_id="r", model="m")  # type: ignore[arg-type]  # a stand-in with the client's session calls
    assert (outcome.status, outcome.error) == (SessionStatus.ERROR, "RuntimeError: no answer")
    assert [(c[1], c[3]) for c in gateway.closed] == [
        (SessionStatus.ERROR, "RuntimeError: no answer")
    ]
