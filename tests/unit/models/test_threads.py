"""``torch_threads=auto``: the tuner keeps the count that measured faster, in pairs."""

from __future__ import annotations

import pytest
import torch

from rllm.consumers.trainer.settings import TrainerSettings
from rllm.errors import ConfigError
from rllm.models.threads import ThreadTuner, check_threads
from rllm.serving.settings import ServeSettings


def run(tuner: ThreadTuner, cost: dict[int, float], steps: int, work: float = 32) -> list[int]:
    """Drive ``steps`` steps where a step with n threads takes ``cost[n]`` s per unit."""
    used = []
    for _ in range(steps):
        n = tuner.choose()
        tuner.observe(n, cost[n] * work, work)
        used.append(n)
    return used


def test_switches_to_the_count_that_measured_faster_and_keeps_probing() -> None:
    tuner = ThreadTuner(choices=(1, 2), probe_every=6)
    assert tuner.current == 2  # all cores first, as torch would
    used = run(tuner, {1: 0.010, 2: 0.013}, 8)
    # two probes of 1 thread, each right after a step with 2 (not the first, cold one),
    # then 1 takes over
    assert used[:7] == [2, 2, 1, 2, 2, 1, 1]
    assert tuner.current == 1
    assert tuner.summary() == {"threads": 1.0, "threads_2_relative_time": 1.3}
    used = run(tuner, {1: 0.010, 2: 0.013}, 30)
    assert tuner.current == 1
    assert 3 <= used.count(2) <= 6  # about one probe in probe_every steps


def test_keeps_the_current_count_when_it_is_faster() -> None:
    tuner = ThreadTuner(choices=(1, 2), probe_every=6)
    used = run(tuner, {1: 0.02, 2: 0.01}, 40)
    assert tuner.current == 2
    assert used.count(1) == 6  # 2 early probes, then one every 6 steps
    assert tuner.summary() == {"threads": 2.0, "threads_1_relative_time": 2.0}


def test_follows_the_machine_when_it_changes() -> None:
    tuner = ThreadTuner(choices=(1, 2), probe_every=4)
    run(tuner, {1: 0.02, 2: 0.01}, 20)
    assert tuner.current == 2
    run(tuner, {1: 0.01, 2: 0.03}, 40)  # a busy neighbour: 2 threads wait on each other
    assert tuner.current == 1
    run(tuner, {1: 0.02, 2: 0.01}, 60)
    assert tuner.current == 2


def test_a_small_difference_does_not_flip_it() -> None:
    tuner = ThreadTuner(choices=(1, 2), probe_every=3, switch_margin=0.05)
    run(tuner, {1: 0.0099, 2: 0.0100}, 60)  # 1% is noise
    assert tuner.current == 2


def test_only_one_core_never_probes() -> None:
    tuner = ThreadTuner(choices=(1,))
    assert run(tuner, {1: 0.01}, 10) == [1] * 10


def test_steps_set_torch_threads() -> None:
    before = torch.get_num_threads()
    try:
        tuner = ThreadTuner(choices=(1, 2), probe_every=6)
        seen = []
        for _ in range(3):
            with tuner.step(1.0) as n:
                seen.append((n, torch.get_num_threads()))
        assert seen == [(2, 2), (2, 2), (1, 1)]
        tuner.hold()
        assert torch.get_num_threads() == tuner.current
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("bad", [-1, True, "many"])
def test_bad_thread_settings_are_refused_naming_the_value(bad: object) -> None:
    with pytest.raises(ConfigError, match=repr(bad).replace("'", "'?")):
        check_threads(bad)  # type: ignore[arg-type]  # bad values on purpose


def test_settings_read_auto_and_counts_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RLLM_SERVE_TORCH_THREADS", "auto")
    monkeypatch.setenv("RLLM_TRAIN_TORCH_THREADS", "2")
    assert ServeSettings().torch_threads == "auto"
    assert TrainerSettings().torch_threads == 2
    monkeypatch.setenv("RLLM_SERVE_TORCH_THREADS", "3")
    assert ServeSettings().torch_threads == 3
    monkeypatch.setenv("RLLM_TRAIN_TORCH_THREADS", "-2")
    with pytest.raises(ValueError, match="-2"):
        TrainerSettings()


def test_compute_runs_on_one_thread_inline_when_nested_and_raises_through() -> None:
    import threading

    from rllm.models.threads import compute, on_compute_thread

    @compute
    def where() -> str:
        return threading.current_thread().name

    @compute
    def nested() -> tuple[str, str]:
        return threading.current_thread().name, where()  # no deadlock: runs inline

    names = {where() for _ in range(3)} | set(nested())
    assert len(names) == 1 and names.pop().startswith("rllm-torch")

    def fail() -> None:
        raise ValueError("bad weights 7")

    with pytest.raises(ValueError, match="bad weights 7"):
        on_compute_thread(fail)
