"""Shared command line of the examples: run a rollout on two tasks and print the outcomes.

The tasks ask for a number, and a model's answer is a sentence as often as not ("7 times 8
is 56."), so they are graded by ``last_number`` (the answer's last number against the
ground truth), not ``exact_match``, which would score that correct answer 0.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from typing import Any

from rllm.producers.evaluation import run_tasks
from rllm.producers.sdk import GatewayClient, Rollout
from rllm.schemas.types import Task

TASKS = [
    Task(
        task_id="mul-7-8",
        instruction="What is 7 times 8? Answer with the number.",
        ground_truth_json="56",
        reward_fn="last_number",
    ),
    Task(
        task_id="mul-6-9",
        instruction="What is 6 times 9? Answer with the number.",
        ground_truth_json="54",
        reward_fn="last_number",
    ),
]


def main(agent: Rollout) -> list[Any]:
    """Run ``agent`` through the gateway named on the command line."""
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--gateway-url", default=os.environ.get("RLLM_GATEWAY_URL", "http://127.0.0.1:8400")
    )
    parser.add_argument("--model", default="HuggingFaceTB/SmolLM2-135M-Instruct")
    parser.add_argument("--run-id", default=f"example-{agent.name}")
    args = parser.parse_args()

    async def go() -> list[Any]:
        client = GatewayClient(args.gateway_url)
        try:
            return await run_tasks(
                TASKS,
                agent,
                client,
                run_id=args.run_id,
                model=args.model,
                sampling={"max_tokens": 32},
            )
        finally:
            await client.aclose()

    results = asyncio.run(go())
    for outcome, reward in results:
        print(
            outcome.task.task_id,
            outcome.status.value,
            repr(outcome.answer),
            None if reward is None else reward.reward,
        )
    return results
