"""Images pulled from a real registry on loopback (``registry_fixtures``) into the local
store, and used by the local backend and builder: layers by digest, whiteouts, config,
the mirror setting, and refusals that name the reference, registry and layer."""

from __future__ import annotations

import contextlib
import os
import stat
import uuid
from pathlib import Path

import pytest

from rllm.sandboxes import SandboxSettings, SandboxSpec, get_backend
from rllm.sandboxes.errors import PullError, RegistryUnreachableError
from rllm.sandboxes.images.build import build_image
from rllm.sandboxes.images.pull import (
    CMD_LABEL,
    DIGEST_LABEL,
    PULLED_FROM_LABEL,
    pull_image,
)
from rllm.sandboxes.images.resolve import find_or_pull
from rllm.sandboxes.images.rootfs import LayerView
from rllm.sandboxes.images.store import ImageStore
from rllm.sandboxes.settings import PullPolicy
from tests.integration.sandboxes.fixtures import shared_home
from tests.integration.sandboxes.registry_fixtures import LoopbackRegistry

pytestmark = pytest.mark.slow


@pytest.fixture
def settings(tmp_path: Path) -> SandboxSettings:
    return SandboxSettings(home=tmp_path / "home")


@pytest.fixture
def store(settings: SandboxSettings) -> ImageStore:
    return ImageStore(settings.images_dir)


def _leftovers(store: ImageStore) -> list[str]:
    return [p.name for p in store.layers_dir.iterdir() if p.name.startswith(".tmp-")]


def test_pull_by_host_keeps_layers_whiteouts_and_config(
    loopback_registry: LoopbackRegistry, store: ImageStore, settings: SandboxSettings
) -> None:
    name = f"{loopback_registry.host}/some/image:tag"
    image = pull_image(store, name, settings)
    assert image.name == name
    assert len(image.layers) == 4  # one store layer per OCI layer
    assert all(layer.name.startswith("sha256-") for layer in image.layers)
    view = LayerView(image.layers)
    assert view.read_text("/marker") == "pulled from the loopback registry\n"
    assert view.lstat("/etc/gone") is None  # the .wh.gone whiteout
    assert view.lstat("/opt/old/stale") is None  # the opaque directory
    assert view.read_text("/opt/old/kept") == "in the opaque directory\n"
    whiteout = os.lstat(image.layers[1] / "etc/gone")
    assert stat.S_ISCHR(whiteout.st_mode) and whiteout.st_rdev == 0
    found = view.lstat("/bin/dash")
    assert found is not None and (found[1].st_uid, found[1].st_gid) == (0, 0)
    assert image.config.env["PYTHON_VERSION"] == "3.13.0"
    assert image.config.workdir == "/opt"
    assert image.labels[CMD_LABEL] == '["python3"]'
    assert image.labels["org.example"] == "yes"
    assert image.labels[PULLED_FROM_LABEL] == f"{loopback_registry.host}/some/image:tag"
    assert image.labels[DIGEST_LABEL].startswith("sha256:")
    # pulled again: the same layers, nothing unpacked twice, nothing left over
    before = {p.name: p.stat().st_ino for p in image.layers}
    again = pull_image(store, name, settings)
    assert {p.name: p.stat().st_ino for p in again.layers} == before
    assert _leftovers(store) == []


def test_docker_hub_name_through_the_mirror(
    loopback_registry: LoopbackRegistry, store: ImageStore, tmp_path: Path
) -> None:
    settings = SandboxSettings(home=tmp_path / "home", registry_mirror=loopback_registry.host)
    image = find_or_pull(store, "python:3.13-slim-bookworm", settings)
    assert image is not None and image.name == "python:3.13-slim-bookworm"
    assert image.labels[PULLED_FROM_LABEL] == (
        f"{loopback_registry.host}/library/python:3.13-slim-bookworm"
    )
    # the canonical spelling is the same image; policy never finds it without a pull
    never = settings.model_copy(update={"pull_policy": PullPolicy.NEVER})
    same = find_or_pull(store, "docker.io/library/python:3.13-slim-bookworm", never)
    assert same is not None and same.id == image.id
    assert find_or_pull(store, "python:3.12-slim", never) is None


