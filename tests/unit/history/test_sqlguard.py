"""The SQL escape hatch accepts one SELECT and refuses everything else."""

from __future__ import annotations

import re

import pytest

from rllm.consumers.history.sqlguard import (
    ALLOWED_TABLE_FUNCTIONS,
    REFUSED_FUNCTIONS,
    SCALAR_TABLE_FUNCTIONS,
    check_select,
    tokenize,
)
from rllm.consumers.history.types import QueryError


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT 1",
        "  select count() from rllm.steps;  ",
        "WITH x AS (SELECT 1 AS a) SELECT a FROM x",
        "SELECT 'drop table x; insert into y' AS s",
        "SELECT `insert` FROM (SELECT 1 AS `insert`)",
        "SELECT replaceAll('a', 'a', 'b') -- trailing comment",
    ],
)
def test_accepts_selects(sql: str) -> None:
    assert check_select(sql).strip().upper().startswith(("SELECT", "WITH"))


@pytest.mark.parametrize(
    ("sql", "reason"),
    [
        ("INSERT INTO rllm.steps VALUES (1)", "only SELECT"),
        ("ALTER TABLE rllm.steps DELETE WHERE 1", "only SELECT"),
        ("DROP TABLE rllm.steps", "only SELECT"),
        ("SELECT 1; DROP TABLE rllm.steps", "one statement"),
        ("SELECT 1 /* ; */; DROP TABLE x", "one statement"),
        ("SELECT 1 INTO OUTFILE '/tmp/x'", "INTO"),
        ("SELECT * FROM file('/etc/passwd')", "file()"),
        ("SELECT * FROM url('http://x', CSV)", "url()"),
        ("SELECT 1 SETTINGS readonly = 0", "SETTINGS"),
        ("SELECT 1 FORMAT CSV", "FORMAT"),
        ("/* SELECT */ DELETE FROM x WHERE 1", "only SELECT"),
        ("SELECT 'unterminated", "unterminated"),
        ("", "empty"),
    ],
)
def test_refuses_everything_else(sql: str, reason: str) -> None:
    with pytest.raises(QueryError, match=reason.replace("(", r"\(").replace(")", r"\)")):
        check_select(sql)


@pytest.mark.parametrize(
    ("sql", "reason"),
    [
        ("SELECT * FROM `file`('/etc/hostname', 'LineAsString')", "function file() reads"),
        ("SELECT \"file\"('/etc/hostname')", "function file() reads"),
        ("SELECT \u201cfile\u201d('/etc/hostname')", "function file() reads"),
        ("SELECT file /* gap */ ('/etc/hostname')", "function file() reads"),
        ("SELECT * FROM icebergLocal('/tmp')", "table function icebergLocal()"),
        ("SELECT * FROM `deltaLakeLocal`('/tmp')", "table function deltaLakeLocal()"),
        ("SELECT * FROM merge('rllm', '.*')", "table function merge()"),
        ("SELECT * FROM view(SELECT 1)", "table function view()"),
        ("SELECT $$'$$ INTO OUTFILE '/tmp/x' --'", "INTO (OUTFILE) writes a file"),
        ("SELECT \u2018'\u2019 INTO OUTFILE '/tmp/x' --'", "INTO (OUTFILE) writes a file"),
        ("SELECT $a$'$a$; DROP TABLE x --'", "one statement"),
        ("SELECT 1 /* /* */ ; */; DROP TABLE x", "one statement"),
        ("SELECT 1 /* /* */", "unterminated /* comment"),
        ("SELECT 1 SETTINGS readonly = 0", "readonly=1 and the read limits"),
        ("SELECT number FROM numbers(3) FORMAT JSON", "FORMAT is chosen with --format"),
    ],
)
def test_refusals_name_the_problem(sql: str, reason: str) -> None:
    with pytest.raises(QueryError, match=re.escape(reason)):
        check_select(sql)


@pytest.mark.parametrize(
    ("sql", "tokens"),
    [
        ("SELECT 'it''s' AS a", [("word", "SELECT"), ("string", "it's"), ("word", "AS")]),
        ("SELECT 'a\\'b'", [("word", "SELECT"), ("string", "a'b")]),
        ("SELECT $t$ ; ' $t$", [("word", "SELECT"), ("string", " ; ' ")]),
        ("SELECT $A$x$a$ $a$", [("word", "SELECT"), ("word", "$A$x$a$"), ("word", "$a$")]),
        ('SELECT `a``b`, "c\\"d"', [("word", "SELECT"), ("ident", "a`b"), ("punct", ",")]),
        ("SELECT \u2018a''b\u2019 # c\n, 1", [("word", "SELECT"), ("string", "a''b")]),
        ("SELECT 1 #x", [("word", "SELECT"), ("number", "1"), ("punct", "#")]),
        ("SELECT $$x", [("word", "SELECT"), ("word", "$$x")]),  # no closing $$: not a string
    ],
)
def test_tokens_are_the_ones_clickhouse_reads(sql: str, tokens: list[tuple[str, str]]) -> None:
    got = [(t.kind, t.value) for t in tokenize(sql)]
    assert got[: len(tokens)] == tokens


def test_format_as_a_function_and_quoted_keywords_are_accepted() -> None:
    assert check_select("SELECT format('{} {}', 'a', 'b')") == "SELECT format('{} {}', 'a', 'b')"
    assert check_select("SELECT 1 AS `insert`, $$INTO OUTFILE$$ AS s;") == (
        "SELECT 1 AS `insert`, $$INTO OUTFILE$$ AS s"
    )
    # as ClickHouse prints a statement back, a bare `insert` is an alias, not a write
    assert check_select("SELECT 1 AS insert", parsed=True) == "SELECT 1 AS insert"
    with pytest.raises(QueryError, match="as ClickHouse parses it, INTO"):
        check_select("SELECT 1 INTO OUTFILE 'x'", parsed=True)


def test_every_table_function_of_this_clickhouse_is_allowed_or_refused_by_name() -> None:
    """A chDB upgrade that brings a table function makes this fail until it is placed."""
    from tests.unit.history.shared import shared_chdb

    names = {str(n) for (n,) in shared_chdb().query("SELECT name FROM system.table_functions").rows}
    assert len(names) > 50
    placed = {n.lower() for n in ALLOWED_TABLE_FUNCTIONS | SCALAR_TABLE_FUNCTIONS}
    unplaced = sorted(n for n in names if n.lower() not in REFUSED_FUNCTIONS | placed)
    assert unplaced == []
