"""What the ``bash`` and ``react`` harnesses share: their loop (``agent_loop.py``) run
INSIDE the sandbox by the host's base interpreter, bound in read-only at
``/opt/rllm/python``.

Why a bound host interpreter: task images are plain Debian with no Python, and a loop in
POSIX sh would need an HTTP client and a JSON parser the images do not have either. The
interpreter's prefix is self-contained (pyenv: its ``RUNPATH`` is absolute, it needs only
the image's libc; ``LD_LIBRARY_PATH`` finds its ``libpython`` at the new place), so nothing
of the host's ``/usr`` shadows the image's, and a non-root agent user reaches it (a
pyenv prefix under ``/root`` would not be). The loop's
source is baked into the snapshot by ``install_script``; nothing is installed at run time.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from rllm.producers.harnesses.errors import HarnessError
from rllm.producers.harnesses.types import (
    AGENT_LOG_DIR,
    INSTRUCTION_PATH,
    AgentSetup,
    HarnessApi,
    HarnessBase,
    ModelEndpoint,
)
from rllm.sandboxes.types import Mount

__all__ = ["LOOP_PATH", "PYTHON_PREFIX", "LoopHarness", "host_python", "pyenv_python"]

LOOP_PATH = "/opt/rllm/agent_loop.py"
"""Where the loop is installed in the snapshot."""

PYTHON_PREFIX = PurePosixPath("/opt/rllm/python")
"""Where the host's interpreter prefix is bound in."""


def host_python() -> tuple[Path, Path]:
    """The host's base interpreter (not the venv's) and its prefix.

    Raises:
        HarnessError: the interpreter lives under ``/usr`` (binding that prefix would
            shadow the image's own ``/usr``): run rllm from a self-contained Python
            (pyenv, a python-build-standalone) instead.
    """
    executable = Path(os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable))
    prefix = executable.parents[1]
    if prefix.is_relative_to("/usr"):
        raise HarnessError(
            f"the bash and react harnesses bind the host's Python into the sandbox, but "
            f"{executable} lives under /usr, which would hide the image's own; run rllm "
            f"from a self-contained Python (pyenv, python-build-standalone)"
        )
    return executable, prefix


def pyenv_python(minor: str) -> tuple[Path, Path]:
    """A self-contained interpreter of Python ``minor`` (``"3.13"``) and its prefix, for a
    harness that needs another Python than rllm's: this one when it is that version, else
    the newest ``$PYENV_ROOT/versions/<minor>.N`` (``~/.pyenv``), never a pyenv shim.

    Raises:
        HarnessError: none is installed (how to install one is named).
    """
    if f"{sys.version_info.major}.{sys.version_info.minor}" == minor:
        return host_python()
    root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    found = [
        (tuple(int(n) for n in path.parents[1].name.split(".")), path)
        for path in root.glob(f"versions/{minor}.*/bin/python{minor}")
        if re.fullmatch(rf"{re.escape(minor)}\.\d+", path.parents[1].name)
    ]
    if not found:
        raise HarnessError(
            f"no Python {minor} under {root}/versions (nor is rllm's own {minor}); install "
            f"one with `pyenv install {minor}` (or set PYENV_ROOT to where it is)"
        )
    executable = Path(os.path.realpath(max(found)[1]))
    return executable, executable.parents[1]


class LoopHarness(HarnessBase):
    """The in-sandbox loop in one ``style`` (``text``: one command a reply; ``tools``:
    OpenAI tool calls).

    Args:
        max_turns: the most model calls of one run.
        command_timeout_s: the most one command may take.
        sampling: sampling parameters every model call sends (``temperature``,
            ``max_tokens``, ...; none: the server's defaults, which for a chat call means
            up to the whole context); passed as ``RLLM_SAMPLING``.
        turn_limit_ends: the last of ``max_turns`` ends the run like ``done`` (a budget
            of one-command agents), instead of an agent error.
    """

    name = "loop"
    version = "1"
    api = HarnessApi.OPENAI_CHAT
    style = "text"

    def __init__(
        self,
        max_turns: int = 50,
        command_timeout_s: float = 120.0,
        sampling: Mapping[str, Any] | None = None,
        turn_limit_ends: bool = False,
    ) -> None:
        self.max_turns = max_turns
        self.command_timeout_s = command_timeout_s
        self.sampling = dict(sampling or {})
        self.turn_limit_ends = turn_limit_ends

    @property
    def log_path(self) -> str:
        """The loop's log: one JSON line a turn."""
        return f"{AGENT_LOG_DIR}/{self.name}-agent.jsonl"

    def install_script(self) -> str:
        """Writes the loop's source to ``/opt/rllm/agent_loop.py`` (idempotent), readable
        by every user (a task's ``[agent] user`` may not be root)."""
        source = (Path(__file__).parent / "agent_loop.py").read_text(encoding="utf-8")
        folder = os.path.dirname(LOOP_PATH)
        heredoc = f"<<'RLLM_AGENT_LOOP'\n{source}\nRLLM_AGENT_LOOP\n"
        return (
            f"mkdir -p {folder} && chmod 755 {folder} && cat > {LOOP_PATH} {heredoc}"
            f"chmod 644 {LOOP_PATH}\n"
        )

    def mounts(self) -> tuple[Mount, ...]:
        """The host's base interpreter prefix, read-only, at ``/opt/rllm/python``."""
        _, prefix = host_python()
        return (Mount(source=prefix, target=str(PYTHON_PREFIX)),)

    def setup(self, endpoint: ModelEndpoint) -> AgentSetup:
        """The OpenAI client's variables (the loop reads them), the sampling parameters,
        and where the bound interpreter finds its ``libpython`` (the loop drops it for the
        commands it runs); no config file."""
        env = {
            "LD_LIBRARY_PATH": f"{PYTHON_PREFIX}/lib",
            "OPENAI_BASE_URL": endpoint.base_url,
            "OPENAI_API_KEY": endpoint.api_key,
            "RLLM_MODEL": endpoint.model,
            "NO_PROXY": "*",
        }
        if self.sampling:
            env["RLLM_SAMPLING"] = json.dumps(self.sampling, separators=(",", ":"))
        return AgentSetup(env=env)

    def command(self, workdir: str) -> str:
        """The loop, run by the bound interpreter in isolated mode, stdin closed."""
        python, prefix = host_python()
        inside = PYTHON_PREFIX / python.relative_to(prefix)
        argv = [
            str(inside),
            "-I",
            "-B",
            LOOP_PATH,
            "--style",
            self.style,
            "--instruction",
            INSTRUCTION_PATH,
            "--workdir",
            workdir,
            "--log",
            self.log_path,
            "--max-turns",
            str(self.max_turns),
            "--timeout",
            f"{self.command_timeout_s:g}",
        ]
        if self.turn_limit_ends:
            argv.append("--turn-limit-ends")
        return shlex.join(argv) + " </dev/null"

    def log_paths(self) -> tuple[str, ...]:
        """The loop's JSON-lines log."""
        return (self.log_path,)
