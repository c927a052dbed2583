"""A Dockerfile's RUN step on the local builder: a sandbox of the backend on an
intermediate image of the layers so far, with the host's network and the step's env,
workdir and user, whose writable layer becomes the step's layer; and the CA bundle the
step trusts when the network's egress re-signs TLS (``build_ca_bundle``)."""

from __future__ import annotations

import contextlib
import uuid
from pathlib import Path
from typing import Protocol, runtime_checkable

from rllm.sandboxes.errors import ImageError, SandboxError
from rllm.sandboxes.images.steps import RunStep
from rllm.sandboxes.images.store import ImageConfig, ImageStore
from rllm.sandboxes.settings import SandboxSettings
from rllm.sandboxes.types import OWNER_LABEL, Mount, NetworkMode, SandboxBackend, SandboxSpec

__all__ = ["BUILD_LABEL", "TAIL_LINES", "build_settings", "ca_bundle", "run_step"]

BUILD_LABEL = "rllm.build"
"""Label of the intermediate images RUN steps run on (value ``intermediate``)."""

TAIL_LINES = 15


@runtime_checkable
class _Committing(Protocol):
    async def commit_layer(self, layer_id: str) -> str: ...

    async def close(self) -> None: ...


def ca_bundle(backend: SandboxBackend) -> Path | None:
    settings = getattr(backend, "settings", None)
    return settings.build_ca_bundle if isinstance(settings, SandboxSettings) else None


_CA_TARGET = "/dev/rllm-build-ca.crt"
"""Where a build's CA bundle is bound: under bubblewrap's own /dev, so outside the
overlay and never in a layer."""
_CA_VARIABLES = (
    "SSL_CERT_FILE",
    "PIP_CERT",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
    "GIT_SSL_CAINFO",
)


def build_settings(backend: SandboxBackend) -> SandboxSettings:
    settings = getattr(backend, "settings", None)
    return settings if isinstance(settings, SandboxSettings) else SandboxSettings()


def _build_trust(backend: SandboxBackend) -> tuple[tuple[Mount, ...], dict[str, str]]:
    """The mount and variables that make RUN steps trust ``build_ca_bundle``, if set."""
    bundle = ca_bundle(backend)
    if bundle is None:
        return (), {}
    if not bundle.is_file():
        raise ImageError(f"RLLM_SANDBOX_BUILD_CA_BUNDLE={bundle} is not a file")
    return (Mount(source=bundle, target=_CA_TARGET),), dict.fromkeys(_CA_VARIABLES, _CA_TARGET)


async def run_step(
    backend: SandboxBackend,
    store: ImageStore,
    step: RunStep,
    layers: list[str],
    layer_id: str,
    timeout_s: float | None,
) -> None:
    where = step.instruction.where
    intermediate = f"build/{layer_id}-{uuid.uuid4().hex[:8]}"
    config = ImageConfig(env=dict(step.env), workdir=step.workdir, user=step.user)
    store.put(intermediate, layers, config, {BUILD_LABEL: "intermediate"})
    mounts, trust_env = _build_trust(backend)
    try:
        spec = SandboxSpec(
            image=intermediate,
            workdir=step.workdir,
            env={**dict(step.env), **trust_env},
            mounts=mounts,
            user=step.user,
            network=NetworkMode.HOST,
            lifetime_s=None,
            output_limit_bytes=16_000_000,
            labels={OWNER_LABEL: "rllm-image-build", BUILD_LABEL: layer_id},
        )
        try:
            sandbox = await backend.create(spec)
        except ImageError:
            raise
        except (SandboxError, ValueError) as exc:
            raise ImageError(f"{where}: the step's sandbox did not start: {exc}") from exc
        try:
            try:
                result = await sandbox.exec(list(step.argv), timeout_s=timeout_s)
            except (SandboxError, ValueError) as exc:  # a USER the image lacks, a dead sandbox
                raise ImageError(f"{where} could not run: {exc}") from exc
            if not result.ok:
                why = result.error or f"exit code {result.exit_code}"
                tail = "\n".join(
                    (result.stdout.rstrip() + "\n" + result.stderr.rstrip())
                    .strip()
                    .splitlines()[-TAIL_LINES:]
                )
                raise ImageError(
                    f"{where} failed ({why}): {step.instruction.args[:200]}\n"
                    f"--- last lines of its output ---\n{tail or '(no output)'}"
                )
            if not isinstance(sandbox, _Committing):
                raise ImageError(
                    f"{where}: the {backend.name!r} backend's sandboxes cannot commit a layer "
                    f"into the local image store; build with the local backend"
                )
            await sandbox.commit_layer(layer_id)
        finally:
            await sandbox.close()
    finally:
        with contextlib.suppress(ImageError):
            store.delete(intermediate)
