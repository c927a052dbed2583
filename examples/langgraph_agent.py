"""A LangGraph graph whose model is ``langchain_openai.ChatOpenAI`` on the session URL."""

from __future__ import annotations

from typing import TypedDict

import httpx
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, StateGraph

import rllm
from rllm.producers.sdk import RolloutConfig
from rllm.schemas.types import Task


class State(TypedDict):
    messages: list[BaseMessage]


def build_graph(llm: ChatOpenAI):  # type: ignore[no-untyped-def]
    def think(state: State) -> State:
        return {"messages": [*state["messages"], llm.invoke(state["messages"])]}

    def answer(state: State) -> State:
        follow = [*state["messages"], HumanMessage("Reply with only the final number.")]
        return {"messages": [*follow, llm.invoke(follow)]}

    graph = StateGraph(State)
    graph.add_node("think", think)
    graph.add_node("answer", answer)
    graph.add_edge(START, "think")
    graph.add_edge("think", "answer")
    graph.add_edge("answer", END)
    return graph.compile()


@rllm.rollout(name="langgraph")
def agent(task: Task, config: RolloutConfig) -> str:
    with httpx.Client(timeout=600) as http:
        llm = ChatOpenAI(
            base_url=config.base_url,
            api_key=config.api_key,
            model=config.model,
            max_retries=0,
            http_client=http,
            **config.sampling,
        )
        result = build_graph(llm).invoke({"messages": [HumanMessage(task.instruction)]})
    last = result["messages"][-1]
    return str(last.content) if isinstance(last, AIMessage) else ""


if __name__ == "__main__":
    from examples._run import main

    main(agent)
