"""Harbor's verifier contract, run in any ``Sandbox``; and the oracle (``solve.sh``).

The verifier: remove ``/logs/verifier`` and ``/tests`` (so nothing planted there counts),
upload the task's ``tests/`` to ``/tests``, run ``/tests/test.sh`` (with bash, or sh
where the image has no bash) in the task's workdir with ``[verifier] env`` and its
timeout, its output in ``/logs/verifier/test-stdout.txt``; then read the reward.

How the reward files are read is in ``rllm.benchmarks.harbor.rewards``. A missing, empty,
non-numeric, non-finite or nested reward is a failed verification (``ok=False``, the path
and content named), never a silent 0; so is a timeout. test.sh's exit status does not
decide the reward (as in Harbor).
"""

from __future__ import annotations

import os
import re
import shlex
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from rllm.benchmarks.errors import RewardFileError
from rllm.benchmarks.harbor.rewards import (
    REWARD_JSON,
    REWARD_TXT,
    VERIFIER_DIR,
    parse_reward_json,
    parse_reward_txt,
    read_file,
    read_rewards,
)
from rllm.benchmarks.harbor.task import HarborTask, HarborTaskError
from rllm.errors import ConfigError
from rllm.sandboxes.types import ExecResult, Sandbox

__all__ = [
    "REWARD_JSON",
    "REWARD_TXT",
    "TEST_STDOUT",
    "VerifierResult",
    "output_tail",
    "parse_reward_json",
    "parse_reward_txt",
    "run_oracle",
    "run_verifier",
]

TEST_STDOUT = f"{VERIFIER_DIR}/test-stdout.txt"
TESTS_DIR = "/tests"
SOLUTION_DIR = "/solution"
TAIL_CHARS = 4000
TAIL_LINES = 40
"""How much of test.sh's output a result keeps: its last 40 lines, at most 4,000
characters."""

_ENV_TEMPLATE = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-(.*))?\}$")


@dataclass(frozen=True)
class VerifierResult:
    """How one verification ended."""

    reward: float | None
    """The main reward; None when the verification failed."""
    values: dict[str, float]
    """Every named value (``reward.json``'s, or ``{"reward": x}`` from ``reward.txt``)."""
    ok: bool
    """A reward was read; False: timed out, no or a bad reward file, sandbox trouble."""
    error: str | None
    """Why it failed, naming the path and the bad content; None when ok."""
    stdout_tail: str
    """The end of ``test-stdout.txt``."""
    timed_out: bool
    """test.sh ran past the task's ``[verifier] timeout_sec`` (times the multiplier)."""
    duration_s: float
    """Wall-clock seconds, upload to reward read."""
    exit_code: int | None = None
    """test.sh's exit status (recorded only: the reward file decides)."""
    files: dict[str, str] = field(default_factory=dict)
    """The reward files read, by path, as written (cut at 1,000 characters)."""


def output_tail(text: str) -> str:
    """The last ``TAIL_LINES`` lines of ``text``, cut to its last ``TAIL_CHARS``."""
    return "".join(text.splitlines(keepends=True)[-TAIL_LINES:])[-TAIL_CHARS:]


def _resolve_env(env: Mapping[str, str]) -> dict[str, str]:
    """``${VAR}`` and ``${VAR:-default}`` values taken from the host (as Harbor does)."""
    resolved: dict[str, str] = {}
    for key, value in env.items():
        match = _ENV_TEMPLATE.match(value)
        if match is None:
            resolved[key] = value
            continue
        name, default = match.group(1), match.group(2)
        if name in os.environ:
            resolved[key] = os.environ[name]
        elif default is not None:
            resolved[key] = default
        else:
            raise ConfigError(f"verifier env {key}={value!r}: host variable {name} is not set")
    return resolved


def _shell(script: str) -> str:
    """Run ``script`` with bash where the image has it, else sh; stdin closed."""
    quoted = shlex.quote(script)
    return (
        f"if command -v bash >/dev/null 2>&1; then bash {quoted}; else sh {quoted}; fi </dev/null"
    )


def _timeout(base: float, multiplier: float) -> float:
    if not multiplier > 0:
        raise ConfigError(f"timeout multiplier {multiplier!r} must be a positive number")
    return base * multiplier


