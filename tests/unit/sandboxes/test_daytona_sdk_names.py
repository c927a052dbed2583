"""The daytona backend and its HTTP fake against the INSTALLED ``daytona`` SDK: every SDK
attribute the backend calls exists and accepts the arguments it passes (read from the
backend's source), the fields it reads exist, and every path the fake serves is one the
generated clients request."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import daytona
import daytona_api_client_async
import daytona_toolbox_api_client_async
import pytest
from daytona import AsyncDaytona, AsyncSandbox
from daytona._async.filesystem import AsyncFileSystem
from daytona._async.process import AsyncProcess
from daytona._async.snapshot import AsyncSnapshotService
from daytona.common.snapshot import Snapshot

import rllm.sandboxes.daytona
from tests.fakes_sandboxes import daytona as fake_daytona
from tests.unit.sandboxes.sdk_calls import checked_calls, dotted

DAYTONA_RECEIVERS: dict[str, Any] = {
    "daytona": daytona,
    "client": AsyncDaytona,
    "self._client": AsyncDaytona,
    "client.snapshot": AsyncSnapshotService,
    "self._remote": AsyncSandbox,
    "self._remote.fs": AsyncFileSystem,
    "self._remote.process": AsyncProcess,
    "remote": AsyncSandbox,
}


def _daytona_names() -> set[str]:
    names: set[str] = set()
    for path in Path(rllm.sandboxes.daytona.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "daytona":
                names |= {alias.name for alias in node.names}
    return names


def test_daytona_calls_exist_with_their_arguments() -> None:
    seen = checked_calls(rllm.sandboxes.daytona, DAYTONA_RECEIVERS, _daytona_names())
    expected = {
        "client.create",
        "self._remote.process.exec",
        "self._remote.fs.upload_file",
        "self._remote.fs.download_file",
        "self._remote.create_snapshot",
        "daytona.CreateSandboxFromImageParams",
        "daytona.Resources",
        "client.list",
    }
    assert expected <= seen, expected - seen


def test_daytona_create_params_have_every_key_the_backend_sets() -> None:
    source = (Path(rllm.sandboxes.daytona.__file__).parent / "backend.py").read_text()
    tree = ast.parse(source)
    keys: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.AnnAssign) and dotted(node.target) == "common":
            assert isinstance(node.value, ast.Dict)
            keys |= {str(k.value) for k in node.value.keys if isinstance(k, ast.Constant)}
        is_key = isinstance(node, ast.Subscript) and dotted(node.value) == "common"
        if is_key and isinstance(node.slice, ast.Constant):  # type: ignore[attr-defined]  # is_key checked it is a Subscript
            keys.add(str(node.slice.value))  # type: ignore[attr-defined]  # is_key checked it is a Subscript
    assert {"labels", "env_vars", "network_block_all", "ttl_minutes"} <= keys
    for params in (daytona.CreateSandboxFromImageParams, daytona.CreateSandboxFromSnapshotParams):
        assert keys <= set(params.model_fields), keys - set(params.model_fields)


@pytest.mark.parametrize(
    ("model", "fields"),
    [
        (AsyncSandbox, ["id", "state", "labels", "created_at", "snapshot"]),
        (daytona.ExecuteResponse, ["result", "exit_code"]),
        (Snapshot, ["id", "name", "size", "created_at"]),
    ],
)
def test_daytona_fields_read_exist(model: Any, fields: list[str]) -> None:
    assert set(fields) <= set(model.model_fields), set(fields) - set(model.model_fields)


def _client_paths() -> set[tuple[str, str]]:
    found: set[tuple[str, str]] = set()
    for package in (daytona_api_client_async, daytona_toolbox_api_client_async):
        for path in (Path(str(package.__file__)).parent / "api").glob("*.py"):
            text = path.read_text()
            for method, resource in re.findall(r"method='(\w+)',\s*resource_path='([^']+)'", text):
                found.add((method, re.sub(r"\{\w+\}", "{}", resource)))
    return found


def test_daytona_fake_serves_only_paths_the_sdk_requests() -> None:
    known = _client_paths()
    app = fake_daytona.FakeDaytona(engine=None).app  # type: ignore[arg-type]  # only the app's routes are read: no engine needed
    served = 0
    for route in app.routes:
        path = getattr(route, "path", "")
        relative = re.sub(r"^/api|^/toolbox/\{sid\}", "", path)
        relative = re.sub(r"\{\w+\}", "{}", relative)
        for method in getattr(route, "methods", None) or ():
            if method == "HEAD":
                continue
            assert (method, relative) in known, f"{method} {path} is not a Daytona client path"
            served += 1
    assert served >= 15
