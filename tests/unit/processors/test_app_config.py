"""The faust app's settings that the processors' delivery guarantees depend on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rllm.processors.app import Processors
from rllm.processors.settings import ProcessorSettings
from rllm.settings import KafkaSettings


def _app_conf() -> object:
    procs = Processors(
        ProcessorSettings(),
        KafkaSettings(topic_prefix="unit."),
        app_id="unit-conf",
        partitions=(3, 3),
        sink=lambda *a: None,  # type: ignore[arg-type]  # never called: only the config is read
    )
    return procs.app.conf


def test_no_standby_replicas() -> None:
    # A standby partition that became active on the same worker (another worker left)
    # hung faust's recovery for good: tests/integration/processors/test_rebalance.py.
    assert _app_conf().table_standby_replicas == 0  # type: ignore[attr-defined]  # faust's Settings, returned as object


def test_at_least_once_with_memory_tables() -> None:
    conf = _app_conf()
    assert conf.processing_guarantee.value == "at_least_once"  # type: ignore[attr-defined]  # faust's Settings, returned as object
    assert str(conf.store) == "memory:"  # type: ignore[attr-defined]  # faust's Settings, returned as object


def test_faust_data_directory_is_under_rllm_home(tmp_path: Path, monkeypatch: Any) -> None:
    # not ./<app_id>-data in whatever directory the worker was started from
    monkeypatch.setenv("RLLM_HOME", str(tmp_path))
    assert Path(_app_conf().datadir) == tmp_path / "processors" / "unit-conf"  # type: ignore[attr-defined]  # faust's Settings, returned as object
