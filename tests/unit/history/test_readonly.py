"""The read path is read-only for real: ClickHouse refuses what a user's statement must not
do (``readonly=1`` set by the session) and the read limits stop a runaway one, on chDB; the
server engine sends the same settings with every request."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from click.testing import CliRunner

from rllm.cli.main import cli
from rllm.consumers.history.engine_chdb import ChdbStore
from rllm.consumers.history.engine_server import ServerStore
from rllm.consumers.history.limits import READ_ONLY, ReadLimits
from rllm.consumers.history.queries import run_named, run_sql
from rllm.consumers.history.service import ServiceClient, serve_queries
from rllm.consumers.history.settings import HistorySettings
from rllm.consumers.history.types import HistoryStore, QueryError
from tests.unit.history.shared import fresh_chdb, load, shared_chdb

TIGHT = ReadLimits(
    max_execution_s=1,
    max_rows_to_read=50_000_000,
    max_memory_bytes=300 * 1024**2,
    max_result_rows=1000,
    max_result_bytes=1024**2,
)


@pytest.fixture(scope="module")
def history() -> Iterator[ChdbStore]:
    """A small history, read through a second store on the same directory with TIGHT limits."""
    view = fresh_chdb("ro")
    load(view, 500)
    store = ChdbStore(shared_chdb().path, view.database, TIGHT)
    yield store
    store.close()


@pytest.fixture
def canary(tmp_path: Path) -> tuple[Path, str]:
    """A host file whose content is known; the content does not occur in its path."""
    content = f"canary-content-{uuid.uuid4().hex}"
    path = tmp_path / "secret.txt"
    path.write_text(content + "\n")
    return path, content


def _tables() -> int:
    return int(shared_chdb().query("SELECT count() FROM system.tables").rows[0][0])


# Each bypass of the old word list, as the issue lists them: refused before it runs, with
# the function named.
ISSUE_BYPASSES = [
    ("SELECT * FROM `file`('{canary}', 'LineAsString')", "file() reads a host file"),
    ("SELECT * FROM icebergLocal('{dir}')", "table function icebergLocal()"),
    ("SELECT * FROM deltaLakeLocal('{dir}')", "table function deltaLakeLocal()"),
    ("SELECT * FROM arrowFlight('127.0.0.1:9', 'x')", "table function arrowFlight()"),
    ("SELECT * FROM hdfsCluster('c', 'hdfs://127.0.0.1:9/x', 'CSV')", "hdfsCluster()"),
    ("SELECT * FROM azureBlobStorageCluster('c', 'http://127.0.0.1:9', 'a', 'b')", "azureBlob"),
    ("SELECT * FROM s3Queue('http://127.0.0.1:9/x', 'CSV')", "table function s3Queue()"),
    ("SELECT * FROM merge('{db}', '.*')", "table function merge()"),
    ("SELECT * FROM view(SELECT 1)", "table function view()"),
]


@pytest.mark.parametrize(("sql", "named"), ISSUE_BYPASSES)
def test_each_bypass_of_the_issue_is_refused_with_its_name(
    history: ChdbStore, canary: tuple[Path, str], sql: str, named: str
) -> None:
    text = sql.format(canary=canary[0], dir=canary[0].parent, db=history.database)
    with pytest.raises(QueryError, match=named.replace("(", r"\(").replace(")", r"\)")) as exc:
        run_sql(history, text)
    assert str(exc.value).startswith("sql: ")


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM `file`('{canary}', 'LineAsString')",
        "SELECT * FROM file('{canary}', 'LineAsString')",
        "SELECT * FROM icebergLocal('{dir}')",
        "SELECT * FROM deltaLakeLocal('{dir}')",
        "SELECT * FROM filesystem('{dir}')",
        "SELECT * FROM url('http://127.0.0.1:9/x', 'CSV')",
        "SELECT * FROM executable('cat {canary}', 'TSV', 'x String')",
        "SELECT * FROM sqlite('{canary}', 't')",
        "SELECT * FROM loop(numbers(3))",
        "SELECT * FROM (SELECT * FROM file('{canary}', 'LineAsString') SETTINGS readonly = 0)",
        "SELECT 1 SETTINGS readonly = 0",
        "SELECT 1 SETTINGS max_execution_time = 1000",
        "SET readonly = 0",
        "CREATE TABLE {db}.leak (x String) ENGINE = Memory",
        "CREATE TEMPORARY TABLE leak (x String)",
        "INSERT INTO {db}.steps (event_id) VALUES ('x')",
        "DROP TABLE {db}.steps",
    ],
)
def test_clickhouse_itself_refuses_them_under_the_session_readonly(
    history: ChdbStore, canary: tuple[Path, str], sql: str
) -> None:
    """Past the lexer (query_user directly): READONLY from ClickHouse, nothing read or made."""
    before = _tables()
    text = sql.format(canary=canary[0], dir=canary[0].parent, db=f"`{history.database}`")
    with pytest.raises(QueryError, match=r"read-only mode \(readonly=1, set by the session\)"):
        history.query_user(text)
    assert _tables() == before
    assert history.query(f"SELECT count() FROM `{history.database}`.steps").rows == [(500,)]


def test_what_readonly_lets_through_is_what_the_lexer_refuses(
    history: ChdbStore, canary: tuple[Path, str], tmp_path: Path
) -> None:
    """Measured: readonly=1 lets scalar file() read and INTO OUTFILE write; run_sql refuses
    both, also in the disguises of the old bypass (quoted name, a heredoc hiding a quote)."""
    path, content = canary
    assert history.query_user(f"SELECT file('{path}')").rows == [(content + "\n",)]
    out = tmp_path / "out.csv"
    history.query_user(f"SELECT 1 INTO OUTFILE '{out}'")
    assert out.read_text() == "1\n"
    out.unlink()
    for sql in (
        f"SELECT file('{path}')",
        f"SELECT `file`('{path}')",
        f"SELECT \"file\" /* c */ ('{path}')",
        f"SELECT \u201cfile\u201d('{path}')",
    ):
        with pytest.raises(QueryError, match=r"function \w+\(\) reads a host file"):
            run_sql(history, sql)
    for sql in (
        f"SELECT 1 INTO OUTFILE '{out}'",
        f"SELECT $$'$$ INTO OUTFILE '{out}' --'",
        f"SELECT $a$ ' $a$ AS x INTO /* */ OUTFILE '{out}'",
        f"SELECT \u2018'\u2019 INTO OUTFILE '{out}' -- '",
    ):
        with pytest.raises(QueryError, match=r"INTO \(OUTFILE\) writes a file"):
            run_sql(history, sql)
    assert not out.exists()


def test_one_statement_only_even_when_a_heredoc_hides_the_semicolon(history: ChdbStore) -> None:
    before = _tables()
    with pytest.raises(QueryError, match="only one statement"):
        run_sql(history, "SELECT $$'$$; CREATE TABLE x.y (a Int8) ENGINE = Memory --'")
    with pytest.raises(QueryError, match="only one statement"):
        run_sql(history, "SELECT 1 /* /* */ */; SELECT 2")
    assert _tables() == before


def test_a_runaway_statement_is_stopped_by_the_limits_with_their_names(
    history: ChdbStore,
) -> None:
    cases = [
        ("SELECT count() FROM numbers(1e12)", "rows read", "max_rows_to_read = 50_000_000"),
        ("SELECT sleep(2)", "execution time", "max_execution_s = 1"),
        ("SELECT number FROM numbers(1001)", "result size", "max_result_rows = 1_000"),
        (
            "SELECT repeat(toString(number), 2000) FROM numbers(900)",
            "result size",
            "max_result_bytes",
        ),
        ("SELECT length(groupArray(number)) FROM numbers(4e7)", "memory", "max_memory_bytes"),
    ]
    for sql, what, setting in cases:
        with pytest.raises(QueryError) as exc:
            run_sql(history, sql)
        said = str(exc.value)
        assert said.startswith(f"sql: stopped by the read limit on {what} ({setting}"), said
        env = "RLLM_HISTORY_SQL_" + setting.split(" ")[0].upper()
        assert env in said, said
    # the same session answers again, right (chDB 4.4 leaves a failed query's output behind)
    assert run_sql(history, "SELECT number FROM numbers(3)").rows == [(0,), (1,), (2,)]


def test_a_statement_cannot_raise_its_own_limits(history: ChdbStore) -> None:
    got = history.query_user(
        "SELECT getSetting('readonly'), getSetting('max_execution_time'), "
        "getSetting('max_rows_to_read'), getSetting('max_result_rows')"
    )
    assert [int(v) for v in got.rows[0]] == [1, 1, 50_000_000, 1000]
    with pytest.raises(QueryError, match="READONLY"):
        history.query_user("SELECT count() FROM numbers(1e12) SETTINGS max_rows_to_read = 0")
    with pytest.raises(QueryError, match="TOO_MANY_ROWS"):  # a subquery's SETTINGS: ignored
        history.query_user(
            "SELECT count() FROM (SELECT * FROM numbers(1e12) SETTINGS max_rows_to_read = 0)"
        )


def test_our_reads_are_read_only_but_not_limited(history: ChdbStore) -> None:
    assert len(history.query("SELECT number FROM numbers(5000)").rows) == 5000
    with pytest.raises(QueryError, match="READONLY"):
        history.query(f"DROP TABLE `{history.database}`.steps")
    assert history.query(f"SELECT count() FROM `{history.database}`.steps").rows == [(500,)]


def test_normal_analytics_statements_still_work(history: ChdbStore) -> None:
    db = history.database
    runs = {r["run_id"]: r["steps"] for r in run_named(history, "runs").records()}
    got = run_sql(
        history,
        "SELECT run_id, count() AS steps FROM __DB__.steps FINAL GROUP BY run_id ORDER BY run_id",
    )
    assert dict(got.rows) == runs and sum(runs.values()) == 500
    cte = run_sql(
        history,
        f"WITH s AS (SELECT session_id, count() AS n FROM `{db}`.steps GROUP BY session_id) "
        "SELECT count() AS sessions, sum(n) AS steps FROM s",
    )
    assert cte.rows[0][1] == 500 and cte.rows[0][0] == len(
        history.query(f"SELECT DISTINCT session_id FROM `{db}`.steps").rows
    )
    union = run_sql(
        history,
        "SELECT 'steps' AS t, count() AS n FROM __DB__.steps "
        "UNION ALL SELECT 'zeros', count() FROM numbers(10) -- comment with 'a quote",
    )
    assert sorted(union.rows) == [("steps", 500), ("zeros", 10)]
    joined = run_sql(
        history,
        "SELECT count() FROM __DB__.steps AS st INNER JOIN (SELECT DISTINCT session_id "
        "FROM __DB__.sessions) AS se ON st.session_id = se.session_id "
        "WHERE st.step_id IN (SELECT step_id FROM __DB__.steps) AND format('{}', 1) = '1'",
    )
    assert joined.rows[0][0] > 0
    words = run_sql(history, "SELECT 'INTO OUTFILE; DROP' AS `insert`, $$file('x')$$ AS s")
    assert words.rows == [("INTO OUTFILE; DROP", "file('x')")]


@pytest.fixture
def service(history: ChdbStore, tmp_path: Path) -> Iterator[dict[str, str]]:
    sock = tmp_path / "history.sock"
    server = serve_queries(sock, history)
    try:
        yield {
            "RLLM_HISTORY_SOCKET": str(sock),
            "RLLM_HISTORY_DATABASE": history.database,
            "RLLM_CLICKHOUSE_URL": "",
        }
    finally:
        server.stop()


def test_the_service_api_reads_only_and_limits_user_statements(
    history: ChdbStore, service: dict[str, str]
) -> None:
    client = ServiceClient(Path(service["RLLM_HISTORY_SOCKET"]), history.database)
    try:
        with pytest.raises(QueryError, match="READONLY"):  # a raw request, past any lexer
            client.query(f"DROP TABLE `{history.database}`.steps")
        assert len(client.query("SELECT number FROM numbers(2000)").rows) == 2000
        with pytest.raises(QueryError, match="max_result_rows = 1_000"):
            client.query_user("SELECT number FROM numbers(2000)")
        with pytest.raises(QueryError, match="stopped by the read limit on rows read"):
            run_sql(client, "SELECT count() FROM numbers(1e12)")
    finally:
        client.close()
    assert history.query(f"SELECT count() FROM `{history.database}`.steps").rows == [(500,)]


def test_cli_sql_refuses_a_bypass_and_reports_a_limit(
    service: dict[str, str], canary: tuple[Path, str]
) -> None:
    res = CliRunner().invoke(
        cli, ["analytics", "sql", f"SELECT * FROM `file`('{canary[0]}', 'LineAsString')"],
        env=service,
    )  # fmt: skip
    assert res.exit_code == 1 and "file() reads a host file" in res.output
    assert canary[1] not in res.output
    res = CliRunner().invoke(cli, ["analytics", "sql", "SELECT sleep(2)"], env=service)
    assert res.exit_code == 1, res.output
    assert "stopped by the read limit on execution time" in res.output
    assert "Traceback" not in res.output
    res = CliRunner().invoke(
        cli, ["analytics", "sql", "SELECT count() AS n FROM __DB__.steps", "--format", "json"],
        env=service,
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert json.loads(res.output) == [{"n": 500}]


def test_history_settings_carry_the_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RLLM_HISTORY_SQL_MAX_EXECUTION_S", "7")
    monkeypatch.setenv("RLLM_HISTORY_SQL_MAX_RESULT_ROWS", "12")
    limits = HistorySettings().read_limits
    assert limits == ReadLimits(max_execution_s=7, max_result_rows=12)
    monkeypatch.setenv("RLLM_HISTORY_SQL_MAX_EXECUTION_S", "0")
    with pytest.raises(ValueError, match="history_sql_max_execution_s"):
        HistorySettings()


class _RecordingClient:
    """Stands in for clickhouse-connect's client: records what each call would send."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def query_arrow(self, sql: str, **kwargs: Any) -> pa.Table:
        self.calls.append({"sql": sql, **kwargs})
        if sql.startswith("SELECT formatQuerySingleLine"):  # what the server answers
            return pa.table({"q": [kwargs["parameters"]["q"]]})
        return pa.table({"x": [1]})


