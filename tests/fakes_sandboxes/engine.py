"""Where the hosted-service fakes really run things: each fake sandbox is a real ``local``
sandbox (bubblewrap over a kernel overlay) of its own, so commands, files, exit codes and
timeouts are real. The engine keeps its state under a home of its own (its snapshots are
the fake service's, not the user's), sharing the test's image store.
"""

from __future__ import annotations

import uuid

from rllm.sandboxes.registry import get_backend
from rllm.sandboxes.settings import SandboxSettings
from rllm.sandboxes.types import NetworkMode, SandboxBackend, SandboxSpec

__all__ = ["DEFAULT_IMAGE", "DockerfileRefused", "build_dockerfile", "engine_backend"]

DEFAULT_IMAGE = "debian:bookworm"
"""What a fake service's default image (Daytona's default snapshot, Modal's debian_slim)
runs on."""


def engine_backend(settings: SandboxSettings, service: str) -> SandboxBackend:
    """The ``local`` backend under ``settings.home/fake-<service>``."""
    home = settings.home / f"fake-{service}-{uuid.uuid4().hex[:6]}"
    home.mkdir(parents=True, exist_ok=True)
    images = home / "images"
    if not images.exists():
        images.symlink_to(settings.images_dir.resolve())
    return get_backend("local", SandboxSettings(home=home))


class DockerfileRefused(ValueError):
    """A Dockerfile line the fakes do not apply (they run FROM and RUN only)."""


async def build_dockerfile(engine: SandboxBackend, text: str, name: str) -> str:
    """Apply a Dockerfile's ``FROM`` and ``RUN`` lines in an engine sandbox and freeze it
    as ``name``; returns the engine image. Any other instruction is refused by line."""
    base: str | None = None
    runs: list[str] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        word, _, rest = line.partition(" ")
        if word.upper() == "FROM" and base is None:
            base = rest.strip()
        elif word.upper() == "RUN" and base is not None:
            runs.append(rest)
        else:
            raise DockerfileRefused(f"line {number}: {word} is not applied by the fake ({line!r})")
    if base is None:
        raise DockerfileRefused("the Dockerfile has no FROM line")
    sandbox = await engine.create(SandboxSpec(image=base, network=NetworkMode.HOST, workdir="/"))
    try:
        for run in runs:
            result = await sandbox.exec(run, timeout_s=600)
            if not result.ok:
                raise DockerfileRefused(f"RUN {run!r} exited {result.exit_code}: {result.stderr}")
        return (await sandbox.snapshot(name)).image
    finally:
        await sandbox.close()
