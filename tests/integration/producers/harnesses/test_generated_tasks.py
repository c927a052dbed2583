"""Generated task families on real sandboxes (the local backend): every kind of
``shell-basics`` builds, its oracle earns 1, and a sandbox left untouched earns 0."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from rllm.benchmarks.harbor import HarborTask, load_dataset, run_verifier
from rllm.benchmarks.harbor.generate import KINDS, generate_family
from rllm.sandboxes import OWNER_LABEL, Sandbox, SandboxBackend
from tests.integration.producers.harnesses.helpers import needs_local_sandbox
from tests.integration.sandboxes.oracle import oracle_verified

pytestmark = needs_local_sandbox


@pytest.fixture
def backend(local_sandbox_backend: SandboxBackend) -> SandboxBackend:
    """The local backend on the test's own home (the shared image store)."""
    return local_sandbox_backend


async def _sandbox(backend: SandboxBackend, task: HarborTask, owner: str) -> Sandbox:
    image = await backend.build_image(task.environment_dir, f"gen-test/{task.path.name}")
    return await backend.create(task.sandbox_spec(image.name, labels={OWNER_LABEL: owner}))


async def test_the_oracle_solves_every_kind_and_an_idle_agent_solves_none(
    backend: SandboxBackend, tmp_path: Path
) -> None:
    split = generate_family("shell-basics", 2 * len(KINDS), tmp_path, seed=7)
    tasks = [*load_dataset(split.train).tasks, *load_dataset(split.test).tasks]
    assert len(tasks) == 2 * len(KINDS)
    owner = f"gen-{uuid.uuid4().hex[:8]}"
    rewards: dict[str, tuple[float | None, float | None]] = {}
    for task in tasks:
        oracle = await oracle_verified(await _sandbox(backend, task, owner), task, task.name)
        idle = await _sandbox(backend, task, owner)
        try:
            nothing = await run_verifier(idle, task)
        finally:
            await idle.close()
        assert oracle.ok and nothing.ok, (oracle.error, nothing.error)
        rewards[task.name] = (oracle.reward, nothing.reward)
    assert rewards == {task.name: (1.0, 0.0) for task in tasks}
