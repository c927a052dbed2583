"""The SELECT-only guard of the analytics SQL escape hatch.

It reads the statement the way ClickHouse's lexer would for the parts that matter:
string literals, quoted identifiers and comments are skipped, so a keyword hidden in a
literal does not count and a statement hidden in a comment does not slip through. Only
one ``SELECT`` (or ``WITH ... SELECT``) statement is accepted; anything that writes,
changes settings or reaches outside the history (files, URLs, other servers) is refused.
"""

from __future__ import annotations

import re

from rllm.consumers.history.types import QueryError

__all__ = ["check_select", "strip_literals"]

_FORBIDDEN_WORDS = {
    "INSERT",
    "ALTER",
    "DROP",
    "CREATE",
    "TRUNCATE",
    "DELETE",
    "UPDATE",
    "RENAME",
    "ATTACH",
    "DETACH",
    "OPTIMIZE",
    "SYSTEM",
    "KILL",
    "GRANT",
    "REVOKE",
    "SET",
    "SETTINGS",
    "OUTFILE",
    "EXCHANGE",
    "UNDROP",
    "MOVE",
    "BACKUP",
    "RESTORE",
    "USE",
    "INTO",
}
_FORBIDDEN_FUNCTIONS = {
    "file",
    "url",
    "s3",
    "s3cluster",
    "gcs",
    "azureblobstorage",
    "hdfs",
    "remote",
    "remotesecure",
    "cluster",
    "clusterallreplicas",
    "executable",
    "mysql",
    "postgresql",
    "jdbc",
    "odbc",
    "sqlite",
    "mongodb",
    "redis",
    "input",
    "python",
    "deltalake",
    "iceberg",
    "hudi",
    "urlcluster",
    "filecluster",
    "dictionary",
    "loop",
}
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def strip_literals(sql: str) -> str:
    """The statement with literals, quoted identifiers and comments blanked out.

    Raises:
        QueryError: for an unterminated literal or comment.
    """
    out: list[str] = []
    i, n = 0, len(sql)
    while i < n:
        ch = sql[i]
        if ch in "'\"`":
            j = i + 1
            while j < n and sql[j] != ch:
                j += 2 if sql[j] == "\\" else 1
            if j >= n:
                raise QueryError(f"sql: unterminated {ch} literal starting at character {i}")
            out.append(" x " if ch != "'" else " '' ")
            i = j + 1
        elif sql.startswith("--", i) or ch == "#":
            j = sql.find("\n", i)
            i = n if j < 0 else j
            out.append(" ")
        elif sql.startswith("/*", i):
            j = sql.find("*/", i + 2)
            if j < 0:
                raise QueryError(f"sql: unterminated /* comment starting at character {i}")
            out.append(" ")
            i = j + 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def check_select(sql: str) -> str:
    """Accept exactly one read-only SELECT statement; return it without a trailing ``;``.

    Raises:
        QueryError: naming what was refused.
    """
    bare = strip_literals(sql).strip()
    if bare.endswith(";"):
        bare = bare[:-1].rstrip()
        sql = sql.rstrip().removesuffix(";")
    if not bare:
        raise QueryError("sql: empty statement; give one SELECT")
    if ";" in bare:
        raise QueryError("sql: only one statement is allowed (found ';' inside the text)")
    words = [w.upper() for w in _WORD.findall(bare)]
    if not words or words[0] not in ("SELECT", "WITH"):
        raise QueryError(f"sql: only SELECT is allowed, got {(words or [bare[:20]])[0]!r}")
    bad = sorted(set(words) & _FORBIDDEN_WORDS)
    if bad:
        raise QueryError(f"sql: only read-only SELECT is allowed; refused keyword {bad[0]}")
    for match in re.finditer(r"([A-Za-z_][A-Za-z0-9_]*)\s*\(", bare):
        if match.group(1).lower() in _FORBIDDEN_FUNCTIONS:
            raise QueryError(
                f"sql: table function {match.group(1)}() reaches outside the history; refused"
            )
    if re.search(r"\bFORMAT\b", bare, re.IGNORECASE):
        raise QueryError("sql: FORMAT is chosen with --format, not in the statement")
    return sql
