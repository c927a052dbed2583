"""Runs Harbor's own Terminus-2 agent INSIDE the sandbox, on the sandbox itself: the
``terminus-2`` harness copies this file in and runs it with the bound Python 3.12 and the
bound Harbor install (it is never imported by rllm, whose Python has no Harbor).

Harbor runs an agent against a ``BaseEnvironment`` (its extension point for providers:
``exec``, uploads, downloads); ``SandboxEnvironment`` is one whose commands are local
subprocesses, because the sandbox already is the task's environment. Terminus-2 starts
its tmux session there and calls the model through litellm at the session's gateway URL;
its trajectory (``trajectory.json``) and pane log land in the log folder.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import resource
import shutil
import signal
import sys
from pathlib import Path
from typing import Any

from harbor.agents.terminus_2 import Terminus2  # type: ignore[import-not-found]  # harbor is optional, absent in CI
from harbor.environments.base import (  # type: ignore[import-not-found]  # harbor is optional, absent in CI
    BaseEnvironment,
    ExecResult,
)
from harbor.environments.capabilities import (  # type: ignore[import-not-found]  # harbor is optional, absent in CI
    EnvironmentCapabilities,
)
from harbor.models.agent.context import AgentContext  # type: ignore[import-not-found]  # harbor is optional, absent in CI
from harbor.models.task.config import EnvironmentConfig  # type: ignore[import-not-found]  # harbor is optional, absent in CI
from harbor.models.trial.paths import TrialPaths  # type: ignore[import-not-found]  # harbor is optional, absent in CI

__all__ = ["SandboxEnvironment", "main"]

DRIVER_ONLY = ("LD_LIBRARY_PATH", "PYTHONPATH", "PYTHONHOME", "PYTHONNOUSERSITE")
"""Variables that serve this interpreter alone: the agent's commands never see them."""

DRIVER_PREFIXES = ("LITELLM_", "OPENAI_", "HARBOR_")
"""Prefixes of the model client's variables, also kept from the agent's commands."""

TMUX_SESSION = "terminus-2"
"""The tmux session Terminus-2 opens (``Terminus2.name()``), killed when it ends."""

LOG_NAME = "terminus-2.log"
"""Harbor's own log (its ``harbor`` logger at DEBUG), in the log folder."""

TIMEOUT_EXIT = 124
"""The exit status of a command killed at its timeout (``timeout(1)``'s)."""