def test_the_server_engine_sends_readonly_and_the_limits_with_every_read() -> None:
    store = object.__new__(ServerStore)
    store.database, store.limits = "rllm", ReadLimits(max_execution_s=9, max_result_rows=77)
    store._client = client = _RecordingClient()
    store.query("SELECT {a:Int32}", {"a": 1})
    store.query_user("SELECT 2")
    run_sql(store, "SELECT 3")
    settings = [c["settings"] for c in client.calls]
    assert settings[0] == READ_ONLY == {"readonly": 1}
    limited = {
        "readonly": 1,
        "max_execution_time": 9,
        "timeout_overflow_mode": "throw",
        "max_rows_to_read": 1_000_000_000,
        "read_overflow_mode": "throw",
        "max_memory_usage": 2 * 1024**3,
        "max_result_rows": 77,
        "max_result_bytes": 256 * 1024**2,
        "result_overflow_mode": "throw",
    }
    assert settings[1:] == [limited, limited, limited]
    assert [c["sql"] for c in client.calls] == [
        "SELECT {a:Int32}",
        "SELECT 2",
        "SELECT formatQuerySingleLine({q:String}) AS q",
        "SELECT 3",
    ]
    assert client.calls[0]["parameters"] == {"a": 1}
    assert client.calls[2]["parameters"] == {"q": "SELECT 3"}


def test_the_same_settings_enforce_on_the_clickhouse_engine(canary: tuple[Path, str]) -> None:
    """The dict the server engine sends, applied by chDB as a session's settings, refuses."""
    store: HistoryStore = ChdbStore(
        shared_chdb().path, "default", ReadLimits(max_execution_s=9, max_result_rows=77)
    )
    try:
        got = store.query_user("SELECT getSetting('readonly'), getSetting('max_result_rows')")
        assert [int(v) for v in got.rows[0]] == [1, 77]
        with pytest.raises(QueryError, match="READONLY"):
            store.query_user(f"SELECT * FROM file('{canary[0]}', 'LineAsString')")
    finally:
        store.close()
