"""Distillation from a served teacher: the local model server's vLLM-shaped
``prompt_logprobs``, the teacher client over real HTTP (vLLM and SGLang forms), its errors,
retries and key handling, the settings, and the local backend's use of it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import torch
from click.testing import CliRunner
from starlette.responses import JSONResponse

from rllm.cli.main import cli
from rllm.consumers.backends.local.backend import LocalBackend
from rllm.consumers.backends.local.tensors import to_tensors
from rllm.consumers.trainer.batching import episode_sequences
from rllm.consumers.trainer.losses import LossInputs, compute_loss
from rllm.consumers.trainer.settings import TeacherApi, TrainerSettings
from rllm.consumers.trainer.teacher import (
    ScoreRequest,
    TeacherClient,
    TeacherResponseError,
    TeacherTokenMismatchError,
    TeacherUnavailableError,
    fill_teacher_logprobs,
    score_start,
)
from rllm.consumers.trainer.types import LossAgg, LossKind, TrainBatch, TrainSequence
from rllm.models.loading import load_model
from rllm.models.tiny import tiny_model_dir
from rllm.serving.app import create_app
from rllm.serving.engine import Engine
from tests.fakes.server import ThreadedServer, free_port
from tests.fakes_training.sglang import FakeSGLang
from tests.unit.consumers.trainer.factory import episode

KEY = "sk-teacher-secret-123"


class Gate:
    """ASGI wrapper: records each request's path and Authorization header, and answers
    ``status`` to the first ``fail`` requests on ``path`` (or echoes the header with 401
    when ``echo_key``)."""

    def __init__(self, app: Any, path: str = "/v1/completions") -> None:
        self.app, self.path = app, path
        self.fail, self.status, self.failed = 0, 503, 0
        self.echo_key = False
        self.seen: list[tuple[str, str | None]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            auth = dict(scope["headers"]).get(b"authorization")
            self.seen.append((scope["path"], auth.decode() if auth else None))
            if self.echo_key:
                echo = {"error": f"bad key {auth.decode() if auth else ''}"}
                await JSONResponse(echo, status_code=401)(scope, receive, send)
                return
            if scope["path"] == self.path and self.failed < self.fail:
                self.failed += 1
                body = {"error": {"message": "engine overloaded"}}
                await JSONResponse(body, status_code=self.status)(scope, receive, send)
                return
        await self.app(scope, receive, send)


@pytest.fixture(scope="module")
def teacher_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_model_dir(tmp_path_factory.mktemp("teacher"), seed=7)


@pytest.fixture(scope="module")
def engine(teacher_dir: Path) -> Engine:
    return Engine(load_model(str(teacher_dir)))


@pytest.fixture(scope="module")
def served(engine: Engine) -> Iterator[tuple[str, Gate]]:
    gate = Gate(create_app(engine, "teacher", batch_wait_ms=5))
    server = ThreadedServer(gate, lifespan="on")
    yield server.url, gate
    server.stop()


@pytest.fixture
def gate(served: tuple[str, Gate]) -> Gate:
    g = served[1]
    g.fail, g.status, g.failed, g.echo_key = 0, 503, 0, False
    g.seen.clear()
    return g


def forward(engine: Engine, ids: list[int]) -> list[float]:
    """Direct forward pass: logprob of ids[t] given ids[:t], for t >= 1."""
    with torch.no_grad():
        logits = engine.model(torch.tensor([ids])).logits[0].float()
    logp = torch.log_softmax(logits, -1)
    return [float(logp[t - 1, ids[t]]) for t in range(1, len(ids))]


def encode(engine: Engine, text: str) -> list[int]:
    return list(engine.tokenizer.encode(text, add_special_tokens=False))


SEQS = [[5, 9, 14, 30, 22, 41, 7], [12, 3, 50], [40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51]]


# --- the local model server as a teacher ------------------------------------------------
def test_server_prompt_logprobs_match_forward_pass(
    served: tuple[str, Gate], engine: Engine
) -> None:
    url, _ = served
    r = httpx.post(
        f"{url}/v1/completions",
        json={"prompt": SEQS, "max_tokens": 1, "prompt_logprobs": 2, "temperature": 0},
    )
    assert r.status_code == 200, r.text
    choices = r.json()["choices"]
    assert len(choices) == len(SEQS)
    for ids, choice in zip(SEQS, choices, strict=True):
        rows = choice["prompt_logprobs"]
        assert len(rows) == len(ids) and rows[0] is None
        expected = forward(engine, ids)
        with torch.no_grad():
            logp_TV = torch.log_softmax(engine.model(torch.tensor([ids])).logits[0].float(), -1)
        for t in range(1, len(ids)):
            row = rows[t]
            own = row[str(ids[t])]
            assert own["logprob"] == pytest.approx(expected[t - 1], abs=1e-4)
            assert own["rank"] == int((logp_TV[t - 1] > logp_TV[t - 1, ids[t]]).sum()) + 1
            assert own["decoded_token"] == engine.tokenizer.decode([ids[t]])
            ranks = sorted(v["rank"] for v in row.values())
            assert ranks[:2] == [1, 2] and len(row) in (2, 3)
            best = max(row.values(), key=lambda v: v["logprob"])
            assert best["rank"] == 1
            if own["rank"] > 2:
                assert len(row) == 3
    assert r.json()["usage"]["prompt_tokens"] == sum(len(s) for s in SEQS)


@pytest.mark.parametrize("max_tokens", [1, 2])
def test_server_samples_alongside_scoring(
    served: tuple[str, Gate], engine: Engine, max_tokens: int
) -> None:
    """One token comes from the scoring pass itself; more go through the batcher: both
    agree with the model (greedy) and report the sampled token's logprob."""
    url, gate = served
    batches = gate.app.state.batcher.batches
    batches.clear()
    body = {"prompt": SEQS, "max_tokens": max_tokens, "prompt_logprobs": 0, "temperature": 0}
    r = httpx.post(f"{url}/v1/completions", json={**body, "logprobs": 0, "return_token_ids": True})
    assert (len(batches) > 0) == (max_tokens > 1)
    for ids, choice in zip(SEQS, r.json()["choices"], strict=True):
        with torch.no_grad():
            last_V = torch.log_softmax(engine.model(torch.tensor([ids])).logits[0, -1], -1)
        best = int(torch.argmax(last_V))
        assert choice["token_ids"][0] == best and len(choice["token_ids"]) <= max_tokens
        assert choice["logprobs"]["token_logprobs"][0] == pytest.approx(
            float(last_V[best]), abs=1e-4
        )
        assert choice["prompt_token_ids"] == ids and len(choice["prompt_logprobs"]) == len(ids)


