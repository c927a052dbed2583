"""A directory of Harbor task folders as a dataset: the tasks that load, the ones that do
not (each with its reason: one bad task never stops the others), and the project's
``Task`` rows, whose metadata carries what a harness needs to find the task again."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rllm.benchmarks.harbor.task import HarborTask, HarborTaskError, load_task
from rllm.schemas.types import Task

__all__ = [
    "HARBOR_KEY",
    "HarborDataset",
    "from_task",
    "load_dataset",
    "task_dirs",
    "to_task",
]

HARBOR_KEY = "harbor"
"""The key of a ``Task``'s metadata that holds its Harbor settings."""


def task_dirs(root: Path) -> list[Path]:
    """The task folders under ``root``: ``root`` itself when it holds a ``task.toml``,
    else its subfolders, sorted, hidden ones (``.git``) skipped.

    Raises:
        HarborTaskError: ``root`` is not a directory.
    """
    root = Path(root)
    if not root.is_dir():
        raise HarborTaskError(f"Harbor tasks directory {root} does not exist or is not a folder")
    if (root / "task.toml").is_file():
        return [root]
    return sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))


@dataclass(frozen=True)
class HarborDataset:
    """The task folders of one directory."""

    root: Path
    """The directory."""
    name: str
    """Dataset name (the directory's, unless given): each row's ``benchmark``."""
    tasks: tuple[HarborTask, ...]
    """Tasks that loaded, in folder order."""
    errors: tuple[HarborTaskError, ...] = ()
    """One error per folder that did not load, naming it and its problems."""

    def rows(self) -> list[Task]:
        """The project's ``Task`` record of every loaded task."""
        return [to_task(task, self.name) for task in self.tasks]

    def get(self, name: str) -> HarborTask:
        """The task called ``name``.

        Raises:
            HarborTaskError: no loaded task has that name (the loaded ones are listed).
        """
        for task in self.tasks:
            if task.name == name:
                return task
        known = ", ".join(t.name for t in self.tasks) or "none"
        raise HarborTaskError(f"no Harbor task {name!r} in {self.root} (tasks: {known})")


def load_dataset(
    root: Path,
    *,
    name: str | None = None,
    agent_timeout_multiplier: float = 1.0,
    verifier_timeout_multiplier: float = 1.0,
) -> HarborDataset:
    """Load every task folder under ``root``; those with problems go to ``errors``.

    Raises:
        HarborTaskError: ``root`` is not a directory, or holds no task folder at all.
    """
    root = Path(root).resolve()
    folders = task_dirs(root)
    if not folders:
        raise HarborTaskError(
            f"no Harbor task folders in {root}: each task is a folder with task.toml, "
            f"instruction.md, environment/Dockerfile and tests/test.sh"
        )
    tasks: list[HarborTask] = []
    errors: list[HarborTaskError] = []
    for folder in folders:
        try:
            tasks.append(
                load_task(
                    folder,
                    agent_timeout_multiplier=agent_timeout_multiplier,
                    verifier_timeout_multiplier=verifier_timeout_multiplier,
                )
            )
        except HarborTaskError as exc:
            errors.append(exc)
    return HarborDataset(root, name or root.name, tuple(tasks), tuple(errors))


def to_task(task: HarborTask, benchmark: str | None = None) -> Task:
    """The ``Task`` record of ``task``: its instruction, and under ``metadata["harbor"]``
    its folder, workdir, timeouts, network and resources; its ``[metadata]`` under
    ``metadata["task_metadata"]``. The reward comes from its verifier (no ``reward_fn``)."""
    config = task.config
    harbor: dict[str, Any] = {
        "path": str(task.path),
        "name": task.name,
        "workdir": task.workdir,
        "agent_timeout_s": task.agent_timeout_s,
        "verifier_timeout_s": task.verifier_timeout_s,
        "build_timeout_s": config.build_timeout_s,
        "network_mode": config.network_mode.value if config.network_mode else None,
        "docker_image": config.docker_image,
        "cpus": config.cpus,
        "memory_mb": config.memory_mb,
        "storage_mb": config.storage_mb,
    }
    metadata = {
        "benchmark": benchmark or task.path.parent.name,
        HARBOR_KEY: harbor,
        "task_metadata": dict(task.metadata),
    }
    return Task(
        task_id=task.name,
        instruction=task.instruction,
        benchmark=benchmark or task.path.parent.name,
        metadata_json=json.dumps(metadata, sort_keys=True, default=str),
    )


def from_task(record: Task) -> HarborTask:
    """The ``HarborTask`` a ``Task`` record was made from (read again from its folder,
    with the record's timeouts).

    Raises:
        HarborTaskError: the record has no Harbor metadata, or its folder no longer loads.
    """
    harbor = record.metadata.get(HARBOR_KEY)
    if not isinstance(harbor, dict) or not isinstance(harbor.get("path"), str):
        raise HarborTaskError(
            f"task {record.task_id!r} is not a Harbor task: its metadata has no "
            f"{HARBOR_KEY!r} entry with the task folder's path"
        )
    task = load_task(Path(harbor["path"]))
    return dataclasses.replace(
        task,
        agent_timeout_s=float(harbor.get("agent_timeout_s", task.agent_timeout_s)),
        verifier_timeout_s=float(harbor.get("verifier_timeout_s", task.verifier_timeout_s)),
    )
