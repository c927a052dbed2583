"""The analytics SQL guard: one SELECT over the history's tables, read by ClickHouse itself.

A user's statement is never matched against words. The engine that will run it parses it
twice, in the read session (``readonly=1`` and the read limits): ``formatQuerySingleLine``
(the text travels base64-encoded, so no escaping or parameter binding changes it) gives one
statement or a syntax error, and ``EXPLAIN AST`` of that statement gives the tree ClickHouse
reads. The guard walks that tree: a SELECT (``WITH``, ``UNION``, subqueries) with no
``INTO OUTFILE``, ``FORMAT`` or ``SETTINGS``, calling only the pure functions and row-making
table functions of ``sqlnames``, reading only the history's tables. The engine then runs
the very text whose tree was checked. ``readonly=1`` and the limits stay the floor.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from rllm.consumers.history.ddl import TABLES
from rllm.consumers.history.errors import QueryError, StatementRefusedError
from rllm.consumers.history.sqlnames import (
    TABLE_FUNCTIONS,
    allowed_function,
    allowed_table_function,
)
from rllm.consumers.history.types import QueryResult

__all__ = ["Node", "check_tree", "guard", "parse_ast"]

Run = Callable[[str, "dict[str, Any] | None"], QueryResult]
"""Runs a statement in the limited read session, errors already translated."""

_KINDS = frozenset(
    {"SelectWithUnionQuery", "SelectIntersectExceptQuery", "SelectQuery", "ExpressionList"}
    | {"WithElement", "Subquery", "Identifier", "TableIdentifier", "Literal", "QueryParameter"}
    | {"Function", "Asterisk", "QualifiedAsterisk", "ColumnsRegexpMatcher", "ColumnsListMatcher"}
    | {"QualifiedColumnsRegexpMatcher", "QualifiedColumnsListMatcher", "ColumnsTransformerList"}
    | {"ColumnsExceptTransformer", "ColumnsReplaceTransformer", "OrderByElement"}
    | {"ColumnsReplaceTransformerReplacement", "WindowDefinition", "WindowListElement"}
    | {"TablesInSelectQuery", "TablesInSelectQueryElement", "TableExpression", "TableJoin"}
    | {"ArrayJoin", "SampleRatio", "InterpolateElement"}
)
"""Node kinds of a plain SELECT (``Set``, ``ColumnsApplyTransformer`` and the rest refused)."""
_IN = frozenset("in notin globalin globalnotin nullin notnullin globalnullin globalnotnullin")
_HIDDEN_DATABASES = frozenset({"system", "information_schema"})
_LINE = re.compile(r"( *)([A-Za-z_]+)(?: (.*))?")
_CHILDREN = re.compile(r"(.*?) ?\(children (\d+)\)")


@dataclass(frozen=True)
class Node:
    """One node of ClickHouse's ``EXPLAIN AST``."""

    kind: str
    """``SelectQuery``, ``Function``, ``TableIdentifier``, ``Literal``…"""
    name: str
    """What ClickHouse printed after the kind, without the alias: a function's or table's
    name, a literal's value."""
    children: tuple[Node, ...]
    """The nodes under it, in ClickHouse's order."""

    def walk(self) -> Iterator[tuple[Node, Node | None]]:
        """Every node under and with this one, with its parent."""
        stack: list[tuple[Node, Node | None]] = [(self, None)]
        while stack:
            node, parent = stack.pop()
            yield node, parent
            stack.extend((child, node) for child in reversed(node.children))


def parse_ast(text: str) -> Node:
    """The tree of ``EXPLAIN AST``'s text, or a refusal if it is not one well-formed tree
    (a name with a line break in it breaks the lines).

    Raises:
        StatementRefusedError: the text is not one tree.
    """
    lines = [line for line in text.split("\n") if line.strip()]
    pos = 0

    def node(depth: int) -> Node:
        nonlocal pos
        line = lines[pos] if pos < len(lines) else ""
        m = _LINE.fullmatch(line)
        if m is None or len(m[1]) != depth:
            raise _unreadable(line)
        pos += 1
        rest, count = m[3] or "", "0"
        if counted := _CHILDREN.fullmatch(rest):
            rest, count = counted[1], counted[2]
        name = rest.split(" (alias ", 1)[0]
        kids = tuple(node(depth + 1) for _ in range(int(count)))
        return Node(m[2], name, kids)

    try:
        root = node(0)
    except RecursionError:
        raise StatementRefusedError("depth", "", "sql: the statement nests too deeply") from None
    if pos != len(lines):
        raise _unreadable(lines[pos])
    return root


def _unreadable(line: str) -> StatementRefusedError:
    return StatementRefusedError(
        "name",
        line,
        f"sql: a name in the statement breaks ClickHouse's printed tree at {line[:60]!r} "
        f"(a line break in a quoted name?); rename it",
    )


