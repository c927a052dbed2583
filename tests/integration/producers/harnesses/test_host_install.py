"""The host-side install every third-party harness shares (``HostInstalled.install``):
once per version, a half-done folder redone, a failed one leaving no marker and an error
that names the command, concurrent installers waiting for one; the built-ins install
nothing; a real npm failure is named."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from rllm.producers.harnesses import HarnessError, get_harness, harness_names
from rllm.producers.harnesses.codex import CodexHarness
from rllm.producers.harnesses.host import (
    INSTALLED_MARKER,
    HostInstalled,
    install,
    is_installed,
    run_install_command,
)


class Counting(HostInstalled):
    """Writes one file a run; fails when asked."""

    name = "counting"
    version = "1.0"

    def __init__(self, fail: bool = False) -> None:
        self.runs = 0
        self.fail = fail

    async def _install_into(self, target: Path) -> None:
        self.runs += 1
        await asyncio.sleep(0.05)
        (target / "tool").write_text("ok")
        if self.fail:
            await run_install_command(["sh", "-c", "echo boom; exit 7"], name=self.name, cwd=target)


async def test_installs_once_and_concurrent_callers_wait(tmp_path: Path) -> None:
    harness = Counting()
    assert not harness.is_installed(tmp_path)
    await asyncio.gather(*(harness.install(tmp_path) for _ in range(4)))
    await harness.install(tmp_path)
    assert harness.runs == 1 and harness.is_installed(tmp_path)
    assert (tmp_path / "counting" / "1.0" / "tool").read_text() == "ok"


async def test_a_half_done_install_is_redone(tmp_path: Path) -> None:
    leftover = tmp_path / "counting" / "1.0"
    leftover.mkdir(parents=True)
    (leftover / "stale").write_text("from a killed install")
    harness = Counting()
    assert not harness.is_installed(tmp_path)
    await harness.install(tmp_path)
    assert harness.runs == 1 and not (leftover / "stale").exists()
    assert (leftover / INSTALLED_MARKER).is_file()


async def test_a_failed_install_names_the_command_and_leaves_no_marker(tmp_path: Path) -> None:
    harness = Counting(fail=True)
    with pytest.raises(HarnessError) as caught:
        await harness.install(tmp_path)
    message = str(caught.value)
    assert "'counting'" in message and "exited 7" in message
    assert "boom" in message
    assert not harness.is_installed(tmp_path)


async def test_a_missing_installer_says_what_to_install(tmp_path: Path) -> None:
    with pytest.raises(HarnessError) as caught:
        await run_install_command(["no-such-npm-xyz", "install"], name="codex", cwd=tmp_path)
    assert "'no-such-npm-xyz' is not on this machine" in str(caught.value)


async def test_built_ins_install_nothing(tmp_path: Path) -> None:
    for name in ("oracle", "bash", "react"):
        harness = get_harness(name)
        assert is_installed(harness, tmp_path)
        await install(harness, tmp_path)
    assert list(tmp_path.iterdir()) == []
    assert {"mini-swe-agent", "claude-code", "codex", "opencode"} <= set(harness_names())


async def test_a_version_npm_does_not_have_is_a_named_error(tmp_path: Path) -> None:
    harness = CodexHarness()
    harness.version = "0.0.0-rllm-no-such-version"
    with pytest.raises(HarnessError) as caught:
        await harness.install(tmp_path)
    message = str(caught.value)
    assert "npm install" in message and "@openai/codex@0.0.0-rllm-no-such-version" in message
    assert not harness.is_installed(tmp_path)
