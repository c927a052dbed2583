"""A bash-harness rollout of two model calls trains as one sequence whose loss mask is 1 on
the sampled tokens only: the system prompt, the instruction and the command's output that
the loop sends back are 0. The prompts are the chat template applied to the very messages
``agent_loop`` sends, and the second step is delta-encoded as the gateway publishes it."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np

from rllm.consumers.trainer.batching import episode_sequences
from rllm.consumers.trainer.types import LossKind
from rllm.models.tiny import tiny_model_dir
from rllm.producers.harnesses.agent_loop import TEXT_PROMPT, text_turn
from rllm.schemas import types as t
from rllm.schemas.delta import delta_prompt
from rllm.schemas.tokens import pack_logprobs, pack_tokens
from tests.unit.consumers.trainer.factory import trajectory

END = "|"
"""The tiny template's end of a turn, sampled by the model as its stop (SmolLM2's
``<|im_end|>``)."""


def _step(
    sid: str,
    index: int,
    prompt: list[int],
    response: list[int],
    parent: tuple[str, list[int]] | None = None,
) -> t.StepCaptured:
    prefix, stored = 0, np.asarray(prompt, dtype=np.int32)
    if parent is not None:  # as the gateway publishes a step that extends its parent
        prefix, stored = delta_prompt(np.asarray(parent[1], dtype=np.int32), stored)
    return t.StepCaptured(
        step_id=f"{sid}/{index}",
        step_index=index,
        api=t.ApiKind.CHAT,
        model="tiny",
        prompt_token_ids=pack_tokens(stored.tolist()),
        prompt_prefix_len=prefix,
        parent_step_id=parent[0] if parent else None,
        response_token_ids=pack_tokens(response),
        response_logprobs=pack_logprobs([-0.5] * len(response)),
        policy_version=0,
        token_status=t.TokenStatus.OK,
    )


def test_a_two_step_bash_rollout_masks_prompt_and_tool_output(tmp_path: Path) -> None:
    import transformers

    tok: Any = transformers.AutoTokenizer.from_pretrained(tiny_model_dir(tmp_path / "m"))
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": TEXT_PROMPT},
        {"role": "user", "content": "Task: write 42 into answer.txt.\nrun: echo 42 > answer.txt"},
    ]
    prompt0 = tok.apply_chat_template(messages, add_generation_prompt=True)
    reply0 = "run: echo 42 > answer.txt"
    response0 = tok.encode(reply0 + END)
    args = argparse.Namespace(workdir=str(tmp_path), timeout=5.0)
    over, _ = text_turn({"content": reply0}, args, messages)  # runs it, appends the output
    assert not over and (tmp_path / "answer.txt").read_text() == "42\n"
    assert messages[-1] == {"role": "user", "content": "exit code 0\n"}
    prompt1 = tok.apply_chat_template(messages, add_generation_prompt=True)
    response1 = tok.encode("done" + END)
    tool = prompt1[len(prompt0) + len(response0) :]
    assert prompt1[: len(prompt0) + len(response0)] == prompt0 + response0
    assert "exit code 0" in tok.decode(tool)

    trajs = []
    for i, reward in enumerate((1.0, 0.0)):
        s0 = _step(f"s{i}", 0, prompt0, response0)
        s1 = _step(f"s{i}", 1, prompt1, response1, parent=(s0.step_id, prompt0 + response0))
        assert s1.prompt_prefix_len == len(prompt0) + len(response0)
        trajs.append(trajectory(f"s{i}", [s0, s1], reward, i))
    episode = t.EpisodeAssembled(
        event_id="ep",
        run_id="run",
        task=t.Task(task_id="ep"),
        trajectories=tuple(trajs),
        rewards=(1.0, 0.0),
        advantages=(0.5, -0.5),
        estimator="grpo",
        group_size=2,
        uniform_reward=False,
    )
    first, second = episode_sequences(episode, LossKind.GRPO)  # one sequence a rollout
    assert first.input_ids_T == prompt1 + response1 == second.input_ids_T
    mask = [0] * len(prompt0) + [1] * len(response0) + [0] * len(tool) + [1] * len(response1)
    assert first.loss_mask_T == mask == second.loss_mask_T
    assert first.step_ids == ("s0/0", "s0/1") and first.num_loss_tokens == len(response0) + 5
    assert (first.advantage, second.advantage) == (0.5, -0.5)
    sampled = [i for i, m in zip(first.input_ids_T, first.loss_mask_T, strict=True) if m]
    assert tok.decode(sampled) == reply0 + END + "done" + END
