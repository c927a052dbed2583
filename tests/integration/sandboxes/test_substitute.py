"""``--image-substitute`` for real: a Dockerfile's FROM and a sandbox's image stand on
the substitute, labelled ``rllm.substituted-from``; an unknown image is refused with
the list of what builds offline."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from rllm.sandboxes.errors import ImageError
from rllm.sandboxes.images.build import build_image
from rllm.sandboxes.images.resolve import SUBSTITUTED_LABEL
from rllm.sandboxes.local.backend import LocalBackend
from rllm.sandboxes.settings import PullPolicy, SandboxSettings
from rllm.sandboxes.types import OWNER_LABEL, SandboxSpec
from tests.integration.sandboxes.backends import open_backend


def _backend(settings: SandboxSettings) -> LocalBackend:
    return LocalBackend(
        settings.model_copy(
            update={
                "pull_policy": PullPolicy.NEVER,
                "image_substitutes": {"ubuntu:24.04": "debian:bookworm"},
            }
        )
    )


async def test_from_is_substituted_and_labelled(
    sandbox_settings: SandboxSettings, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    backend = _backend(sandbox_settings)
    (tmp_path / "Dockerfile").write_text("FROM ubuntu:24.04\nENV X=1\n")
    info = await build_image(backend, backend.store, tmp_path, "subst-test")
    image = backend.store.get(info.name)
    assert image.labels[SUBSTITUTED_LABEL] == "ubuntu:24.04"
    assert image.labels["rllm.dockerfile.from"] == "debian:bookworm"
    assert "image ubuntu:24.04 is substituted by debian:bookworm" in caplog.text
    backend.store.delete(info.name)


async def test_a_sandbox_image_is_substituted_and_labelled(
    sandbox_settings: SandboxSettings,
) -> None:
    backend = _backend(sandbox_settings)
    sandbox = await backend.create(SandboxSpec(image="ubuntu:24.04"))
    try:
        done = await sandbox.exec(". /etc/os-release; echo $VERSION_CODENAME")
        assert done.stdout.strip() == "bookworm"
        [info] = [s for s in await backend.sandboxes() if s.id == sandbox.id]
        assert info.labels[SUBSTITUTED_LABEL] == "ubuntu:24.04"
    finally:
        await sandbox.close()
        await backend.aclose()


async def test_docker_builds_and_runs_on_the_substitute_too(
    sandbox_settings: SandboxSettings, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """The docker backend substitutes as the local one does: the Dockerfile's FROM (the
    context's Dockerfile left as written) and a sandbox's image, each labelled."""
    settings = sandbox_settings.model_copy(
        update={"image_substitutes": {"ubuntu:24.04": "debian:bookworm"}}
    )
    (tmp_path / "Dockerfile").write_text("FROM ubuntu:24.04\nRUN echo built > /built\n")
    owner = {OWNER_LABEL: f"subst-{uuid.uuid4().hex[:8]}"}
    async with open_backend("docker", settings, request) as backend:
        image = await backend.build_image(tmp_path, "subst-docker:test")
        built = backend.client.images.get(image.name).labels  # type: ignore[attr-defined]  # the docker backend's client; the Protocol has none
        assert built[SUBSTITUTED_LABEL] == "ubuntu:24.04"
        assert (tmp_path / "Dockerfile").read_text().startswith("FROM ubuntu:24.04\n")
        for name, marker in ((image.name, "built"), ("ubuntu:24.04", "none")):
            sandbox = await backend.create(SandboxSpec(image=name, labels=owner))
            try:
                done = await sandbox.exec(
                    ". /etc/os-release; echo $VERSION_CODENAME $(cat /built || echo none)"
                )
                assert done.stdout.split() == ["bookworm", marker], done
                [info] = await backend.sandboxes(owner)
                asked = "ubuntu:24.04" if name == "ubuntu:24.04" else None
                assert info.labels.get(SUBSTITUTED_LABEL) == asked
            finally:
                await sandbox.close()


async def test_an_unknown_image_is_refused_listing_the_offline_ones(
    sandbox_settings: SandboxSettings,
) -> None:
    backend = _backend(sandbox_settings)
    with pytest.raises(ImageError, match=r"Offline here: debian:\{.*python:\{.*3\.12"):
        await backend.create(SandboxSpec(image="nosuch/image:1"))
