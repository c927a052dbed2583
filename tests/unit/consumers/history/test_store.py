"""HistoryStore contract, run against every engine available; and the event -> row mapping."""

from __future__ import annotations

import numpy as np
import pytest

from rllm.consumers.history.batch import RowBuffer
from rllm.consumers.history.ddl import TABLES, create_statements
from rllm.consumers.history.rows import dead_letter_row, event_rows
from rllm.consumers.history.types import HistoryStore, QueryError
from rllm.schemas.codec import AvroCodec
from tests import samples


def _rows_of_samples() -> RowBuffer:
    codec = AvroCodec()
    buf = RowBuffer()
    records = [
        *samples.session_events(),
        samples.TRAJECTORY,
        samples.EPISODE,
        samples.POLICY,
        samples.DEAD,
    ]
    for i, rec in enumerate(records):
        name, datum = codec.decode_dict(codec.encode(rec))
        buf.extend(event_rows(name, datum, ("rllm.x", 0, i)))
    buf.extend([dead_letter_row(("rllm.x", 0, 99), b"k", b"\x00junk", ValueError("bad"))])
    return buf


def test_every_table_is_keyed_by_its_event_id() -> None:
    assert set(TABLES) == {
        "runs",
        "sessions",
        "steps",
        "rewards",
        "trajectories",
        "episodes",
        "policy_updates",
        "dead_letters",
    }
    for t in TABLES.values():
        assert t.order_by[-1] in ("event_id", "version") or "event_id" in t.order_by
        assert "ReplacingMergeTree" in t.create("db")
    assert create_statements("h")[0] == "CREATE DATABASE IF NOT EXISTS `h`"


def test_samples_map_to_rows_and_round_trip(store: HistoryStore) -> None:
    buf = _rows_of_samples()
    for table, batch in buf.batches():
        store.insert(table, batch)
    db = store.database
    counts = {t: store.query(f"SELECT count() FROM `{db}`.`{t}` FINAL").rows[0][0] for t in TABLES}
    assert counts == {
        "runs": 2,
        "sessions": 2,
        "steps": 2,
        "rewards": 2,
        "trajectories": 1,
        "episodes": 1,
        "policy_updates": 1,
        "dead_letters": 2,
    }
    step = store.query(
        f"SELECT step_id, prompt_token_ids, response_token_ids, response_logprobs, n_response_ids,"
        f" error_kind, error_status FROM `{db}`.steps ORDER BY step_index"
    ).records()
    assert step[0]["prompt_token_ids"] == [7, 8, 9]
    assert step[0]["response_token_ids"] == [101, 102, 2]
    assert np.allclose(step[0]["response_logprobs"], [-0.5, -0.25, -0.125])
    assert step[0]["n_response_ids"] == 3
    assert (step[1]["error_kind"], step[1]["error_status"], step[1]["response_token_ids"]) == (
        "upstream_status",
        502,
        [],
    )


def test_redelivered_rows_count_once_with_final(store: HistoryStore) -> None:
    buf = _rows_of_samples()
    for _ in range(2):
        for table, batch in buf.batches():
            store.insert(table, batch)
    db = store.database
    assert store.query(f"SELECT count() FROM `{db}`.steps").rows[0][0] == 4
    assert store.query(f"SELECT count() FROM `{db}`.steps FINAL").rows[0][0] == 2


def test_bound_parameters_and_bad_ones(store: HistoryStore) -> None:
    for table, batch in _rows_of_samples().batches():
        store.insert(table, batch)
    sql = f"SELECT count() AS n FROM `{store.database}`.steps WHERE step_id = {{id:String}}"
    assert store.query(sql, {"id": "step-1"}).rows == [(1,)]
    assert store.query(sql, {"id": "x' OR '1'='1"}).rows == [(0,)]
    with pytest.raises(QueryError, match="'n'"):
        store.query("SELECT {n:UInt32}", {"n": "abc"})
