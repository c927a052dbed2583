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
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

from rllm.benchmarks.harbor.task import HarborTask
from rllm.producers.harnesses.errors import HarnessError
from rllm.producers.harnesses.host import HostInstalled, copy_python_libraries, run_install_command
from rllm.producers.harnesses.loop import pyenv_python
from rllm.producers.harnesses.types import AGENT_LOG_DIR, HarnessApi
from rllm.sandboxes.types import Mount

__all__ = ["HARBOR_PYTHON_PREFIX", "TERMINUS_HOME", "Terminus2Harness", "vendor_tmux"]

VERSION = "0.26.0"
"""The pinned PyPI version of ``harbor``."""

TERMINUS_HOME = PurePosixPath("/opt/rllm/terminus-2")
"""Where its install folder (``venv/``, ``lib/``, ``tmux/``, ``bin/tmux``) is bound in."""

HARBOR_PYTHON_PREFIX = PurePosixPath("/opt/rllm/harbor-python")
"""Where the Python >= 3.12 prefix that made the venv is bound in."""

DRIVER_PATH = "/rllm/terminus_driver.py"
"""Where the driver is written in the sandbox."""

CONFIG_PATH = "/rllm/terminus-2.json"
"""The run's config (model, URL, log folder, tmux's folder, turns) the driver reads."""

INSTALL_RECORD = "install.json"
"""In the install folder: the interpreter that made the venv and the venv's
``site-packages``, relative."""

HARBOR_PYTHON = "3.12"
"""The Python Harbor runs on (it needs >= 3.12; rllm's is 3.11)."""

_GLIBC = ("libc.so", "libm.so", "libpthread.so", "libdl.so", "librt.so", "libresolv.so",
          "ld-linux", "linux-vdso")  # fmt: skip
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


class Terminus2Harness(HostInstalled):
    """Harbor's Terminus-2, run by the driver on the sandbox itself.

    Args:
        max_turns: the most model calls of one run (0: Harbor's, no practical limit).
    """

    name = "terminus-2"
    version = VERSION
    api = HarnessApi.OPENAI_CHAT

    def __init__(self, max_turns: int = 50) -> None:
        self.max_turns = max_turns

    async def _install_into(self, target: Path) -> None:
        """A venv from a Python >= 3.12 with the pinned ``harbor``, that interpreter's
        system libraries, the vendored tmux and its wrapper, and the install record."""
        python, prefix = pyenv_python(HARBOR_PYTHON)
        await copy_python_libraries(prefix, target / "lib")
        venv = target / "venv"
        await run_install_command([str(python), "-m", "venv", str(venv)], name=self.name,
                                  cwd=target)  # fmt: skip
        await run_install_command(
            [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet",
             "--disable-pip-version-check", f"harbor=={self.version}"],
            name=self.name, cwd=target,
        )  # fmt: skip
        loader = await vendor_tmux(target / "tmux")
        wrapper = target / "bin" / "tmux"
        wrapper.parent.mkdir()
        home = TERMINUS_HOME
        wrapper.write_text(
            f"#!/bin/sh\n# tmux with its own libraries, loaded by the image's {loader}\n"
            f'exec {loader} --library-path {home}/tmux/lib {home}/tmux/tmux "$@"\n'
        )
        wrapper.chmod(0o755)
        site = next(venv.glob("lib/python3.*/site-packages"))
        record = {"python": str(python), "site_packages": str(site.relative_to(target))}
        (target / INSTALL_RECORD).write_text(json.dumps(record) + "\n")

    def _record(self) -> tuple[Path, Path, str]:
        """The installed folder, the interpreter that made its venv, and the venv's
        ``site-packages`` relative to the folder.

        Raises:
            HarnessError: it is not installed.
        """
        folder = self.installed_dir()
        record = json.loads((folder / INSTALL_RECORD).read_text())
        return folder, Path(record["python"]), record["site_packages"]

    def install_script(self) -> str:
        """Nothing in the snapshot: it is bound in from the host."""
        return ""

    def mounts(self) -> tuple[Mount, ...]:
        """The interpreter's prefix at ``/opt/rllm/harbor-python`` and the install folder
        at ``/opt/rllm/terminus-2``, read-only.

        Raises:
            HarnessError: it is not installed.
        """
        folder, python, _ = self._record()
        return (Mount(source=python.parents[1], target=str(HARBOR_PYTHON_PREFIX)),
                Mount(source=folder, target=str(TERMINUS_HOME)))  # fmt: skip

    def uploads(self, task: HarborTask) -> Mapping[str, Path]:
        """Nothing."""
        return {}

    def environment(self, gateway_base_url: str, api_key: str, model: str) -> dict[str, str]:
        """The bound interpreter's paths, the key and URL litellm reads, and the switches
        that keep litellm off the network (the driver keeps all of them, and the key, from
        the agent's shell)."""
        _, _, site_packages = self._record()
        return {
            "PYTHONPATH": f"{TERMINUS_HOME}/{site_packages}",
            "LD_LIBRARY_PATH": f"{HARBOR_PYTHON_PREFIX}/lib:{TERMINUS_HOME}/lib",
            "OPENAI_API_KEY": api_key,
            "OPENAI_BASE_URL": gateway_base_url,
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "LITELLM_TELEMETRY": "False",
            "LITELLM_LOG": "ERROR",
            "HARBOR_TELEMETRY": "0",
            "NO_PROXY": "*",
        }

    def config_files(self, gateway_base_url: str, api_key: str, model: str) -> dict[str, str]:
        """The driver's source and the run's config (no key: it comes from the
        environment, so that Harbor's trajectory does not record it)."""
        driver = (Path(__file__).parent / "drivers" / "terminus_driver.py").read_text(
            encoding="utf-8"
        )
        config = {
            "model": model,
            "base_url": gateway_base_url,
            "logs_dir": AGENT_LOG_DIR,
            "bin_dirs": [f"{TERMINUS_HOME}/bin"],
            "max_turns": self.max_turns,
        }
        return {DRIVER_PATH: driver, CONFIG_PATH: json.dumps(config, indent=2) + "\n"}

    def command(self, instruction_path: str, workdir: str) -> str:
        """The driver, run by the bound interpreter without ``site`` and the script's
        folder on the path, stdin closed."""
        _, python, _ = self._record()
        inside = HARBOR_PYTHON_PREFIX / "bin" / python.name
        argv = [
            str(inside), "-S", "-P", "-B", DRIVER_PATH, "--config", CONFIG_PATH,
            "--instruction", instruction_path, "--workdir", workdir,
        ]  # fmt: skip
        return f"cd {shlex.quote(workdir)} && {shlex.join(argv)} </dev/null"

    def log_paths(self) -> tuple[str, ...]:
        """Harbor's trajectory (ATIF), the tmux pane's log and Harbor's own log."""
        return (f"{AGENT_LOG_DIR}/trajectory.json", f"{AGENT_LOG_DIR}/terminus_2.pane",
                f"{AGENT_LOG_DIR}/terminus-2.log")  # fmt: skip
