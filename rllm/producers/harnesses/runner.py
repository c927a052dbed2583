"""One runner for every harness and every task: the task's image, a snapshot with the
harness installed (made once per backend, image and install script), a sandbox with
``network=gateway``, the agent with the task's timeout, the verifier in the same sandbox,
the harness's logs kept as artifacts, and the sandbox closed whatever fails.

The gateway session around it is ``rllm.producers.harnesses.rollout``'s.
"""

from __future__ import annotations

import asyncio
import json
import shlex
import time
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import TypedDict, Unpack

from rllm.benchmarks.harbor.task import HarborTask
from rllm.benchmarks.harbor.verifier import TEST_STDOUT, VerifierResult, run_verifier
from rllm.producers.harnesses.errors import HarnessError
from rllm.producers.harnesses.host import harnesses_home, install, is_installed
from rllm.producers.harnesses.types import (
    AGENT_LOG_DIR,
    INSTRUCTION_PATH,
    AgentSetup,
    CallsModel,
    CloseReason,
    Harness,
    HarnessApi,
    HarnessRun,
    ModelEndpoint,
    UploadsTaskFiles,
)
from rllm.sandboxes.snapshots import ensure_snapshot, snapshot_key
from rllm.sandboxes.types import NetworkMode, Sandbox, SandboxBackend

__all__ = ["HarnessRunner", "RunnerOptions"]

INSTRUCTION_DIR = str(PurePosixPath(INSTRUCTION_PATH).parent)
TAIL_CHARS = 4000
"""How much of the agent's output a run keeps."""


class RunnerOptions(TypedDict, total=False):
    """How a ``HarnessRunner`` runs (every one optional)."""

    artifacts_dir: Path | None
    """Where the harness's log files are copied (``<dir>/<session>/``); None keeps none."""
    labels: Mapping[str, str] | None
    """Put on every sandbox (``rllm.owner``: the run, for ``reap``)."""
    install_timeout_s: float
    """The most the install script may take (900 s)."""


