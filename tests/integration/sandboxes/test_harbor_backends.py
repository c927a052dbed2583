"""The same Harbor task scores the same on the ``local`` and ``docker`` backends: each
shipped task and Harbor's own template task (``harbor tasks init``'s, vendored from the
``harbor`` 0.25.0 wheel in ``tests/fixtures/harbor_template``, Apache-2.0, its LICENSE
beside it), built, solved by its oracle and verified on both."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import pytest

from rllm.benchmarks.harbor import HarborTask, load_task
from rllm.sandboxes import OWNER_LABEL, SandboxSettings
from tests.integration.sandboxes.backends import open_backend
from tests.integration.sandboxes.oracle import oracle_verified
from tests.paths import FIXTURES

SHIPPED = sorted(p.name for p in (FIXTURES / "harbor_tasks").iterdir() if p.is_dir())
TEMPLATE = FIXTURES / "harbor_template" / "template-task"
SUBSTITUTES = {"ubuntu:24.04": "debian:bookworm"}
"""The template's ``FROM ubuntu:24.04`` on a Debian base (no registry here), stated."""

Outcome = tuple[bool, float | None, int | None, str | None]


def template_task(root: Path) -> HarborTask:
    """The template laid out as ``harbor tasks init --no-pytest`` does in shared mode:
    ``tests/`` without its Dockerfile, and a one-line instruction where the template's
    is empty (a task without one is refused here)."""
    path = root / "template-task"
    shutil.copytree(TEMPLATE, path, ignore=shutil.ignore_patterns("*pytest-tests"))
    (path / "tests" / "Dockerfile").unlink()
    (path / "instruction.md").write_text("Nothing to do: Harbor's task template.\n")
    return load_task(path)


async def oracle_outcome(
    backend_name: str, task: HarborTask, settings: SandboxSettings, request: pytest.FixtureRequest
) -> Outcome:
    """The verifier's outcome after the oracle, in a sandbox of ``backend_name`` built from
    the task's environment: (ok, reward, test.sh's exit code, error)."""
    async with open_backend(backend_name, settings, request) as backend:
        image = await backend.build_image(task.environment_dir, f"harbor-eq/{task.path.name}")
        owner = {OWNER_LABEL: f"harbor-eq-{uuid.uuid4().hex[:8]}"}
        spec = task.sandbox_spec(image.name, labels=owner)
        if backend_name == "docker":  # this daemon's overlay2 is not on xfs: no size limits
            spec = spec.model_copy(update={"disk_mb": None})
        result = await oracle_verified(await backend.create(spec), task, backend_name)
    return result.ok, result.reward, result.exit_code, result.error


@pytest.mark.parametrize("name", [*SHIPPED, "harbor-template"])
async def test_oracle_scores_the_same_on_local_and_docker(
    name: str, sandbox_settings: SandboxSettings, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    settings = sandbox_settings.model_copy(update={"image_substitutes": SUBSTITUTES})
    if name == "harbor-template":
        task = template_task(tmp_path)
    else:
        task = load_task(FIXTURES / "harbor_tasks" / name)
    local = await oracle_outcome("local", task, settings, request)
    docker = await oracle_outcome("docker", task, settings, request)
    assert local == docker
    if name == "harbor-template":  # its tests/test.sh is comments only: no reward, named
        ok, reward, exit_code, error = local
        assert (ok, reward, exit_code) == (False, None, 0)
        assert error is not None and "test.sh wrote no reward" in error
    else:
        assert local == (True, 1.0, 0, None)
