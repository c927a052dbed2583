"""A chat-completions stream as OpenAI Responses events, chunk by chunk: ``response.created``,
a message item's text deltas, a function call's argument deltas, ``response.completed``
with usage (or ``response.failed``)."""

from __future__ import annotations

import time
import uuid
from typing import Any

from rllm.producers.gateway.adapters.base import sse
from rllm.producers.gateway.adapters.responses import from_chat
from rllm.producers.gateway.adapters.stream import TranslatedStream
from rllm.producers.gateway.types import Parsed

__all__ = ["ResponsesStream"]


class ResponsesStream(TranslatedStream):
    """Responses events for one streamed call (choice 0; Responses has no ``n``)."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.body = body
        self.id = f"resp_{uuid.uuid4().hex}"
        self.created = int(time.time())
        self.seq = 0
        self.started = False
        self.items: list[dict[str, Any]] = []
        """Output items already done, in order."""
        self.open: dict[str, Any] | None = None
        """The item being streamed (a message or a function call)."""
        self.text: list[str] = []
        """The open message's text so far."""
        self.calls: dict[int, dict[str, Any]] = {}
        """Function call items by the chat tool call's index."""

    def _event(self, kind: str, **data: Any) -> bytes:
        event = sse({"type": kind, "sequence_number": self.seq, **data}, event=kind)
        self.seq += 1
        return event

    def _response(self, status: str) -> dict[str, Any]:
        """The response object so far (no usage yet)."""
        head = from_chat(self.body, Parsed(client=None))
        return {
            **head,
            "id": self.id,
            "created_at": self.created,
            "status": status,
            "output": list(self.items),
            "incomplete_details": None,
            "usage": None,
        }

    def _start(self) -> list[bytes]:
        if self.started:
            return []
        self.started = True
        response = self._response("in_progress")
        return [
            self._event("response.created", response=response),
            self._event("response.in_progress", response=response),
        ]

    def _text(self, text: str) -> list[bytes]:
        out: list[bytes] = []
        if self.open is None or self.open["type"] != "message":
            out += self._close()
            self.open = {
                "type": "message",
                "id": f"msg_{uuid.uuid4().hex}",
                "status": "in_progress",
                "role": "assistant",
                "content": [],
            }
            self.text = []
            out.append(
                self._event(
                    "response.output_item.added", output_index=len(self.items), item=self.open
                )
            )
            part = {"type": "output_text", "text": "", "annotations": []}
            out.append(
                self._event("response.content_part.added", **self._part(self.open), part=part)
            )
        self.text.append(text)
        ids = self._part(self.open)
        out.append(self._event("response.output_text.delta", **ids, delta=text, logprobs=[]))
        return out

    def _part(self, message: dict[str, Any]) -> dict[str, Any]:
        """Where the message's text (its one content part) stands: the fields that place
        its part and text events."""
        return {"item_id": message["id"], "output_index": len(self.items), "content_index": 0}

    def _call(self, call: dict[str, Any]) -> list[bytes]:
        out: list[bytes] = []
        index = int(call.get("index", 0))
        fn = call.get("function") or {}
        item = self.calls.get(index)
        if item is None:
            out += self._close()
            item = self.calls[index] = self.open = {
                "type": "function_call",
                "id": f"fc_{uuid.uuid4().hex}",
                "call_id": call.get("id") or f"call_{uuid.uuid4().hex}",
                "name": fn.get("name") or "",
                "arguments": "",
                "status": "in_progress",
            }
            out.append(
                self._event("response.output_item.added", output_index=len(self.items), item=item)
            )
        pieces = str(fn.get("arguments") or "")
        if pieces:
            item["arguments"] += pieces
            if item is self.open:
                out.append(
                    self._event(
                        "response.function_call_arguments.delta",
                        item_id=item["id"],
                        output_index=len(self.items),
                        delta=pieces,
                    )
                )
        return out

    def _close(self) -> list[bytes]:
        """Finish the open item: its done events, then it joins the output."""
        item, self.open = self.open, None
        if item is None:
            return []
        at = len(self.items)
        out: list[bytes] = []
        if item["type"] == "message":
            text = "".join(self.text)
            part = {"type": "output_text", "text": text, "annotations": []}
            item = {**item, "status": "completed", "content": [part]}
            ids = self._part(item)
            out.append(self._event("response.output_text.done", **ids, text=text, logprobs=[]))
            out.append(self._event("response.content_part.done", **ids, part=part))
        else:
            item = {**item, "status": "completed"}
            out.append(
                self._event(
                    "response.function_call_arguments.done",
                    item_id=item["id"],
                    output_index=at,
                    arguments=item["arguments"],
                )
            )
        out.append(self._event("response.output_item.done", output_index=at, item=item))
        self.items.append(item)
        return out

    def finish(self, parsed: Parsed) -> tuple[list[bytes], Any]:
        """Close the open item, then ``response.completed`` with the whole response."""
        out = self._start() + self._close()
        answer = {
            **from_chat(self.body, parsed),
            "id": self.id,
            "created_at": self.created,
            "output": list(self.items),
        }
        out.append(self._event("response.completed", response=answer))
        return out, answer

    def fail(self, status: int, kind: str, message: str) -> list[bytes]:
        """``response.failed``, its error naming what broke."""
        response = self._response("failed")
        response["error"] = {"code": "server_error", "message": f"{kind}: {message}"}
        return [*self._start(), self._event("response.failed", response=response)]
