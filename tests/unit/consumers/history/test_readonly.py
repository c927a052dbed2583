"""The read path is read-only for real: ClickHouse refuses what a user's statement must not
do (``readonly=1`` set by the session) and the read limits stop a runaway one, on chDB; the
server engine sends the same settings with every request."""

from __future__ import annotations

import base64
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
from rllm.consumers.history.errors import StatementRefusedError
from rllm.consumers.history.limits import READ_ONLY, ReadLimits
from rllm.consumers.history.queries import run_named, run_sql
from rllm.consumers.history.service import ServiceClient
from rllm.consumers.history.settings import HistorySettings
from rllm.consumers.history.types import QueryError
from tests.unit.consumers.history.shared import limited_chdb, serving, shared_chdb

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
    with limited_chdb("ro", 500, TIGHT) as store:
        yield store


@pytest.fixture
def canary(tmp_path: Path) -> tuple[Path, str]:
    """A host file whose content is known; the content does not occur in its path."""
    content = f"canary-content-{uuid.uuid4().hex}"
    path = tmp_path / "secret.txt"
    path.write_text(content + "\n")
    return path, content


def _all_refused(store: ChdbStore, match: str, *sqls: str) -> None:
    """Each of ``sqls`` is refused with a QueryError matching ``match``."""
    for sql in sqls:
        with pytest.raises(QueryError, match=match):
            run_sql(store, sql)


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
    """Past the guard (the limited session directly): READONLY from ClickHouse, nothing read
    or made; and the guard refuses each before it runs."""
    before = _tables()
    text = sql.format(canary=canary[0], dir=canary[0].parent, db=f"`{history.database}`")
    with pytest.raises(QueryError, match=r"read-only mode \(readonly=1, set by the session\)"):
        history._run_user(text)
    with pytest.raises(StatementRefusedError) as exc:
        history.query_user(text)
    assert exc.value.kind in ("table function", "statement", "clause"), str(exc.value)
    assert _tables() == before
    assert history.query(f"SELECT count() FROM `{history.database}`.steps").rows == [(500,)]


def test_what_readonly_lets_through_is_what_the_lexer_refuses(
    history: ChdbStore, canary: tuple[Path, str], tmp_path: Path
) -> None:
    """Measured: readonly=1 lets scalar file() read and INTO OUTFILE write; run_sql refuses
    both, also in the disguises of the old bypass (quoted name, a heredoc hiding a quote)."""
    path, content = canary
    assert history._run_user(f"SELECT file('{path}')").rows == [(content + "\n",)]
    out = tmp_path / "out.csv"
    history._run_user(f"SELECT 1 INTO OUTFILE '{out}'")
    assert out.read_text() == "1\n"
    out.unlink()
    _all_refused(
        history,
        r"function \w+\(\) reads a host file",
        f"SELECT file('{path}')",
        f"SELECT `file`('{path}')",
        f"SELECT \"file\" /* c */ ('{path}')",
        f"SELECT \u201cfile\u201d('{path}')",
    )
    _all_refused(
        history,
        r"INTO OUTFILE and FORMAT are refused \(Literal",
        f"SELECT 1 INTO OUTFILE '{out}'",
        f"SELECT $$'$$ INTO OUTFILE '{out}' --'",
        f"SELECT $a$ ' $a$ AS x INTO /* */ OUTFILE '{out}'",
        f"SELECT \u2018'\u2019 INTO OUTFILE '{out}' -- '",
    )
    assert not out.exists()


def test_one_statement_only_even_when_a_heredoc_hides_the_semicolon(history: ChdbStore) -> None:
    before = _tables()
    with pytest.raises(QueryError, match="Multi-statements are not allowed"):
        run_sql(history, "SELECT $$'$$; CREATE TABLE x.y (a Int8) ENGINE = Memory --'")
    with pytest.raises(QueryError, match="Multi-statements are not allowed"):
        run_sql(history, "SELECT 1 /* /* */ */; SELECT 2")
    assert _tables() == before


SLOW = "SELECT count() FROM numbers(45000000) WHERE SHA256(SHA256(toString(number))) = ''"
"""Pure and under every limit but time: seconds of hashing (sleep() is not a pure function)."""


