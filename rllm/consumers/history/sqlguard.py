"""Clear messages for the analytics SQL escape hatch: one SELECT, nothing that reaches out.

ClickHouse enforces the read path: a user's statement runs under ``readonly=1`` and the read
limits, set by the session (``limits.py``). This lexer names what a statement does wrong
before it runs, and it refuses the two things ``readonly=1`` lets through (measured with
chDB 26.9): the scalar ``file()`` function, which reads a host file, and ``INTO OUTFILE``,
which writes one. It tokenises the way ClickHouse's lexer does (``'…'`` strings and
U+2018/U+2019 ones, ``$tag$…$tag$`` heredocs, ``"…"``, ```…``` and U+201C/U+201D
identifiers, ``--``, ``#`` and nested ``/* */`` comments), so a word in a literal does not
count, a quoted function name still does, and nothing hides in a comment.
``queries.run_sql`` also checks the statement as ClickHouse's own parser prints it back.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import pairwise

from rllm.consumers.history.types import QueryError

__all__ = [
    "ALLOWED_TABLE_FUNCTIONS",
    "REFUSED_FUNCTIONS",
    "SCALAR_TABLE_FUNCTIONS",
    "Token",
    "check_select",
    "tokenize",
]

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
    "EXCHANGE",
    "UNDROP",
    "MOVE",
    "BACKUP",
    "RESTORE",
    "USE",
}
ALLOWED_TABLE_FUNCTIONS = frozenset(
    {"numbers", "numbers_mt", "zeros", "zeros_mt", "values", "generate_series", "generateSeries"}
    | {"generateRandom", "primes", "null"}
)
"""Table functions a statement may call: they make rows and read nothing."""
SCALAR_TABLE_FUNCTIONS = frozenset({"format", "fuzzQuery"})
"""Table functions that are scalar functions too: allowed by name (the table form of
``format`` is refused by ``readonly=1``; ``fuzzQuery`` rewrites a string)."""


def _names(text: str) -> frozenset[str]:
    return frozenset(name.lower() for name in text.split())


REFUSED_FUNCTIONS = _names(
    # host files, object stores, lakes, other servers and processes
    "file fileCluster filesystem url urlCluster s3 s3Cluster cosn oss gcs "
    "azureBlobStorage azureBlobStorageCluster hdfs hdfsCluster remote remoteSecure "
    "cluster clusterAllReplicas executable python mysql postgresql jdbc odbc sqlite "
    "mongodb redis ytsaurus bigquery arrowFlight arrowflight arrowstream prometheusQuery "
    "prometheusQueryRange s3Queue azureQueue input dictionary loop eval "
    "deltaLake deltaLakeAzure deltaLakeAzureCluster deltaLakeCluster deltaLakeLocal "
    "deltaLakeS3 deltaLakeS3Cluster hudi hudiCluster hudiLocal iceberg icebergAzure "
    "icebergAzureCluster icebergCluster icebergHDFS icebergHDFSCluster icebergLocal "
    "icebergLocalCluster icebergS3 icebergS3Cluster paimon paimonAzure paimonAzureCluster "
    "paimonCluster paimonHDFS paimonHDFSCluster paimonLocal paimonS3 paimonS3Cluster "
    # other views of ClickHouse's own tables: a statement names the tables it reads
    "merge view viewExplain viewIfPermitted mergeTreeIndex mergeTreeProjection "
    "mergeTreeAnalyzeIndexes mergeTreeAnalyzeIndexesUUID mergeTreeCodecBlockCounts "
    "mergeTreeTextIndex timeSeriesData timeSeriesMetrics timeSeriesMetricFamilies "
    "timeSeriesSamples timeSeriesSelector timeSeriesTags SQLStandardValues fuzzJSON"
)
"""Functions refused by name (lower case): ``file`` as a scalar function too."""


@dataclass(frozen=True)
class Token:
    """One token of a statement."""

    kind: str
    """``word``, ``ident`` (quoted identifier), ``string``, ``number`` or ``punct``."""
    value: str
    """The word, the identifier or string without quotes and escapes, or the character."""
    pos: int
    """Offset of its first character in the statement."""


_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*")
_DIGITS = re.compile(r"[0-9]+")  # 1e12 reads as 1 and e12: never fewer words than ClickHouse
_HEREDOC = re.compile(r"\$([A-Za-z0-9_]*)\$")
_QUOTES = {"'": ("'", "string"), '"': ('"', "ident"), "`": ("`", "ident")}
_UNICODE_QUOTES = {"\u2018": ("\u2019", "string"), "\u201c": ("\u201d", "ident")}


def _quoted(sql: str, i: int, close: str) -> tuple[str, int]:
    """The unescaped body of the ASCII-quoted token at ``i`` and the offset after it."""
    out: list[str] = []
    j, n = i + 1, len(sql)
    while j < n:
        ch = sql[j]
        if ch == "\\" and j + 1 < n:
            out.append(sql[j + 1])
            j += 2
        elif ch == close:
            if sql.startswith(close, j + 1):  # a doubled quote stands for itself
                out.append(close)
                j += 2
            else:
                return "".join(out), j + 1
        else:
            out.append(ch)
            j += 1
    raise QueryError(f"sql: unterminated {sql[i]} literal starting at character {i}")


def _comment_end(sql: str, i: int) -> int:
    """The offset after the (nested) ``/* */`` comment starting at ``i``."""
    depth, j = 0, i
    while j < len(sql):
        if sql.startswith("/*", j):
            depth, j = depth + 1, j + 2
        elif sql.startswith("*/", j):
            depth, j = depth - 1, j + 2
            if depth == 0:
                return j
        else:
            j += 1
    raise QueryError(f"sql: unterminated /* comment starting at character {i}")


def tokenize(sql: str) -> list[Token]:
    """The statement's tokens, comments dropped, as ClickHouse's lexer splits them.

    Raises:
        QueryError: for an unterminated literal or comment.
    """
    tokens: list[Token] = []
    i, n = 0, len(sql)
    while i < n:
        ch = sql[i]
        if ch.isspace():
            i += 1
        elif sql.startswith("--", i) or sql.startswith(("# ", "#!"), i):
            j = sql.find("\n", i)
            i = n if j < 0 else j
        elif sql.startswith("/*", i):
            i = _comment_end(sql, i)
        elif ch in _QUOTES:
            close, kind = _QUOTES[ch]
            value, end = _quoted(sql, i, close)
            tokens.append(Token(kind, value, i))
            i = end
        elif ch in _UNICODE_QUOTES:  # no escapes inside these
            close, kind = _UNICODE_QUOTES[ch]
            j = sql.find(close, i + 1)
            if j < 0:
                raise QueryError(f"sql: unterminated {ch} literal starting at character {i}")
            tokens.append(Token(kind, sql[i + 1 : j], i))
            i = j + 1
        elif ch == "$" and (here := _HEREDOC.match(sql, i)) and sql.find(here[0], here.end()) >= 0:
            j = sql.find(here[0], here.end())
            tokens.append(Token("string", sql[here.end() : j], i))
            i = j + len(here[0])
        elif ch == "$" or _WORD.match(sql, i):
            j = i + 1
            while j < n and (sql[j].isascii() and (sql[j].isalnum() or sql[j] in "_$")):
                j += 1
            tokens.append(Token("word", sql[i:j], i))
            i = j
        elif ch.isdigit():
            m = _DIGITS.match(sql, i)
            end = m.end() if m else i + 1
            tokens.append(Token("number", sql[i:end], i))
            i = end
        else:
            tokens.append(Token("punct", ch, i))
            i += 1
    return tokens


def check_select(sql: str, *, parsed: bool = False) -> str:
    """Accept exactly one SELECT that reaches nothing outside; return it without a final ``;``.

    Args:
        sql: the statement.
        parsed: ``sql`` is ClickHouse's own rendering of the user's statement
            (``formatQuerySingleLine``): only what ``readonly=1`` lets through is checked
            (one statement, ``INTO OUTFILE``, ``file()`` and the refused table functions),
            as ClickHouse prints some keywords bare that the user had quoted.

    Raises:
        QueryError: naming what was refused and the value.
    """
    reading = "as ClickHouse parses it, " if parsed else ""
    try:
        tokens = tokenize(sql)
    except QueryError as exc:
        raise QueryError(f"sql: {reading}{str(exc).removeprefix('sql: ')}") from None
    if tokens and tokens[-1].value == ";" and tokens[-1].kind == "punct":
        sql = sql[: tokens[-1].pos].rstrip()
        tokens = tokens[:-1]

    def refuse(why: str) -> QueryError:
        return QueryError(f"sql: {reading}{why}")

    if not tokens:
        raise refuse("empty statement; give one SELECT")
    semi = next((t for t in tokens if t.kind == "punct" and t.value == ";"), None)
    if semi is not None:
        raise refuse(
            f"only one statement is allowed (found ';' at character {semi.pos}: "
            f"{sql[semi.pos : semi.pos + 30]!r})"
        )
    words = [t for t in tokens if t.kind == "word"]
    if not parsed and (not words or words[0].value.upper() not in ("SELECT", "WITH")):
        first = words[0].value if words else tokens[0].value
        raise refuse(f"only SELECT is allowed, got {first!r}")
    calls = {  # tokens followed by "(": function calls
        tok.pos
        for tok, nxt in pairwise(tokens)
        if tok.kind in ("word", "ident") and nxt.kind == "punct" and nxt.value == "("
    }
    for w, nxt in pairwise([*words, Token("word", "", len(sql))]):
        upper = w.value.upper()
        if upper == "INTO" and (not parsed or nxt.value.upper() == "OUTFILE"):
            raise refuse("INTO (OUTFILE) writes a file; results come back on stdout, refused")
        if parsed:
            continue
        if upper in _FORBIDDEN_WORDS:
            raise refuse(f"only read-only SELECT is allowed; refused keyword {upper}")
        if upper == "FORMAT" and w.pos not in calls:  # format(...) is a string function
            raise refuse("FORMAT is chosen with --format, not in the statement")
        if upper == "SETTINGS":
            raise refuse(
                "SETTINGS in the statement is refused: a statement runs under readonly=1 and "
                "the read limits (RLLM_HISTORY_SQL_*), which only the history settings change"
            )
    for tok in tokens:
        if tok.pos not in calls:
            continue
        name = tok.value
        if name.lower() == "file":
            raise refuse(f"function {name}() reads a host file; refused")
        if name.lower() in REFUSED_FUNCTIONS:
            raise refuse(
                f"table function {name}() reaches outside the history's tables; refused "
                f"(read the tables by name; table functions allowed: "
                f"{', '.join(sorted(ALLOWED_TABLE_FUNCTIONS))})"
            )
    return sql