def command_environment(bin_dirs: list[str]) -> dict[str, str]:
    """This process's environment without the driver's own variables, ``bin_dirs`` (tmux)
    first on ``PATH``: what every command Terminus-2 runs starts from."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in DRIVER_ONLY and not k.startswith(DRIVER_PREFIXES)
    }
    env["PATH"] = os.pathsep.join([*bin_dirs, env.get("PATH", "/usr/bin:/bin")])
    return env


class SandboxEnvironment(BaseEnvironment):  # type: ignore[misc]  # Harbor is untyped here
    """The sandbox this process runs in, as a Harbor environment: ``exec`` is a local
    ``bash -c`` (as this process's user: the sandbox already runs the task's agent user,
    so ``user`` is not switched), files are copied locally.

    Args:
        workdir: where commands run when no ``cwd`` is given.
        command_env: every command's base environment.
        logs_dir: the agent's log folder (``/logs/agent``).
    """

    def __init__(self, workdir: str, command_env: dict[str, str], logs_dir: Path) -> None:
        self.workdir = workdir
        self.command_env = command_env
        super().__init__(
            environment_dir=Path(workdir),
            environment_name="rllm-sandbox",
            session_id="rllm-sandbox",
            trial_paths=TrialPaths(trial_dir=logs_dir.parent),
            task_env_config=EnvironmentConfig(),
        )

    @staticmethod
    def type() -> str:
        """Its name among Harbor's environment types."""
        return "rllm-sandbox"

    @property
    def capabilities(self) -> Any:
        """None beyond running commands (the sandbox's limits are set outside it)."""
        return EnvironmentCapabilities()

    def _validate_definition(self) -> None:
        """Nothing to build: the sandbox is running."""

    async def start(self, force_build: bool) -> None:
        """Nothing: the sandbox is running."""

    async def stop(self, delete: bool) -> None:
        """Nothing: the runner closes the sandbox."""

    async def upload_file(self, source_path: Path | str, target_path: str) -> None:
        """Copy a file (the same file system)."""
        Path(target_path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source_path, target_path)

    async def upload_dir(self, source_dir: Path | str, target_dir: str) -> None:
        """Copy a folder (the same file system)."""
        shutil.copytree(source_dir, target_dir, dirs_exist_ok=True)

    async def download_file(self, source_path: str, target_path: Path | str) -> None:
        """Copy a file (the same file system)."""
        Path(target_path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source_path, target_path)

    async def download_dir(self, source_dir: str, target_dir: Path | str) -> None:
        """Copy a folder (the same file system)."""
        shutil.copytree(source_dir, target_dir, dirs_exist_ok=True)

    async def exec(
        self,
        command: str,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout_sec: int | None = None,
        user: str | int | None = None,
    ) -> Any:
        """Run ``command`` with ``bash -c`` in its own process group, killed (with its
        children) at ``timeout_sec``: then exit status 124."""
        proc = await asyncio.create_subprocess_exec(
            "/bin/bash",
            "-c",
            command,
            cwd=cwd or self.workdir,
            env={**self.command_env, **(env or {})},
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        code: int | None = None
        try:
            out, err = await asyncio.wait_for(proc.communicate(), timeout_sec)
        except TimeoutError:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = await proc.communicate()
            code = TIMEOUT_EXIT
        return ExecResult(
            stdout=out.decode(errors="replace"),
            stderr=err.decode(errors="replace"),
            return_code=proc.returncode if code is None else code,
        )


async def run(config: dict[str, Any], instruction: str, workdir: str) -> dict[str, Any]:
    """Terminus-2 on ``instruction`` in this sandbox, as ``config`` says (the model and its
    URL, the log folder, tmux's folder, the most turns; the key is ``OPENAI_API_KEY``, so
    it stays out of the trajectory); its context's summary."""
    logs_dir = Path(config["logs_dir"])
    logs_dir.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(logs_dir / LOG_NAME)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.getLogger("harbor").addHandler(handler)
    environment = SandboxEnvironment(workdir, command_environment(config["bin_dirs"]), logs_dir)
    agent = Terminus2(
        logs_dir=logs_dir,
        model_name=f"openai/{config['model']}",
        api_base=config["base_url"],
        max_turns=config["max_turns"] or None,
        suppress_max_turns_warning=True,
        record_terminal_session=False,  # asciinema is not in the image, nor reachable
    )
    context = AgentContext()
    try:
        await agent.setup(environment)
        await agent.run(instruction, environment, context)
    finally:  # Harbor would remove its container; here the tmux server must go
        await environment.exec(f"tmux kill-session -t {TMUX_SESSION} 2>/dev/null", timeout_sec=10)
    return {
        "n_input_tokens": context.n_input_tokens,
        "n_output_tokens": context.n_output_tokens,
        "metadata": context.metadata,
        "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
    }


def main(argv: list[str] | None = None) -> int:
    """``terminus_driver.py --config FILE --instruction FILE --workdir DIR``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--config", required=True, help="the run's JSON config")
    parser.add_argument("--instruction", required=True, help="the task's instruction file")
    parser.add_argument("--workdir", required=True, help="where the agent's shell starts")
    args = parser.parse_args(argv)
    config = json.loads(Path(args.config).read_text(encoding="utf-8"))
    instruction = Path(args.instruction).read_text(encoding="utf-8")
    summary = asyncio.run(run(config, instruction, args.workdir))
    print(json.dumps(summary, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
