"""The ``mini-swe-agent`` harness (PyPI ``mini-swe-agent``): one bash code block a turn,
OpenAI chat through litellm, run non-interactively (``--yolo --exit-immediately``).

It is installed on the host into a venv under ``<home>/mini-swe-agent/<version>`` made by
the host's base interpreter; the venv's ``site-packages`` and that interpreter are bound
read-only into the sandbox (as the ``bash`` harness binds its interpreter), and the agent
runs as ``python -S -m minisweagent.run.mini`` with ``PYTHONPATH`` on the venv, so neither
the host's ``/usr`` nor its global ``site-packages`` shadow anything. litellm makes no
network call at start: the local cost map, no telemetry, cost tracking errors ignored.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

from rllm.benchmarks.harbor.task import HarborTask
from rllm.producers.harnesses.host import HostInstalled, copy_python_libraries, run_install_command
from rllm.producers.harnesses.loop import PYTHON_PREFIX, host_python
from rllm.producers.harnesses.types import AGENT_LOG_DIR, HarnessApi
from rllm.sandboxes.types import Mount

__all__ = ["MINI_CONFIG_PATH", "MINI_HOME", "MiniSweAgentHarness"]

VERSION = "2.4.6"
"""The pinned PyPI version."""

MINI_HOME = PurePosixPath("/opt/rllm/mini-swe-agent")
"""Where its install folder (``venv/``, ``lib/``: the interpreter's system libraries) is
bound in."""

MINI_CONFIG_PATH = "/rllm/mini-swe-agent.yaml"
"""The run's config (the session's model, URL and key), merged over ``mini_textbased``."""

STATE_DIR = "/tmp/rllm-mini-swe-agent"
"""A writable home for its global config (``.env``) inside the sandbox."""


SITE_PACKAGES = f"venv/lib/python{sys.version_info.major}.{sys.version_info.minor}/site-packages"
"""The venv's ``site-packages`` in the install folder (the interpreter is this one)."""


class MiniSweAgentHarness(HostInstalled):
    """mini-swe-agent's text-based agent (``litellm_textbased``): a ```mswea_bash_command```
    block a reply, ``echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`` to finish.

    Args:
        step_limit: the most model calls of one run (0: no limit).
    """

    name = "mini-swe-agent"
    version = VERSION
    api = HarnessApi.OPENAI_CHAT

    def __init__(self, step_limit: int = 50) -> None:
        self.step_limit = step_limit

    @property
    def log_path(self) -> str:
        """Its trajectory file (an artifact)."""
        return f"{AGENT_LOG_DIR}/mini-swe-agent.traj.json"

    async def _install_into(self, target: Path) -> None:
        """A venv from the host's base interpreter, the pinned package, and the system
        libraries the interpreter's ``ssl`` and ``ctypes`` need."""
        python, prefix = host_python()
        await copy_python_libraries(prefix, target / "lib")
        venv = target / "venv"
        await run_install_command([str(python), "-m", "venv", str(venv)], name=self.name,
                                  cwd=target)  # fmt: skip
        await run_install_command(
            [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet",
             "--disable-pip-version-check", f"mini-swe-agent=={self.version}"],
            name=self.name, cwd=target,
        )  # fmt: skip

    def install_script(self) -> str:
        """Nothing in the snapshot: it is bound in from the host."""
        return ""

    def mounts(self) -> tuple[Mount, ...]:
        """The host's base interpreter at ``/opt/rllm/python`` and the install folder at
        ``/opt/rllm/mini-swe-agent``, read-only.

        Raises:
            HarnessError: it is not installed, or the host's Python lives under ``/usr``.
        """
        _, prefix = host_python()
        return (Mount(source=prefix, target=str(PYTHON_PREFIX)),
                Mount(source=self.installed_dir(), target=str(MINI_HOME)))  # fmt: skip

    def uploads(self, task: HarborTask) -> Mapping[str, Path]:
        """Nothing."""
        return {}

    def environment(self, gateway_base_url: str, api_key: str, model: str) -> dict[str, str]:
        """The bound interpreter's paths, the key and URL litellm reads, and every switch
        that keeps litellm and mini-swe-agent off the network and quiet."""
        return {
            "PYTHONPATH": f"{MINI_HOME}/{SITE_PACKAGES}",
            "LD_LIBRARY_PATH": f"{PYTHON_PREFIX}/lib:{MINI_HOME}/lib",
            "HOME": STATE_DIR,
            "OPENAI_API_KEY": api_key,
            "OPENAI_API_BASE": gateway_base_url,
            "OPENAI_BASE_URL": gateway_base_url,
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "LITELLM_TELEMETRY": "False",
            "LITELLM_LOG": "ERROR",
            "MSWEA_GLOBAL_CONFIG_DIR": STATE_DIR,
            "MSWEA_SILENT_STARTUP": "1",
            "MSWEA_COST_TRACKING": "ignore_errors",
            "MSWEA_CONFIGURED": "true",
            "NO_PROXY": "*",
            "TERM": "dumb",
        }

    def config_files(self, gateway_base_url: str, api_key: str, model: str) -> dict[str, str]:
        """The model section: ``openai/<model>`` at the session's URL with its key; no
        cost limit (the scripted and local models have no price)."""
        lines = [
            "agent:",
            f"  step_limit: {self.step_limit}",
            "  cost_limit: 0",
            "model:",
            f"  model_name: {_yaml(f'openai/{model}')}",
            "  cost_tracking: ignore_errors",
            "  model_kwargs:",
            f"    api_base: {_yaml(gateway_base_url)}",
            f"    api_key: {_yaml(api_key)}",
        ]
        return {MINI_CONFIG_PATH: "\n".join(lines) + "\n"}

    def command(self, instruction_path: str, workdir: str) -> str:
        """``mini`` on the instruction, no confirmation, exiting when it submits."""
        python, prefix = host_python()
        inside = PYTHON_PREFIX / python.relative_to(prefix)
        argv = [
            str(inside), "-S", "-B", "-m", "minisweagent.run.mini",
            "--model-class", "litellm_textbased", "-c", "mini_textbased.yaml",
            "-c", MINI_CONFIG_PATH, "--yolo", "--exit-immediately", "-o", self.log_path,
        ]  # fmt: skip
        task = f'"$(cat {shlex.quote(instruction_path)})"'
        return (f"mkdir -p {STATE_DIR} && cd {shlex.quote(workdir)} && "
                f"{shlex.join(argv)} -t {task} </dev/null")  # fmt: skip

    def log_paths(self) -> tuple[str, ...]:
        """Its trajectory (messages and actions)."""
        return (self.log_path,)


def _yaml(value: str) -> str:
    """A YAML double-quoted scalar (JSON's string syntax is YAML's)."""
    return json.dumps(value)