async def run_verifier(
    sandbox: Sandbox, task: HarborTask, *, timeout_multiplier: float = 1.0
) -> VerifierResult:
    """Run ``task``'s verifier in ``sandbox`` (after its agent) and read the reward.

    Args:
        sandbox: Where the agent worked.
        task: The task.
        timeout_multiplier: Scales the task's verifier timeout (on top of its loading's).

    Raises:
        ConfigError: a bad multiplier, or a ``${VAR}`` in ``[verifier] env`` not set here.
    """
    timeout = _timeout(task.verifier_timeout_s, timeout_multiplier)
    env = _resolve_env(task.config.verifier_env)
    start = time.monotonic()
    workdir = shlex.quote(task.workdir)
    prepare = await sandbox.exec(
        f"rm -rf {VERIFIER_DIR} {TESTS_DIR} && mkdir -p {VERIFIER_DIR} {TESTS_DIR} {workdir}"
    )
    if not prepare.ok:
        return _failed(
            f"could not prepare {VERIFIER_DIR} and {TESTS_DIR} (exit {prepare.exit_code}): "
            f"{(prepare.stderr or prepare.error or '').strip()}",
            start,
        )
    await sandbox.upload_dir(task.tests_dir, TESTS_DIR)
    run = await sandbox.exec(
        f"{{ {_shell(f'{TESTS_DIR}/test.sh')}; }} >{TEST_STDOUT} 2>&1",
        cwd=task.workdir,
        env=env,
        timeout_s=timeout,
        user=task.config.verifier_user,
    )
    tail = await read_file(sandbox, TEST_STDOUT)
    stdout_tail = output_tail(tail if tail is not None else run.stdout + run.stderr)
    if run.timed_out:
        return _failed(
            f"{TESTS_DIR}/test.sh of task {task.name!r} timed out after {timeout:g} s "
            f"([verifier] timeout_sec = {task.config.verifier_timeout_s:g})",
            start,
            stdout_tail,
            timed_out=True,
        )
    if run.exit_code is None:
        return _failed(f"{TESTS_DIR}/test.sh did not finish: {run.error}", start, stdout_tail)
    files: dict[str, str] = {}
    try:
        reward, values = await read_rewards(sandbox, files)
    except RewardFileError as exc:
        return _failed(f"task {task.name!r}: {exc}", start, stdout_tail, run.exit_code, files)
    return VerifierResult(
        reward=reward,
        values=values,
        ok=True,
        error=None,
        stdout_tail=stdout_tail,
        timed_out=False,
        duration_s=time.monotonic() - start,
        exit_code=run.exit_code,
        files=files,
    )


def _failed(
    error: str,
    start: float,
    stdout_tail: str = "",
    exit_code: int | None = None,
    files: dict[str, str] | None = None,
    *,
    timed_out: bool = False,
) -> VerifierResult:
    return VerifierResult(
        reward=None,
        values={},
        ok=False,
        error=error,
        stdout_tail=stdout_tail,
        timed_out=timed_out,
        duration_s=time.monotonic() - start,
        exit_code=exit_code,
        files=files or {},
    )


async def run_oracle(
    sandbox: Sandbox, task: HarborTask, *, timeout_multiplier: float = 1.0
) -> ExecResult:
    """Upload ``solution/`` to ``/solution`` and run ``solve.sh`` in the task's workdir,
    with ``[solution] env`` and the agent's timeout: what a perfect agent would do.

    Raises:
        HarborTaskError: the task has no ``solution/solve.sh``.
        ConfigError: a bad multiplier.
    """
    if task.solution_dir is None:
        raise HarborTaskError(
            f"Harbor task {task.name!r} has no oracle: {task.path / 'solution' / 'solve.sh'} "
            f"is missing"
        )
    timeout = _timeout(task.agent_timeout_s, timeout_multiplier)
    workdir = shlex.quote(task.workdir)
    prepare = await sandbox.exec(f"rm -rf {SOLUTION_DIR} && mkdir -p {SOLUTION_DIR} {workdir}")
    if not prepare.ok:
        return prepare
    await sandbox.upload_dir(task.solution_dir, SOLUTION_DIR)
    return await sandbox.exec(
        _shell(f"{SOLUTION_DIR}/solve.sh"),
        cwd=task.workdir,
        env=_resolve_env(task.config.solution_env),
        timeout_s=timeout,
        user=task.config.agent_user,
    )
