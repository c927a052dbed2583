"""``llm_judge``: a judge model (any OpenAI-compatible endpoint, e.g. the gateway) grades
a free-form answer against the reference; ``harness``: marks harness-scored tasks."""

from __future__ import annotations

import re

import httpx
from pydantic import SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from rllm.benchmarks.errors import GradingError
from rllm.benchmarks.graders.common import gold_list
from rllm.benchmarks.rewards import register_reward_fn
from rllm.benchmarks.types import RewardResult
from rllm.errors import ConfigError
from rllm.schemas.types import Task

__all__ = ["JudgeSettings", "harness", "llm_judge"]

JUDGE_PROMPT = """You are grading an answer against a reference answer.

Question: {question}

Reference answer: {reference}

Response: {response}

Does the response's final answer mean the same as the reference (ignore style; numbers may
differ only by rounding)? Reply with exactly one word: CORRECT or INCORRECT."""


class JudgeSettings(BaseSettings):
    """The judge model (env ``RLLM_JUDGE_*``)."""

    model_config = SettingsConfigDict(env_prefix="RLLM_JUDGE_", frozen=True)

    base_url: str = ""
    """OpenAI-compatible base URL ending in ``/v1`` (a gateway session URL works)."""
    model: str = ""
    """Judge model name."""
    api_key: SecretStr = SecretStr("")
    """Bearer key, if the endpoint needs one."""
    timeout_s: float = 60.0
    """Per-request timeout."""


def _verdict(text: str) -> bool | None:
    words = re.findall(r"[A-Za-z]+", text.upper())
    if "INCORRECT" in words:
        return False
    if "CORRECT" in words:
        return True
    return None


@register_reward_fn("llm_judge")
def llm_judge(
    task: Task,
    answer: str,
    settings: JudgeSettings | None = None,
    client: httpx.Client | None = None,
) -> RewardResult:
    """1.0 when the judge says CORRECT.

    Raises:
        ConfigError: no judge is configured (``RLLM_JUDGE_BASE_URL``, ``RLLM_JUDGE_MODEL``).
        httpx.HTTPError: the judge endpoint failed (callers record it as a scoring error).
        GradingError: the judge's reply holds no verdict.
    """
    settings = settings or JudgeSettings()
    if not settings.base_url or not settings.model:
        raise ConfigError(
            "llm_judge needs a judge model: set RLLM_JUDGE_BASE_URL "
            "(OpenAI-compatible, .../v1) and RLLM_JUDGE_MODEL"
        )
    prompt = JUDGE_PROMPT.format(
        question=task.instruction, reference=" | ".join(gold_list(task)), response=answer
    )
    body = {
        "model": settings.model,
        "temperature": 0.0,
        "max_tokens": 16,
        "messages": [{"role": "user", "content": prompt}],
    }
    headers = (
        {"Authorization": f"Bearer {settings.api_key.get_secret_value()}"}
        if (settings.api_key.get_secret_value())
        else {}
    )
    own = client is None
    http = client or httpx.Client(timeout=settings.timeout_s)
    try:
        response = http.post(
            settings.base_url.rstrip("/") + "/chat/completions", json=body, headers=headers
        )
        response.raise_for_status()
        reply = str(response.json()["choices"][0]["message"]["content"] or "")
    finally:
        if own:
            http.close()
    verdict = _verdict(reply)
    if verdict is None:
        raise GradingError(f"the judge's reply has no CORRECT/INCORRECT verdict: {reply[:200]!r}")
    return RewardResult(
        1.0 if verdict else 0.0, verdict, metadata={"judge": settings.model, "verdict": reply[:200]}
    )


@register_reward_fn("harness")
def harness(task: Task, answer: str) -> RewardResult:
    """Harness benchmarks are scored by their harness (RewardAssigned events), not here."""
    raise GradingError(
        f"task {task.task_id!r} of {task.benchmark!r} is scored by its harness "
        "(RewardAssigned events), not by a reward function"
    )
