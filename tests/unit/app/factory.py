"""Build the app's ``UpdateRecord`` (one batch of a training run) for report tests."""

from __future__ import annotations

from typing import Any

from rllm.app.report import UpdateRecord

__all__ = ["update_record"]


def update_record(version: int = 0, rollout_version: int = 0, **fields: Any) -> UpdateRecord:
    """One batch's record: ``version`` after its update, ``rollout_version`` of its rollouts.

    The other required figures default to a batch of one rollout with no reward and no
    time; ``fields`` sets any field of the record.
    """
    figures: dict[str, Any] = {"reward_mean": 0.0, "accuracy": 0.0, "rollouts": 1, "seconds": 0.0}
    return UpdateRecord(version=version, rollout_version=rollout_version, **(figures | fields))
