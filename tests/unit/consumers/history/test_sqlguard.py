"""The SQL escape hatch accepts one SELECT of pure functions over the history's tables, as
ClickHouse itself parses it, and refuses everything else, naming what and its value."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterator

import pytest

from rllm.consumers.history import sql as named_sql
from rllm.consumers.history.engine_chdb import ChdbStore
from rllm.consumers.history.errors import StatementRefusedError
from rllm.consumers.history.queries import run_sql
from rllm.consumers.history.sqlguard import check_tree, parse_ast
from rllm.consumers.history.sqlnames import AGGREGATES, FUNCTIONS, TABLE_FUNCTIONS
from rllm.consumers.history.types import QueryError
from rllm.consumers.viewer import sql as viewer_sql
from tests.unit.consumers.history.shared import fresh_chdb, load, shared_chdb

ZWSP = "\u200b"


@pytest.fixture(scope="module")
def store() -> Iterator[ChdbStore]:
    view = fresh_chdb("sg")
    load(view, 30)
    yield view


@pytest.mark.parametrize(
    ("sql", "rows"),
    [
        ("SELECT 1", [(1,)]),
        ("  select count() > 0 from __DB__.steps;  ", [(1,)]),
        ("WITH x AS (SELECT 1 AS a) SELECT a FROM x", [(1,)]),
        ("SELECT 'drop table x; insert into y' AS s", [("drop table x; insert into y",)]),
        ("SELECT `insert` FROM (SELECT 1 AS `insert`)", [(1,)]),
        ("SELECT replaceAll('a', 'a', 'b') -- trailing comment", [("b",)]),
        ("SELECT 'it''s' AS a", [("it's",)]),
        ("SELECT 'a\\'b'", [("a'b",)]),
        ("SELECT $t$ ; ' $t$", [(" ; ' ",)]),
        ("SELECT format('{} {}', 'a', 'b')", [("a b",)]),
        ("SELECT 1 AS `insert`, $$INTO OUTFILE$$ AS s;", [(1, "INTO OUTFILE")]),
        ("SELECT '\\\\' AS a", [("\\",)]),  # a backslash is a backslash (not unescaped twice)
        ("SELECT\tnumber\nFROM\tnumbers(2)\r\nORDER BY number", [(0,), (1,)]),
        (f"SELECT{ZWSP}1 /* U+200B is whitespace to ClickHouse */", [(1,)]),
        (
            "SELECT avgIfOrNull(number, number > 1), uniqExactIf(number, 1) FROM numbers(4)",
            [(2.5, 4)],
        ),
        ("SELECT * FROM (SELECT 1 AS x UNION ALL SELECT 2) ORDER BY x", [(1,), (2,)]),
        ("SELECT 1 IN (SELECT number FROM numbers(3)), EXISTS (SELECT 1)", [(1, 1)]),
    ],
)
def test_accepts_selects_and_returns_their_rows(
    store: ChdbStore, sql: str, rows: list[tuple[object, ...]]
) -> None:
    assert run_sql(store, sql).rows == rows


def test_multi_line_sql_with_comments_and_tabs_runs(store: ChdbStore) -> None:
    sql = (
        "-- sessions per run, with a comment first\n"
        "WITH\n\tper_run AS (\n"
        "\t\tSELECT run_id, /* a block\n comment */ count() AS steps\n"
        "\t\tFROM __DB__.steps FINAL -- trailing\n"
        "\t\tGROUP BY run_id\n\t)\n"
        "SELECT run_id,\n\tsteps\nFROM per_run\nORDER BY run_id;\n"
    )
    got = run_sql(store, sql)
    expected = store.query(
        f"SELECT run_id, count() FROM `{store.database}`.steps FINAL GROUP BY run_id "
        "ORDER BY run_id"
    )
    total = store.query(f"SELECT count() FROM `{store.database}`.steps FINAL").rows[0][0]
    assert got.rows == expected.rows and sum(n for _, n in got.rows) == total > 0


# (statement, what is refused, the refused value); every probe of the old word list kept.
PROBES = [
    ("INSERT INTO __DB__.steps VALUES (1)", "statement", "InsertQuery"),
    ("ALTER TABLE __DB__.steps DELETE WHERE 1", "statement", "AlterQuery"),
    ("DROP TABLE __DB__.steps", "statement", "DropQuery"),
    ("/* SELECT */ DELETE FROM x WHERE 1", "statement", "DeleteQuery"),
    ("SELECT 1 INTO OUTFILE '/tmp/x'", "clause", "Literal '/tmp/x'"),
    ("SELECT $$'$$ INTO OUTFILE '/tmp/x' --'", "clause", "Literal '/tmp/x'"),
    ("SELECT \u2018'\u2019 INTO OUTFILE '/tmp/x' --'", "clause", "Literal '/tmp/x'"),
    ("SELECT 1 FORMAT CSV", "clause", "Identifier CSV"),
    ("SELECT number FROM numbers(3) FORMAT JSON", "clause", "Identifier JSON"),
    ("SELECT 1 SETTINGS readonly = 0", "clause", "SETTINGS"),
    ("SELECT * FROM (SELECT 1 SETTINGS max_threads = 1)", "clause", "SETTINGS"),
    ("SELECT * FROM file('/etc/passwd')", "table function", "file"),
    ("SELECT * FROM `file`('/etc/hostname', 'LineAsString')", "table function", "file"),
    ("SELECT * FROM url('http://x', CSV)", "table function", "url"),
    ("SELECT * FROM icebergLocal('/tmp')", "table function", "icebergLocal"),
    ("SELECT * FROM `deltaLakeLocal`('/tmp')", "table function", "deltaLakeLocal"),
    ("SELECT * FROM merge('rllm', '.*')", "table function", "merge"),
    ("SELECT * FROM view(SELECT 1)", "table function", "view"),
    ("SELECT * FROM remote('127.0.0.1', system.one)", "table function", "remote"),
    ("SELECT * FROM s3('http://127.0.0.1:9/x', 'CSV')", "table function", "s3"),
    ("SELECT * FROM input('x String')", "table function", "input"),
    ("SELECT \"file\"('/etc/hostname')", "function", "file"),
    ("SELECT \u201cfile\u201d('/etc/hostname')", "function", "file"),
    ("SELECT file /* gap */ ('/etc/hostname')", "function", "file"),
    (f"SELECT '\\\\' AS a, file{ZWSP}($$/etc/passwd$$) AS b -- '", "function", "file"),
    (f"SELECT file{ZWSP}('/etc/shadow')", "function", "file"),
    (f"SELECT file{ZWSP}('/proc/self/environ')", "function", "file"),
    ("SELECT fIlE('/etc/passwd')", "function", "fIlE"),
    ("SELECT file\u00a0('/etc/passwd')", "function", "file"),
    ("SELECT file\u3000('/etc/passwd')", "function", "file"),
    ("SELECT\nfile\n(\n'/etc/passwd'\n)", "function", "file"),
    ("SELECT dictGet('d', 'a', 1)", "function", "dictGet"),
    ("SELECT joinGet('j', 'a', 1)", "function", "joinGet"),
    ("SELECT getSetting('readonly')", "function", "getSetting"),
    ("SELECT sleep(1)", "function", "sleep"),
    ("SELECT * FROM system.one", "table", "system.one"),
    ("SELECT 1 IN system.one", "table", "system.one"),
    ("SELECT * FROM default.x", "table", "default.x"),
    ("SELECT * FROM __DB__.nope", "table", "nope"),
    ("SELECT * APPLY(toString) FROM numbers(1)", "clause", "ColumnsApplyTransformer"),
    ("SELECT `fi\nle`(1)", "name", "le"),
    ("", "statement", ""),
]


@pytest.mark.parametrize(("sql", "kind", "name"), PROBES)
def test_refusals_name_what_and_the_value(store: ChdbStore, sql: str, kind: str, name: str) -> None:
    with pytest.raises(StatementRefusedError) as exc:
        run_sql(store, sql)
    assert exc.value.kind == kind, str(exc.value)
    if kind == "table" and "." not in name:
        name = f"{store.database}.{name}"
    assert name in exc.value.name, (exc.value.name, str(exc.value))
    assert str(exc.value).startswith("sql: ")


@pytest.mark.parametrize(
    ("sql", "said"),
    [
        ("SELECT 1; DROP TABLE __DB__.steps", "Multi-statements are not allowed"),
        ("SELECT 1 /* ; */; DROP TABLE x", "Multi-statements are not allowed"),
        ("SELECT $a$'$a$; DROP TABLE x --'", "Multi-statements are not allowed"),
        ("SELECT 1 /* /* */ ; */; DROP TABLE x", "Multi-statements are not allowed"),
        ("SELECT 'unterminated", "ClickHouse cannot parse the statement"),
        ("SELECT 1 /* /* */", "ClickHouse cannot parse the statement"),
    ],
)
def test_syntax_errors_are_clickhouses_own(store: ChdbStore, sql: str, said: str) -> None:
    with pytest.raises(QueryError, match=re.escape(said)):
        run_sql(store, sql)


def test_the_tree_walk_on_a_printed_tree() -> None:
    dump = "\n".join(
        [
            "SelectWithUnionQuery (children 1)",
            " ExpressionList (children 1)",
            "  SelectQuery (children 1)",
            "   ExpressionList (children 2)",
            "    Literal '\\\\' (alias a)",
            "    Function file (alias b) (children 1)",
            "     ExpressionList (children 1)",
            "      Literal '/etc/passwd'",
        ]
    )
    root = parse_ast(dump)
    assert [n.kind for n, _ in root.walk()][-3:] == ["Function", "ExpressionList", "Literal"]
    with pytest.raises(StatementRefusedError, match=r"function file\(\) reads a host file"):
        check_tree(root, "rllm")
    with pytest.raises(StatementRefusedError, match="breaks ClickHouse's printed tree"):
        parse_ast(dump + "\n   Literal 'extra'")  # a sibling no count accounts for


def _functions() -> dict[str, tuple[str, str]]:
    rows = shared_chdb().query("SELECT name, categories, alias_to FROM system.functions").rows
    return {str(n): (str(c), str(a)) for n, c, a in rows}


def test_every_listed_name_is_a_pure_function_of_this_clickhouse() -> None:
    """A chDB upgrade that renames or moves a listed function makes this fail until placed."""
    fns = _functions()
    low = {n.lower(): n for n in fns}
    listed = FUNCTIONS | AGGREGATES
    assert len(listed) > 1000 and not sorted(n for n in listed if n not in low)
    impure = {"Other", "Internal", "Dictionary", "Embedded Dictionary", "Introspection", "AI"}
    impure |= {"Machine Learning"}
    for name in sorted(listed):
        cat, alias = fns[low[name]]
        cat = fns[alias][0] if alias in fns else cat
        assert cat not in impure - {"Other", "Internal"} or name in {"_cast"}, name
    tables = {
        str(n).lower()
        for (n,) in shared_chdb().query("SELECT name FROM system.table_functions").rows
    }
    assert {t.lower() for t in TABLE_FUNCTIONS} <= tables
    # a table function refused in FROM is not callable as a listed scalar function either
    assert not (listed & tables) - {t.lower() for t in TABLE_FUNCTIONS} - {"format", "null"}


def test_names_match_ignoring_case_safely() -> None:
    """No two functions differ only in case where one is listed and the other is not."""
    by: defaultdict[str, set[str]] = defaultdict(set)
    for name in _functions():
        by[name.lower()].add(name)
    listed = FUNCTIONS | AGGREGATES
    mixed = [names for low, names in by.items() if len(names) > 1 and low in listed]
    assert all(all(n.lower() in listed for n in names) for names in mixed)


@pytest.mark.parametrize(
    "text",
    [getattr(named_sql, n) for n in named_sql.__all__]
    + [getattr(viewer_sql, n) for n in viewer_sql.__all__],
)
def test_our_own_queries_pass_the_guard(store: ChdbStore, text: str) -> None:
    """The viewer's reads go through the guard; the named queries show the list is enough."""
    sql = text.replace("__DB__", f"`{store.database}`")
    params = {
        name: (1 if kind.startswith(("UInt", "Int")) else "")
        for name, kind in re.findall(r"\{(\w+):(\w+)\}", sql)
    }
    store.query_user(sql, params)
