"""``--image-substitute`` for real: a Dockerfile's FROM and a sandbox's image stand on
the substitute, labelled ``rllm.substituted-from``; an unknown image is refused with
the list of what builds offline."""

from __future__ import annotations

from pathlib import Path

import pytest

from rllm.sandboxes.errors import ImageError
from rllm.sandboxes.images.build import build_image
from rllm.sandboxes.images.resolve import SUBSTITUTED_LABEL
from rllm.sandboxes.local.backend import LocalBackend
from rllm.sandboxes.settings import PullPolicy, SandboxSettings
from rllm.sandboxes.types import SandboxSpec


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


async def test_an_unknown_image_is_refused_listing_the_offline_ones(
    sandbox_settings: SandboxSettings,
) -> None:
    backend = _backend(sandbox_settings)
    with pytest.raises(ImageError, match=r"Offline here: debian:\{.*python:\{.*3\.12"):
        await backend.create(SandboxSpec(image="nosuch/image:1"))
