"""A fuzzer over the analytics SQL surface: statements drawn from a grammar of table
functions, quoting styles, comments, heredocs, settings clauses, outfiles, unions,
subqueries and stacked statements, run on chDB. None may read the canary file, write a file
or make a table, through ``run_sql`` or past the lexer straight into ``query_user``.

Seeded (``RLLM_SQL_FUZZ_SEED`` picks another seed, ``RLLM_SQL_FUZZ_N`` another count) and
bounded in time; a failure prints the seed and the statement.
"""

from __future__ import annotations

import os
import random
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from rllm.consumers.history.engine_chdb import ChdbStore
from rllm.consumers.history.limits import ReadLimits
from rllm.consumers.history.queries import run_sql
from rllm.consumers.history.types import HistoryError, QueryResult
from tests.unit.consumers.history.shared import limited_chdb, shared_chdb

SEED = int(os.environ.get("RLLM_SQL_FUZZ_SEED", "20261121"))
N = int(os.environ.get("RLLM_SQL_FUZZ_N", "3000"))
BUDGET_S = 45.0
LIMITS = ReadLimits(max_execution_s=2, max_rows_to_read=20_000_000, max_result_rows=10_000)

# Names the issue lists that this chDB does not know, and case/quoting variants.
_EXTRA_TABLE_FUNCTIONS = ["arrowFlight", "s3Queue", "hudiLocal", "FILE", "File", "URL"]


@dataclass
class Statement:
    """One generated statement and the hazards it carries that readonly=1 lets through."""

    text: str = ""
    hazards: set[str] = field(default_factory=set)
    """``file()`` (scalar host-file read) or ``outfile`` (INTO OUTFILE): lexer-only."""


class Grammar:
    """Draws statements; every choice comes from one seeded ``random.Random``."""

    def __init__(
        self,
        rng: random.Random,
        table_functions: list[str],
        canary: Path,
        outfile: Path,
        db: str,
    ) -> None:
        self.rng, self.tfs, self.canary, self.outfile, self.db = (
            rng,
            table_functions,
            canary,
            outfile,
            db,
        )

    def pick(self, *options: str) -> str:
        return self.rng.choice(options)

    def name(self, name: str) -> str:
        """A function name in one of ClickHouse's quoting styles, maybe a comment after it."""
        quoted = self.pick(name, f"`{name}`", f'"{name}"', f"\u201c{name}\u201d", name, f"`{name}`")
        gap = self.pick("", "", " ", " /* c */ ", " /* /* n */ */ ", " -- c\n", "\n# c\n")
        return quoted + gap

    def literal(self) -> str:
        return self.pick(
            "'x'",
            "'it''s'",
            "'a\\'b'",
            "$$'$$",
            "$t$;$t$",
            "$a$ -- $a$",
            "'/*'",
            "'*/'",
            "\u2018'\u2019",
            "'; DROP TABLE x'",
            "'INTO OUTFILE'",
            "$$file('x')$$",
        )

    def arg(self) -> str:
        return self.pick(
            f"'{self.canary}'",
            f"'{self.canary.parent}'",
            f"'file://{self.canary}'",
            "'LineAsString'",
            "'x String'",
            "'CSV'",
            "'http://127.0.0.1:9/x'",
            "'127.0.0.1:9'",
            f"'{self.db}'",
            "'.*'",
            "3",
            "numbers(3)",
            "SELECT 1",
        )

    def table_function(self, st: Statement) -> str:
        name = self.rng.choice(self.tfs)
        args = ", ".join(self.arg() for _ in range(self.rng.randint(0, 3)))
        return f"{self.name(name)}({args})"

    def scalar(self, st: Statement) -> str:
        roll = self.rng.random()
        if roll < 0.08:
            st.hazards.add("file()")
            return f"{self.name('file')}('{self.canary}')"
        if roll < 0.5:
            return self.literal()
        return self.pick("1", "count()", "number", "'a' AS s", "format('{}', 1)", "now()")

    def source(self, st: Statement, depth: int) -> str:
        roll = self.rng.random()
        if roll < 0.3:
            return self.table_function(st)
        if roll < 0.6:
            return self.pick(f"`{self.db}`.steps", "__DB__.sessions", "system.one")
        if roll < 0.75 and depth < 2:
            return f"({self.select(st, depth + 1)})"
        return self.pick("numbers(3)", "zeros(2)", "values('a Int8', 1, 2)")

    def select(self, st: Statement, depth: int = 0) -> str:
        cols = ", ".join(self.scalar(st) for _ in range(self.rng.randint(1, 2)))
        text = f"SELECT {cols} FROM {self.source(st, depth)}"
        if self.rng.random() < 0.15:
            text += f" JOIN {self.source(st, depth)} ON 1"
        if self.rng.random() < 0.15 and depth < 2:
            text += f" UNION ALL {self.select(st, depth + 1)}"
        if self.rng.random() < 0.1:
            text += f" WHERE 1 IN ({self.select(st, depth + 1)})" if depth < 2 else " WHERE 1"
        if self.rng.random() < 0.1:
            text += self.pick(
                " SETTINGS readonly = 0", " SETTINGS max_rows_to_read = 0", " SETTINGS readonly=2"
            )
        return text + self.pick("", "", " LIMIT 5")

    def statement(self) -> Statement:
        st = Statement()
        body = self.select(st)
        prefix = self.pick(
            *("", "", "", "", "/* c */ ", "-- c\n", "WITH w AS (SELECT 1) "),
            *("SET readonly = 0; ", "EXPLAIN ", "INSERT INTO __DB__.runs (run_id) "),
        )
        tail = self.pick("", "", "", "", ";", " FORMAT CSV", " -- trailing '")
        roll = self.rng.random()
        if roll < 0.06:
            st.hazards.add("outfile")
            into = self.pick("INTO OUTFILE", "INTO /* c */ OUTFILE", "INTO\nOUTFILE")
            tail = f" {into} '{self.outfile}'" + tail
        elif roll < 0.12:
            tail += self.pick(
                f"; SELECT * FROM {self.table_function(st)}",
                f"; CREATE TABLE `{self.db}`.made (a Int8) ENGINE = Memory",
                "; INSERT INTO __DB__.runs (run_id) VALUES ('x')",
            )
        elif roll < 0.16:  # a heredoc or unicode string that hides the rest from a naive lexer
            hidden = f"SELECT 1 INTO OUTFILE '{self.outfile}'"
            st.hazards.add("outfile")
            tail = self.pick(f" , $$'$$; {hidden} --'", f" , \u2018'\u2019; {hidden} --'")
        st.text = prefix + body + tail
        return st


