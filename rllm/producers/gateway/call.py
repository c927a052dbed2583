"""One call's timing and capture, published as its step (one per choice of ``n > 1``):
what ``dispatch`` fills while it serves the call."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import time
from collections.abc import Mapping
from concurrent.futures import Future
from typing import Any

from starlette.responses import JSONResponse, Response

from rllm.errors import MessageTooLargeError
from rllm.producers.gateway.capture import (
    choice_capture,
    choices_asked,
    missing_choice,
    sampling_params,
    step_event,
    too_large,
)
from rllm.producers.gateway.clock import Timing
from rllm.producers.gateway.context import Clamp
from rllm.producers.gateway.errors import anthropic_error
from rllm.producers.gateway.replicas import Replica
from rllm.producers.gateway.sessions import Session
from rllm.producers.gateway.settings import UpstreamKind
from rllm.producers.gateway.state import GatewayState
from rllm.producers.gateway.types import Capture, Parsed
from rllm.producers.gateway.upstreams import UpstreamFailure
from rllm.schemas.lineage import POLICY_HEADER
from rllm.schemas.topics import SESSION_EVENTS
from rllm.schemas.types import ApiKind, utcnow

__all__ = ["Call"]

log = logging.getLogger("rllm.gateway")


class Call:
    """Timing and capture of one call."""

    def __init__(
        self,
        state: GatewayState,
        session: Session,
        api: ApiKind,
        body: dict[str, Any],
        timing: Timing | None = None,
        replica: Replica | None = None,
    ) -> None:
        self.state, self.session, self.api, self.body = state, session, api, body
        self.replica = replica or state.replicas.first
        """The upstream replica serving the call."""
        self.upstream = self.replica.upstream
        self.t0 = timing.arrived if timing is not None else time.perf_counter()
        self.asked = choices_asked(body)
        self.index = session.take_index(self.asked)
        self.cap = Capture(
            api=api,
            model=str(body.get("model", "")),
            request=body,
            started_at=utcnow(),
            upstream=self.replica.url,
            policy_version=self.replica.policy_version,
            sampling=sampling_params(body),
        )
        self.t_up = 0.0
        self.recorded = False

    def moved(self, note: str) -> None:
        """Record in the step (``replica_moved`` in its sampling parameters) that the
        session moved to this replica because its own was taken out."""
        self.cap.sampling["replica_moved"] = note

    def reroute(self, replica: Replica, body: dict[str, Any], note: str | None) -> None:
        """Serve the call on ``replica`` instead (its own was taken out before answering);
        ``body``: the request as that replica is sent it."""
        self.replica, self.upstream, self.body = replica, replica.upstream, body
        c = self.cap
        c.request, c.model = body, str(body.get("model", ""))
        c.upstream, c.policy_version = replica.url, replica.policy_version
        if note is not None:
            self.moved(note)

    def dropped(self, labels: list[str]) -> None:
        """Record in the step (``dropped`` in its sampling parameters) what of the request
        the upstream is not sent; warn of each field once per session (a warning: the
        default log shows it, and the agent's request did not reach the model whole)."""
        if not labels:
            return
        self.cap.sampling["dropped"] = labels
        new = [label for label in labels if label not in self.session.noted]
        if new:
            self.session.noted.update(new)
            log.warning(
                "session %s: %s %s not sent to the chat-completions upstream (each step "
                "records them: sampling_params_json 'dropped'; logged once per session)",
                self.session.session_id,
                self.api.value,
                new,
            )

    def clamped(self, clamp: Clamp) -> None:
        """Record in the step that ``max_tokens`` was cut to what the context leaves."""
        for key in ("max_tokens", "max_completion_tokens", "max_output_tokens"):
            if key in self.cap.sampling:
                self.cap.sampling[key] = clamp.sent
        self.cap.sampling["max_tokens_clamped"] = clamp.note()

    def sent(self) -> None:
        self.t_up = time.perf_counter()

    def received(self, headers: Mapping[str, str] | None = None) -> None:
        """The upstream answered; a local model server names the version that generated
        the answer, which replaces the one stamped at dispatch (a reload may have come
        between the policy update the gateway saw and the server's)."""
        self.cap.latency_ms = (time.perf_counter() - self.t_up) * 1000
        served = (headers or {}).get(POLICY_HEADER)
        if served is not None and served.isdigit():
            self.cap.policy_version = int(served)

    def take(self, parsed: Parsed, response: Any) -> None:
        self.cap.response = response
        self.cap.take_sampled(parsed)

    async def record(self, wait: bool | None = None) -> None:
        """Publish the step (once); with ack capture this returns after Kafka's ack, with
        async capture (or ``wait`` False) the step is built and submitted
        ``publish_delay_ms`` after the answer is sent (``GatewayState.defer``).

        The step's ``overhead_ms`` is the time the gateway itself spent on the call: from
        the request's arrival at the gateway's app to here (the answer parsed, translated
        and captured, ready to publish), less the upstream's time (a stream's relay is in
        the upstream's). ``rllm_gateway_added_latency_seconds`` observes the same figure,
        once per call. Neither holds what comes after: the wait for Kafka's ack with ack
        capture (``rllm_gateway_produce_latency_seconds``) and writing the answer out; nor
        what comes before the app (the HTTP server reading the request), which a client's
        own measure also counts.

        A step whose event is over the event limit (``RLLM_MAX_MESSAGE_BYTES``) is published
        as a failed step (kind ``too_large``) without its payloads, so the agent still gets
        its answer and the session's published steps stay contiguous and counted.
        """
        if self.recorded:
            return
        self.recorded = True
        total = (time.perf_counter() - self.t0) * 1000
        self.cap.overhead_ms = max(total - self.cap.latency_ms, 0.0)
        m = self.state.metrics
        m.observe("rllm_gateway_upstream_latency_seconds", self.cap.latency_ms / 1000)
        m.observe("rllm_gateway_added_latency_seconds", self.cap.overhead_ms / 1000)
        if self.cap.error is not None:
            m.inc("rllm_gateway_errors_total", kind=self.cap.error.kind)
        if self.state.wait_for_ack if wait is None else wait:
            self.state.settle()  # the steps deferred before this one go first
            settled = self._submit_choices()
            await asyncio.gather(*(asyncio.wrap_future(f) for f in settled))
        else:  # after the answer is written, in order (``GatewayState.defer``)
            self.state.defer(self._submit_choices)

    def _submit_choices(self) -> list[Future[None]]:
        """Submit one step per choice, at consecutive step indices from the call's: the
        first choice as the call's step, each other one delta-encoded against it (its
        parent, by key), then the session continues from the first choice. Reserved
        indices the call did not use are given back, or filled with failed steps when a
        later call already took an index after them."""
        s = self.session
        more = self.cap.more[: self.asked - 1] if self.cap.error is None else []
        settled = [self._submit(self.cap, self.index)]
        first = s.delta
        for k, sample in enumerate(more, start=1):
            settled.append(self._submit(choice_capture(self.cap, sample), self.index + k))
            parent = dataclasses.replace(
                s.delta, last_step_id=first.last_step_id, last_full_ids=first.last_full_ids
            )
            s.advance(parent)
        used = 1 + len(more)
        if not s.give_back(self.index, self.asked, used):
            for k in range(used, self.asked):
                gap = missing_choice(self.cap, k, self.asked)
                settled.append(self._submit(gap, self.index + k))
        return settled

    def _submit(self, cap: Capture, index: int) -> Future[None]:
        """Build and submit one step event (no await between: the session's delta state
        and step count change only for an event that was taken)."""
        s, producer = self.session, self.state.settings.producer_name
        event, delta = step_event(s, cap, index, producer)
        try:
            settled = self.state.sink.submit(SESSION_EVENTS, s.session_id, event)
        except MessageTooLargeError as exc:
            self.state.metrics.inc("rllm_gateway_errors_total", kind="too_large")
            event, delta = step_event(s, too_large(cap, str(exc)), index, producer)
            settled = self.state.sink.submit(SESSION_EVENTS, s.session_id, event)
        s.advance(delta)
        return settled

    async def failed(self, failure: UpstreamFailure) -> Response:
        self.received()
        self.cap.error = failure.error
        try:
            self.cap.response = json.loads(failure.body)
        except ValueError:
            self.cap.response = {"raw": failure.body[:2000].decode("utf-8", "replace")}
        await self.record()
        translated = self.upstream.kind is not UpstreamKind.HOSTED
        if translated and self.api is ApiKind.ANTHROPIC_MESSAGES:  # an Anthropic client reads it
            body = anthropic_error(failure.status, failure.error.message)
            return JSONResponse(body, status_code=failure.status)
        return Response(failure.body, status_code=failure.status, media_type=failure.content_type)
