"""The step the Harbor task tests share: solve a task with its oracle in a sandbox, then
score it with the task's verifier."""

from __future__ import annotations

from rllm.benchmarks.harbor import HarborTask, VerifierResult, run_oracle, run_verifier
from rllm.sandboxes import Sandbox

__all__ = ["oracle_verified"]


async def oracle_verified(sandbox: Sandbox, task: HarborTask, what: str) -> VerifierResult:
    """Run ``task``'s ``solve.sh`` in ``sandbox``, which must succeed (``what`` names the run
    in the failure), then its verifier; the sandbox is closed either way.

    Returns:
        The verifier's result after the oracle.
    """
    try:
        solved = await run_oracle(sandbox, task)
        assert solved.ok, f"{what}: solve.sh failed: {solved.stdout}{solved.stderr}{solved.error}"
        return await run_verifier(sandbox, task)
    finally:
        await sandbox.close()
