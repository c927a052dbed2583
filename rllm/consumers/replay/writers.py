"""Writing SFT datasets: JSONL (one example per line) or Parquet (same columns)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from rllm.consumers.replay.types import SftExample
from rllm.errors import ConfigError

__all__ = ["check_dataset_path", "write_dataset"]


def check_dataset_path(path: Path) -> Path:
    """Refuse a dataset path that is neither .jsonl nor .parquet, before any work is done.

    Raises:
        ConfigError: naming the path.
    """
    if path.suffix not in (".jsonl", ".parquet"):
        raise ConfigError(
            f"--out {path}: write .jsonl or .parquet, not {path.suffix or 'no suffix'!r}"
        )
    return path


def write_dataset(examples: list[SftExample], path: Path) -> int:
    """Write ``examples`` to ``path`` (.jsonl or .parquet); return how many were written.

    Raises:
        ConfigError: for another file extension.
    """
    check_dataset_path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [asdict(e) for e in examples]
    if path.suffix == ".jsonl":
        with path.open("w") as fh:
            for row in rows:
                fh.write(json.dumps(row) + "\n")
    else:  # .parquet; messages as a JSON string column
        table = pa.Table.from_pylist(
            [{**r, "messages": json.dumps(r["messages"])} for r in rows], schema=_SCHEMA
        )
        pq.write_table(table, path)
    return len(rows)


_SCHEMA = pa.schema(
    [
        ("session_id", pa.string()),
        ("run_id", pa.string()),
        ("task_id", pa.string()),
        ("benchmark", pa.string()),
        ("model", pa.string()),
        ("step_index", pa.int32()),
        ("reward", pa.float64()),
        ("is_correct", pa.bool_()),
        ("messages", pa.string()),
        ("prompt_token_ids", pa.list_(pa.int32())),
        ("response_token_ids", pa.list_(pa.int32())),
    ]
)
