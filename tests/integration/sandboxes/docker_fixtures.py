"""A session-wide Docker Engine for the docker backend's tests.

The daemon comes from, in order: ``RLLM_TEST_DOCKER_URL`` (a running one, e.g. the one
``.ci/run`` started with ``infra/docker/start``); otherwise ``infra/docker/start`` with its
data under ``RLLM_TEST_DOCKER_DATA_DIR`` (default ``/var/tmp/rllm-test-docker``, kept across
runs so imported images stay), stopped at the end when this session started it. The
tests skip only where dockerd cannot run at all (not installed, or not root).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.paths import ROOT

__all__ = ["docker_backend_settings", "docker_url"]

_INFRA = ROOT / "infra" / "docker"


def _our_dockerd_running(data_dir: Path) -> bool:
    try:
        pid = int((data_dir / "dockerd.pid").read_text().strip())
        return os.readlink(f"/proc/{pid}/exe").endswith("dockerd")
    except (OSError, ValueError):
        return False


@pytest.fixture(scope="session")
def docker_url() -> Iterator[str]:
    """URL of a Docker Engine started with ``--bridge=none --iptables=false``."""
    if os.environ.get("RLLM_TEST_DOCKER_URL"):
        yield os.environ["RLLM_TEST_DOCKER_URL"]
        return
    if shutil.which("dockerd") is None:
        pytest.fail("dockerd is not installed (apt-get install -y docker.io)")
    if os.geteuid() != 0:
        pytest.fail("dockerd needs root; run the docker tests as root or set RLLM_TEST_DOCKER_URL")
    data_dir = Path(os.environ.get("RLLM_TEST_DOCKER_DATA_DIR", "/var/tmp/rllm-test-docker"))
    env = {**os.environ, "RLLM_DOCKER_DATA_DIR": str(data_dir)}
    started_here = not _our_dockerd_running(data_dir)
    proc = subprocess.run(
        [str(_INFRA / "start")], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(f"infra/docker/start failed ({proc.returncode}): {proc.stderr.strip()}")
    try:
        yield proc.stdout.strip().splitlines()[-1]
    finally:
        if started_here:
            subprocess.run(
                [str(_INFRA / "stop")], env=env, capture_output=True, timeout=120, check=False
            )


@pytest.fixture(scope="session")
def docker_backend_settings(docker_url: str) -> dict[str, object]:
    """``SandboxSettings`` fields that point the docker backend at the session's daemon:
    ``get_backend("docker", sandbox_settings.model_copy(update=docker_backend_settings))``."""
    return {"docker_url": docker_url}
