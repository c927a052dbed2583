"""What the tests that train through the loop stack share (the loop's and the viewer's):
an agent's call through its session, the evaluator that keeps every group, and the
``AgentTrainer`` config of a short run on the tiny model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

import rllm
from rllm.producers.sdk import RolloutConfig, RolloutOutcome
from rllm.schemas.types import Task

__all__ = ["by_index", "post", "short_run_config"]


async def post(config: RolloutConfig, path: str, body: dict[str, Any]) -> Any:
    """POST ``body`` (with the rollout's sampling) to the session's ``path``; its JSON."""
    async with httpx.AsyncClient(timeout=60) as http:
        resp = await http.post(
            f"{config.base_url}{path}",
            json={"model": config.model, **body, **config.sampling},
            headers={"Authorization": f"Bearer {config.api_key}"},
        )
    resp.raise_for_status()
    return resp.json()


@rllm.evaluator
def by_index(task: Task, outcome: RolloutOutcome) -> tuple[float, bool]:
    """A reward that always differs inside a group of two, so no group is uniform."""
    return float(outcome.rollout_index), outcome.rollout_index == 1


def short_run_config(
    run_id: str, gateway_url: str, admin_key: str, tiny_model: Path, tmp_path: Path, tokens: int
) -> dict[str, Any]:
    """Run ``run_id`` on the tiny model through the stack's gateway: groups and batches of
    two, three epochs, ``tokens`` sampled per call, checkpoints under ``tmp_path/ckpt``."""
    return {
        "run_id": run_id,
        "gateway_url": gateway_url,
        "admin_key": admin_key,
        "model": "tiny",
        "group_size": 2,
        "batch_size": 2,
        "epochs": 3,
        "update_timeout_s": 120,
        "sampling": {"max_tokens": tokens, "temperature": 1.0},
        "trainer": {
            "model": str(tiny_model),
            "lr": 0.05,
            "checkpoint_dir": str(tmp_path / "ckpt"),
        },
    }
