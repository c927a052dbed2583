"""The ``terminus-2`` harness: Harbor's own Terminus-2 agent (PyPI ``harbor``), which types
keystrokes into a tmux session and answers in JSON (``analysis``, ``plan``, ``commands``,
``task_complete``), calling the model through litellm (OpenAI chat).

Harbor runs an agent from outside its environment: ``Terminus2.run(instruction, environment,
context)`` drives a ``BaseEnvironment`` (``exec``, uploads) that a Harbor provider (Docker,
Modal, ...) starts and owns. Here the runner owns the sandbox and runs ``command()`` inside
it, with its network limited to the gateway, so the agent runs there too: a small driver
(``drivers/terminus_driver.py``: a file, not a module of the package, written in as a config
file) constructs Harbor's ``Terminus2`` with a ``BaseEnvironment`` of its own whose ``exec``
is a local subprocess (Harbor's extension point for environments, as its ``import_path``
ones), and runs it on the instruction. The agent's code, prompts, parser and tmux handling
are Harbor's; only the environment is ours.

Harbor needs Python >= 3.12 (rllm runs on 3.11): the install is a venv made by a
self-contained 3.12 interpreter (pyenv's: ``pyenv_python``) under
``<home>/terminus-2/<version>``, with that interpreter's system libraries and a vendored
tmux (the host's binary, its libraries, and a wrapper that starts it through the image's
own loader, so no ``LD_LIBRARY_PATH`` reaches the agent's shell). The interpreter prefix
and the install folder are bound read-only into the sandbox; litellm makes no network
call at start (the local cost map, no telemetry).
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import shutil
from pathlib import Path, PurePosixPath

from rllm.producers.harnesses.errors import HarnessError
from rllm.producers.harnesses.host import harnesses_home
from rllm.producers.harnesses.pypi import VenvInstalled
from rllm.producers.harnesses.types import (
    AGENT_LOG_DIR,
    INSTRUCTION_PATH,
    AgentSetup,
    HarnessApi,
    ModelEndpoint,
)

__all__ = ["HARBOR_PYTHON_PREFIX", "Terminus2Harness", "vendor_tmux"]

VERSION = "0.26.0"
"""The pinned PyPI version of ``harbor``."""

HARBOR_PYTHON_PREFIX = PurePosixPath("/opt/rllm/harbor-python")
"""Where the Python >= 3.12 prefix that made the venv is bound in."""

DRIVER_PATH = "/rllm/terminus_driver.py"
"""Where the driver is written in the sandbox."""

CONFIG_PATH = "/rllm/terminus-2.json"
"""The run's config (model, URL, log folder, tmux's folder, turns) the driver reads."""

INSTALL_RECORD = "install.json"
"""In the install folder: the interpreter that made the venv (pyenv may have a newer
3.12 later)."""

_GLIBC = (
    "libc.so",
    "libm.so",
    "libpthread.so",
    "libdl.so",
    "librt.so",
    "libresolv.so",
    "ld-linux",
    "linux-vdso",
)
"""Parts of glibc that tmux links to: the image's own are used, never the host's."""


async def vendor_tmux(dest: Path) -> str:
    """Copy the host's tmux and the libraries it links to (not glibc's) into ``dest``
    (``tmux``, ``lib/``); the dynamic loader it names (the image has its own there).

    Raises:
        HarnessError: tmux is not on this host, or its loader cannot be read.
    """
    found = shutil.which("tmux")
    if found is None:
        raise HarnessError(
            "installing harness 'terminus-2': tmux is not on this host (Terminus-2 drives "
            "a tmux session, and task images lack it); apt-get install -y tmux and retry"
        )
    binary = Path(os.path.realpath(found))
    proc = await asyncio.create_subprocess_exec(
        "ldd", str(binary), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    out, _ = await proc.communicate()
    (dest / "lib").mkdir(parents=True)
    shutil.copy2(binary, dest / "tmux")
    loader = ""
    for line in out.decode(errors="replace").splitlines():
        name, arrow, rest = line.strip().partition(" => ")
        if not arrow and name.startswith("/") and "ld-linux" in name:
            loader = name.split(" (")[0]
        path = rest.split(" (")[0].strip()
        if arrow and path.startswith("/") and not name.startswith(_GLIBC):
            shutil.copy2(path, dest / "lib" / name)
    if proc.returncode != 0 or not loader:
        raise HarnessError(
            f"installing harness 'terminus-2': `ldd {binary}` exited {proc.returncode} "
            f"without naming its loader: {out.decode(errors='replace')[-500:]}"
        )
    return loader


class Terminus2Harness(VenvInstalled):
    """Harbor's Terminus-2, run by the driver on the sandbox itself; its install folder
    (``venv/``, ``lib/``, ``tmux/``, ``bin/tmux``) is bound in at ``/opt/rllm/terminus-2``.

    Args:
        max_turns: the most model calls of one run (0: Harbor's, no practical limit).
    """

    name = "terminus-2"
    version = VERSION
    api = HarnessApi.OPENAI_CHAT
    package = "harbor"
    python = "3.12"  # Harbor needs >= 3.12; rllm's is 3.11
    python_prefix_dir = HARBOR_PYTHON_PREFIX

    def __init__(self, max_turns: int = 50) -> None:
        self.max_turns = max_turns

    def interpreter(self) -> tuple[Path, Path]:
        """The interpreter that made the venv, as the install recorded it; before the
        install, pyenv's newest 3.12.

        Raises:
            HarnessError: not installed, and no Python 3.12 on the host.
        """
        home = harnesses_home()
        if not self.is_installed(home):
            return super().interpreter()
        record = json.loads((self.install_dir(home) / INSTALL_RECORD).read_text())
        python = Path(record["python"])
        return python, python.parents[1]

    async def _complete(self, target: Path) -> None:
        """The vendored tmux and its wrapper, and the install record."""
        loader = await vendor_tmux(target / "tmux")
        wrapper = target / "bin" / "tmux"
        wrapper.parent.mkdir()
        home = self.bound_dir
        wrapper.write_text(
            f"#!/bin/sh\n# tmux with its own libraries, loaded by the image's {loader}\n"
            f'exec {loader} --library-path {home}/tmux/lib {home}/tmux/tmux "$@"\n'
        )
        wrapper.chmod(0o755)
        python, _ = self.interpreter()
        (target / INSTALL_RECORD).write_text(json.dumps({"python": str(python)}) + "\n")

    def setup(self, endpoint: ModelEndpoint) -> AgentSetup:
        """The bound interpreter's paths, the key and URL litellm reads, and the switches
        that keep litellm off the network (the driver keeps all of them, and the key, from
        the agent's shell); the driver's source and the run's config (no key: it comes
        from the environment, so that Harbor's trajectory does not record it)."""
        env = {
            **self.python_environment(),
            "OPENAI_API_KEY": endpoint.api_key,
            "OPENAI_BASE_URL": endpoint.base_url,
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "LITELLM_TELEMETRY": "False",
            "LITELLM_LOG": "ERROR",
            "HARBOR_TELEMETRY": "0",
            "NO_PROXY": "*",
        }
        driver = (Path(__file__).parent / "drivers" / "terminus_driver.py").read_text(
            encoding="utf-8"
        )
        config = {
            "model": endpoint.model,
            "base_url": endpoint.base_url,
            "logs_dir": AGENT_LOG_DIR,
            "bin_dirs": [f"{self.bound_dir}/bin"],
            "max_turns": self.max_turns,
        }
        files = {DRIVER_PATH: driver, CONFIG_PATH: json.dumps(config, indent=2) + "\n"}
        return AgentSetup(env=env, files=files)

    def command(self, workdir: str) -> str:
        """The driver, run by the bound interpreter without ``site`` and the script's
        folder on the path, stdin closed."""
        argv = [
            self.sandbox_python(),
            "-S",
            "-P",
            "-B",
            DRIVER_PATH,
            "--config",
            CONFIG_PATH,
            "--instruction",
            INSTRUCTION_PATH,
            "--workdir",
            workdir,
        ]
        return f"cd {shlex.quote(workdir)} && {shlex.join(argv)} </dev/null"

    def log_paths(self) -> tuple[str, ...]:
        """Harbor's trajectory (ATIF), the tmux pane's log and Harbor's own log."""
        return (
            f"{AGENT_LOG_DIR}/trajectory.json",
            f"{AGENT_LOG_DIR}/terminus_2.pane",
            f"{AGENT_LOG_DIR}/terminus-2.log",
        )
