"""Steps the daytona and modal tests share, each against its service's fake: a command
that sees the spec's env and workdir, an image built and started, a sandbox closed twice,
a spec the service refuses. Each test goes on with what its service does differently."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rllm.errors import ConfigError
from rllm.sandboxes.types import ExecResult, ImageInfo, Sandbox, SandboxBackend, SandboxSpec

__all__ = ["build_and_start", "close_twice", "exec_env_and_cwd", "refuse"]


async def exec_env_and_cwd(backend: SandboxBackend) -> tuple[Sandbox, ExecResult]:
    """A sandbox whose spec's env and workdir, and the call's env, reach a command that
    exits 7; then an argv with spaces and quotes run in another cwd."""
    sandbox = await backend.create(SandboxSpec(env={"SPEC_VAR": "spec"}, workdir="/work/dir"))
    result = await sandbox.exec(
        "echo out $SPEC_VAR $CALL_VAR; echo err >&2; pwd; exit 7", env={"CALL_VAR": "call"}
    )
    assert (result.stdout, result.stderr, result.exit_code) == (
        "out spec call\n/work/dir\n",
        "err\n",
        7,
    )
    assert not result.timed_out and result.error is None
    moved = await sandbox.exec(
        ["sh", "-c", 'printf "%s|" "$0" "$1"; pwd', "a b", "c'd"], cwd="/tmp"
    )
    assert moved.stdout == "a b|c'd|/tmp\n" and moved.ok
    return sandbox, result


async def build_and_start(backend: SandboxBackend, tmp_path: Path) -> ImageInfo:
    """``tmp_path``'s Dockerfile built as ``task-image``, and a sandbox started from it
    that sees what its RUN wrote."""
    (tmp_path / "Dockerfile").write_text("FROM debian:bookworm\nRUN echo built > /built.txt\n")
    info = await backend.build_image(tmp_path, "task-image")
    sandbox = await backend.create(SandboxSpec(image="task-image"))
    assert await sandbox.read_file("/built.txt") == b"built\n"
    return info


async def close_twice(backend: SandboxBackend, fake: Any) -> tuple[Sandbox, Any]:
    """A sandbox, alive, closed twice; the real local sandbox the fake ran it in."""
    sandbox = await backend.create(SandboxSpec())
    engine = fake.sandboxes[sandbox.id].engine
    assert engine is not None and await sandbox.is_alive()
    await sandbox.close()
    await sandbox.close()
    return sandbox, engine


async def refuse(backend: SandboxBackend, spec: SandboxSpec, words: list[str]) -> None:
    """Creating ``spec`` is a ConfigError whose message has every one of ``words``."""
    with pytest.raises(ConfigError) as caught:
        await backend.create(spec)
    assert all(w in str(caught.value) for w in words), str(caught.value)
