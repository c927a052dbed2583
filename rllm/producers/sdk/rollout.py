"""``@rllm.rollout``: turn an agent function ``(task, config)`` into something that runs in
a gateway session, so the same code drives evaluation and training.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any, overload

from rllm.producers.sdk.client import GatewayClient
from rllm.producers.sdk.types import AgentAnswer, Attempt, RolloutConfig, RolloutOutcome
from rllm.schemas.types import RewardAssigned, SessionEvent, SessionStatus, Task

__all__ = ["BeforeClose", "Rollout", "answer_of", "rollout"]

AgentFn = Callable[[Task, RolloutConfig], Any]
BeforeClose = Callable[[RolloutOutcome], Awaitable[list[SessionEvent] | None]]
"""Sees the outcome before the session closes; the events it returns (a reward) are
published with the close, ahead of SessionClosed."""


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, AgentAnswer):
        return {"text": value.text, **value.extra}
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "model_dump"):
        return _jsonable(value.model_dump())
    return str(value)


def answer_of(value: Any) -> str | None:
    """The answer text in what an agent returned (a string, AgentAnswer, or a dict)."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, AgentAnswer):
        return value.text
    if isinstance(value, dict):
        for key in ("answer", "text", "output", "content"):
            if isinstance(value.get(key), str):
                return str(value[key])
    return str(value)


class Rollout:
    """An agent function bound to the gateway's session lifecycle.

    Calling the object calls the function unchanged; ``run`` opens a session, calls the
    function with the session's config (``attempt``), and closes the session with status
    ``ok`` or ``error`` (the exception's message), never raising the agent's error. A
    subclass that runs something else in the session (a harness) overrides ``attempt`` and
    ``session_metadata``; the lifecycle stays this one.
    """

    def __init__(self, fn: AgentFn, name: str | None = None) -> None:
        self.fn = fn
        self.name: str = name or str(getattr(fn, "__name__", "agent"))
        functools.update_wrapper(self, fn)

    def __call__(self, task: Task, config: RolloutConfig) -> Any:
        return self.fn(task, config)

    async def _call(self, task: Task, config: RolloutConfig) -> Any:
        if inspect.iscoroutinefunction(self.fn):
            return await self.fn(task, config)
        result = await asyncio.to_thread(self.fn, task, config)
        if inspect.isawaitable(result):
            return await result
        return result

    def session_metadata(self) -> dict[str, Any]:
        """What ``SessionOpened.metadata`` carries for this agent (none by default)."""
        return {}

    async def attempt(self, task: Task, config: RolloutConfig, gateway: GatewayClient) -> Attempt:
        """Run the agent once in the open session of ``config``; its failure is data (an
        ``error`` attempt), never raised."""
        try:
            result = await self._call(task, config)
        except Exception as exc:  # the agent's failure is data, not a crash of the run
            return Attempt(SessionStatus.ERROR, error=f"{type(exc).__name__}: {exc}")
        usage = result if isinstance(result, AgentAnswer) else None
        return Attempt(
            SessionStatus.OK,
            answer=answer_of(result),
            output=_jsonable(result),
            prompt_tokens=usage.prompt_tokens if usage else 0,
            completion_tokens=usage.completion_tokens if usage else 0,
        )

    async def run(
        self,
        task: Task,
        gateway: GatewayClient,
        *,
        run_id: str,
        model: str,
        sampling: dict[str, Any] | None = None,
        rollout_index: int = 0,
        group_size: int = 1,
        session_id: str | None = None,
        before_close: BeforeClose | None = None,
    ) -> RolloutOutcome:
        """Run the agent on ``task`` in a new gateway session: the one session lifecycle of
        every rollout (an agent function's and a harness's).

        ``before_close`` sees the outcome (``num_steps`` not yet known) before the session
        closes; the events it returns go with the close request, so a reward precedes
        ``SessionClosed`` on the partition and costs no request of its own. The attempt's
        own reward goes with them when ``before_close`` gave none. The session closes
        whatever failed (cancelled too). An agent that reports no token usage gets the
        gateway's totals for the session.
        """
        started = time.perf_counter()
        handle = await gateway.open_session(
            task,
            run_id=run_id,
            session_id=session_id,
            rollout_index=rollout_index,
            group_size=group_size,
            agent=self.name,
            model=model,
            metadata=self.session_metadata(),
        )
        config = RolloutConfig(
            base_url=handle.base_url,
            api_key=handle.api_key,
            model=model,
            session_id=handle.session_id,
            run_id=run_id,
            sampling=dict(sampling or {}),
            rollout_index=rollout_index,
        )
        done = Attempt(SessionStatus.ERROR, error="cancelled before the agent finished")
        events: list[SessionEvent] = []
        try:
            done = await self.attempt(task, config, gateway)
            outcome = RolloutOutcome(
                session_id=handle.session_id,
                run_id=run_id,
                task=task,
                rollout_index=rollout_index,
                status=done.status,
                answer=done.answer,
                output=done.output,
                error=done.error,
                num_steps=0,
                seconds=time.perf_counter() - started,
                prompt_tokens=done.prompt_tokens,
                completion_tokens=done.completion_tokens,
            )
            if before_close is not None:
                events += await before_close(outcome) or []
            if done.reward is not None and not any(
                isinstance(e.payload, RewardAssigned) for e in events
            ):
                events.insert(0, done.reward)  # the caller's evaluator did not score it
        finally:
            totals = await gateway.close_session_totals(
                handle, done.status, done.output, done.error, events or None
            )
        if outcome.prompt_tokens or outcome.completion_tokens:  # the agent reported its usage
            return replace(outcome, num_steps=totals.num_steps)
        return replace(
            outcome,
            num_steps=totals.num_steps,
            prompt_tokens=totals.prompt_tokens,
            completion_tokens=totals.completion_tokens,
        )


@overload
def rollout(fn: AgentFn, *, name: str | None = None) -> Rollout: ...


@overload
def rollout(fn: None = None, *, name: str | None = None) -> Callable[[AgentFn], Rollout]: ...


def rollout(
    fn: AgentFn | None = None, *, name: str | None = None
) -> Rollout | Callable[[AgentFn], Rollout]:
    """Decorate an agent function ``(task, config)``, sync or async.

    Usable bare (``@rllm.rollout``) or with a name (``@rllm.rollout(name="solver")``).
    """
    if fn is None:
        return lambda f: Rollout(f, name)
    return Rollout(fn, name)
