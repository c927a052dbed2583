"""The modal backend against the fake of the ``modal`` SDK's Python boundary
(``tests/fakes_sandboxes/modal.py``); every fake sandbox is a real local sandbox, so
results are real. ``tests/unit/sandboxes/test_hosted_sdk_names.py`` keeps the fake's names
and signatures those of the installed SDK."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from pydantic import SecretStr

from rllm.sandboxes.errors import (
    ImageError,
    SandboxClosedError,
    SandboxUnavailableError,
    SnapshotError,
)
from rllm.sandboxes.modal.backend import ModalBackend
from rllm.sandboxes.registry import get_backend
from rllm.sandboxes.settings import SandboxSettings
from rllm.sandboxes.snapshots import SnapshotRegistry
from rllm.sandboxes.types import OWNER_LABEL, Mount, NetworkMode, SandboxSpec, cut_output
from tests.fakes_sandboxes import modal_fake
from tests.fakes_sandboxes.modal import FakeModal
from tests.integration.sandboxes.hosted_checks import (
    build_and_start,
    close_twice,
    exec_env_and_cwd,
    refuse,
)
from tests.integration.sandboxes.trees import write_tree

Pair = tuple[ModalBackend, FakeModal]


async def test_exec_exit_codes_env_and_cwd(modal: Pair) -> None:
    backend, _ = modal
    sandbox, _result = await exec_env_and_cwd(backend)
    assert (await sandbox.exec(["tr", "a-z", "A-Z"], stdin=b"shout")).stdout == "SHOUT"
    assert (await sandbox.exec("exit 42")).exit_code == 42


async def test_timeout_kills_the_tree(modal: Pair) -> None:
    backend, _ = modal
    sandbox = await backend.create(SandboxSpec())
    result = await sandbox.exec("(sleep 2; echo late > /tmp/late) & sleep 30", timeout_s=1)
    assert result.timed_out and result.exit_code is None and 0.9 <= result.duration_s < 6
    await asyncio.sleep(2.5)
    with pytest.raises(FileNotFoundError):
        await sandbox.read_file("/tmp/late")


async def test_output_is_cut_with_the_marker(modal: Pair) -> None:
    backend, _ = modal
    sandbox = await backend.create(SandboxSpec(output_limit_bytes=2048))
    result = await sandbox.exec("head -c 100000 /dev/zero | tr '\\0' b")
    assert result.truncated and result.stdout == cut_output(b"b" * 100000, 2048)
    assert result.stderr == ""


async def test_files_in_and_out(modal: Pair, tmp_path: Path) -> None:
    backend, _ = modal
    sandbox = await backend.create(SandboxSpec())
    await sandbox.write_file("/opt/tool/run.sh", "#!/bin/sh\necho ran\n", mode=0o755)
    assert (await sandbox.exec("/opt/tool/run.sh")).stdout == "ran\n"
    assert await sandbox.read_file("/opt/tool/run.sh") == b"#!/bin/sh\necho ran\n"
    with pytest.raises(FileNotFoundError):
        await sandbox.read_file("/opt/none")
    source = write_tree(tmp_path / "src", {"sub/c.txt": b"\x00\x01gamma"})
    await sandbox.upload_dir(source, "/workspace/in")
    assert await sandbox.read_file("/workspace/in/sub/c.txt") == b"\x00\x01gamma"
    await sandbox.download_dir("/workspace/in", tmp_path / "back")
    assert (tmp_path / "back" / "sub" / "c.txt").read_bytes() == b"\x00\x01gamma"


async def test_snapshot_then_create_from_it(modal: Pair, sandbox_settings: SandboxSettings) -> None:
    backend, fake = modal
    first = await backend.create(SandboxSpec(labels={OWNER_LABEL: "run-snap"}))
    await first.write_file("/workspace/state.txt", "prepared")
    info = await first.snapshot("prepared-env")
    assert info.backend == "modal" and info.image.startswith("im-") and info.image in fake.images
    registered = SnapshotRegistry(sandbox_settings.snapshots_file).get("prepared-env")
    assert registered.image == info.image and registered.labels == {OWNER_LABEL: "run-snap"}
    for image in ("prepared-env", info.image):  # by registry name, or by Modal's image id
        again = await backend.create(SandboxSpec(image=image))
        assert await again.read_file("/workspace/state.txt") == b"prepared"
    assert [i.name for i in await backend.snapshots.all()] == ["prepared-env"]
    await backend.snapshots.delete("prepared-env")
    assert await backend.snapshots.all() == []
    with pytest.raises(SnapshotError):
        await backend.snapshots.delete("prepared-env")


async def test_labels_and_reap(modal: Pair) -> None:
    backend, fake = modal
    a1 = await backend.create(SandboxSpec(labels={OWNER_LABEL: "run-a"}))
    a2 = await backend.create(SandboxSpec(labels={OWNER_LABEL: "run-a"}))
    b1 = await backend.create(SandboxSpec(labels={OWNER_LABEL: "run-b"}))
    listed = await backend.sandboxes({OWNER_LABEL: "run-a"})
    assert sorted(i.id for i in listed) == sorted([a1.id, a2.id])
    assert all(i.image == "debian:bookworm" and 0 <= i.age_s < 60 for i in listed)
    assert await backend.reap({OWNER_LABEL: "run-a"}, older_than_s=3600) == []
    other = ModalBackend(backend.settings, sdk=fake)  # another process's view of the app
    try:
        assert sorted(await other.reap({OWNER_LABEL: "run-a"})) == sorted([a1.id, a2.id])
    finally:
        await other.aclose()
    assert [s.object_id for s in fake.live()] == [b1.id]
    assert not await a1.is_alive() and await b1.is_alive()


async def test_close_is_idempotent_and_leaves_nothing(modal: Pair) -> None:
    backend, fake = modal
    sandbox, engine = await close_twice(backend, fake)
    assert fake.live() == [] and not await engine.is_alive()
    with pytest.raises(SandboxClosedError):
        await sandbox.exec("true")
    await backend.create(SandboxSpec())
    await backend.aclose()
    assert fake.live() == [] and all(c.closed for c in fake.clients)


async def test_lifetime_ends_the_sandbox(modal: Pair) -> None:
    backend, fake = modal
    sandbox = await backend.create(SandboxSpec(lifetime_s=2))
    assert fake.calls[-1][1]["timeout"] == 2
    await asyncio.sleep(2.5)
    assert not await sandbox.is_alive()
    result = await sandbox.exec("true")
    assert result.exit_code is None and result.error is not None
    assert result.error.startswith("sandbox died")


async def test_spec_maps_onto_create(modal: Pair) -> None:
    backend, fake = modal
    await backend.create(SandboxSpec(cpus=0.5, memory_mb=768, labels={OWNER_LABEL: "r"}))
    app, used = fake.calls[-1]
    assert app == "rllm-sandboxes"
    assert (used["cpu"], used["memory"], used["block_network"], used["timeout"]) == (
        0.5,
        768,
        True,
        3600,
    )
    assert used["tags"][OWNER_LABEL] == "r" and used["tags"]["rllm.backend"] == "modal"
    await backend.create(SandboxSpec(network=NetworkMode.HOST))
    assert fake.calls[-1][1]["block_network"] is False


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        (
            SandboxSpec(network=NetworkMode.GATEWAY, gateway_url="http://127.0.0.1:8400"),
            ["network='gateway'", "network='host'"],
        ),
        (SandboxSpec(disk_mb=512), ["disk_mb=512"]),
        (SandboxSpec(lifetime_s=None), ["lifetime_s=None", "86400"]),
        (SandboxSpec(lifetime_s=100_000), ["lifetime_s=100000"]),
        (SandboxSpec(pids=64), ["pids=64"]),
        (SandboxSpec(mounts=(Mount(source=Path("/usr"), target="/host-usr"),)), ["/usr"]),
    ],
)
async def test_what_modal_cannot_honour_is_refused(
    modal: Pair, spec: SandboxSpec, words: list[str]
) -> None:
    backend, fake = modal
    await refuse(backend, spec, words)
    assert fake.calls == [] and fake.sandboxes == {}


async def test_unknown_image_is_an_image_error(modal: Pair) -> None:
    backend, fake = modal
    with pytest.raises(ImageError) as caught:
        await backend.create(SandboxSpec(image="no-such/image:1"))
    assert "no-such/image:1" in str(caught.value) and fake.live() == []


async def test_user_runs_commands_as_that_user(modal: Pair) -> None:
    backend, _ = modal
    sandbox = await backend.create(SandboxSpec(user="nobody"))
    assert (await sandbox.exec("id -un; stat -c %U .")).stdout == "nobody\nnobody\n"
    assert (await sandbox.exec("id -u", user="0")).stdout == "0\n"


async def test_build_image(modal: Pair, tmp_path: Path) -> None:
    backend, _ = modal
    info = await build_and_start(backend, tmp_path)
    assert info.name == "task-image" and info.id.startswith("im-")
    assert "task-image" in [i.name for i in await backend.images()]


async def test_build_failure_is_an_image_error(modal: Pair, tmp_path: Path) -> None:
    backend, _ = modal
    (tmp_path / "Dockerfile").write_text("FROM debian:bookworm\nRUN exit 3\n")
    with pytest.raises(ImageError, match="exited 3"):
        await backend.build_image(tmp_path, "broken")
    assert await backend.images() == []


async def test_missing_or_refused_token(
    sandbox_settings: SandboxSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("MODAL_TOKEN_ID", "MODAL_TOKEN_SECRET"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(f"RLLM_SANDBOX_{name}", raising=False)
    with pytest.raises(SandboxUnavailableError) as caught:
        get_backend("modal", sandbox_settings)
    for words in ("RLLM_SANDBOX_MODAL_TOKEN_ID", "MODAL_TOKEN_SECRET", "token id"):
        assert words in str(caught.value)
    secret = "as-wrong-" + "y" * 20
    wrong = sandbox_settings.model_copy(
        update={"modal_token_id": SecretStr("ak-x"), "modal_token_secret": SecretStr(secret)}
    )
    async with modal_fake(sandbox_settings) as (_good, fake):
        refused = ModalBackend(wrong, sdk=fake)
        with pytest.raises(SandboxUnavailableError) as caught:
            await refused.create(SandboxSpec())
        await refused.aclose()
    assert "refused the token" in str(caught.value) and secret not in str(caught.value)
