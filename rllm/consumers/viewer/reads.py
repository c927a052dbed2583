"""The viewer's reads: each page's data from the history, through the read-only path.

The numbers that ``rllm-cli analytics`` also prints come from the same named queries
(``run_named``: runs, rewards, passk, tokens, latency, staleness, failures); the rest (a
run's sessions and state, a trajectory's steps, a comparison) from ``viewer.sql`` through
``store.query_user``. Nothing here writes, and nothing pastes a value into SQL.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from rllm.consumers.history import HistoryStore, QueryResult, run_named
from rllm.consumers.viewer import sql
from rllm.consumers.viewer.types import BadRequestError, NotFoundError

__all__ = [
    "RUN_COLUMNS",
    "CompareSide",
    "RunFilter",
    "as_time",
    "compare",
    "int_param",
    "run_ids",
    "run_page",
    "runs_page",
    "trajectory_page",
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
    "assembled_at", "bucket", "created_at", "emitted_at", "first_seen", "last_at",
    "last_event", "last_seen", "opened_at", "rewarded_at", "started_at",
}  # fmt: skip


def _records(result: QueryResult) -> list[dict[str, Any]]:
    """Rows as dicts, times as aware datetimes whichever store answered."""
    out = result.records()
    times = [c for c in result.columns if c in _TIMES]
    for row in out:
        for c in times:
            row[c] = as_time(row[c])
    return out


def _read(store: HistoryStore, text: str, **params: Any) -> list[dict[str, Any]]:
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


def _num(value: Any) -> float | None:
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
    states = {r["run_id"]: r for r in _read(store, sql.RUN_STATES, run=run)}
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
    updates = _read(store, sql.POLICY_UPDATES, run=run_id)
    for u in updates:
        u["metrics"] = dict(zip(u.pop("metric_names"), u.pop("metric_values"), strict=True))
        u["created_at"] = as_time(u["created_at"])
    sessions = _read(store, sql.RUN_SESSIONS, run=run_id, limit=SESSIONS_SHOWN)
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
            "mean_reward": [_num(r["mean_reward"]) for r in rewards],
            "accuracy": [_num(r["accuracy"]) for r in rewards],
        },
    )


@dataclass(frozen=True)
class TrajectoryPage:
    """One session: how it opened and closed, its steps turn by turn, its rewards."""

    session_id: str
    """The session."""
    opened: dict[str, Any] | None
    """Its SessionOpened row (None when only later events arrived)."""
    closed: dict[str, Any] | None
    """Its latest SessionClosed row (None: still open)."""
    steps: list[dict[str, Any]]
    """Each step with ``new_messages``, ``answer`` and ``tokens`` (``turns``)."""
    rewards: list[dict[str, Any]]
    """Its rewards, oldest first (the last one counts)."""
    episode: dict[str, Any] | None
    """The group it was trained in, with its advantage (None: not in an episode yet)."""
    task: Any
    """The task (its JSON)."""
    output: Any
    """What the agent returned (its JSON)."""
    harness: dict[str, Any] | None
    """A harness run's logs and verifier details, when there are any."""


_HARNESS_KEYS = ("agent_output_tail", "verifier_error", "artifacts", "agent_exit_code", "reason")


