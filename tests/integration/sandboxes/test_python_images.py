"""Offline ``python:3.X`` images: Debian plus this host's pyenv CPython at the official
image's paths, run in a local sandbox. Needs root, bubblewrap, debootstrap and pyenv's
3.12 and 3.13 (the first build takes about 45 s, later ones about 3 s per version)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from rllm.sandboxes.images.base import PYTHON_IMAGES
from rllm.sandboxes.local.backend import LocalBackend
from rllm.sandboxes.settings import PullPolicy, SandboxSettings
from rllm.sandboxes.types import OWNER_LABEL, SandboxSpec
from tests.integration.sandboxes.backends import local_backend


@pytest.fixture
async def offline(sandbox_settings: SandboxSettings) -> AsyncIterator[LocalBackend]:
    """A local backend that never pulls: the offline recipes only."""
    settings = sandbox_settings.model_copy(update={"pull_policy": PullPolicy.NEVER})
    async with local_backend(settings) as made:
        yield made


@pytest.mark.parametrize("minor", ["3.12", "3.13"])
async def test_pyenv_python_runs_at_the_official_paths(offline: LocalBackend, minor: str) -> None:
    name = f"python:{minor}-slim-bookworm"
    assert name in PYTHON_IMAGES, (  # these machines' pyenv has 3.6-3.13: a missing one fails
        f"pyenv has no CPython {minor} on this host: pyenv install {minor}"
    )
    version = PYTHON_IMAGES[name].version
    sandbox = await offline.create(SandboxSpec(image=name, labels={OWNER_LABEL: "test-py"}))
    try:
        script = (
            "python3 --version; pip --version; "
            "for p in python3 python pip pip3; do command -v $p; done; "
            "echo $PYTHON_VERSION $LANG; "
            "python3 -c 'import ssl, sqlite3, ctypes, venv, readline, sys, sysconfig; "
            'print(sys.prefix, sysconfig.get_config_var("LIBDIR"), ssl.OPENSSL_VERSION[:7])\'; '
            "ldconfig -p | grep -c libpython; "
            "ls /usr/local/lib/python*/site-packages; "
            "find / -xdev -name test -path '*python3*' | wc -l; "
            "grep -rlI pyenv /usr/local/bin /usr/local/lib/python3.*/_sysconfigdata* | wc -l"
        )
        done = await sandbox.exec(script, timeout_s=60)
    finally:
        await sandbox.close()
    assert done.ok, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"Python {version}"
    assert lines[1].startswith("pip ") and f"/usr/local/lib/python{minor}/" in lines[1]
    assert lines[2:6] == [f"/usr/local/bin/{p}" for p in ("python3", "python", "pip", "pip3")]
    assert lines[6] == f"{version} C.UTF-8"
    assert lines[7] == "/usr/local /usr/local/lib OpenSSL"
    assert int(lines[8]) >= 1  # libpython in ld.so.cache
    site = lines[9:-2]
    assert "pip" in site and not any(s.endswith(".pth") and "sandboxing" in s for s in site)
    assert lines[-2:] == ["0", "0"]  # no test dirs, no pyenv path left in a script
