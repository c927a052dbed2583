"""``harness list``, ``sandbox ls``, ``sandbox image ls`` and ``sandbox snapshot list`` print
tab-separated lines into a pipe, as every table does (issue 35: they printed boxed tables),
and never cut a name, in a pipe or on a terminal."""

from __future__ import annotations

import io
import re
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from rich.console import Console

from rllm.cli import common
from rllm.cli.main import cli
from rllm.producers.harnesses import HARNESSES
from rllm.sandboxes.types import ImageInfo, SandboxInfo

LONG = "registry.example.com/team/harbor-task-environments/very-long-image-name:2024-06-01-abcdef"
BOX = re.compile(r"[┏┓┗┛┃━│─┡┩└┘┌┐╇╈┼]")


class BareHarness:
    name = "bare-fake"
    version = "7"
    api = "anthropic"


class ListingBackend:
    """A sandbox backend that only lists: one sandbox, one image with a long name."""

    async def sandboxes(self, labels: Any = None) -> list[SandboxInfo]:
        created = time.time() - 90
        return [SandboxInfo("sb-1", "fake", LONG, {"rllm.owner": "me"}, created, alive=True)]

    async def images(self) -> list[ImageInfo]:
        return [ImageInfo(LONG, "fake", "sha256:0123", size_bytes=12_000_000, created_at=None)]

    async def aclose(self) -> None:
        return None


@pytest.fixture
def backend(monkeypatch: pytest.MonkeyPatch) -> None:
    import rllm.sandboxes

    monkeypatch.setattr(rllm.sandboxes, "get_backend", lambda name, settings: ListingBackend())


def _run(*args: str) -> Any:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert not BOX.search(result.stdout), result.stdout
    return result


def test_harness_list_into_a_pipe_is_tab_separated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RLLM_HARNESS_HOME", str(tmp_path))
    monkeypatch.setitem(HARNESSES, "bare-fake", f"{__name__}:BareHarness")
    result = _run("harness", "list")
    lines = result.stdout.splitlines()
    assert lines[0] == "name\tversion\tapi\tinstalled"
    assert "bare-fake\t7\tanthropic\tyes" in lines
    assert all(line.count("\t") == 3 for line in lines)
    assert len(lines) == len(HARNESSES) + 1
    assert f"harnesses (installs in {tmp_path})" in result.stderr


def test_sandbox_ls_into_a_pipe_is_tab_separated(backend: None) -> None:
    result = _run("sandbox", "ls")
    assert result.stdout.splitlines() == [
        "id\tbackend\timage\towner\tage\talive",
        f"sb-1\tfake\t{LONG}\tme\t1.5m\tyes",
    ]
    assert result.stderr.strip() == "1 sandboxes"


def test_image_ls_into_a_pipe_is_tab_separated_with_whole_names(backend: None) -> None:
    result = _run("sandbox", "image", "ls")
    assert result.stdout.splitlines() == [
        "name\tbackend\tid\tsize\tcreated",
        f"{LONG}\tfake\tsha256:0123\t12 MB\t-",
    ]


def test_image_ls_on_a_narrow_terminal_folds_the_name_instead_of_cutting_it(
    backend: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = io.StringIO()
    monkeypatch.setattr(common, "console", Console(file=out, force_terminal=True, width=60))
    CliRunner().invoke(cli, ["sandbox", "image", "ls"], catch_exceptions=False)
    shown = out.getvalue()
    assert BOX.search(shown), "a terminal gets the table"
    assert "…" not in shown
    cells = "".join(line.split("│")[1].strip() for line in shown.splitlines() if "│" in line)
    assert LONG in cells
