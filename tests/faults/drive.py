"""The input of every row: groups of rollouts through the gateway with the SDK, each a few
chat steps and a reward, in waves of concurrent sessions; everything deterministic (session
ids, prompts, rewards), so every run of the same :class:`Load` yields the same episodes."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from rllm.producers.sdk import rollout
from rllm.producers.sdk.client import GatewayClient
from rllm.producers.sdk.types import RolloutConfig, RolloutOutcome
from rllm.schemas.types import RewardAssigned, SessionEvent, SessionStatus, Task

__all__ = [
    "RUN_ID",
    "Load",
    "Progress",
    "drive",
    "episode_id",
    "reward_of",
    "session_id",
    "task_of",
    "task_of_session",
]

RUN_ID = "faults"
"""Run id of every session."""


@dataclass(frozen=True)
class Load:
    """What the driver sends."""

    tasks: int
    """Tasks; each is one group and one episode."""
    group: int = 4
    """Rollouts per task."""
    steps: int = 3
    """Chat calls per rollout."""
    wave: int = 16
    """Sessions in flight at once (a wave's sessions start together; the next wave starts
    when it is done)."""
    think_s: float = 0.0
    """The agent's pause before each call (paces the stream so faults land mid-stream)."""

    @property
    def sessions(self) -> int:
        """Rollouts in all."""
        return self.tasks * self.group

    @property
    def total_steps(self) -> int:
        """Chat calls in all."""
        return self.sessions * self.steps


def session_id(task: int, rollout_index: int) -> str:
    """The session of rollout ``rollout_index`` of task ``task``."""
    return f"{RUN_ID}/t{task:04d}/r{rollout_index}"


def task_of_session(sid: str) -> int:
    """The task number in a ``session_id``."""
    return int(sid.split("/")[1].removeprefix("t"))


def task_of(task: int) -> Task:
    """Task number ``task`` (no reward function: the driver sends the reward)."""
    return Task(task_id=f"faults/t{task:04d}", instruction=f"Task {task}: say ok.")


def episode_id(task: int) -> str:
    """The episode the processors publish for task ``task``."""
    return f"ep:{RUN_ID}/{task_of(task).task_id}"


def reward_of(task: int, rollout_index: int) -> float:
    """1.0 for a third of the rollouts (never the whole group)."""
    return 1.0 if (task + rollout_index) % 3 == 0 else 0.0


@dataclass
class Progress:
    """What the driver has done so far; other threads wait on it."""

    steps: list[tuple[str, int]] = field(default_factory=list)
    """``(session_id, step_index)`` of every call the gateway answered 200."""
    failures: list[str] = field(default_factory=list)
    """What went wrong (a refused call, a session that closed with an error)."""
    done: bool = False
    _cond: threading.Condition = field(default_factory=threading.Condition)

    def add_step(self, sid: str, index: int) -> None:
        """Record an answered call."""
        with self._cond:
            self.steps.append((sid, index))
            self._cond.notify_all()

    def finish(self) -> None:
        """Mark the drive as over (whatever happened)."""
        with self._cond:
            self.done = True
            self._cond.notify_all()

    def wait_steps(self, count: int, timeout_s: float = 600.0) -> bool:
        """Wait until ``count`` calls were answered or the drive is over; whether the
        count was reached."""
        with self._cond:
            self._cond.wait_for(lambda: len(self.steps) >= count or self.done, timeout_s)
            return len(self.steps) >= count


async def _session(
    load: Load,
    task: int,
    index: int,
    gateway: GatewayClient,
    http: httpx.AsyncClient,
    progress: Progress,
) -> None:
    sid = session_id(task, index)

    async def agent(the_task: Task, config: RolloutConfig) -> str:
        messages: list[dict[str, Any]] = []
        answer = ""
        for k in range(load.steps):
            await asyncio.sleep(load.think_s)
            messages.append({"role": "user", "content": f"{the_task.instruction} step {k}"})
            resp = await http.post(
                f"{config.base_url}/chat/completions",
                json={"model": config.model, "messages": messages, "max_tokens": 16},
                headers={"Authorization": f"Bearer {config.api_key}"},
            )
            if resp.status_code != 200:
                raise RuntimeError(f"step {k}: {resp.status_code} {resp.text[:200]}")
            progress.add_step(sid, k)
            answer = resp.json()["choices"][0]["message"]["content"] or ""
            messages.append({"role": "assistant", "content": answer})
        return answer

    async def reward(outcome: RolloutOutcome) -> list[SessionEvent]:
        value = reward_of(task, index)
        payload = RewardAssigned(reward=value, is_correct=value == 1.0, evaluator="faults")
        return [
            SessionEvent(
                event_id=f"{sid}/reward",
                session_id=sid,
                run_id=RUN_ID,
                producer="faults",
                payload=payload,
            )
        ]

    try:
        outcome = await rollout(agent, name="faults").run(
            task_of(task),
            gateway,
            run_id=RUN_ID,
            model="fake-model",
            rollout_index=index,
            group_size=load.group,
            session_id=sid,
            before_close=reward,
        )
    except Exception as exc:  # a close the gateway refused: the row reports it
        progress.failures.append(f"{sid}: {type(exc).__name__}: {exc}")
        return
    if outcome.status is not SessionStatus.OK:
        progress.failures.append(f"{sid}: {outcome.error}")


async def drive(
    load: Load,
    gateway_url: str,
    admin_key: str,
    progress: Progress,
    between: Callable[[int], None] | None = None,
) -> float:
    """Run every session, a wave at a time; ``between(w)`` runs (in a thread) after wave
    ``w`` and before the next. Returns the seconds it took."""
    started = time.monotonic()
    gateway = GatewayClient(gateway_url, admin_key=admin_key, timeout_s=120)
    limits = httpx.Limits(max_connections=load.wave * 2, keepalive_expiry=2.0)
    order = [(t, r) for t in range(load.tasks) for r in range(load.group)]
    try:
        async with httpx.AsyncClient(timeout=120, limits=limits) as http:
            waves = [order[i : i + load.wave] for i in range(0, len(order), load.wave)]
            for w, wave in enumerate(waves):
                await asyncio.gather(
                    *(_session(load, t, r, gateway, http, progress) for t, r in wave)
                )
                if between is not None and w + 1 < len(waves):
                    await asyncio.to_thread(between, w)
    finally:
        await gateway.aclose()
        progress.finish()
    return time.monotonic() - started
