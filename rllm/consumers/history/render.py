"""Turning query results into something a person reads (rich tables with short times and
plain numbers, PNG plots) or a script reads (tab-separated lines, JSON, CSV, full values)."""

from __future__ import annotations

import csv
import io
import json
import math
import re
from datetime import date, datetime
from pathlib import Path
from typing import Any

from rich.markup import escape
from rich.table import Table

from rllm.consumers.history.types import QueryError, QueryResult

__all__ = [
    "as_datetime",
    "jsonable",
    "plot_result",
    "short_cell",
    "to_csv",
    "to_json",
    "to_rich",
    "to_tsv",
]

_ISO = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?")


def as_datetime(value: Any) -> datetime | None:
    """``value`` as a datetime when it is one or an ISO timestamp (the history service
    sends its datetimes as ISO strings), else None."""
    if isinstance(value, datetime):
        return value
    if isinstance(value, str) and _ISO.fullmatch(value):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
    return None


def _number(value: float) -> str:
    """A float for people: no exponent in the usual range, thousands grouped."""
    if not math.isfinite(value):
        return str(value)
    size = abs(value)
    if size >= 1000:
        return f"{value:,.0f}"
    if size >= 1e-4 or size == 0:
        return f"{value:.4g}"
    return f"{value:.1e}"


def short_cell(value: Any) -> str:
    """One value for a table on a terminal: times to the second, plain numbers."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value)
    when = as_datetime(value)
    if when is not None:
        return when.strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(value, float):
        return _number(value)
    if isinstance(value, (list, tuple)):
        return " / ".join(short_cell(v) for v in value)
    if isinstance(value, bytes):
        return value[:16].hex()
    return str(value)


def _full_cell(value: Any) -> str:
    """One value for a script: whole (ISO times, every digit), on one line."""
    if value is None:
        return ""
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(value, default=lambda v: str(jsonable(v)))
    text = str(jsonable(value))
    return text.replace("\t", " ").replace("\n", " ")


def to_rich(result: QueryResult, title: str = "") -> Table:
    """A rich table for a terminal (``short_cell`` values)."""
    table = Table(title=title or None, show_lines=False)
    for name in result.columns:  # an id stays whole on a narrow terminal
        table.add_column(name, overflow="fold", no_wrap=name.endswith("_id"))
    for row in result.rows:
        table.add_row(*(escape(short_cell(v)) for v in row))
    if not result.rows:
        table.caption = "no rows"
    return table


def to_tsv(result: QueryResult) -> str:
    """Tab-separated lines, a header first: every row on one line however wide, values
    whole (ISO times, every digit, arrays as JSON, nothing for NULL)."""
    lines = ["\t".join(result.columns)]
    lines += ["\t".join(_full_cell(v) for v in row) for row in result.rows]
    return "\n".join(lines) + "\n"


def jsonable(value: Any) -> Any:
    """A result cell as JSON can hold it: dates and times in ISO 8601, bytes in hex."""
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.hex()
    return value


def to_json(result: QueryResult) -> str:
    """One JSON document: a list of row objects."""
    return json.dumps([{k: jsonable(v) for k, v in r.items()} for r in result.records()], indent=1)


def to_csv(result: QueryResult) -> str:
    """CSV with a header line; arrays as JSON."""
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(result.columns)
    for row in result.rows:
        writer.writerow(
            [json.dumps(v) if isinstance(v, (list, tuple)) else jsonable(v) for v in row]
        )
    return buf.getvalue()


def plot_result(
    result: QueryResult,
    x: str,
    ys: tuple[str, ...],
    path: Path,
    title: str,
    group: str | None = None,
) -> Path:
    """Plot columns ``ys`` against ``x`` into a PNG; array columns plot one line per element,
    a ``group`` column (``run_id``) one line per value. Timestamps (datetimes or ISO
    strings) make a real time axis, its labels spaced by matplotlib's date locator.

    Raises:
        QueryError: when the result has no rows to plot.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt

    if not result.rows:
        raise QueryError(f"--plot: the query returned no rows, nothing to draw into {path}")
    times = [as_datetime(v) for v in result.column(x)]
    xs: list[Any] = times if all(t is not None for t in times) else result.column(x)
    keys = result.column(group) if group and group in result.columns else [None] * len(xs)
    series = list(dict.fromkeys(keys))
    fig, axes = plt.subplots(len(ys), 1, figsize=(9, 3 * len(ys)), sharex=True, squeeze=False)
    for ax, y in zip(axes[:, 0], ys, strict=True):
        values = result.column(y)
        for key in series:
            rows = [i for i, k in enumerate(keys) if k == key]
            xs_k = [xs[i] for i in rows]
            name = y if key is None else f"{key} {y}"
            if values and isinstance(values[0], (list, tuple)):
                for j, label in enumerate(("p50", "p95", "p99")[: len(values[0])]):
                    ax.plot(
                        xs_k,
                        [values[i][j] if values[i] else None for i in rows],
                        marker=".",
                        label=f"{name} {label}",
                    )
            else:
                ax.plot(xs_k, [values[i] for i in rows], marker=".", label=name)
        if len(series) > 1 or (values and isinstance(values[0], (list, tuple))):
            ax.legend(loc="best", fontsize="small")
        ax.set_ylabel(y)
        ax.grid(alpha=0.3)
    bottom = axes[-1, 0]
    bottom.set_xlabel(f"{x} (UTC)" if xs is times else x)
    if xs is times:  # a few ticks, each label only as long as it must be: no overlap
        # matplotlib.dates has no annotations for these two constructors
        locator = mdates.AutoDateLocator(minticks=3, maxticks=8)  # type: ignore[no-untyped-call]  # matplotlib.dates is untyped
        concise = mdates.ConciseDateFormatter(locator)  # type: ignore[no-untyped-call]  # matplotlib.dates is untyped
        bottom.xaxis.set_major_locator(locator)
        bottom.xaxis.set_major_formatter(concise)
    fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