def _cells(result: QueryResult) -> Iterator[str]:
    for row in result.rows:
        for value in row:
            yield value.decode(errors="replace") if isinstance(value, bytes) else str(value)


@pytest.fixture(scope="module")
def store() -> Iterator[ChdbStore]:
    with limited_chdb("fz", 200, LIMITS) as st:
        yield st


def _catalog() -> tuple[int, int]:
    one = shared_chdb().query(
        "SELECT (SELECT count() FROM system.tables), (SELECT count() FROM system.databases)"
    )
    return int(one.rows[0][0]), int(one.rows[0][1])


def test_no_generated_statement_reads_a_host_file_or_writes(
    store: ChdbStore, tmp_path: Path
) -> None:
    content = f"canary-{uuid.uuid4().hex}"
    canary = tmp_path / "secret.txt"
    canary.write_text(content + "\n")
    outfile = tmp_path / "out" / "written.csv"
    outfile.parent.mkdir()
    names = [
        str(n) for (n,) in store.query("SELECT name FROM system.table_functions ORDER BY name").rows
    ]
    grammar = Grammar(
        random.Random(SEED), names + _EXTRA_TABLE_FUNCTIONS, canary, outfile, store.database
    )
    before = _catalog()
    ran = refused = direct_ran = direct_refused = 0
    start = time.monotonic()
    done = 0
    for done in range(1, N + 1):  # `done`: how far the budget allowed
        st = grammar.statement()
        where = f"seed {SEED}, statement {done}: {st.text!r}"
        try:
            got = run_sql(store, st.text)
            ran += 1
            assert not any(content in c for c in _cells(got)), f"canary read; {where}"
        except HistoryError:
            refused += 1
        if not st.hazards:  # past the lexer: ClickHouse's readonly=1 alone must hold
            try:
                got = store._run_user(st.text.replace("__DB__", f"`{store.database}`"))
                direct_ran += 1
                assert not any(content in c for c in _cells(got)), f"canary read; {where}"
            except HistoryError:
                direct_refused += 1
        assert not outfile.exists(), f"a file was written; {where}"
        assert not any(outfile.parent.iterdir()), f"a file was written; {where}"
        if time.monotonic() - start > BUDGET_S:
            break
    assert _catalog() == before, "a table or database was made"
    assert store.query(f"SELECT count() FROM `{store.database}`.steps").rows == [(200,)]
    # the fuzzer reached both sides: statements that ran, and refusals by each layer
    assert done >= 200, f"only {done} statements in {BUDGET_S} s"
    print(
        f"fuzz: {done} statements; run_sql ran {ran}, refused {refused}; past the lexer "
        f"ran {direct_ran}, refused {direct_refused}"
    )
    assert ran >= done // 20 and refused >= done // 2, (ran, refused, done)
    assert direct_ran >= done // 20 and direct_refused >= done // 5, (direct_ran, direct_refused)
