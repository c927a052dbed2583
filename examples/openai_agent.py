"""A plain ``openai.OpenAI`` agent, unchanged except for its base URL and key."""

from __future__ import annotations

import openai

import rllm
from rllm.producers.sdk import RolloutConfig
from rllm.schemas.types import Task


@rllm.rollout(name="openai-plain")
def agent(task: Task, config: RolloutConfig) -> str:
    with openai.OpenAI(base_url=config.base_url, api_key=config.api_key, max_retries=0) as client:
        return _solve(client, task, config)


def _solve(client: openai.OpenAI, task: Task, config: RolloutConfig) -> str:
    messages: list[dict[str, str]] = [
        {"role": "system", "content": "You are a careful calculator."},
        {"role": "user", "content": task.instruction},
    ]
    first = client.chat.completions.create(model=config.model, messages=messages, **config.sampling)
    draft = first.choices[0].message.content or ""
    # a second turn: the gateway sends only the new suffix of the prompt to Kafka
    messages += [
        {"role": "assistant", "content": draft},
        {"role": "user", "content": "Now give only the final number."},
    ]
    final = client.chat.completions.create(model=config.model, messages=messages, **config.sampling)
    return final.choices[0].message.content or ""


if __name__ == "__main__":
    from examples._run import main

    main(agent)
