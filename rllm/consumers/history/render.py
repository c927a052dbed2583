"""Turning query results into something a person reads: rich tables, JSON, CSV, PNG plots."""

from __future__ import annotations

import csv
import io
import json
from datetime import date, datetime
from pathlib import Path
from typing import Any

from rich.table import Table

from rllm.consumers.history.types import QueryError, QueryResult

__all__ = ["plot_result", "to_csv", "to_json", "to_rich"]


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        return " / ".join(_cell(v) for v in value)
    if isinstance(value, bytes):
        return value[:16].hex()
    return str(value)


def to_rich(result: QueryResult, title: str = "") -> Table:
    """A rich table."""
    table = Table(title=title or None, show_lines=False)
    for name in result.columns:
        table.add_column(name, overflow="fold")
    for row in result.rows:
        table.add_row(*(_cell(v) for v in row))
    if not result.rows:
        table.caption = "no rows"
    return table


def _json(value: Any) -> Any:
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.hex()
    return value


def to_json(result: QueryResult) -> str:
    """One JSON document: a list of row objects."""
    return json.dumps([{k: _json(v) for k, v in r.items()} for r in result.records()], indent=1)


def to_csv(result: QueryResult) -> str:
    """CSV with a header line; arrays as JSON."""
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(result.columns)
    for row in result.rows:
        writer.writerow([json.dumps(v) if isinstance(v, (list, tuple)) else _json(v) for v in row])
    return buf.getvalue()


def plot_result(result: QueryResult, x: str, ys: tuple[str, ...], path: Path, title: str) -> Path:
    """Plot columns ``ys`` against ``x`` into a PNG; array columns plot one line per element.

    Raises:
        QueryError: when the result has no rows to plot.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not result.rows:
        raise QueryError(f"--plot: the query returned no rows, nothing to draw into {path}")
    xs = result.column(x)
    fig, axes = plt.subplots(len(ys), 1, figsize=(9, 3 * len(ys)), sharex=True, squeeze=False)
    for ax, y in zip(axes[:, 0], ys, strict=True):
        values = result.column(y)
        if values and isinstance(values[0], (list, tuple)):
            for i, label in enumerate(("p50", "p95", "p99")[: len(values[0])]):
                ax.plot(xs, [v[i] if v else None for v in values], marker=".", label=f"{y} {label}")
            ax.legend(loc="best")
        else:
            ax.plot(xs, values, marker=".")
        ax.set_ylabel(y)
        ax.grid(alpha=0.3)
    axes[-1, 0].set_xlabel(x)
    fig.suptitle(title)
    fig.autofmt_xdate()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