def test_server_refuses_bad_prompt_logprobs_and_unknown_tokens(
    served: tuple[str, Gate], engine: Engine
) -> None:
    url, _ = served
    r = httpx.post(f"{url}/v1/completions", json={"prompt": [5, 6], "prompt_logprobs": 99})
    assert r.status_code == 400 and "prompt_logprobs=99" in r.text
    vocab = engine.vocab_size
    r = httpx.post(f"{url}/v1/completions", json={"prompt": [5, vocab + 3], "max_tokens": 1})
    assert r.status_code == 400
    assert f"token {vocab + 3} at position 1" in r.json()["error"]["message"]


def test_server_tokenize_and_chat_prompt_logprobs(served: tuple[str, Gate], engine: Engine) -> None:
    url, _ = served
    r = httpx.post(f"{url}/tokenize", json={"prompt": "ab 7", "add_special_tokens": False})
    assert r.json()["tokens"] == encode(engine, "ab 7") and r.json()["count"] == 4
    r = httpx.post(
        f"{url}/v1/chat/completions",
        json={
            "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": 1,
            "prompt_logprobs": 0,
            "return_token_ids": True,
        },
    )
    body = r.json()
    prompt = body["prompt_token_ids"]
    rows = body["prompt_logprobs"]
    assert rows[0] is None and len(rows) == len(prompt)
    got = [rows[t][str(prompt[t])]["logprob"] for t in range(1, len(prompt))]
    assert got == pytest.approx(forward(engine, prompt), abs=1e-4)


