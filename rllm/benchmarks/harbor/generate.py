"""Generated Harbor task families: small, varied, verifiable shell tasks written as task
folders (``rllm-cli bench gen NAME --count N DIR``), with a deterministic train / test split.

``shell-basics`` is made for learning through the ``bash`` harness: each task is solved by
one command that its instruction names (write a number into a file, count files, rename a
file, take a field from a CSV, fix one word in a script, make a directory), with the
numbers, words and paths drawn from a seeded RNG, so a tiny model can sometimes solve it
and RL has something to reinforce. Every folder has ``solution/solve.sh`` (the oracle
solves it) and a verifier that gives 0 to a sandbox left untouched.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rllm.benchmarks.harbor.task import HarborTaskError

__all__ = [
    "FAMILIES",
    "GeneratedSplit",
    "GeneratedTask",
    "family_names",
    "generate_family",
    "write_task",
]

WORDS = (
    "apple",
    "river",
    "stone",
    "cloud",
    "maple",
    "tiger",
    "lemon",
    "piano",
    "ocean",
    "amber",
    "delta",
    "forest",
    "silver",
    "rocket",
    "garden",
    "candle",
)
"""Words the generators draw contents from, and names (with a number) from."""

ATTEMPTS = 1000
"""Draws of one kind before a family run gives up finding a task not drawn before."""

TASK_TOML = """version = "1.0"

[metadata]
author_name = "rllm-stream"
difficulty = "easy"
category = "{kind}"
tags = ["generated", "{family}", "{kind}"]

[agent]
timeout_sec = 120.0

[verifier]
timeout_sec = 30.0

[environment]
build_timeout_sec = 300.0
cpus = 1
memory_mb = 512
storage_mb = 1024
"""

VERIFY = """#!/bin/bash
# {why}
if {check}; then
  echo "solved: {why}"
  echo 1 > /logs/verifier/reward.txt
else
  echo "not solved: {why}"
  echo 0 > /logs/verifier/reward.txt
fi
"""

FILE_TEXT = "$(tr -d '[:space:]' < {path} 2>/dev/null)"
"""A file's content without whitespace, as a shell expression (empty when missing)."""


@dataclass(frozen=True)
class GeneratedTask:
    """One task of a family, before it is written as a folder."""

    kind: str
    """Which generator made it (``write-number``, ``count-files``, ...)."""
    instruction: str
    """``instruction.md``: what to do, naming the one command that does it."""
    command: str
    """The command that solves it (``solution/solve.sh``)."""
    check: str
    """A bash condition, true once the task is solved (``tests/test.sh``)."""
    why: str
    """What the check checks, in words (the verifier's output)."""
    files: dict[str, str] = field(default_factory=dict)
    """Files of the environment, relative to ``/app`` (copied in by the Dockerfile)."""


def _names(rng: random.Random, k: int) -> list[str]:
    """``k`` distinct file or folder names: a word and a number (``river42``)."""
    return [f"{w}{rng.randint(1, 99)}" for w in rng.sample(WORDS, k)]


def _instruction(what: str, command: str) -> str:
    return (
        f"Task: {what}.\nThe command that does it is `{command}`.\n"
        f"Reply with exactly:\n\nrun: {command}\n"
    )


def _write_number(rng: random.Random) -> GeneratedTask:
    n, (name,) = rng.randint(2, 999), _names(rng, 1)
    return _write_value("write-number", "number", str(n), name)


def _write_word(rng: random.Random) -> GeneratedTask:
    word, (name,) = rng.choice(WORDS), _names(rng, 1)
    return _write_value("write-word", "word", word, name)


def _write_value(kind: str, noun: str, value: str, name: str) -> GeneratedTask:
    """A task of writing ``value`` into ``/app/<name>.txt``."""
    path = f"/app/{name}.txt"
    command = f"echo {value} > {path}"
    return _file_holds(kind, f"write the {noun} {value} into {path}", command, path, value)


def _file_holds(
    kind: str,
    what: str,
    command: str,
    path: str,
    value: object,
    files: dict[str, str] | None = None,
) -> GeneratedTask:
    """A task checked by the file at ``path`` holding ``value`` (whitespace aside)."""
    return GeneratedTask(
        kind,
        _instruction(what, command),
        command,
        f'[ "{FILE_TEXT.format(path=path)}" = "{value}" ]',
        f"{path} holds {value}",
        files or {},
    )


def _count_files(rng: random.Random) -> GeneratedTask:
    folder, out = _names(rng, 2)
    count = rng.randint(2, 9)
    files = {f"{folder}/{w}.txt": f"{w}\n" for w in rng.sample(WORDS, count)}
    path = f"/app/{out}.txt"
    command = f"ls /app/{folder} | wc -l > {path}"
    what = f"count the files in /app/{folder} and write the count into {path}"
    return _file_holds("count-files", what, command, path, count, files)


def _rename_file(rng: random.Random) -> GeneratedTask:
    old, new = _names(rng, 2)
    content = rng.choice(WORDS)
    command = f"mv /app/{old}.txt /app/{new}.txt"
    what = f"rename the file /app/{old}.txt to /app/{new}.txt"
    moved = FILE_TEXT.format(path=f"/app/{new}.txt")
    check = f'[ ! -e /app/{old}.txt ] && [ "{moved}" = "{content}" ]'
    return GeneratedTask(
        "rename-file",
        _instruction(what, command),
        command,
        check,
        f"/app/{new}.txt holds {old}.txt's text and {old}.txt is gone",
        {f"{old}.txt": f"{content}\n"},
    )


