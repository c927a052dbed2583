"""``rllm-cli up`` starts the viewer after the history service, on ``RLLM_VIEW_PORT``, and
``status`` says where it listens."""

from __future__ import annotations

from pathlib import Path

import pytest

from rllm.cli.stack import stack_settings
from rllm.infra.stack import plan_services, stack_status


def test_up_plans_the_viewer_after_the_history(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RLLM_VIEW_PORT", "18555")
    stack = stack_settings(home=tmp_path, model="local")
    specs = plan_services(stack)
    names = [s.name for s in specs]
    assert names[-2:] == ["history", "view"]
    view = specs[-1]
    assert view.args == ("view", "--port", "18555", "--history-dir", str(tmp_path / "history"))
    assert view.health_url == "http://127.0.0.1:18555/healthz"
    only = plan_services(stack_settings(home=tmp_path, model="local", services="history"))
    assert [s.name for s in only] == ["history"]


def test_status_names_the_viewer_s_address(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RLLM_VIEW_PORT", "18556")
    stack = stack_settings(home=tmp_path, kafka_port=1)
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "view.log").write_text("stopped\n")
    (row,) = [s for s in stack_status(stack) if s.name == "view"]
    assert (row.running, row.address, row.detail) == (False, "http://127.0.0.1:18556", "stopped")
