"""The SQL escape hatch accepts one SELECT and refuses everything else."""

from __future__ import annotations

import pytest

from rllm.consumers.history.sqlguard import check_select
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