# --- the client -------------------------------------------------------------------------
def test_client_scores_like_a_forward_pass_and_checks_the_tokenizer(
    served: tuple[str, Gate], gate: Gate, engine: Engine
) -> None:
    url, _ = served
    client = TeacherClient(f"{url}/v1/", concurrency=2, encode=lambda s: encode(engine, s))
    reqs = [ScoreRequest(ids, start) for ids, start in zip(SEQS, (3, 1, 6), strict=True)]
    got = client.score(reqs)
    for r, lps in zip(reqs, got, strict=True):
        assert len(lps) == len(r.token_ids) - r.start
        assert lps == pytest.approx(forward(engine, r.token_ids)[r.start - 1 :], abs=1e-4)
    paths = [p for p, _ in gate.seen]
    assert paths[:2] == ["/v1/models", "/tokenize"]
    assert paths.count("/v1/completions") == 3 and client.requests == 5 and client.retried == 0
    assert client.served_model == "teacher"
    client.score(reqs[:1])  # the model name and the tokenizer are checked once
    assert [p for p, _ in gate.seen].count("/tokenize") == 1


def test_distill_advantages_from_served_teacher_match_hand_computation(
    served: tuple[str, Gate], engine: Engine, tiny_model: Path
) -> None:
    url, _ = served
    seqs = episode_sequences(episode("ep", prompt=[5, 6, 7, 8]), LossKind.DISTILL)
    fill_teacher_logprobs(TeacherClient(url), seqs)
    student = load_model(str(tiny_model)).model
    num, den, adv_sum = 0.0, 0, 0.0
    for s in seqs:
        start = score_start(s)
        assert start == 4 and s.teacher_logprobs_T is not None
        assert s.teacher_logprobs_T[:start] == [0.0] * start
        teacher = forward(engine, s.input_ids_T)
        assert s.teacher_logprobs_T[start:] == pytest.approx(teacher[start - 1 :], abs=1e-4)
        with torch.no_grad():
            logp = torch.log_softmax(student(torch.tensor([s.input_ids_T])).logits[0], -1)
        for t in range(start, len(s.input_ids_T)):
            adv = teacher[t - 1] - s.logprobs_T[t]  # teacher minus rollout (student) logprob
            num += -adv * float(logp[t - 1, s.input_ids_T[t]])
            adv_sum += adv
            den += 1
    x = to_tensors(seqs, 0)
    logits = student(input_ids=x.input_ids_BT, attention_mask=x.attention_BT).logits
    lp = torch.log_softmax(logits, -1).gather(-1, x.targets_BT.unsqueeze(-1)).squeeze(-1)
    out = compute_loss(
        LossKind.DISTILL,
        LossInputs(lp, x.old_logprobs_BT, x.advantages_BT, x.mask_BT, None, x.teacher_logprobs_BT),
        LossAgg.TOKEN_MEAN,
    )
    assert out.metrics["loss"] == pytest.approx(num / den, abs=1e-4)
    assert out.metrics["reverse_kl"] == pytest.approx(-adv_sum / den, abs=1e-4)


def test_local_backend_distills_from_teacher_url(
    served: tuple[str, Gate], gate: Gate, engine: Engine, tiny_model: Path
) -> None:
    url, _ = served
    settings = TrainerSettings(
        model=str(tiny_model), loss=LossKind.DISTILL, teacher_url=url, teacher_api_key=KEY, lr=1e-3
    )
    backend = LocalBackend(settings)
    assert backend.teacher is None and backend.teacher_client is not None
    seqs = episode_sequences(episode("ep2"), LossKind.DISTILL)
    hand = [
        forward(engine, s.input_ids_T)[t - 1] - s.logprobs_T[t]
        for s in seqs
        for t in range(score_start(s), len(s.input_ids_T))
    ]
    result = backend.update(TrainBatch(seqs, ["ep2"]))
    assert result.version == 1 and result.metrics["teacher_s"] > 0
    assert result.metrics["reverse_kl"] == pytest.approx(-sum(hand) / len(hand), abs=1e-4)
    assert {a for p, a in gate.seen if p == "/v1/completions"} == {f"Bearer {KEY}"}


