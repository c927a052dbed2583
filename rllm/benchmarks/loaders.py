"""Load a benchmark's rows from a local file, the local cache, a package, or the Hub.

Order: ``data_file`` when given; else a ``package:`` source; else the cache
(``RLLM_BENCH_CACHE_DIR``/NAME/CONFIG/SPLIT.parquet, written by ``pull``); else a download
(``datasets`` when installed, else the Hub's parquet export through ``huggingface_hub``).
"""

from __future__ import annotations

import gzip
import importlib.resources
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from rllm.benchmarks.errors import DatasetUnavailableError
from rllm.benchmarks.registry import get_benchmark
from rllm.benchmarks.tasks import rows_to_tasks
from rllm.benchmarks.types import BenchmarkSpec
from rllm.errors import ConfigError
from rllm.schemas.types import Task
from rllm.settings import default_home

__all__ = [
    "MULTIPLY_HELD_OUT",
    "MULTIPLY_SPLITS",
    "BenchmarkSettings",
    "cache_path",
    "load_tasks",
    "pull",
    "read_rows",
    "synthetic_rows",
]


class BenchmarkSettings(BaseSettings):
    """Where benchmark data is cached, and whether downloads are allowed."""

    model_config = SettingsConfigDict(env_prefix="RLLM_BENCH_", frozen=True)

    cache_dir: Path = Field(default_factory=lambda: default_home() / "benchmarks")
    """Folder of pulled datasets."""
    offline: bool = False
    """Never download (also implied by ``HF_HUB_OFFLINE=1`` / ``HF_DATASETS_OFFLINE=1``)."""


