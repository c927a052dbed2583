"""``llm_judge`` against a tiny deterministic OpenAI-compatible server on loopback."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from rllm.benchmarks import get_reward_fn
from rllm.benchmarks.graders.judge import JudgeSettings, llm_judge
from rllm.errors import ConfigError
from rllm.schemas.types import Task


class _Judge(BaseHTTPRequestHandler):
    """CORRECT when the response line contains the reference; records every request."""

    requests: list[dict[str, Any]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _Judge.requests.append(
            {"path": self.path, "body": body, "auth": self.headers.get("Authorization")}
        )
        prompt = body["messages"][0]["content"]
        reference = prompt.split("Reference answer: ")[1].split("\n")[0].strip().lower()
        response = prompt.split("Response: ")[1].split("\n\nDoes")[0].lower()
        if "garble" in response:
            verdict = "I am not sure."
        else:
            verdict = "CORRECT" if reference in response else "INCORRECT"
        if "server error" in response:
            self.send_response(500)
            self.end_headers()
            return
        payload = json.dumps(
            {
                "id": "x",
                "object": "chat.completion",
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": verdict},
                    }
                ],
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def judge_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Judge)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Judge.requests.clear()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()
    thread.join()


def test_judge_verdicts_and_request(
    judge_url: str, make_task: Callable[..., Task], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RLLM_JUDGE_BASE_URL", judge_url)
    monkeypatch.setenv("RLLM_JUDGE_MODEL", "judge-1")
    monkeypatch.setenv("RLLM_JUDGE_API_KEY", "sk-test-judge-key")
    task = make_task("Michio Sugeno", "llm_judge")
    judge = get_reward_fn("llm_judge")
    yes = judge(task, "It was Michio Sugeno, in 2010.")
    no = judge(task, "It was Lotfi Zadeh.")
    assert (yes.reward, yes.is_correct, no.reward, no.is_correct) == (1.0, True, 0.0, False)
    assert len(_Judge.requests) == 2
    first = _Judge.requests[0]
    assert first["path"] == "/v1/chat/completions" and first["body"]["model"] == "judge-1"
    assert first["body"]["temperature"] == 0.0
    assert first["auth"] == "Bearer sk-test-judge-key"


def test_judge_without_verdict_or_with_server_error(
    judge_url: str, make_task: Callable[..., Task]
) -> None:
    settings = JudgeSettings(base_url=judge_url, model="j")
    task = make_task("x", "llm_judge")
    with pytest.raises(ValueError, match="no CORRECT/INCORRECT verdict"):
        llm_judge(task, "garble", settings=settings)
    with pytest.raises(httpx.HTTPStatusError):
        llm_judge(task, "server error", settings=settings)


def test_judge_unconfigured_says_what_to_set(
    make_task: Callable[..., Task], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RLLM_JUDGE_BASE_URL", raising=False)
    with pytest.raises(ConfigError, match="RLLM_JUDGE_BASE_URL"):
        get_reward_fn("llm_judge")(make_task("x", "llm_judge"), "x")


def test_harness_reward_refuses_with_a_reason(make_task: Callable[..., Task]) -> None:
    with pytest.raises(ValueError, match="scored by its harness"):
        get_reward_fn("harness")(make_task("x", "harness"), "x")