def test_a_runaway_statement_is_stopped_by_the_limits_with_their_names(
    history: ChdbStore,
) -> None:
    cases = [
        ("SELECT count() FROM numbers(1e12)", "rows read", "max_rows_to_read = 50_000_000"),
        (SLOW, "execution time", "max_execution_s = 1"),
        ("SELECT number FROM numbers(1001)", "result size", "max_result_rows = 1_000"),
        (
            "SELECT repeat(toString(number), 2000) FROM numbers(900)",
            "result size",
            "max_result_bytes",
        ),
        (  # 10 GB of strings: past the memory limit within milliseconds, long before 1 s
            "SELECT length(groupArray(repeat('x', 100000))) FROM numbers(1e5)",
            "memory",
            "max_memory_bytes",
        ),
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
    got = history._run_user(
        "SELECT getSetting('readonly'), getSetting('max_execution_time'), "
        "getSetting('max_rows_to_read'), getSetting('max_result_rows')"
    )
    assert [int(v) for v in got.rows[0]] == [1, 1, 50_000_000, 1000]
    with pytest.raises(QueryError, match="READONLY"):
        history._run_user("SELECT count() FROM numbers(1e12) SETTINGS max_rows_to_read = 0")
    with pytest.raises(StatementRefusedError, match="SETTINGS in the statement is refused"):
        history.query_user("SELECT count() FROM numbers(1e12) SETTINGS max_rows_to_read = 0")
    with pytest.raises(StatementRefusedError, match="SETTINGS in the statement is refused"):
        history.query_user(
            "SELECT count() FROM (SELECT * FROM numbers(1e12) SETTINGS max_rows_to_read = 0)"
        )
    with pytest.raises(QueryError, match="TOO_MANY_ROWS"):  # a subquery's SETTINGS: ignored
        history._run_user(
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
    with serving(tmp_path / "history.sock", history) as env:
        yield env


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
        cli,
        ["analytics", "sql", f"SELECT * FROM `file`('{canary[0]}', 'LineAsString')"],
        env=service,
    )
    assert res.exit_code == 1 and "file() reads a host file" in res.output
    assert canary[1] not in res.output
    res = CliRunner().invoke(cli, ["analytics", "sql", SLOW], env=service)
    assert res.exit_code == 1, res.output
    assert "stopped by the read limit on execution time" in res.output
    assert "Traceback" not in res.output
    res = CliRunner().invoke(
        cli,
        ["analytics", "sql", "SELECT count() AS n FROM __DB__.steps", "--format", "json"],
        env=service,
    )
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
            encoded = sql.split("base64Decode('")[1].split("'")[0]
            return pa.table({"q": [base64.b64decode(encoded).decode()]})
        if sql.startswith("EXPLAIN AST"):
            lines = ["SelectWithUnionQuery (children 1)", " ExpressionList (children 1)"]
            lines += ["  SelectQuery (children 1)", "   ExpressionList (children 1)"]
            return pa.table({"explain": [*lines, "    Literal UInt64_3"]})
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
    assert settings[1:] == [limited] * 6
    parse = (
        f"SELECT formatQuerySingleLine(base64Decode('{base64.b64encode(b'SELECT 3').decode()}'))"
    )
    assert [c["sql"] for c in client.calls] == [
        "SELECT {a:Int32}",
        "SELECT formatQuerySingleLine(base64Decode('U0VMRUNUIDI=')) AS q",
        "EXPLAIN AST SELECT 2",
        "SELECT 2",
        parse + " AS q",
        "EXPLAIN AST SELECT 3",
        "SELECT 3",
    ]
    assert client.calls[0]["parameters"] == {"a": 1}


def test_the_same_settings_enforce_on_the_clickhouse_engine(canary: tuple[Path, str]) -> None:
    """The dict the server engine sends, applied by chDB as a session's settings, refuses."""
    store = ChdbStore(
        shared_chdb().path, "default", ReadLimits(max_execution_s=9, max_result_rows=77)
    )
    try:
        got = store._run_user("SELECT getSetting('readonly'), getSetting('max_result_rows')")
        assert [int(v) for v in got.rows[0]] == [1, 77]
        with pytest.raises(QueryError, match="READONLY"):
            store._run_user(f"SELECT * FROM file('{canary[0]}', 'LineAsString')")
    finally:
        store.close()


ATTACK = "SELECT '\\\\' AS a, file\u200b($$/etc/passwd$$) AS b -- '"
"""Issue 33 item 2: U+200B is whitespace to ClickHouse; the word list read `file\u200b`."""


@pytest.mark.parametrize(
    "template",
    [
        ATTACK.replace("/etc/passwd", "{path}"),
        "SELECT file\u200b('{path}')",
        "SELECT '\\\\', file\u200b /* */ ('{path}') -- '",
        "SELECT * FROM file\u200b('{path}', 'LineAsString')",
        "SELECT '\\\\' AS a, (SELECT file\u200b('{path}')) AS b -- '",
    ],
)
def test_the_zero_width_space_file_attack_is_refused_on_every_path(
    history: ChdbStore, service: dict[str, str], canary: tuple[Path, str], template: str
) -> None:
    """On the scratch directory, through the service's client (its own guard), through a raw
    user request to the service, and through the CLI: refused, naming file, canary unread."""
    path, content = canary
    sql = template.format(path=path)
    client = ServiceClient(Path(service["RLLM_HISTORY_SOCKET"]), history.database)
    try:
        for store in (history, client):
            with pytest.raises(QueryError, match=r"function file\(\) reads a host file") as exc:
                run_sql(store, sql)
            assert content not in str(exc.value)
        with pytest.raises(QueryError, match=r"function file\(\) reads a host file"):
            client.query_user(sql)  # a raw request, past the CLI
    finally:
        client.close()
    res = CliRunner().invoke(cli, ["analytics", "sql", sql], env=service)
    assert res.exit_code == 1 and "function file() reads a host file" in res.output
    assert content not in res.output
    if "FROM file" not in sql:  # scalar file(): readonly=1 alone would have let it read
        assert content in str(history._run_user(sql.split(" -- ")[0]).rows)


def test_multi_line_sql_runs_through_the_service(
    history: ChdbStore, service: dict[str, str]
) -> None:
    sql = "SELECT\n\tcount() AS n -- steps\n/* all of them */\nFROM __DB__.steps\n"
    res = CliRunner().invoke(cli, ["analytics", "sql", sql, "--format", "json"], env=service)
    assert res.exit_code == 0, res.output
    assert json.loads(res.output) == [{"n": 500}]


def test_an_unprefixed_table_is_answered_with_where_the_tables_are(
    service: dict[str, str],
) -> None:
    res = CliRunner().invoke(cli, ["analytics", "sql", "SELECT count() FROM steps"], env=service)
    assert res.exit_code == 1, res.output
    said = " ".join(res.output.split())
    assert "Unknown table" in said and "Traceback" not in said
    database = service["RLLM_HISTORY_DATABASE"]
    assert said.endswith(
        f"(the history's tables are read as {database}.<table> or __DB__.<table>; `rllm-cli "
        "analytics tables` lists them and their columns)"
    ), said


def test_analytics_tables_lists_every_table_and_its_columns() -> None:
    from rllm.consumers.history.ddl import TABLES

    res = CliRunner().invoke(cli, ["analytics", "tables", "--format", "tsv"])
    assert res.exit_code == 0, res.output
    head, *rows = [line.split("\t") for line in res.output.splitlines()]
    assert head == ["table", "row", "columns"]
    assert [r[0] for r in rows] == [f"rllm.{name}" for name in TABLES] and len(rows) == 8
    steps = dict((r[0], r[2]) for r in rows)["rllm.steps"].split("; ")
    assert steps[:3] == [f"{c.name} {c.ch_type}" for c in TABLES["steps"].columns[:3]]
    assert len(steps) == len(TABLES["steps"].columns)
    assert all("CODEC" not in column for column in steps)
    refused = CliRunner().invoke(cli, ["analytics", "tables", "--run", "r"])
    assert refused.exit_code == 1 and "tables: takes no SQL, filter or --plot" in refused.output
