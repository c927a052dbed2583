"""The modal backend and its fake against the INSTALLED ``modal`` SDK: every SDK attribute
the backend calls exists and accepts the arguments it passes (read from the backend's
source, so a new call is checked without editing this test), and every name and parameter
of the fake is the real SDK's."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import modal
import modal.exception
import pytest
from modal.container_process import ContainerProcess
from modal.sandbox.sandbox import SandboxFilesystem

import rllm.sandboxes.modal
from tests.fakes_sandboxes import modal as fake_modal
from tests.fakes_sandboxes import modal_sandbox
from tests.unit.sandboxes.sdk_calls import checked_calls

MODAL_RECEIVERS: dict[str, Any] = {
    "sdk": modal,
    "self.sdk": modal,
    "self._sdk": modal,
    "self.backend.sdk": modal,
    "self._remote": modal.Sandbox,
    "remote": modal.Sandbox,
    "sandbox.remote": modal.Sandbox,
    "process": ContainerProcess,
    "image": modal.Image,
    "self._client": modal.Client,
    "fs": SandboxFilesystem,
}
"""What each receiver the modal backend calls through is, in the real SDK."""


def test_modal_calls_exist_with_their_arguments() -> None:
    seen = checked_calls(rllm.sandboxes.modal, MODAL_RECEIVERS, set())
    expected = {
        "self.sdk.Sandbox.create",
        "self._remote.exec",
        "process.stdout.read",
        "self._remote.filesystem.write_bytes",
        "sandbox.remote.snapshot_filesystem",
        "self.sdk.Sandbox.list",
        "self.sdk.App.lookup",
        "self.sdk.Image.from_id",
    }
    assert expected <= seen, expected - seen


def test_modal_exceptions_exist() -> None:
    used = set()
    for path in Path(rllm.sandboxes.modal.__file__).parent.glob("*.py"):
        used |= set(re.findall(r"(?:exception|errors)\.([A-Z]\w+)", path.read_text()))
    assert used >= {"Error", "AuthError", "NotFoundError", "SandboxTerminatedError"}
    for name in used:
        assert issubclass(getattr(modal.exception, name), modal.exception.Error), name


def _pairs() -> list[tuple[str, Callable[..., Any], Any]]:
    fake = fake_modal.FakeModal(engine=None)  # type: ignore[arg-type]  # only the SDK's names are read: no engine needed
    sandbox, process, fs = modal_sandbox.FakeSandbox, modal_sandbox.FakeProcess, SandboxFilesystem
    return [
        ("Client.from_credentials", fake.Client.from_credentials, modal.Client.from_credentials),
        ("App.lookup", fake.App.lookup.aio, modal.App.lookup),
        ("Image.from_registry", fake.Image.from_registry, modal.Image.from_registry),
        ("Image.from_dockerfile", fake.Image.from_dockerfile, modal.Image.from_dockerfile),
        ("Image.from_id", fake.Image.from_id.aio, modal.Image.from_id),
        ("Sandbox.create", fake.Sandbox.create.aio, modal.Sandbox.create),
        ("Sandbox.from_id", fake.Sandbox.from_id.aio, modal.Sandbox.from_id),
        ("Sandbox.list", fake.Sandbox.list.aio, modal.Sandbox.list),
        ("Sandbox.exec", sandbox._exec, modal.Sandbox.exec),
        ("Sandbox.terminate", sandbox._terminate, modal.Sandbox.terminate),
        ("Sandbox.poll", sandbox._poll, modal.Sandbox.poll),
        ("Sandbox.get_tags", sandbox._get_tags, modal.Sandbox.get_tags),
        ("Sandbox.set_tags", sandbox._set_tags, modal.Sandbox.set_tags),
        (
            "Sandbox.snapshot_filesystem",
            sandbox._snapshot_filesystem,
            modal.Sandbox.snapshot_filesystem,
        ),
        (
            "ContainerProcess.wait",
            process(stdout="", stderr="", code=0).wait.aio,
            ContainerProcess.wait,
        ),
        ("SandboxFilesystem.read_bytes", _fs_method("read_bytes"), fs.read_bytes),
        ("SandboxFilesystem.write_bytes", _fs_method("write_bytes"), fs.write_bytes),
        ("SandboxFilesystem.make_directory", _fs_method("make_directory"), fs.make_directory),
    ]


def _fs_method(name: str) -> Callable[..., Any]:
    holder = modal_sandbox.FakeFilesystem.__new__(modal_sandbox.FakeFilesystem)
    modal_sandbox.FakeFilesystem.__init__(holder, None)  # type: ignore[arg-type]  # only the method names are read: no sandbox needed
    method: Callable[..., Any] = getattr(holder, name).aio
    return method


@pytest.mark.parametrize(
    ("name", "fake", "real"), _pairs(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_modal_fake_signatures_are_the_sdks(name: str, fake: Callable[..., Any], real: Any) -> None:
    real_params = {p.name: p for p in inspect.signature(real).parameters.values()}
    for param in inspect.signature(fake).parameters.values():
        if param.name == "self":
            continue
        assert param.name in real_params, f"{name}: the real SDK has no parameter {param.name!r}"
        twin = real_params[param.name]
        assert param.kind == twin.kind, f"{name}({param.name}): {param.kind} vs {twin.kind}"
        both = param.default is not param.empty and twin.default is not twin.empty
        if both and not isinstance(twin.default, dict | list):
            assert param.default == twin.default, f"{name}({param.name}) default"


def test_modal_fake_names_exist_in_the_sdk() -> None:
    fake = fake_modal.FakeModal(engine=None)  # type: ignore[arg-type]  # only the SDK's names are read: no engine needed
    for space in ("Client", "App", "Image", "Sandbox"):
        for attr in vars(getattr(fake, space)):
            assert hasattr(getattr(modal, space), attr), f"modal.{space}.{attr}"
    assert fake.exception is modal.exception
    for attr in ("object_id", "filesystem", "returncode", "exec", "snapshot_filesystem"):
        assert hasattr(modal.Sandbox, attr), attr
    assert hasattr(modal.App, "app_id") and hasattr(modal.Image, "object_id")
