"""A chat-completions stream as Anthropic Messages events, chunk by chunk: ``message_start``,
text and ``tool_use`` content blocks (``text_delta``, ``input_json_delta``),
``message_delta`` with the stop reason and usage, ``message_stop`` (or an ``error`` event)."""

from __future__ import annotations

import json
import uuid
from typing import Any

from rllm.producers.gateway.adapters.anthropic import from_chat
from rllm.producers.gateway.adapters.base import sse
from rllm.producers.gateway.adapters.chat import ChatStream
from rllm.producers.gateway.adapters.stream import TranslatedStream
from rllm.producers.gateway.errors import anthropic_error
from rllm.producers.gateway.types import Parsed

__all__ = ["AnthropicStream"]


def _input(arguments: str) -> Any:
    """A tool call's JSON arguments as a tool_use input (as the whole answer has it)."""
    try:
        return json.loads(arguments or "{}")
    except ValueError:
        return {"_raw": arguments}


class AnthropicStream(TranslatedStream):
    """Anthropic events for one streamed call (choice 0).

    Args:
        body: the client's Messages request.
        capture: the call's accumulator; ``message_start`` reads the prompt's length from it.
    """

    def __init__(self, body: dict[str, Any], capture: ChatStream) -> None:
        self.body = body
        self.capture = capture
        self.id = f"msg_{uuid.uuid4().hex}"
        self.started = False
        self.blocks: list[dict[str, Any]] = []
        """Content blocks already stopped, in order."""
        self.open: dict[str, Any] | None = None
        """The block being streamed (text, or tool_use with its JSON so far)."""
        self.calls: dict[int, dict[str, Any]] = {}
        """tool_use blocks by the chat tool call's index."""

    def _start(self) -> list[bytes]:
        if self.started:
            return []
        self.started = True
        message: dict[str, Any] = {
            "id": self.id,
            "type": "message",
            "role": "assistant",
            "model": self.body.get("model"),
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": len(self.capture.prompt_ids or ()), "output_tokens": 0},
        }
        return [sse({"type": "message_start", "message": message}, event="message_start")]

    def _open(self, block: dict[str, Any]) -> bytes:
        self.open = block
        start = {**block, "input": {}} if block["type"] == "tool_use" else block
        start = {k: v for k, v in start.items() if k != "json"}
        return sse(
            {"type": "content_block_start", "index": len(self.blocks), "content_block": start},
            event="content_block_start",
        )

    def _delta(self, delta: dict[str, Any]) -> bytes:
        return sse(
            {"type": "content_block_delta", "index": len(self.blocks), "delta": delta},
            event="content_block_delta",
        )

    def _text(self, text: str) -> list[bytes]:
        out: list[bytes] = []
        if self.open is None or self.open["type"] != "text":
            out += self._close()
            out.append(self._open({"type": "text", "text": ""}))
        assert self.open is not None
        self.open["text"] += text
        out.append(self._delta({"type": "text_delta", "text": text}))
        return out

    def _call(self, call: dict[str, Any]) -> list[bytes]:
        out: list[bytes] = []
        index = int(call.get("index", 0))
        fn = call.get("function") or {}
        block = self.calls.get(index)
        if block is None:
            out += self._close()
            block = self.calls[index] = {
                "type": "tool_use",
                "id": call.get("id") or f"toolu_{uuid.uuid4().hex}",
                "name": fn.get("name") or "",
                "json": "",
            }
            out.append(self._open(block))
        pieces = str(fn.get("arguments") or "")
        if pieces:
            block["json"] += pieces
            if block is self.open:
                out.append(self._delta({"type": "input_json_delta", "partial_json": pieces}))
            else:  # a piece of a block already stopped: its input still takes it
                block["input"] = _input(block["json"])
        return out

    def _close(self) -> list[bytes]:
        block, self.open = self.open, None
        if block is None:
            return []
        if block["type"] == "tool_use":
            block["input"] = _input(block["json"])
        stop = sse({"type": "content_block_stop", "index": len(self.blocks)}, "content_block_stop")
        self.blocks.append(block)
        return [stop]

    def finish(self, parsed: Parsed) -> tuple[list[bytes], Any]:
        """Stop the open block, then the stop reason and usage, then ``message_stop``."""
        out = self._start() + self._close()
        content = [{k: v for k, v in b.items() if k != "json"} for b in self.blocks]
        answer = {**from_chat(self.body, parsed), "id": self.id, "content": content}
        out.append(
            sse(
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": answer["stop_reason"], "stop_sequence": None},
                    "usage": answer["usage"],
                },
                event="message_delta",
            )
        )
        out.append(sse({"type": "message_stop"}, event="message_stop"))
        return out, answer

    def fail(self, status: int, kind: str, message: str) -> list[bytes]:
        """An Anthropic ``error`` event (the ``anthropic`` client raises its status error)."""
        body = anthropic_error(status, f"{kind}: {message}")
        return [*self._start(), sse(body, event="error")]
