"""Turn dataset rows into ``Task`` records through a benchmark entry's field mapping."""

from __future__ import annotations

import json
import string
from collections.abc import Iterable, Mapping
from typing import Any

from rllm.benchmarks.adapters import ADAPTERS
from rllm.benchmarks.errors import DatasetRowError
from rllm.benchmarks.types import BenchmarkSpec
from rllm.schemas.types import Task

__all__ = ["row_to_task", "rows_to_tasks"]

_MISSING = object()


def _lookup(row: Mapping[str, Any], path: str) -> Any:
    """``row["a"]["b"]`` for ``"a.b"``; ``_MISSING`` when any step is absent."""
    value: Any = row
    for part in path.split("."):
        if isinstance(value, Mapping) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return _MISSING
    return value


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        return value.item()
    return value


def row_to_task(
    spec: BenchmarkSpec, row: Mapping[str, Any], index: int, split: str | None = None
) -> Task:
    """The task for one row.

    Raises:
        DatasetRowError: naming the benchmark, the row index and the missing or bad field.
    """
    where = f"{spec.name}: row {index}"
    vars_: dict[str, Any] = {}
    for var, column in spec.fields.items():
        value = _lookup(row, column)
        if value is _MISSING or value is None:
            present = ", ".join(sorted(map(str, row))[:20])
            raise DatasetRowError(
                f"{where} has no field {column!r} (needed as {var!r}); the row has: {present}"
            )
        vars_[var] = value
    for var, column in spec.optional.items():
        value = _lookup(row, column)
        vars_[var] = None if value is _MISSING else value
    if spec.adapter:
        try:
            vars_.update(ADAPTERS[spec.adapter](vars_))
        except (KeyError, ValueError, TypeError, IndexError) as exc:
            raise DatasetRowError(f"{where}: {exc} (adapter {spec.adapter!r})") from exc
    try:
        instruction = string.Formatter().vformat(spec.prompt, (), _Blank(vars_))
    except (ValueError, IndexError) as exc:
        raise DatasetRowError(f"{where}: prompt template failed: {exc}") from exc
    task_id = str(_lookup(row, spec.id_field)) if spec.id_field else str(index)
    if spec.id_field and task_id == str(_MISSING):
        raise DatasetRowError(f"{where} has no id field {spec.id_field!r}")
    truth = vars_.get(spec.truth) if spec.truth else None
    metadata = {"benchmark": spec.name, "split": split or spec.split, "index": index}
    metadata.update({k: _jsonable(vars_.get(k)) for k in spec.metadata})
    if "choices" in vars_ and "choices" not in metadata:
        metadata["choices"] = _jsonable(vars_["choices"])
    if "images" in vars_:
        metadata["images"] = vars_["images"]
    return Task(
        task_id=task_id,
        instruction=instruction,
        ground_truth_json=None if truth is None else json.dumps(_jsonable(truth)),
        reward_fn=spec.reward_fn,
        benchmark=spec.name,
        metadata_json=json.dumps(metadata),
    )


class _Blank(dict[str, Any]):
    """Template variables; an optional variable that is None renders as ''."""

    def __missing__(self, key: str) -> str:
        raise DatasetRowError(f"template variable {{{key}}} is not mapped")

    def __getitem__(self, key: str) -> Any:
        value = super().__getitem__(key)
        return "" if value is None else value


def rows_to_tasks(
    spec: BenchmarkSpec,
    rows: Iterable[Mapping[str, Any]],
    split: str | None = None,
    max_examples: int | None = None,
) -> list[Task]:
    """Tasks for the first ``max_examples`` rows (all when None), in row order."""
    tasks: list[Task] = []
    for index, row in enumerate(rows):
        if max_examples is not None and index >= max_examples:
            break
        tasks.append(row_to_task(spec, row, index, split))
    return tasks