def test_retries_5xx_with_backoff_then_succeeds(served: tuple[str, Gate], gate: Gate) -> None:
    url, _ = served
    gate.fail = 2
    client = TeacherClient(url, retries=3, backoff_s=0.01, served_model="teacher")
    assert len(client.score([ScoreRequest(SEQS[0], 2)])[0]) == len(SEQS[0]) - 2
    assert gate.failed == 2 and client.retried == 2 and client.requests == 3


def test_5xx_after_retries_names_url_status_and_body(served: tuple[str, Gate], gate: Gate) -> None:
    url, _ = served
    gate.fail, gate.status = 100, 500
    client = TeacherClient(url, retries=2, backoff_s=0.01, served_model="teacher", api_key=KEY)
    with pytest.raises(TeacherUnavailableError) as err:
        client.score([ScoreRequest(SEQS[0], 2)])
    msg = str(err.value)
    assert f"{url}/v1/completions" in msg and "500" in msg and "engine overloaded" in msg
    assert "3 attempt(s)" in msg and gate.failed == 3 and KEY not in msg


def test_4xx_is_not_retried_and_names_the_reason(
    served: tuple[str, Gate], gate: Gate, engine: Engine
) -> None:
    url, _ = served
    client = TeacherClient(url, retries=3, backoff_s=0.01, served_model="teacher")
    with pytest.raises(TeacherResponseError, match=r"answered 400: .*not in the model's vocab"):
        client.score([ScoreRequest([5, engine.vocab_size + 1, 6], 1)])
    assert client.requests == 1 and client.retried == 0


def test_key_is_sent_but_never_in_errors(served: tuple[str, Gate], gate: Gate) -> None:
    url, _ = served
    gate.echo_key = True  # the worst case: a server that echoes the header it got
    client = TeacherClient(url, api_key=KEY, served_model="teacher")
    with pytest.raises(TeacherResponseError) as err:
        client.score([ScoreRequest(SEQS[1], 1)])
    assert gate.seen[-1][1] == f"Bearer {KEY}"
    assert KEY not in str(err.value) and "Bearer ***" in str(err.value)


def test_unreachable_teacher_is_retried_then_named() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    client = TeacherClient(url, retries=1, backoff_s=0.01, served_model="m")
    with pytest.raises(TeacherUnavailableError, match=r"unreachable .*after 2 attempt"):
        client.score([ScoreRequest([1, 2, 3], 1)])
    assert client.requests == 2


def _mock(answer: Any, tokens: list[int] | None = None) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/tokenize":
            if tokens is None:
                return httpx.Response(404, json={"detail": "Not Found"})
            return httpx.Response(200, json={"tokens": tokens, "count": 0, "max_model_len": 9})
        body = json.loads(request.content)
        return httpx.Response(200, json=answer(body))

    return httpx.MockTransport(handle)


def _rows(ids: list[int]) -> list[Any]:
    return [None] + [{str(t): {"logprob": -1.0, "rank": 1}} for t in ids[1:]]


def test_token_mismatch_wrong_length_and_tokenizer_probe_are_refused() -> None:
    ids = [3, 4, 5, 6, 7]

    def swapped(body: dict[str, Any]) -> Any:
        rows = _rows(body["prompt"])
        rows[3] = {"99": {"logprob": -0.5}}
        return {"choices": [{"prompt_logprobs": rows}]}

    client = TeacherClient("http://t", served_model="m", transport=_mock(swapped))
    with pytest.raises(TeacherTokenMismatchError, match=r"position 3 should score token 6"):
        client.score([ScoreRequest(ids, 1)])
    short = _mock(lambda b: {"choices": [{"prompt_logprobs": _rows(b["prompt"])[:-1]}]})
    client = TeacherClient("http://t", served_model="m", transport=short)
    with pytest.raises(TeacherResponseError, match=r"4 prompt logprobs for 5 tokens"):
        client.score([ScoreRequest(ids, 1)])
    none = _mock(lambda b: {"choices": [{"text": "x", "prompt_logprobs": None}]})
    with pytest.raises(TeacherResponseError, match=r"without choices\[0\]\.prompt_logprobs"):
        TeacherClient("http://t", served_model="m", transport=none).score([ScoreRequest(ids, 1)])
    probe = _mock(lambda b: {"choices": [{"prompt_logprobs": _rows(b["prompt"])}]}, [1, 2])
    client = TeacherClient("http://t", served_model="m", encode=lambda s: [1, 3], transport=probe)
    with pytest.raises(TeacherTokenMismatchError, match=r"as \[1, 2\] but the student as \[1, 3\]"):
        client.score([ScoreRequest(ids, 1)])