def test_mirror_from_the_environment(
    loopback_registry: LoopbackRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RLLM_REGISTRY_MIRROR", f"http://{loopback_registry.host}")
    assert SandboxSettings().registry_mirror == f"http://{loopback_registry.host}"


def test_missing_image_names_reference_and_registry(
    loopback_registry: LoopbackRegistry, store: ImageStore, settings: SandboxSettings
) -> None:
    name = f"{loopback_registry.host}/some/missing:tag"
    with pytest.raises(PullError, match="has no such image") as caught:
        pull_image(store, name, settings)
    assert name in str(caught.value) and loopback_registry.host in str(caught.value)
    assert not isinstance(caught.value, RegistryUnreachableError)
    assert store.find(name) is None and _leftovers(store) == []


def test_unreachable_registry(store: ImageStore, settings: SandboxSettings) -> None:
    with pytest.raises(RegistryUnreachableError, match=r"127\.0\.0\.1:9/x/y:z.*cannot be reached"):
        pull_image(store, "127.0.0.1:9/x/y:z", settings)


def test_another_arch_is_refused(
    loopback_registry: LoopbackRegistry, store: ImageStore, settings: SandboxSettings
) -> None:
    name = f"{loopback_registry.host}/some/arm:tag"
    with pytest.raises(PullError, match=r"linux/arm64 image; sandboxes run linux/amd64"):
        pull_image(store, name, settings)
    assert store.find(name) is None


def test_corrupt_layer_is_refused_and_the_store_stays_usable(
    loopback_registry: LoopbackRegistry, store: ImageStore, settings: SandboxSettings
) -> None:
    top = loopback_registry.layer_digests["some/corrupt:tag"][-1]
    blob = loopback_registry.blob(top)
    blob.write_bytes(blob.read_bytes()[:-8] + b"corrupt!")
    name = f"{loopback_registry.host}/some/corrupt:tag"
    with pytest.raises(PullError, match="corrupt") as caught:
        pull_image(store, name, settings)
    message = str(caught.value)
    assert name in message and loopback_registry.host in message
    assert top.removeprefix("sha256:") in message
    assert store.find(name) is None and _leftovers(store) == []
    good = pull_image(store, f"{loopback_registry.host}/some/image:tag", settings)
    assert LayerView(good.layers).read_text("/marker") is not None


async def test_local_sandbox_and_build_from_pulled_images(
    loopback_registry: LoopbackRegistry, tmp_path: Path
) -> None:
    home = shared_home() / "tests" / f"registry-{uuid.uuid4().hex[:8]}"
    settings = SandboxSettings(home=home, registry_mirror=loopback_registry.host)
    backend = get_backend("local", settings)
    try:
        direct = f"{loopback_registry.host}/some/image:tag"
        sandbox = await backend.create(SandboxSpec(image=direct))
        result = await sandbox.exec(["cat", "/marker"])
        assert result.stdout == "pulled from the loopback registry\n", result
        assert (await sandbox.exec(["sh", "-c", "echo $PYTHON_VERSION"])).stdout == "3.13.0\n"
        await sandbox.close()
        context = tmp_path / "ctx"
        context.mkdir()
        (context / "Dockerfile").write_text(
            "FROM python:3.13-slim-bookworm\nRUN cat /marker > /built\n"
        )
        info = await build_image(backend, backend.store, context, "test-registry-build")  # type: ignore[attr-defined]  # the local backend's store; the Protocol has none
        sandbox = await backend.create(SandboxSpec(image=info.name))
        built = await sandbox.exec(["cat", "/built"])
        assert built.stdout == "pulled from the loopback registry\n", built
        await sandbox.close()
    finally:
        await backend.aclose()
        import shutil

        shutil.rmtree(home, ignore_errors=True)


def test_cli_pull(
    loopback_registry: LoopbackRegistry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from rllm.cli.main import cli

    monkeypatch.setenv("RLLM_SANDBOX_HOME", str(tmp_path / "home"))
    result = CliRunner().invoke(
        cli,
        [
            "sandbox",
            "image",
            "pull",
            "--mirror",
            loopback_registry.host,
            "python:3.13-slim-bookworm",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "pulled python:3.13-slim-bookworm" in result.output and "4 layers" in result.output
    assert ImageStore(tmp_path / "home" / "images").find("python:3.13-slim-bookworm") is not None
    missing = CliRunner().invoke(
        cli, ["sandbox", "image", "pull", f"{loopback_registry.host}/no/such:1"]
    )
    assert missing.exit_code != 0 and "has no such image" in missing.output


def test_docker_pulls_directly_and_through_the_mirror(
    loopback_registry: LoopbackRegistry, docker_url: str, tmp_path: Path
) -> None:
    from rllm.sandboxes.docker.client import connect
    from rllm.sandboxes.docker.images import ensure_image

    client = connect(docker_url)
    settings = SandboxSettings(
        home=tmp_path / "home", docker_url=docker_url, registry_mirror=loopback_registry.host
    )
    store = ImageStore(settings.images_dir)
    direct = f"{loopback_registry.host}/some/image:tag"
    hub = "python:3.13-slim-bookworm"
    for name in (direct, hub):
        with contextlib.suppress(Exception):
            client.images.remove(name, force=True)
    assert ensure_image(client, store, direct, settings) == direct
    assert ensure_image(client, store, hub, settings) == hub
    pulled = client.images.get(hub)
    assert pulled.attrs["Config"]["Env"] == ["PATH=/bin:/usr/bin", "PYTHON_VERSION=3.13.0"]
    assert store.find(hub) is None  # dockerd pulled it, not the local store
    with pytest.raises(PullError, match="no/such"):
        ensure_image(client, store, f"{loopback_registry.host}/no/such:1", settings)