def check_tree(root: Node, database: str) -> None:
    """Refuse all but a SELECT of pure functions over ``database``'s history tables.

    Raises:
        StatementRefusedError: naming the refused kind, function or table and its value.
    """
    if root.kind != "SelectWithUnionQuery":
        raise StatementRefusedError(
            "statement", root.kind, f"sql: only SELECT is allowed, got a {root.kind}"
        )
    if len(root.children) != 1:  # INTO OUTFILE, FORMAT: children after the selects
        extra = ", ".join(f"{c.kind} {c.name}".strip() for c in root.children[1:])
        raise StatementRefusedError(
            "clause",
            extra,
            f"sql: INTO OUTFILE and FORMAT are refused ({extra}): results come back on stdout, "
            f"in the format --format chooses",
        )
    for node, parent in root.walk():
        _check_node(node, parent, database)


def _check_node(node: Node, parent: Node | None, database: str) -> None:
    if node.kind == "Set":
        raise _settings_refused()
    if node.kind not in _KINDS:
        raise StatementRefusedError(
            "clause", node.kind, f"sql: the statement uses {node.kind}, which analytics SQL refuses"
        )
    if node.kind == "Function":
        in_from = parent is not None and parent.kind == "TableExpression"
        if in_from and not allowed_table_function(node.name):
            raise StatementRefusedError(
                "table function",
                node.name,
                f"sql: table function {node.name}() {_why(node.name, 'reaches outside')}; "
                f"refused (read the history's tables by name; table functions allowed: "
                f"{', '.join(sorted(TABLE_FUNCTIONS))})",
            )
        if not in_from and not allowed_function(node.name):
            raise StatementRefusedError(
                "function",
                node.name,
                f"sql: function {node.name}() {_why(node.name, 'is not a pure function')}; "
                f"refused (analytics SQL calls the pure functions listed in "
                f"rllm/consumers/history/sqlnames.py)",
            )
        if node.name.lower() in _IN and node.children and len(node.children[0].children) == 2:
            rhs = node.children[0].children[1]
            if rhs.kind == "Identifier" and "." in rhs.name:
                _check_table(rhs.name, database)
    hidden = node.kind == "Identifier" and node.name.split(".")[0].lower() in _HIDDEN_DATABASES
    if node.kind == "TableIdentifier" or hidden:  # system.x as a column: a table in disguise
        _check_table(node.name, database)


def _settings_refused() -> StatementRefusedError:
    return StatementRefusedError(
        "clause",
        "SETTINGS",
        "sql: SETTINGS in the statement is refused: a statement runs under readonly=1 and the "
        "read limits (RLLM_HISTORY_SQL_*), which only the history settings change",
    )


def _why(name: str, otherwise: str) -> str:
    if name.lower() == "file":
        return "reads a host file"
    return "reaches outside the history's tables" if otherwise == "reaches outside" else otherwise


def _check_table(name: str, database: str) -> None:
    """A qualified table must be one of the history's; an unqualified one is a ``WITH``
    name (or a table of the session's own empty database)."""
    db, _, table = name.rpartition(".")
    if db and (db != database or table not in TABLES):
        raise StatementRefusedError(
            "table",
            name,
            f"sql: table {name} is not one of the history's; refused (tables: "
            f"{', '.join(f'{database}.{t}' for t in TABLES)}, or __DB__.<table>)",
        )


def guard(run: Run, sql: str, params: dict[str, Any] | None, database: str) -> str:
    """Parse ``sql`` with the engine, check its tree, and return the statement to run.

    Args:
        run: runs a statement in the limited read session (errors as ``QueryError``).
        sql: the user's statement (``__DB__`` already replaced).
        params: the values of its ``{name:Type}`` placeholders, if any.
        database: the history database.

    Returns:
        ClickHouse's one-line rendering of the statement: the text whose tree was checked.

    Raises:
        QueryError: a syntax error, as ClickHouse reports it.
        StatementRefusedError: what was refused, named with its value.
    """
    if not sql.strip():
        raise StatementRefusedError("statement", "", "sql: empty statement; give one SELECT")
    encoded = base64.b64encode(sql.encode()).decode("ascii")
    try:
        got = run(f"SELECT formatQuerySingleLine(base64Decode('{encoded}')) AS q", None)
    except QueryError as exc:
        said = str(exc).removeprefix("sql: ").split(": In scope SELECT formatQuery")[0]
        raise QueryError(f"sql: ClickHouse cannot parse the statement: {said}") from None
    text = _text(got.rows[0][0]).strip()
    try:
        dump = run(f"EXPLAIN AST {text}", params)
    except QueryError as exc:
        if "READONLY" in str(exc):  # EXPLAIN applies the statement's SETTINGS, and readonly=1
            raise _settings_refused() from None
        raise
    check_tree(parse_ast("\n".join(_text(row[0]) for row in dump.rows)), database)
    return text


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