def trajectory_page(store: HistoryStore, session_id: str) -> TrajectoryPage:
    """One trajectory's page.

    Raises:
        NotFoundError: when the history has no event of ``session_id``.
    """
    from rllm.consumers.viewer import turns

    events = _read(store, sql.SESSION_EVENTS, session=session_id)
    steps = _read(store, sql.STEPS_OF, session=session_id)
    if not events and not steps:
        raise NotFoundError(f"no trajectory (session) {session_id!r} in the history")
    opened = next((e for e in events if e["kind"] == "opened"), None)
    closes = [e for e in events if e["kind"] == "closed"]
    closed = closes[-1] if closes else None
    earlier: list[turns.Message] = []
    for step in steps:
        request = turns.parse_json(step.pop("request_json"))
        response = turns.parse_json(step.pop("response_json"))
        api = str(step["api"])
        sent = turns.request_messages(api, request)
        answer = turns.response_messages(api, response) if not step["error_kind"] else []
        step["new_messages"] = turns.new_messages(earlier, sent)
        step["answer"] = answer
        step["tokens"] = turns.tokens(
            api, response, step.pop("response_token_ids"), step.pop("response_logprobs")
        )
        step["started_at"] = as_time(step["started_at"])
        step["sampling"] = turns.parse_json(step.pop("sampling_params_json"))
        earlier = sent + answer
    rewards = _read(store, sql.REWARDS_OF, session=session_id)
    for r in rewards:
        r["signals"] = dict(zip(r.pop("signal_names"), r.pop("signal_values"), strict=True))
        r["metadata"] = turns.parse_json(r.pop("metadata_json"))
        r["emitted_at"] = as_time(r["emitted_at"])
    episodes = _read(store, sql.EPISODE_OF, session=session_id)
    episode = episodes[0] if episodes else None
    if episode is not None:
        episode["advantage"] = _num(episode["advantage"])
        episode["group_reward"] = _num(episode["group_reward"])
    output = turns.parse_json(closed["output_json"]) if closed else None
    harness = (
        {k: output[k] for k in _HARNESS_KEYS if output.get(k) not in (None, "", {}, [])}
        if isinstance(output, dict) and ("harness" in output or "agent_output_tail" in output)
        else None
    )
    return TrajectoryPage(
        session_id=session_id,
        opened=opened,
        closed=closed,
        steps=steps,
        rewards=rewards,
        episode=episode,
        task=turns.parse_json(opened["task_json"]) if opened else None,
        output=output,
        harness=harness or None,
    )


@dataclass(frozen=True)
class CompareSide:
    """One side of a comparison: a run, and one of its policy versions or all (-1)."""

    run: str
    """The run id."""
    version: int = -1
    """A policy version, or -1 for every version."""

    @property
    def label(self) -> str:
        """``run`` or ``run @ vN``."""
        return self.run if self.version < 0 else f"{self.run} @ v{self.version}"


def compare(store: HistoryStore, a: CompareSide, b: CompareSide) -> dict[str, Any]:
    """Two runs, or two policy versions, on the tasks both were scored on.

    Returns:
        ``tasks`` (common tasks: each side's sessions, mean reward, accuracy and the
        difference), ``only_a``/``only_b`` (tasks scored on one side only) and per side
        the mean over every scored session (``a_mean``/``b_mean``) and over the common
        tasks' sessions (``a_common``/``b_common``).

    Raises:
        NotFoundError: when a side has no rewarded session.
    """
    rows = _read(
        store,
        sql.COMPARE,
        a_run=a.run,
        a_version=a.version,
        b_run=b.run,
        b_version=b.version,
        limit=100_000,
    )
    for side, name in ((a, "a"), (b, "b")):
        if not any(r[f"{name}_sessions"] for r in rows):
            raise NotFoundError(f"{side.label}: no rewarded session in the history")

    def mean(rs: list[dict[str, Any]], name: str) -> float | None:
        n = sum(r[f"{name}_sessions"] for r in rs)
        total = sum(
            r[f"{name}_reward"] * r[f"{name}_sessions"] for r in rs if r[f"{name}_sessions"]
        )
        return total / n if n else None

    common = [r for r in rows if r["a_sessions"] and r["b_sessions"]]
    for r in common:
        for name in ("a", "b"):
            r[f"{name}_accuracy"] = _num(r[f"{name}_accuracy"])
        r["delta"] = r["b_reward"] - r["a_reward"]
    return {
        "tasks": common,
        "only_a": sum(1 for r in rows if r["a_sessions"] and not r["b_sessions"]),
        "only_b": sum(1 for r in rows if r["b_sessions"] and not r["a_sessions"]),
        "a_mean": mean(rows, "a"),
        "b_mean": mean(rows, "b"),
        "a_common": mean(common, "a"),
        "b_common": mean(common, "b"),
        "better": sum(1 for r in common if r["delta"] > 0),
        "worse": sum(1 for r in common if r["delta"] < 0),
    }
