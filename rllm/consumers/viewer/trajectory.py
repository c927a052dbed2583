"""A trajectory's page: how its session opened and closed, its steps turn by turn (through
``turns``), its rewards, the group it was trained in and a harness run's logs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rllm.consumers.history import HistoryStore
from rllm.consumers.viewer import sql, turns
from rllm.consumers.viewer.errors import NotFoundError
from rllm.consumers.viewer.reads import as_time, number, read
from rllm.consumers.viewer.tokenizers import decoder_for

__all__ = ["TrajectoryPage", "trajectory_page"]


@dataclass(frozen=True)
class TrajectoryPage:
    """One session: how it opened and closed, its steps turn by turn, its rewards."""

    session_id: str
    """The session."""
    opened: dict[str, Any] | None
    """Its SessionOpened row (None when only later events arrived)."""
    closed: dict[str, Any] | None
    """Its latest SessionClosed row (None: still open)."""
    steps: list[dict[str, Any]]
    """Each step with ``new_messages``, ``answer`` and ``tokens`` (``turns``)."""
    rewards: list[dict[str, Any]]
    """Its rewards, oldest first (the last one counts)."""
    episode: dict[str, Any] | None
    """The group it was trained in, with its advantage (None: not in an episode yet)."""
    task: Any
    """The task (its JSON)."""
    output: Any
    """What the agent returned (its JSON)."""
    harness: dict[str, Any] | None
    """A harness run's logs and verifier details, when there are any."""


_HARNESS_KEYS = (
    "agent_output_tail",
    "verifier_error",
    "verifier_exit_code",
    "verifier_output_tail",
    "artifacts",
    "agent_exit_code",
    "reason",
)


def trajectory_page(store: HistoryStore, session_id: str) -> TrajectoryPage:
    """One trajectory's page.

    Raises:
        NotFoundError: when the history has no event of ``session_id``.
    """
    events = read(store, sql.SESSION_EVENTS, session=session_id)
    steps = read(store, sql.STEPS_OF, session=session_id)
    if not events and not steps:
        raise NotFoundError(f"no trajectory (session) {session_id!r} in the history")
    opened = next((e for e in events if e["kind"] == "opened"), None)
    closes = [e for e in events if e["kind"] == "closed"]
    closed = closes[-1] if closes else None
    earlier: list[turns.Message] = []
    for step in steps:
        request = turns.parse_json(step.pop("request_json"))
        response = turns.parse_json(step.pop("response_json"))
        api = str(step["api"])
        sent = turns.request_messages(api, request)
        answer = turns.response_messages(api, response) if not step["error_kind"] else []
        step["new_messages"] = turns.new_messages(earlier, sent)
        step["answer"] = answer
        decode = decoder_for(str(step["model"]))
        step["tokens"] = turns.tokens(
            api, response, step.pop("response_token_ids"), step.pop("response_logprobs"), decode
        )
        step["decoded"] = decode is not None
        step["started_at"] = as_time(step["started_at"])
        step["sampling"] = turns.parse_json(step.pop("sampling_params_json"))
        earlier = sent + answer
    rewards = read(store, sql.REWARDS_OF, session=session_id)
    for r in rewards:
        r["signals"] = dict(zip(r.pop("signal_names"), r.pop("signal_values"), strict=True))
        r["metadata"] = turns.parse_json(r.pop("metadata_json"))
        r["emitted_at"] = as_time(r["emitted_at"])
    episodes = read(store, sql.EPISODE_OF, session=session_id)
    episode = episodes[0] if episodes else None
    if episode is not None:
        episode["advantage"] = number(episode["advantage"])
        episode["group_reward"] = number(episode["group_reward"])
    output = turns.parse_json(closed["output_json"]) if closed else None
    harness = (
        {k: output[k] for k in _HARNESS_KEYS if output.get(k) not in (None, "", {}, [])}
        if isinstance(output, dict) and ("harness" in output or "agent_output_tail" in output)
        else None
    )
    return TrajectoryPage(
        session_id=session_id,
        opened=opened,
        closed=closed,
        steps=steps,
        rewards=rewards,
        episode=episode,
        task=turns.parse_json(opened["task_json"]) if opened else None,
        output=output,
        harness=harness or None,
    )
