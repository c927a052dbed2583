"""The viewer's reads through the read-only path, and the runs and run pages' data.

The numbers that ``rllm-cli analytics`` also prints come from the same named queries
(``run_named``: runs, rewards, passk, tokens, latency, staleness, failures); the rest (a
run's sessions and state here, a trajectory in ``trajectory``, a comparison in ``compare``)
from ``viewer.sql`` through ``read``, that is ``store.query_user``. Nothing here writes,
and nothing pastes a value into SQL.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from rllm.consumers.history import HistoryStore, QueryResult, run_named
from rllm.consumers.viewer import sql
from rllm.consumers.viewer.errors import BadRequestError, NotFoundError

__all__ = [
    "RUN_COLUMNS",
    "RunFilter",
    "as_time",
    "int_param",
    "number",
    "read",
    "run_ids",
    "run_page",
    "runs_page",
]

RUN_COLUMNS = (
    "run_id",
    "kind",
    "benchmarks",
    "models",
    "backend",
    "first_seen",
    "state",
    "sessions",
    "mean_reward",
    "accuracy",
    "pass_at_k",
)
"""Columns of the runs page, in order; each one sorts it."""

SESSIONS_SHOWN = 1000
"""Most sessions listed on a run's page."""


_TIMES = {
    "assembled_at",
    "bucket",
    "created_at",
    "emitted_at",
    "first_seen",
    "last_at",
    "last_event",
    "last_seen",
    "opened_at",
    "rewarded_at",
    "started_at",
}


def _records(result: QueryResult) -> list[dict[str, Any]]:
    """Rows as dicts, times as aware datetimes whichever store answered."""
    out = result.records()
    times = [c for c in result.columns if c in _TIMES]
    for row in out:
        for c in times:
            row[c] = as_time(row[c])
    return out


def read(store: HistoryStore, text: str, **params: Any) -> list[dict[str, Any]]:
    """A viewer statement of ``viewer.sql`` through ``query_user`` (readonly=1, the read
    limits), its parameters bound; rows as dicts with aware times."""
    return _records(store.query_user(text.replace("__DB__", f"`{store.database}`"), params))


def _named(
    store: HistoryStore, name: str, by: str | None = None, **params: Any
) -> list[dict[str, Any]]:
    return _records(run_named(store, name, by, **params))


def as_time(value: Any) -> datetime | None:
    """A timestamp as an aware datetime, whether the store gave a datetime or ISO text
    (the history service's JSON); None for none or the epoch (a LEFT JOIN's default)."""
    if value is None or value == "":
        return None
    when = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    when = when if when.tzinfo else when.replace(tzinfo=UTC)
    return None if when.timestamp() <= 0 else when


def number(value: Any) -> float | None:
    """A number, None for NULL or NaN (an empty average)."""
    if value is None:
        return None
    out = float(value)
    return None if math.isnan(out) else out


def _state(row: dict[str, Any], now: datetime, live_window_s: float) -> str:
    """running: an event within the live window (a trainer between batches has every
    session closed); unfinished: sessions open and nothing recent; finished: neither."""
    last = as_time(row.get("last_event"))
    if last is not None and (now - last).total_seconds() <= live_window_s:
        return "running"
    open_sessions = int(row.get("opened") or 0) - int(row.get("closed") or 0)
    return "unfinished" if open_sessions > 0 else "finished"