def read_rows(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a ``.jsonl`` (optionally ``.gz``), ``.json`` (a list) or ``.parquet`` file.

    Raises:
        DatasetUnavailableError: the file is missing or of an unknown kind.
    """
    path = Path(path)
    if not path.is_file():
        raise DatasetUnavailableError(f"data file {str(path)!r} does not exist")
    name = path.name.lower()
    if name.endswith(".parquet"):
        import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]  # no stubs

        return [dict(r) for r in pq.read_table(path).to_pylist()]
    if name.endswith((".jsonl", ".jsonl.gz", ".ndjson")):
        opener: Any = gzip.open if name.endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8") as fh:
            return list(_json_lines(fh, path))
    if name.endswith(".json"):
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, list):
            raise DatasetUnavailableError(f"{path}: a .json data file must hold a list of rows")
        return [dict(r) for r in data]
    raise DatasetUnavailableError(
        f"data file {str(path)!r}: unknown format (use .jsonl, .jsonl.gz, .json or .parquet)"
    )


def _json_lines(fh: Any, path: Path) -> Iterator[dict[str, Any]]:
    for number, line in enumerate(fh, 1):
        if line.strip():
            try:
                yield dict(json.loads(line))
            except json.JSONDecodeError as exc:
                raise DatasetUnavailableError(f"{path}:{number}: not JSON: {exc.msg}") from exc


def cache_path(spec: BenchmarkSpec, split: str, settings: BenchmarkSettings | None = None) -> Path:
    """Where ``pull`` stores one split of a benchmark."""
    settings = settings or BenchmarkSettings()
    return settings.cache_dir / spec.name / (spec.config or "default") / f"{split}.parquet"


def _package_rows(source: str) -> list[dict[str, Any]]:
    module, _, relpath = source.removeprefix("package:").partition("/")
    try:
        resource = importlib.resources.files(module).joinpath(relpath)
    except ModuleNotFoundError as exc:
        raise DatasetUnavailableError(
            f"package {module!r} is not installed; install it (pip install "
            f"{module.replace('_', '-')}) to load this benchmark offline"
        ) from exc
    with resource.open("rb") as raw, gzip.open(raw, "rt", encoding="utf-8") as fh:
        return list(_json_lines(fh, Path(str(resource))))


MULTIPLY_HELD_OUT = 20
"""Tasks of ``multiply`` held out as its ``test`` split: the first 20 of its fixed order."""
MULTIPLY_SPLITS = ("all", "train", "test")
"""Splits of ``multiply``: every product (81), the 61 to train on, the 20 held out."""


def synthetic_rows(source: str, split: str = "all") -> list[dict[str, Any]]:
    """Rows generated here, for tasks small models can learn on a CPU.

    ``synthetic:multiply``: every single-digit product "What is a times b?" (a, b in 1..9),
    in a fixed shuffled order; split ``test`` is its first ``MULTIPLY_HELD_OUT`` rows,
    ``train`` the rest (disjoint by task id), ``all`` every row.

    Raises:
        DatasetUnavailableError: an unknown source or split (naming the known ones).
    """
    kind = source.removeprefix("synthetic:")
    if kind == "multiply":
        import random

        if split not in MULTIPLY_SPLITS:
            raise DatasetUnavailableError(
                f"multiply has no split {split!r}; its splits: {', '.join(MULTIPLY_SPLITS)}"
            )
        pairs = [(a, b) for a in range(1, 10) for b in range(1, 10)]
        random.Random(0).shuffle(pairs)
        if split == "test":
            pairs = pairs[:MULTIPLY_HELD_OUT]
        elif split == "train":
            pairs = pairs[MULTIPLY_HELD_OUT:]
        return [
            {"id": f"mul-{a}x{b}", "question": f"What is {a} times {b}?", "answer": str(a * b)}
            for a, b in pairs
        ]
    raise DatasetUnavailableError(f"unknown synthetic source {source!r}; known: multiply")


def _offline(settings: BenchmarkSettings) -> bool:
    flags = (os.environ.get("HF_HUB_OFFLINE", ""), os.environ.get("HF_DATASETS_OFFLINE", ""))
    return settings.offline or any(f.lower() in ("1", "true", "yes") for f in flags)


def pull(
    spec: BenchmarkSpec | str, split: str | None = None, settings: BenchmarkSettings | None = None
) -> Path:
    """Download one split to the cache and return its path.

    Raises:
        DatasetUnavailableError: offline, no source, or the download failed; the message
            names the dataset id, config and split.
    """
    spec = get_benchmark(spec) if isinstance(spec, str) else spec
    settings = settings or BenchmarkSettings()
    split = split or spec.split
    target = cache_path(spec, split, settings)
    what = f"dataset {spec.hf_id!r} (config {spec.config or 'default'!r}, split {split!r})"
    if spec.hf_id is None:
        raise DatasetUnavailableError(
            f"{spec.name} has no Hugging Face dataset ({spec.source}); pass --data-file"
        )
    if _offline(settings):
        raise DatasetUnavailableError(
            f"cannot download {what} for {spec.name}: offline mode is on "
            "(RLLM_BENCH_OFFLINE / HF_HUB_OFFLINE); pass --data-file or pull when online"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        _download(spec, split, target)
    except DatasetUnavailableError:
        raise
    except Exception as exc:  # network, auth, missing split: all reported the same way
        raise DatasetUnavailableError(
            f"could not download {what} for {spec.name}: {type(exc).__name__}: {exc}; "
            "check the network (or HF_TOKEN for gated sets), or pass --data-file"
        ) from exc
    return target


def _download(spec: BenchmarkSpec, split: str, target: Path) -> None:
    assert spec.hf_id is not None
    try:
        import datasets  # type: ignore[import-not-found,import-untyped,unused-ignore]  # datasets is optional
    except ImportError:
        datasets = None
    if datasets is not None:
        ds = datasets.load_dataset(spec.hf_id, spec.config, split=split)
        ds.to_parquet(str(target))
        return
    try:
        from huggingface_hub import snapshot_download
    except ImportError as exc:
        raise DatasetUnavailableError(
            f"downloading {spec.hf_id!r} needs `datasets` or `huggingface_hub` "
            "(pip install 'rllm-stream[eval]')"
        ) from exc
    import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]  # no stubs
    import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]  # no stubs

    folder = Path(
        snapshot_download(
            spec.hf_id,
            repo_type="dataset",
            revision="refs/convert/parquet",
            allow_patterns=[f"{spec.config or 'default'}/{split}/*"],
        )
    )
    parts = sorted(folder.glob(f"{spec.config or 'default'}/{split}/*.parquet"))
    if not parts:
        raise DatasetUnavailableError(f"{spec.hf_id!r} has no parquet files for split {split!r}")
    pq.write_table(pa.concat_tables([pq.read_table(p) for p in parts]), target)


def load_tasks(
    bench: BenchmarkSpec | str,
    split: str | None = None,
    data_file: str | Path | None = None,
    max_examples: int | None = None,
    settings: BenchmarkSettings | None = None,
) -> list[Task]:
    """The benchmark's tasks, in row order, from the first source that has them.

    Raises:
        UnknownBenchmarkError: ``bench`` names no entry (the message lists close names).
        DatasetRowError: a row lacks a mapped field (the message names row and field).
        DatasetUnavailableError: no local data and no way to download it.
    """
    spec = get_benchmark(bench) if isinstance(bench, str) else bench
    split = split or spec.split
    if max_examples is not None and max_examples < 0:
        raise ConfigError(f"max_examples must be >= 0, got {max_examples}")
    if data_file is not None:
        rows = read_rows(data_file)
    elif spec.source.startswith("package:"):
        rows = _package_rows(spec.source)
    elif spec.source.startswith("synthetic:"):
        rows = synthetic_rows(spec.source, split)
    elif spec.source == "harness":
        raise DatasetUnavailableError(
            f"{spec.name} is a harness benchmark (task folders from {spec.hf_id or spec.homepage});"
            f" pass --tasks-dir DIR with its Harbor task folders and --agent HARNESS "
            f"(rllm-cli harness list), or --data-file with one JSON row per task"
        )
    else:
        cached = cache_path(spec, split, settings)
        rows = read_rows(cached if cached.is_file() else pull(spec, split, settings))
    return rows_to_tasks(spec, rows, split, max_examples)
