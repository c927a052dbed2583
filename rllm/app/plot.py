"""The demos' reward curve: training reward per policy version, held-out reward before
and after, as a PNG."""

from __future__ import annotations

from pathlib import Path

from rllm.app.report import TrainReport
from rllm.producers.evaluation import EvalSummary

__all__ = ["plot_rewards"]


def plot_rewards(
    report: TrainReport, path: Path, title: str, before: EvalSummary, after: EvalSummary
) -> Path:
    """The training reward of each batch against the policy version it ran on (rollouts
    sampled at temperature 1), and the held-out reward before and after (greedy) on the
    versions they ran on, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 3.5))
    versions = [u.rollout_version for u in report.updates]
    ax.plot(
        versions,
        [u.reward_mean for u in report.updates],
        marker=".",
        label="training reward (rollouts sampled at temperature 1)",
    )
    held = [(e.policy_version or 0, e.mean_reward) for e in (before, after)]
    ax.plot(
        [v for v, _ in held],
        [r for _, r in held],
        linestyle=":",
        marker="D",
        color="C1",
        label=f"held-out reward, greedy ({after.tasks} tasks never trained on)",
    )
    for version, reward in held:
        ax.annotate(f"{reward:.2f}", (version, reward), textcoords="offset points", xytext=(6, 6))
    ax.set(xlabel="policy version", ylabel="mean reward", ylim=(0, 1.08), title=title)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize="small")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