def test_teacher_without_tokenize_is_checked_token_by_token() -> None:
    ok = _mock(lambda b: {"choices": [{"prompt_logprobs": _rows(b["prompt"])}]})
    client = TeacherClient("http://t", served_model="m", encode=lambda s: [1], transport=ok)
    assert client.score([ScoreRequest([3, 4, 5], 2)]) == [[-1.0]]
    assert client.requests == 2  # /tokenize (404) and one completion


# --- SGLang ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def sglang(engine: Engine) -> Iterator[tuple[str, FakeSGLang]]:
    fake = FakeSGLang(engine)
    server = ThreadedServer(fake.app)
    yield server.url, fake
    server.stop()


def test_sglang_generate_form(sglang: tuple[str, FakeSGLang], engine: Engine) -> None:
    url, fake = sglang
    fake.wrong_token_at, fake.drop_last = None, False
    client = TeacherClient(url, api=TeacherApi.SGLANG, api_key=KEY)
    reqs = [ScoreRequest(SEQS[0], 3), ScoreRequest(SEQS[2], 1)]
    got = client.score(reqs)
    for r, lps in zip(reqs, got, strict=True):
        assert lps == pytest.approx(forward(engine, r.token_ids)[r.start - 1 :], abs=1e-4)
    sent = sorted(fake.requests[-2:], key=lambda b: len(b["input_ids"]))
    assert [b["logprob_start_len"] for b in sent] == [2, 0]
    assert all(b["return_logprob"] is True for b in sent)
    assert sent[0]["sampling_params"]["max_new_tokens"] == 1
    fake.wrong_token_at = 4
    with pytest.raises(TeacherTokenMismatchError, match=r"position 4 should score token 22"):
        client.score([ScoreRequest(SEQS[0], 3)])
    fake.wrong_token_at, fake.drop_last = None, True
    with pytest.raises(TeacherResponseError, match=r"answered 4 input logprobs; 5 expected"):
        client.score([ScoreRequest(SEQS[0], 3)])


# --- settings and CLI ---------------------------------------------------------------------
def test_settings_need_exactly_one_teacher_for_distill() -> None:
    for extra in ({}, {"teacher_model": "/m", "teacher_url": "http://t:1"}):
        with pytest.raises(ValueError, match=r"exactly one of teacher_model .* or teacher_url"):
            TrainerSettings(loss=LossKind.DISTILL, **extra)  # type: ignore[arg-type]  # settings fields given by name
    with pytest.raises(ValueError, match=r"teacher_url is set but loss=grpo"):
        TrainerSettings(teacher_url="http://t:1")
    with pytest.raises(ValueError, match=r"teacher URL 'ftp://t' must start with http"):
        TrainerSettings(loss=LossKind.DISTILL, teacher_url="ftp://t")
    s = TrainerSettings(loss=LossKind.DISTILL, teacher_url="http://t:1/v1/", teacher_api="sglang")
    assert s.teacher_url == "http://t:1" and s.teacher_api is TeacherApi.SGLANG


def test_cli_teacher_options() -> None:
    runner = CliRunner()
    help_text = runner.invoke(cli, ["train", "--help"]).output
    assert "--teacher-url" in help_text and "--teacher-api" in help_text
    result = runner.invoke(
        cli,
        [
            "train",
            "consume",
            "--loss",
            "distill",
            "--teacher-url",
            "http://t:1",
            "--teacher-model",
            "/m",
            "-b",
            "127.0.0.1:1",
        ],
    )
    assert result.exit_code == 2
    assert "teacher_model and teacher_url" in " ".join(result.output.split())


def test_score_start_is_the_first_loss_token() -> None:
    seq = TrainSequence("e", "s", ("a",), [1, 2, 3, 4, 5], [0, 0, 0, 1, 1], [0.0] * 5)
    assert score_start(seq) == 3
    seq.loss_mask_T = [1, 1, 0, 0, 0]
    assert score_start(seq) == 1
