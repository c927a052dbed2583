"""The history schema, in one place: every engine creates its tables from these definitions,
and the sink builds its Arrow batches from the same column lists.

Each table is a ``ReplacingMergeTree`` whose sorting key ends in the event id, so a batch
that Kafka re-delivers replaces its own rows instead of adding to them; queries read with
``FINAL``. The SQL is the subset that chDB and a ClickHouse server both accept.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

__all__ = ["TABLES", "Column", "Table", "create_statements", "table"]


@dataclass(frozen=True)
class Column:
    """One column: its name, ClickHouse type and Arrow type."""

    name: str
    """Column name."""
    ch_type: str
    """ClickHouse type in the DDL."""
    arrow: pa.DataType
    """Arrow type the sink builds it with."""


@dataclass(frozen=True)
class Table:
    """One history table."""

    name: str
    """Table name within the history database."""
    columns: tuple[Column, ...]
    """Columns in insert order."""
    order_by: tuple[str, ...]
    """Sorting key; its last column is the identity that re-deliveries replace."""
    doc: str
    """What a row is."""

    @property
    def schema(self) -> pa.Schema:
        """The Arrow schema of an insert batch."""
        return pa.schema([pa.field(c.name, c.arrow) for c in self.columns])

    def create(self, database: str) -> str:
        """The CREATE TABLE statement in ``database``."""
        cols = ",\n  ".join(f"`{c.name}` {c.ch_type}" for c in self.columns)
        return (
            f"CREATE TABLE IF NOT EXISTS `{database}`.`{self.name}` (\n  {cols}\n)\n"
            f"ENGINE = ReplacingMergeTree\nORDER BY ({', '.join(self.order_by)})\n"
            f"COMMENT '{self.doc}'"
        )


_T = "DateTime64(6, 'UTC')"
_S, _LS = "String", "LowCardinality(String)"
_ZSTD = " CODEC(ZSTD(1))"
_ARROW: dict[str, pa.DataType] = {
    _S: pa.string(),
    _LS: pa.string(),
    _T: pa.timestamp("us", tz="UTC"),
    "UInt8": pa.uint8(),
    "Nullable(UInt8)": pa.uint8(),
    "Int32": pa.int32(),
    "Int64": pa.int64(),
    "Float64": pa.float64(),
    "Nullable(Float64)": pa.float64(),
    "Array(String)": pa.list_(pa.string()),
    "Array(Float64)": pa.list_(pa.float64()),
    "Array(Int32)" + _ZSTD: pa.list_(pa.int32()),
    "Array(Float32)" + _ZSTD: pa.list_(pa.float32()),
    "Map(String, Float64)": pa.map_(pa.string(), pa.float64()),
}
"""The Arrow type the sink builds each ClickHouse type with."""


def _c(name: str, ch_type: str, arrow: pa.DataType | None = None) -> Column:
    """A column whose Arrow type follows from its ClickHouse type unless given."""
    return Column(name, ch_type, _ARROW[ch_type] if arrow is None else arrow)


def _envelope() -> tuple[Column, ...]:
    return (
        _c("event_id", _S),
        _c("session_id", _S),
        _c("run_id", _S),
        _c("emitted_at", _T),
        _c("producer", _LS),
    )


_ROLLOUT = (
    _c("task_id", _S),
    _c("benchmark", _LS),
    _c("agent", _LS),
    _c("model", _LS),
    _c("trajectory_name", _LS),
    _c("rollout_index", "Int32"),
    _c("group_size", "Int32"),
)
"""Which rollout of which task a session or trajectory is."""
_SOURCE = (
    _c("topic", _LS),
    _c("partition", "Int32"),
    _c("offset", "Int64"),
)

TABLES: dict[str, Table] = {
    t.name: t
    for t in (
        Table(
            "runs",
            (
                _c("run_id", _S),
                _c("event_id", _S),
                _c("seen_at", _T),
                _c("kind", _LS),
                _c("model", _LS),
                _c("benchmark", _LS),
                _c("agent", _LS),
            ),
            ("run_id", "event_id"),
            "one row per event that names a run",
        ),
        Table(
            "sessions",
            (
                *_envelope(),
                _c("kind", _LS),
                *_ROLLOUT,
                _c("policy_version", "Int64"),
                _c("status", _LS),
                _c("num_steps", "Int32"),
                _c("error", _S),
                _c("output_json", _S),
                _c("task_json", _S),
                _c("metadata_json", _S),
                *_SOURCE,
            ),
            ("run_id", "session_id", "event_id"),
            "session lifecycle events: opened and closed",
        ),
        Table(
            "steps",
            (
                *_envelope(),
                _c("step_id", _S),
                _c("step_index", "Int32"),
                _c("parent_step_id", _S),
                _c("api", _LS),
                _c("model", _LS),
                _c("upstream", _LS),
                _c("policy_version", "Int64"),
                _c("started_at", _T),
                _c("latency_ms", "Float64"),
                _c("ttft_ms", "Nullable(Float64)"),
                _c("overhead_ms", "Float64"),
                _c("prompt_tokens", "Int32"),
                _c("completion_tokens", "Int32"),
                _c("cached_tokens", "Int32"),
                _c("prompt_prefix_len", "Int32"),
                _c("n_prompt_ids", "Int32"),
                _c("n_response_ids", "Int32"),
                _c("token_status", _LS),
                _c("finish_reason", _LS),
                _c("error_kind", _LS),
                _c("error_message", _S),
                _c("error_status", "Int32"),
                _c("request_json", _S),
                _c("response_json", _S),
                _c("sampling_params_json", _S),
                _c("prompt_token_ids", "Array(Int32)" + _ZSTD),
                _c("response_token_ids", "Array(Int32)" + _ZSTD),
                _c("response_logprobs", "Array(Float32)" + _ZSTD),
                *_SOURCE,
            ),
            ("run_id", "session_id", "event_id"),
            "one LLM call per row, with its token arrays",
        ),
        Table(
            "rewards",
            (
                *_envelope(),
                _c("source", _LS),
                _c("reward", "Float64"),
                _c("is_correct", "Nullable(UInt8)"),
                _c("signals", "Map(String, Float64)"),
                _c("evaluator", _LS),
                _c("metadata_json", _S),
            ),
            ("run_id", "session_id", "event_id"),
            "rewards of sessions: RewardAssigned events and scored trajectories",
        ),
        Table(
            "trajectories",
            (
                *_envelope(),
                *_ROLLOUT,
                _c("status", _LS),
                _c("num_steps", "Int32"),
                _c("num_steps_reported", "Int32"),
                _c("step_ids", "Array(String)"),
                _c("min_policy_version", "Int64"),
                _c("max_policy_version", "Int64"),
                _c("response_tokens", "Int64"),
                _c("reward", "Nullable(Float64)"),
                _c("is_correct", "Nullable(UInt8)"),
                _c("reward_error", _S),
                _c("evaluator", _LS),
                _c("opened_at", _T),
                _c("closed_at", _T),
                _c("flags", "Array(String)"),
                _c("output_json", _S),
            ),
            ("run_id", "session_id", "event_id"),
            "assembled agent runs (steps are in steps)",
        ),
        Table(
            "episodes",
            (
                _c("event_id", _S),
                _c("run_id", _S),
                _c("task_id", _S),
                _c("benchmark", _LS),
                _c("session_ids", "Array(String)"),
                _c("rewards", "Array(Float64)"),
                _c("advantages", "Array(Float64)"),
                _c("estimator", _LS),
                _c("group_size", "Int32"),
                _c("is_partial", "UInt8"),
                _c("uniform_reward", "UInt8"),
                _c("assembled_at", _T),
            ),
            ("run_id", "task_id", "event_id"),
            "GRPO groups with their advantages",
        ),
        Table(
            "policy_updates",
            (
                _c("event_id", _S),
                _c("run_id", _S),
                _c("version", "Int64"),
                _c("checkpoint_uri", _S),
                _c("base_model", _LS),
                _c("backend", _LS),
                _c("metrics", "Map(String, Float64)"),
                _c("num_episodes", "Int64"),
                _c("num_tokens", "Int64"),
                _c("created_at", _T),
            ),
            ("run_id", "version", "event_id"),
            "policy versions published by trainers",
        ),
        Table(
            "dead_letters",
            (
                _c("event_id", _S),
                _c("source_topic", _S),
                _c("source_partition", "Int32"),
                _c("source_offset", "Int64"),
                _c("key", _S, pa.binary()),
                _c("value", _S, pa.binary()),
                _c("reason", _S),
                _c("error_type", _LS),
                _c("consumer", _LS),
                _c("failed_at", _T),
            ),
            ("source_topic", "source_partition", "source_offset", "event_id"),
            "records refused by the history sink or published to the dead-letter topic",
        ),
    )
}


def table(name: str) -> Table:
    """A table by name.

    Raises:
        KeyError: naming the unknown table and the known ones.
    """
    try:
        return TABLES[name]
    except KeyError:
        raise KeyError(f"unknown history table {name!r}; known: {', '.join(TABLES)}") from None


def create_statements(database: str) -> list[str]:
    """Every statement that creates the history database and its tables."""
    return [
        f"CREATE DATABASE IF NOT EXISTS `{database}`",
        *(t.create(database) for t in TABLES.values()),
    ]