@dataclass(frozen=True)
class RunFilter:
    """The runs page's filter and sort (query parameters of the same names)."""

    q: str = ""
    """Part of the run id."""
    benchmark: str = ""
    """Only runs on this benchmark."""
    model: str = ""
    """Only runs of this model."""
    kind: str = ""
    """train, eval or '' for both."""
    state: str = ""
    """running, unfinished, finished or '' for any."""
    sort: str = "first_seen"
    """A column of ``RUN_COLUMNS``."""
    order: str = "desc"
    """asc or desc."""
    k: int = 1
    """k of pass@k."""

    @classmethod
    def parse(cls, params: dict[str, str]) -> RunFilter:
        """From query parameters, each checked.

        Raises:
            BadRequestError: naming the parameter and its value.
        """
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(params) - known)
        if unknown:
            raise BadRequestError(
                f"unknown query parameter {unknown[0]!r}; known: {', '.join(sorted(known))}"
            )
        choices = {
            "kind": ("", "train", "eval"),
            "state": ("", "running", "unfinished", "finished"),
            "sort": RUN_COLUMNS,
            "order": ("asc", "desc"),
        }
        for name, allowed in choices.items():
            if name in params and params[name] not in allowed:
                named = ", ".join(a or "''" for a in allowed)
                raise BadRequestError(f"parameter {name!r}: one of {named}, got {params[name]!r}")
        k = int_param(params, "k", 1, 1, 10_000)
        texts = {n: v for n, v in params.items() if n != "k"}
        return cls(k=k, **texts)


def int_param(params: dict[str, str], name: str, default: int, lo: int, hi: int) -> int:
    """An integer query parameter between ``lo`` and ``hi``, ``default`` when absent.

    Raises:
        BadRequestError: naming the parameter and its value.
    """
    raw = params.get(name, "")
    if raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise BadRequestError(f"parameter {name!r}: expected an integer, got {raw!r}") from None
    if not lo <= value <= hi:
        raise BadRequestError(f"parameter {name!r}: must be between {lo} and {hi}, got {value}")
    return value


@dataclass(frozen=True)
class RunsPage:
    """Every run, filtered and sorted."""

    rows: list[dict[str, Any]]
    """One dict per run shown (``RUN_COLUMNS`` and more)."""
    total: int
    """Runs in the history."""
    benchmarks: list[str]
    """Every benchmark of a run (the filter's choices)."""
    models: list[str]
    """Every model of a run."""


def run_ids(store: HistoryStore) -> list[str]:
    """Every run id, newest first (``analytics runs``)."""
    return [str(r["run_id"]) for r in _named(store, "runs")]


def _passk_text(rows: Sequence[dict[str, Any]]) -> str:
    """pass@k as the page shows it: the number, or one per benchmark and model."""
    if len(rows) == 1:
        return f"{round(rows[0]['pass_at_k'], 4):g}"
    return ", ".join(
        f"{r['benchmark'] or '-'}/{r['model'] or '-'} {round(r['pass_at_k'], 4):g}" for r in rows
    )


def _runs(
    store: HistoryStore, run: str, k: int, live_window_s: float, now: datetime
) -> list[dict[str, Any]]:
    """The runs (or one), each with the named queries' numbers, its state and backend."""
    runs = _named(store, "runs", run=run)
    passk: dict[str, list[dict[str, Any]]] = {}
    for row in _named(store, "passk", by="run", run=run, k=k):
        passk.setdefault(row["run_id"], []).append(row)
    states = {r["run_id"]: r for r in read(store, sql.RUN_STATES, run=run)}
    for row in runs:
        st = states.get(row["run_id"], {})
        row["kind"] = "train" if "train" in str(row["kinds"]).split(",") else "eval"
        row["backend"] = st.get("backends") or ""
        row["state"] = _state(st, now, live_window_s) if st else "finished"
        row["open_sessions"] = int(st.get("opened") or 0) - int(st.get("closed") or 0)
        row["last_event"] = as_time(st.get("last_event")) or as_time(row["last_seen"])
        row["first_seen"] = as_time(row["first_seen"])
        row["updates"] = int(st.get("updates") or 0)
        row["passk_rows"] = passk.get(row["run_id"], [])
        row["pass_at_k"] = (
            row["passk_rows"][0]["pass_at_k"] if len(row["passk_rows"]) == 1 else None
        )
        row["pass_at_k_text"] = _passk_text(row["passk_rows"]) if row["passk_rows"] else ""
    return runs