def _csv_field(rng: random.Random) -> GeneratedTask:
    names = rng.sample(WORDS, 4)
    prices = {n: rng.randint(1, 99) for n in names}
    pick, (out,) = names[rng.randrange(len(names))], _names(rng, 1)
    rows = "".join(f"{n},{prices[n]}\n" for n in names)
    path = f"/app/{out}.txt"
    command = f"grep {pick} /app/prices.csv | cut -d, -f2 > {path}"
    what = f"write the price of {pick} from /app/prices.csv into {path}"
    files = {"prices.csv": f"name,price\n{rows}"}
    return _file_holds("csv-field", what, command, path, prices[pick], files)


def _fix_word(rng: random.Random) -> GeneratedTask:
    wrong, right = rng.sample(WORDS, 2)
    command = f"sed -i s/{wrong}/{right}/ /app/say.sh"
    what = f"in the script /app/say.sh, replace the word {wrong} with {right}"
    return GeneratedTask(
        "fix-word",
        _instruction(what, command),
        command,
        f'[ "$(sh /app/say.sh 2>/dev/null)" = "{right}" ]',
        f"/app/say.sh prints {right}",
        {"say.sh": f"#!/bin/sh\necho {wrong}\n"},
    )


def _make_dir(rng: random.Random) -> GeneratedTask:
    (name,) = _names(rng, 1)
    command = f"mkdir /app/{name}"
    return GeneratedTask(
        "make-dir",
        _instruction(f"make the directory /app/{name}", command),
        command,
        f"[ -d /app/{name} ]",
        f"/app/{name} is a directory",
    )


KINDS: dict[str, Callable[[random.Random], GeneratedTask]] = {
    "write-number": _write_number,
    "write-word": _write_word,
    "count-files": _count_files,
    "rename-file": _rename_file,
    "csv-field": _csv_field,
    "fix-word": _fix_word,
    "make-dir": _make_dir,
}
"""The ``shell-basics`` generators by kind."""

FAMILIES: dict[str, tuple[str, ...]] = {
    "shell-basics": tuple(KINDS),
    "write-number": ("write-number",),
}
"""Family name -> the kinds it draws from, in turn."""


def family_names() -> list[str]:
    """Every family's name, sorted."""
    return sorted(FAMILIES)


def write_task(task: GeneratedTask, folder: Path, family: str) -> Path:
    """Write ``task`` as a Harbor task folder at ``folder`` (made; must not exist)."""
    folder.mkdir(parents=True)
    (folder / "instruction.md").write_text(task.instruction, encoding="utf-8")
    (folder / "task.toml").write_text(TASK_TOML.format(kind=task.kind, family=family))
    env = folder / "environment"
    env.mkdir()
    copies = sorted({rel.split("/")[0] for rel in task.files})
    lines = ["FROM debian:bookworm", "WORKDIR /app"] + [f"COPY {c} /app/{c}" for c in copies]
    (env / "Dockerfile").write_text("\n".join(lines) + "\n", encoding="utf-8")
    for rel, text in task.files.items():
        (env / rel).parent.mkdir(parents=True, exist_ok=True)
        (env / rel).write_text(text, encoding="utf-8")
    for sub, name, text in (
        ("solution", "solve.sh", f"#!/bin/bash\n{task.command}\n"),
        ("tests", "test.sh", VERIFY.format(why=task.why, check=task.check)),
    ):
        (folder / sub).mkdir()
        (folder / sub / name).write_text(text, encoding="utf-8")
        (folder / sub / name).chmod(0o755)
    return folder


@dataclass(frozen=True)
class GeneratedSplit:
    """Where a family run wrote its tasks."""

    train: Path
    """``DIR/train``: the tasks to train on."""
    test: Path
    """``DIR/test``: the held-out tasks."""
    train_names: tuple[str, ...]
    test_names: tuple[str, ...]


def generate_family(
    name: str, count: int, directory: Path, *, seed: int = 0, test_fraction: float = 0.25
) -> GeneratedSplit:
    """Write ``count`` tasks of family ``name`` under ``directory/train`` and
    ``directory/test`` (every ``round(1 / test_fraction)``-th task held out), the same
    folders for the same ``seed``. Tasks whose instructions coincide are drawn again, so
    no held-out task is also a training task.

    Raises:
        HarborTaskError: an unknown family (the known ones named), a count below 2, a
            fraction outside (0, 1), or a ``train``/``test`` folder already there.
    """
    kinds = FAMILIES.get(name)
    if kinds is None:
        raise HarborTaskError(f"unknown task family {name!r}; known: {', '.join(family_names())}")
    if count < 2 or not 0 < test_fraction < 1:
        raise HarborTaskError(
            f"a family run needs --count >= 2 and a test fraction in (0, 1), got count "
            f"{count} and fraction {test_fraction}"
        )
    split = GeneratedSplit(directory / "train", directory / "test", (), ())
    for path in (split.train, split.test):
        if path.exists():
            raise HarborTaskError(f"{path} already exists; give an empty or new DIR")
    rng, seen = random.Random(f"{name}:{seed}"), set[str]()
    every = max(2, round(1 / test_fraction))
    train: list[str] = []
    test: list[str] = []
    for index in range(count):
        kind = kinds[index % len(kinds)]
        task = KINDS[kind](rng)
        for _ in range(ATTEMPTS):
            if task.instruction not in seen:
                break
            task = KINDS[kind](rng)
        else:
            raise HarborTaskError(
                f"family {name!r}: no new {kind} task in {ATTEMPTS} draws after {index}; "
                f"generate fewer (--count {index})"
            )
        seen.add(task.instruction)
        folder_name = f"{kind}-{index:03d}"
        held = index % every == every - 1
        write_task(task, (split.test if held else split.train) / folder_name, name)
        (test if held else train).append(folder_name)
    return GeneratedSplit(split.train, split.test, tuple(train), tuple(test))
