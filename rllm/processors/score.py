"""Scoring: the trajectory's answer, the task's reward function, bounded and timed out.

Precedence: a RewardAssigned event for the session wins (assembly already copied it);
otherwise ``Task.reward_fn`` (looked up with ``rllm.benchmarks.get_reward_fn``) is applied
to the answer. A reward function that raises, times out or cannot be found leaves
``reward`` empty and says why in ``reward_error``; the worker keeps going.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from rllm.benchmarks import get_reward_fn
from rllm.benchmarks.types import RewardFn, RewardResult
from rllm.schemas.types import ApiKind, StepCaptured, Task, TrajectoryAssembled

__all__ = ["RewardRunner", "extract_answer", "response_text"]


def _text_parts(content: Any) -> str:
    """Text of a message content: a string, or a list of parts with ``text``."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(p.get("text", ""))
            for p in content
            if isinstance(p, dict) and p.get("type", "text") in ("text", "output_text")
        )
    return ""


def response_text(step: StepCaptured) -> str | None:
    """The assistant text of one step's response, by API shape (None if none)."""
    return _response_text(step.api, step.response_json)


def _response_text(api: str, response_json: str) -> str | None:
    try:
        body = json.loads(response_json)
    except ValueError:
        return None
    if not isinstance(body, dict):
        return None
    if api == ApiKind.CHAT:
        choices = body.get("choices") or []
        if choices and isinstance(choices[0], dict):
            return _text_parts((choices[0].get("message") or {}).get("content"))
    elif api == ApiKind.COMPLETIONS:
        choices = body.get("choices") or []
        if choices and isinstance(choices[0], dict):
            return str(choices[0].get("text", ""))
    elif api == ApiKind.RESPONSES:
        if isinstance(body.get("output_text"), str):
            return str(body["output_text"])
        texts = [
            _text_parts(item.get("content"))
            for item in body.get("output") or []
            if isinstance(item, dict) and item.get("type") == "message"
        ]
        return "".join(texts) if texts else None
    elif api == ApiKind.ANTHROPIC_MESSAGES:
        return _text_parts(body.get("content"))
    elif api == ApiKind.GENERATE:
        text = body.get("text")
        return text if isinstance(text, str) else None
    return None


def extract_answer(traj: TrajectoryAssembled) -> str | None:
    """The answer a reward function sees.

    ``output_json`` when it holds a JSON string; else the assistant text of the last
    step that has one (failed steps skipped); None when there is neither.
    """
    return _answer(
        traj.output_json, [(s.api, s.response_json) for s in traj.steps if s.error is None]
    )


def _answer(output_json: str | None, steps: list[tuple[str, str]]) -> str | None:
    if output_json is not None:
        try:
            value = json.loads(output_json)
        except ValueError:
            value = None
        if isinstance(value, str):
            return value
    for api, response_json in reversed(steps):
        text = _response_text(api, response_json)
        if text is not None:
            return text
    return None


def _result_fields(name: str, result: RewardResult) -> dict[str, Any]:
    return {
        "reward": float(result.reward),
        "is_correct": result.is_correct,
        "reward_signals": {k: float(v) for k, v in result.signals.items()},
        "evaluator": name,
        "reward_error": None,
    }


class RewardRunner:
    """Runs reward functions in a thread pool: at most ``concurrency`` at once, each
    bounded by ``timeout_s``. A timed-out function's thread finishes in the background.
    """

    def __init__(self, concurrency: int, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self._pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="rllm-reward")
        self._slots = asyncio.Semaphore(concurrency)

    async def score_dict(self, traj: dict[str, Any]) -> None:
        """Score an Avro-shaped TrajectoryAssembled dict in place, unless it already has a
        reward or an error, or names no function."""
        name = traj["task"]["reward_fn"]
        if traj["reward"] is not None or traj["reward_error"] is not None or not name:
            return
        steps = [(s["api"], s["response_json"]) for s in traj["steps"] if s["error"] is None]
        update = await self._updates(
            lambda: Task.model_validate(traj["task"]),
            name,
            lambda: _answer(traj["output_json"], steps),
        )
        if "reward_signals" in update:
            update["reward_signals"] = dict(update["reward_signals"])
        traj.update(update)

    async def _updates(
        self, task_of: Callable[[], Task], name: str, answer_of: Callable[[], str | None]
    ) -> dict[str, Any]:
        """The fields a scoring changes: the result, or ``reward_error`` saying why not."""
        try:
            fn: RewardFn = get_reward_fn(name)
        except KeyError as exc:
            return {"reward_error": str(exc.args[0]), "evaluator": name}
        answer = answer_of()
        if answer is None:
            return {
                "reward_error": "no answer: output_json is not a JSON string and no step "
                "has assistant text",
                "evaluator": name,
            }
        task = task_of()
        loop = asyncio.get_running_loop()
        async with self._slots:
            try:
                result = await asyncio.wait_for(
                    loop.run_in_executor(self._pool, fn, task, answer), self.timeout_s
                )
            except TimeoutError:
                timed_out = f"reward function {name!r} timed out after {self.timeout_s:g} s"
                return {"reward_error": timed_out, "evaluator": name}
            except Exception as exc:
                return {
                    "reward_error": f"reward function {name!r} raised {type(exc).__name__}: {exc}",
                    "evaluator": name,
                }
        return _result_fields(name, result)

    def close(self) -> None:
        """Stop accepting work; running functions are not waited for."""
        self._pool.shutdown(wait=False, cancel_futures=True)