class HarnessRunner:
    """Runs one harness on Harbor tasks in one sandbox backend.

    Args:
        harness: the agent.
        backend: where sandboxes come from.
        options: ``RunnerOptions`` (artifacts folder, sandbox labels, install timeout).
    """

    def __init__(
        self, harness: Harness, backend: SandboxBackend, **options: Unpack[RunnerOptions]
    ) -> None:
        self.harness = harness
        self.backend = backend
        self.artifacts_dir = options.get("artifacts_dir")
        self.labels = dict(options.get("labels") or {})
        self.install_timeout_s = options.get("install_timeout_s", 900.0)
        self._images: dict[Path, str] = {}
        self._locks: dict[Path, asyncio.Lock] = {}
        self._install_lock = asyncio.Lock()

    async def prepare(self, task: HarborTask) -> str:
        """The image the task's sandboxes start from: the harness installed on the host
        when it installs there (``harnesses_home()``), its environment built, and the
        harness's install script snapshotted on top (once; concurrent callers wait for it).

        Raises:
            HarnessError: the host install or the install script failed (its exit status
                and output named).
            ImageError, DockerfileError: the task's environment does not build.
        """
        async with self._install_lock:  # a host-side install (npm, PyPI), once
            home = harnesses_home()
            if not is_installed(self.harness, home):
                await install(self.harness, home)
        lock = self._locks.setdefault(task.path, asyncio.Lock())
        async with lock:
            if task.path not in self._images:
                self._images[task.path] = await self._prepare(task)
            return self._images[task.path]

    async def _prepare(self, task: HarborTask) -> str:
        if task.dockerfile is None and task.config.docker_image:
            image_name, image_id = task.config.docker_image, task.config.docker_image
        else:
            image = await self.backend.build_image(task.environment_dir, f"harbor/{task.name}")
            image_name, image_id = image.name, image.id
        script = self.harness.install_script()
        if not script.strip():
            return image_name
        harness = self.harness
        key = snapshot_key(self.backend.name, image_id, harness.name, harness.version, script)

        async def install(sandbox: Sandbox) -> None:
            done = await sandbox.exec(script, timeout_s=self.install_timeout_s)
            if not done.ok:
                raise HarnessError(
                    f"installing harness {harness.name!r} {harness.version} on task "
                    f"{task.name!r} failed (exit {done.exit_code}, {done.error or 'no error'}): "
                    f"{(done.stdout + done.stderr)[-2000:]}"
                )

        spec = task.sandbox_spec(
            image_name, limits=False, network=NetworkMode.HOST, labels=self.labels
        )
        name = f"harness-{harness.name}-{key[:16]}"
        return (await ensure_snapshot(self.backend, spec, key, install, name=name)).image

    async def run(
        self, task: HarborTask, *, gateway_url: str, endpoint: ModelEndpoint, session_id: str = ""
    ) -> HarnessRun:
        """Run the harness on ``task`` with its model calls going to ``endpoint`` (a gateway
        session on ``gateway_url``); verify; close the sandbox.

        Never raises for the agent's or the verifier's failure: ``HarnessRun.reason``
        says what happened.
        """
        harness, began = self.harness, time.monotonic()
        try:
            image = await self.prepare(task)
            calls = harness.api is not HarnessApi.NONE
            spec = task.sandbox_spec(
                image,
                network=NetworkMode.GATEWAY if calls else NetworkMode.NONE,
                gateway_url=gateway_url if calls else None,
                mounts=harness.mounts(),
                labels={**self.labels, "rllm.session": session_id, "rllm.harness": harness.name},
                lifetime_s=task.agent_timeout_s + task.verifier_timeout_s + 300.0,
            )
            sandbox = await self.backend.create(spec)
        except Exception as exc:  # a failed environment or install is this run's result
            error = f"task {task.name!r}, harness {harness.name!r}: {type(exc).__name__}: {exc}"
            return HarnessRun(
                harness.name,
                task.name,
                reason=CloseReason.SANDBOX_ERROR,
                error=error,
                sandbox_s=time.monotonic() - began,
            )
        try:
            return await self._in_sandbox(sandbox, task, endpoint, session_id, began)
        finally:
            await sandbox.close()

    async def _in_sandbox(
        self,
        sandbox: Sandbox,
        task: HarborTask,
        endpoint: ModelEndpoint,
        session_id: str,
        began: float,
    ) -> HarnessRun:
        harness = self.harness
        try:
            setup = harness.setup(endpoint) if isinstance(harness, CallsModel) else AgentSetup()
            await sandbox.write_file(INSTRUCTION_PATH, task.instruction)
            for path, text in setup.files.items():
                await sandbox.write_file(path, text, mode=0o600)
            if isinstance(harness, UploadsTaskFiles):
                for remote, local in harness.uploads(task).items():
                    await sandbox.upload_dir(local, remote)
            await self._grant(sandbox, task, list(setup.files))
        except Exception as exc:
            error = (
                f"harness {harness.name!r} could not be started on task {task.name!r}: "
                f"{type(exc).__name__}: {exc}"
            )
            return HarnessRun(harness.name, task.name, reason=CloseReason.AGENT_ERROR, error=error)
        sandbox_s = time.monotonic() - began
        agent = await sandbox.exec(
            harness.command(task.workdir),
            cwd=task.workdir,
            env=setup.env,
            timeout_s=task.agent_timeout_s,
            user=task.config.agent_user,
        )
        tail = (agent.stdout + agent.stderr)[-TAIL_CHARS:]
        artifacts = await self._keep_logs(sandbox, session_id)
        verifier: VerifierResult | None = None
        error_text: str | None = None
        try:  # the work done counts, even after a timeout
            verifier = await run_verifier(sandbox, task)
        except Exception as exc:  # a [verifier] env the host cannot fill, a dead sandbox
            error_text = f"verifier of task {task.name!r} failed: {type(exc).__name__}: {exc}"
        if self.artifacts_dir is not None:
            folder = self.artifacts_dir / (session_id or sandbox.id)
            artifacts.update(_keep_verification(folder, verifier, error_text))
        reason = CloseReason.OK
        if agent.timed_out:
            reason = CloseReason.TIMEOUT
            error_text = (
                f"harness {harness.name!r} on task {task.name!r} ran past "
                f"{task.agent_timeout_s:g} s ([agent] timeout_sec) and was killed"
            )
        elif not agent.ok:
            reason = CloseReason.AGENT_ERROR
            error_text = (
                f"harness {harness.name!r} on task {task.name!r} exited "
                f"{agent.exit_code} ({agent.error or 'no error'}): {tail[-500:]}"
            )
        elif verifier is None or not verifier.ok:
            reason = CloseReason.VERIFIER_ERROR
            error_text = error_text if verifier is None else verifier.error
        close_began = time.monotonic()
        await sandbox.close()
        return HarnessRun(
            harness.name,
            task.name,
            reason=reason,
            error=error_text,
            agent_exit_code=agent.exit_code,
            agent_s=agent.duration_s,
            agent_output_tail=tail,
            verifier=verifier,
            sandbox_s=sandbox_s + time.monotonic() - close_began,
            artifacts=artifacts,
        )

    async def _grant(self, sandbox: Sandbox, task: HarborTask, configs: list[str]) -> None:
        """Make the workdir and log folder, and let a non-root ``[agent] user`` read the
        instruction, own its config files and write its logs."""
        quoted = " ".join(shlex.quote(p) for p in configs)
        script = (
            f"mkdir -p {AGENT_LOG_DIR} {shlex.quote(task.workdir)} && "
            f"chmod 1777 {AGENT_LOG_DIR} && chmod 755 {INSTRUCTION_DIR} && "
            f"chmod 644 {INSTRUCTION_PATH}"
        )
        user = task.config.agent_user
        if user and configs:
            script += f" && chown {shlex.quote(user)} {quoted}"
        done = await sandbox.exec(script)
        if not done.ok:
            raise HarnessError(
                f"preparing the sandbox failed (exit {done.exit_code}): "
                f"{(done.stderr or done.error or '').strip()}"
            )

    async def _keep_logs(self, sandbox: Sandbox, session_id: str) -> dict[str, str]:
        """Copy the harness's log files out (missing ones skipped): artifacts, not data."""
        if self.artifacts_dir is None:
            return {}
        kept: dict[str, str] = {}
        folder = self.artifacts_dir / (session_id or sandbox.id)
        for path in self.harness.log_paths():
            try:
                data = await sandbox.read_file(path)
            except FileNotFoundError:
                continue
            folder.mkdir(parents=True, exist_ok=True)
            local = folder / Path(path).name
            local.write_bytes(data)
            kept[path] = str(local)
        return kept


def _keep_verification(
    folder: Path, verifier: VerifierResult | None, error: str | None
) -> dict[str, str]:
    """Write the verification's outcome (exit code, reason, output tail) as an
    artifact, ``verifier.json``, and the tail as ``test-stdout.txt``."""
    folder.mkdir(parents=True, exist_ok=True)
    outcome = {
        "ok": verifier is not None and verifier.ok,
        "reward": verifier.reward if verifier is not None else None,
        "exit_code": verifier.exit_code if verifier is not None else None,
        "error": verifier.error if verifier is not None else error,
        "timed_out": verifier.timed_out if verifier is not None else False,
        "output_tail": verifier.stdout_tail if verifier is not None else "",
    }
    (folder / "verifier.json").write_text(json.dumps(outcome, indent=2) + "\n")
    kept = {"verifier": str(folder / "verifier.json")}
    if verifier is not None:
        (folder / "test-stdout.txt").write_text(verifier.stdout_tail)
        kept[TEST_STDOUT] = str(folder / "test-stdout.txt")
    return kept
