"""Property tests of the analytics SQL guard with hypothesis: a call that reaches outside,
dressed in any whitespace ClickHouse reads (U+200B, U+00A0, U+2028, U+3000, control
characters), comments, quoting styles and escapes, is refused naming it; and benign
SELECTs dressed the same way run and return their value."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rllm.consumers.history.engine_chdb import ChdbStore
from rllm.consumers.history.errors import StatementRefusedError
from rllm.consumers.history.queries import run_sql
from rllm.consumers.history.types import QueryError
from tests.unit.consumers.history.shared import fresh_chdb

SPACES = [" ", "\t", "\n", "\r", "\f", "\v", "\u200b", "\u00a0", "\u2028", "\u3000", "\r\n"]
COMMENTS = ["/* c */", "/* /* nested */ */", "-- c\n", "# c\n", "/* ' */", "/* $$ */"]
CANARY = "canary-ZfQ8"


def _gap() -> st.SearchStrategy[str]:
    piece = st.sampled_from(SPACES) | st.sampled_from(COMMENTS).map(lambda c: f" {c} ")
    return st.lists(piece, max_size=3).map("".join)


def _quoted(name: str) -> st.SearchStrategy[str]:
    return st.sampled_from(
        [name, name.upper(), f"`{name}`", f'"{name}"', f"\u201c{name}\u201d", name.title()]
    )


def _string(value: str) -> st.SearchStrategy[str]:
    escaped = value.replace("'", "\\'")
    return st.sampled_from(
        [f"'{escaped}'", f"$${value}$$", f"$t${value}$t$", f"\u2018{value}\u2019", f"'{value}'"]
    )


HOST = [
    ("file", "{path}"),
    ("url", "http://127.0.0.1:9/x"),
    ("s3", "http://127.0.0.1:9/b/x"),
    ("hdfs", "hdfs://127.0.0.1:9/x"),
    ("remote", "127.0.0.1:9"),
    ("remoteSecure", "127.0.0.1:9"),
    ("clusterAllReplicas", "default"),
    ("mysql", "127.0.0.1:9"),
    ("postgresql", "127.0.0.1:9"),
    ("sqlite", "{path}"),
    ("executable", "cat {path}"),
    ("icebergLocal", "{dir}"),
    ("deltaLakeLocal", "{dir}"),
    ("dictGet", "d"),
    ("dictGetString", "d"),
    ("joinGet", "j"),
    ("input", "x String"),
    ("filesystem", "{dir}"),
    ("catboostEvaluate", "{path}"),
]


@st.composite
def attacks(draw: st.DrawFn) -> tuple[str, str]:
    name, arg = draw(st.sampled_from(HOST))
    fn = draw(_quoted(name))
    literal = draw(_string(arg))
    call = f"{fn}{draw(_gap())}({draw(_gap())}{literal}{draw(_gap())})"
    lead = draw(st.sampled_from(["SELECT '\\\\' AS a, ", "SELECT ", "SELECT 1, ", "SELECT\n"]))
    shape = draw(st.sampled_from(["col", "from", "sub", "where", "cte", "union"]))
    body = {
        "col": f"{lead}{call} AS b",
        "from": f"SELECT * FROM{draw(_gap())} {call}",
        "sub": f"SELECT * FROM (SELECT * FROM {call})",
        "where": f"SELECT 1 WHERE length(toString({call})) > 0",
        "cte": f"WITH w AS (SELECT {call} AS x) SELECT * FROM w",
        "union": f"SELECT 'a' UNION ALL SELECT toString({call})",
    }[shape]
    tail = draw(st.sampled_from(["", " -- '", ";", " /* */", "\n"]))
    return draw(_gap()) + body + tail, name


@st.composite
def benign(draw: st.DrawFn) -> tuple[str, int]:
    n = draw(st.integers(min_value=0, max_value=50))
    g = [draw(_gap()) for _ in range(4)]
    text = draw(_string("x"))
    sql = (
        f"SELECT{g[0]} {n} + length({text}) - 1 AS v{g[1]}"
        f" FROM{g[2]} numbers(1){g[3]} WHERE number = 0"
    )
    return sql + draw(st.sampled_from(["", ";", " -- done", "\n"])), n


@pytest.fixture(scope="module")
def store() -> Iterator[ChdbStore]:
    yield fresh_chdb("hf")


@pytest.fixture(scope="module")
def canary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("fz") / "secret.txt"
    path.write_text(CANARY + "\n")
    return path


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(attack=attacks())
def test_every_disguised_call_out_is_refused(
    store: ChdbStore, canary: Path, attack: tuple[str, str]
) -> None:
    sql, name = attack
    sql = sql.replace("{path}", str(canary)).replace("{dir}", str(canary.parent))
    try:
        got = run_sql(store, sql)
    except StatementRefusedError as exc:
        assert exc.name.lower() == name.lower() or exc.kind == "name", (sql, str(exc))
        assert CANARY not in str(exc)
        return
    except QueryError as exc:  # ClickHouse's own syntax error: nothing ran
        assert "cannot parse the statement" in str(exc), (sql, str(exc))
        return
    pytest.fail(f"ran: {sql!r} -> {got.rows!r}")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=benign())
def test_benign_selects_in_any_dress_run(store: ChdbStore, case: tuple[str, int]) -> None:
    sql, n = case
    assert run_sql(store, sql).rows == [(n,)], sql
