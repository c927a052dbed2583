"""bfloat16 is flagged on a CPU that emulates it, from the CPU's flags."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from rllm.models import precision

AVX2_ONLY = "processor\t: 0\nflags\t\t: fpu sse sse2 avx avx2 fma f16c\n"
SAPPHIRE = "processor\t: 0\nflags\t\t: avx2 avx512f avx512_bf16 amx_bf16 amx_tile\n"


def cpuinfo(tmp_path: Path, text: str) -> Path:
    path = tmp_path / f"cpuinfo-{abs(hash(text))}"
    path.write_text(text, encoding="utf-8")
    return path


def test_flags_decide(tmp_path: Path) -> None:
    assert precision.cpu_has_native_bf16(cpuinfo(tmp_path, AVX2_ONLY)) is False
    assert precision.cpu_has_native_bf16(cpuinfo(tmp_path, SAPPHIRE)) is True
    assert precision.cpu_has_native_bf16(tmp_path / "missing") is None
    assert precision.cpu_has_native_bf16(cpuinfo(tmp_path, "processor: 0\n")) is None


@pytest.mark.parametrize(
    ("native", "device", "warned"),
    [
        (False, "cpu", True),
        (True, "cpu", False),
        (None, "cpu", False),
        (False, "cuda:0", False),
    ],
)
def test_warning_only_where_emulated(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    native: bool | None,
    device: str,
    warned: bool,
) -> None:
    monkeypatch.setattr(precision, "cpu_has_native_bf16", lambda: native)
    with caplog.at_level(logging.WARNING, logger=precision.__name__):
        assert precision.warn_if_slow_bf16(device, "the local training backend") is warned
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == int(warned)
    if warned:
        assert messages[0].startswith("the local training backend computes in bfloat16")
        assert "use float32" in messages[0]
