"""An OpenAI Agents SDK agent whose model client points at the session URL."""

from __future__ import annotations

from agents import Agent, ModelSettings, OpenAIChatCompletionsModel, Runner, set_tracing_disabled
from openai import AsyncOpenAI

import rllm
from rllm.producers.sdk import RolloutConfig
from rllm.schemas.types import Task

set_tracing_disabled(True)  # traces would go to a hosted service


@rllm.rollout(name="openai-agents")
async def agent(task: Task, config: RolloutConfig) -> str:
    async with AsyncOpenAI(
        base_url=config.base_url, api_key=config.api_key, max_retries=0
    ) as client:
        model = OpenAIChatCompletionsModel(model=config.model, openai_client=client)
        solver = Agent(
            name="calculator",
            instructions="Answer arithmetic questions with the number only.",
            model=model,
            model_settings=ModelSettings(max_tokens=config.sampling.get("max_tokens")),
        )
        result = await Runner.run(solver, task.instruction)
        return str(result.final_output)


if __name__ == "__main__":
    from examples._run import main

    main(agent)
