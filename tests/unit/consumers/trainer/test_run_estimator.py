"""One estimator per run: the trainer refuses episodes whose advantages another estimator
made, and whitens the REINFORCE++ estimators over each batch's loss tokens (as verl)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from rllm.consumers.backends.local.backend import LOCAL_CAPABILITIES
from rllm.consumers.backends.verl.backend import VERL_CAPABILITIES
from rllm.consumers.backends.verl.convert import verl_config
from rllm.consumers.trainer.batching import Batcher
from rllm.consumers.trainer.errors import CapabilityError
from rllm.consumers.trainer.settings import TrainerSettings
from rllm.consumers.trainer.types import LossKind, check_capabilities
from rllm.consumers.trainer.whitening import whiten_over_tokens
from rllm.errors import ConfigError
from tests.unit.consumers.trainer.factory import episode


def test_loss_rloo_refuses_grpo_advantages_naming_run_and_estimators() -> None:
    b = Batcher(TrainerSettings(loss=LossKind.RLOO, batch_size=1))
    assert not b.add(episode("e-g", run_id="run-7", estimator="grpo"), current_version=0)
    assert not b.add(episode("e-g2", run_id="run-7", estimator="grpo"), current_version=0)
    assert b.drops.wrong_estimator_episodes == 2 and b.pending == 0
    message = b.drops.messages[-1]
    assert "run 'run-7'" in message and "'grpo'" in message and "'rloo'" in message
    assert b.drops.as_metrics()["refused_wrong_estimator_episodes"] == 2.0
    assert b.add(episode("e-r", run_id="run-7", estimator="rloo"), current_version=0)


def test_each_loss_expects_its_estimator() -> None:
    assert TrainerSettings().run_estimator() == "grpo"
    assert TrainerSettings(loss=LossKind.REINFORCE).run_estimator() == "reinforce"
    assert TrainerSettings(loss=LossKind.SFT).run_estimator() is None
    pp = TrainerSettings(estimator="reinforce_plus_plus")
    assert pp.run_estimator() == "reinforce_plus_plus"
    # verl's rloo: its clipped PPO loss (our loss=grpo) on rloo advantages
    assert TrainerSettings(estimator="rloo").run_estimator() == "rloo"
    b = Batcher(TrainerSettings(loss=LossKind.REINFORCE, batch_size=1))
    assert not b.add(episode("e", estimator="grpo"), 0)
    assert b.drops.wrong_estimator_episodes == 1


def test_a_loss_and_estimator_that_do_not_fit_are_refused_at_configuration() -> None:
    # a ConfigError, which pydantic reports as a ValidationError (both ValueErrors)
    with pytest.raises(ValueError, match=r"estimator=.grpo. does not fit loss=rloo.*rloo"):
        TrainerSettings(loss=LossKind.RLOO, estimator="grpo")
    with pytest.raises(ValueError, match=r"loss=sft.*none"):
        TrainerSettings(loss=LossKind.SFT, estimator="grpo")


def test_whitening_over_tokens_by_hand() -> None:
    # values 1 (3 tokens) and -1 (1 token): mean over 4 tokens 0.5, unbiased var
    # (3 * 0.25 + 2.25) / 4 * 4 / 3 = 1.0
    got = whiten_over_tokens([1.0, -1.0], [3, 1])
    assert got.tolist() == pytest.approx([0.5 / math.sqrt(1 + 1e-8), -1.5 / math.sqrt(1 + 1e-8)])
    with pytest.raises(ValueError, match="at least two loss tokens"):
        whiten_over_tokens([1.0], [1])


def test_reinforce_plus_plus_batches_are_whitened_over_their_tokens() -> None:
    b = Batcher(TrainerSettings(estimator="reinforce_plus_plus_baseline", batch_size=2))
    e1 = episode("e1", rewards=(1.0, 0.0), estimator="reinforce_plus_plus_baseline")
    e2 = episode("e2", rewards=(1.0, 0.0, 0.0, 0.0), estimator="reinforce_plus_plus_baseline")
    assert b.add(e1, 0) and b.add(e2, 0)
    batch = b.take()
    values = [0.5, -0.5, 0.75, -0.25, -0.25, -0.25]  # reward minus group mean
    tokens = [s.num_loss_tokens for s in batch.sequences]
    assert [s.advantage for s in batch.sequences] == pytest.approx(
        whiten_over_tokens(values, tokens).tolist()
    )
    mean = sum(s.advantage * n for s, n in zip(batch.sequences, tokens, strict=True))
    assert abs(mean) < 1e-9  # zero mean over the batch's loss tokens


def test_reinforce_is_the_plain_reward_everywhere_and_verl_refuses_it() -> None:
    # one meaning: loss=reinforce trains on the `reinforce` estimator (reward minus a
    # constant baseline); verl has no such estimator, so its capability check refuses it
    reinforce = TrainerSettings(loss=LossKind.REINFORCE)
    check_capabilities(reinforce, "local", LOCAL_CAPABILITIES)
    with pytest.raises(CapabilityError, match="loss=reinforce"):
        check_capabilities(reinforce, "verl", VERL_CAPABILITIES)
    with pytest.raises(ConfigError, match="cannot honour loss=reinforce"):
        verl_config(reinforce)
    pp = TrainerSettings(estimator="reinforce_plus_plus")
    check_capabilities(pp, "verl", VERL_CAPABILITIES)
    assert verl_config(pp)["algorithm.adv_estimator"] == "reinforce_plus_plus"
    assert verl_config(TrainerSettings(loss=LossKind.RLOO))["algorithm.adv_estimator"] == "rloo"


def test_a_backend_refuses_an_estimator_it_cannot_train() -> None:
    caps = replace(LOCAL_CAPABILITIES, estimators=frozenset({"grpo"}))
    with pytest.raises(CapabilityError, match=r"estimator=reinforce_plus_plus \(supported: grpo\)"):
        check_capabilities(TrainerSettings(estimator="reinforce_plus_plus"), "x", caps)


def test_uniform_groups_are_kept_for_batch_whitened_estimators() -> None:
    # a uniform group has zero GRPO advantages, but under REINFORCE++ its rewards are
    # whitened with the batch (verl keeps them), so the uniform-drop rule does not apply
    b = Batcher(TrainerSettings(estimator="reinforce_plus_plus", batch_size=2))
    assert b.add(episode("u", rewards=(1.0, 1.0), estimator="reinforce_plus_plus"), 0)
    g = Batcher(TrainerSettings(batch_size=2))
    assert not g.add(episode("u", rewards=(1.0, 1.0)), 0)
    assert g.drops.uniform_episodes == 1