def runs_page(
    store: HistoryStore, flt: RunFilter, live_window_s: float, now: datetime | None = None
) -> RunsPage:
    """The runs page: every run, then the filter, then the sort."""
    runs = _runs(store, "", flt.k, live_window_s, now or datetime.now(UTC))
    benchmarks = sorted({b for r in runs for b in str(r["benchmarks"]).split(",") if b})
    models = sorted({m for r in runs for m in str(r["models"]).split(",") if m})

    def keep(r: dict[str, Any]) -> bool:
        return (
            flt.q.lower() in str(r["run_id"]).lower()
            and (not flt.benchmark or flt.benchmark in str(r["benchmarks"]).split(","))
            and (not flt.model or flt.model in str(r["models"]).split(","))
            and (not flt.kind or r["kind"] == flt.kind)
            and (not flt.state or r["state"] == flt.state)
        )

    shown = [r for r in runs if keep(r)]
    present = [r for r in shown if r[flt.sort] is not None]
    missing = [r for r in shown if r[flt.sort] is None]
    present.sort(key=lambda r: (r[flt.sort], r["run_id"]), reverse=flt.order == "desc")
    return RunsPage(present + missing, len(runs), benchmarks, models)


@dataclass(frozen=True)
class RunPage:
    """One run: its numbers as analytics gives them, its state, sessions and updates."""

    run: dict[str, Any]
    """The run's row (as on the runs page)."""
    rewards: list[dict[str, Any]]
    """``analytics rewards --run``: per policy version."""
    passk: list[dict[str, Any]]
    """``analytics passk --by run --run``."""
    tokens: list[dict[str, Any]]
    """``analytics tokens --run``."""
    latency: list[dict[str, Any]]
    """``analytics latency --run``."""
    staleness: list[dict[str, Any]]
    """``analytics staleness --run``."""
    failures: list[dict[str, Any]]
    """``analytics failures --run``."""
    dead_letters: list[dict[str, Any]]
    """``analytics failures`` rows of dead letters (they name no run)."""
    updates: list[dict[str, Any]]
    """The run's policy updates."""
    sessions: list[dict[str, Any]]
    """Its sessions (at most ``SESSIONS_SHOWN``)."""
    chart: dict[str, list[Any]] = field(default_factory=dict)
    """Reward and pass rate per policy version, as the chart draws them."""


def run_page(
    store: HistoryStore, run_id: str, k: int, live_window_s: float, now: datetime | None = None
) -> RunPage:
    """One run's page.

    Raises:
        NotFoundError: when the history has no session of ``run_id``.
    """
    if not run_id:
        raise NotFoundError("no run id given")
    found = _runs(store, run_id, k, live_window_s, now or datetime.now(UTC))
    if not found:
        raise NotFoundError(f"no run {run_id!r} in the history")
    rewards = _named(store, "rewards", run=run_id)
    every_failure = _named(store, "failures")
    updates = read(store, sql.POLICY_UPDATES, run=run_id)
    for u in updates:
        u["metrics"] = dict(zip(u.pop("metric_names"), u.pop("metric_values"), strict=True))
        u["created_at"] = as_time(u["created_at"])
    sessions = read(store, sql.RUN_SESSIONS, run=run_id, limit=SESSIONS_SHOWN)
    for s in sessions:
        s["opened_at"] = as_time(s["opened_at"])
        s["status"] = s["status"] if s["has_close"] else "open"
        if not s["has_reward"]:
            s["reward"] = s["is_correct"] = None
    return RunPage(
        run=found[0],
        rewards=rewards,
        passk=_named(store, "passk", by="run", run=run_id, k=k),
        tokens=_named(store, "tokens", run=run_id),
        latency=_named(store, "latency", run=run_id),
        staleness=_named(store, "staleness", run=run_id),
        failures=_named(store, "failures", run=run_id),
        dead_letters=[r for r in every_failure if r["source"] == "dead_letter"],
        updates=updates,
        sessions=sessions,
        chart={
            "policy_version": [r["policy_version"] for r in rewards],
            "mean_reward": [number(r["mean_reward"]) for r in rewards],
            "accuracy": [number(r["accuracy"]) for r in rewards],
        },
    )
