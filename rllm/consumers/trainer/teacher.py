"""Teacher logprobs for on-policy distillation from a teacher served over HTTP.

vLLM (and ``rllm-cli serve``): ``POST /v1/completions`` with the token IDs as ``prompt``,
``max_tokens: 1`` and ``prompt_logprobs: 0``; ``choices[0].prompt_logprobs[t]`` is
``{"<token id>": {"logprob": ...}}`` (``null`` at position 0). SGLang: ``POST /generate``
with ``input_ids``, ``return_logprob`` and ``logprob_start_len: s``;
``meta_info.input_token_logprobs`` holds ``[logprob, token_id, text]`` for ``ids[s:]``, the
first with a ``null`` logprob. The teacher must share the student's tokenizer: every
answered position must name the token asked about, and a vLLM teacher's ``/tokenize`` of a
probe text must equal the student's. Errors: ``rllm.consumers.trainer.errors``; parsing:
``teacher_parse``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import httpx

from rllm.consumers.trainer.errors import (
    TeacherError,
    TeacherResponseError,
    TeacherTokenMismatchError,
    TeacherUnavailableError,
)
from rllm.consumers.trainer.settings import TeacherApi, TrainerSettings
from rllm.consumers.trainer.teacher_parse import excerpt, parse_sglang, parse_vllm
from rllm.consumers.trainer.types import TrainSequence
from rllm.errors import ConfigError

__all__ = [
    "PROBE_TEXT",
    "ScoreRequest",
    "TeacherClient",
    "TeacherError",
    "TeacherResponseError",
    "TeacherTokenMismatchError",
    "TeacherUnavailableError",
    "fill_teacher_logprobs",
    "parse_sglang",
    "parse_vllm",
    "score_start",
]

log = logging.getLogger(__name__)

PROBE_TEXT = "The teacher's tokenizer, 1234 + 5678 = 6912? Naïve café: ok.\n"
"""Text whose token IDs a vLLM teacher's ``/tokenize`` must answer like the student."""

_RETRY_STATUS = frozenset({429, 500, 502, 503, 504})


@dataclass(frozen=True)
class ScoreRequest:
    """One sequence to score: the teacher's logprob of every token from ``start`` on."""

    token_ids: list[int]
    """Prompt then response token IDs."""
    start: int
    """First position whose logprob is wanted (>= 1: nothing predicts position 0)."""


def score_start(seq: TrainSequence) -> int:
    """The first position that carries loss (at least 1)."""
    first = next((t for t, m in enumerate(seq.loss_mask_T) if m), len(seq.input_ids_T) - 1)
    return max(1, first)


class TeacherClient:
    """Asks a served teacher for the logprobs of given tokens, concurrently, with retries.

    Args:
        url: base URL (``http://host:port``; a trailing ``/v1`` is dropped).
        api: vllm (``/v1/completions`` + ``prompt_logprobs``) or sglang (``/generate``).
        api_key: bearer key (sent as ``Authorization``; never logged nor in errors).
        timeout_s: timeout of one request.
        concurrency: requests in flight at once.
        retries: retries after a connection error or a 5xx/429 answer.
        backoff_s: first retry delay; doubles each retry (at most 10 s).
        served_model: model name for a vLLM teacher (None: the first of ``/v1/models``).
        encode: the student's ``text -> token IDs`` (no special tokens); when given, a vLLM
            teacher's ``/tokenize`` of ``PROBE_TEXT`` is compared with it once.
        transport: an httpx transport (tests).
    """

    def __init__(
        self,
        url: str,
        api: TeacherApi = TeacherApi.VLLM,
        api_key: str | None = None,
        timeout_s: float = 60.0,
        concurrency: int = 8,
        retries: int = 3,
        backoff_s: float = 0.5,
        served_model: str | None = None,
        encode: Callable[[str], list[int]] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        url = url.rstrip("/")
        self.url = url[:-3] if url.endswith("/v1") else url
        self.api = api
        self._key = api_key
        self.timeout_s, self.concurrency = timeout_s, concurrency
        self.retries, self.backoff_s = retries, backoff_s
        self.served_model = served_model
        self._encode = encode
        self._transport = transport
        self._prepared = False
        self.requests = 0
        """HTTP requests sent (retries included)."""
        self.retried = 0
        """Retries made after connection errors or 5xx/429 answers."""

    @classmethod
    def from_settings(
        cls, settings: TrainerSettings, encode: Callable[[str], list[int]] | None = None
    ) -> TeacherClient:
        """The client for ``settings.teacher_url``."""
        if not settings.teacher_url:
            raise ConfigError("teacher_url is not set: a served teacher needs its base URL")
        key = settings.teacher_api_key
        return cls(
            settings.teacher_url,
            settings.teacher_api,
            key.get_secret_value() if key else None,
            settings.teacher_timeout_s,
            settings.teacher_concurrency,
            settings.teacher_retries,
            served_model=settings.teacher_served_model,
            encode=encode,
        )

    # --- public ----------------------------------------------------------------------
    def score(self, requests: Sequence[ScoreRequest]) -> list[list[float]]:
        """Logprobs of ``token_ids[start:]`` of each request, in order (blocking).

        Raises:
            TeacherError: naming the URL, the status and an excerpt of the answer.
        """
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.ascore(requests))
        with ThreadPoolExecutor(1) as pool:  # called from async code: own loop elsewhere
            return pool.submit(asyncio.run, self.ascore(requests)).result()

    async def ascore(self, requests: Sequence[ScoreRequest]) -> list[list[float]]:
        """``score`` for async callers."""
        for i, r in enumerate(requests):
            if not 1 <= r.start < len(r.token_ids):
                raise ValueError(
                    f"score request {i}: start {r.start} must be in [1, {len(r.token_ids)}) "
                    f"(nothing predicts position 0)"
                )
        if not requests:
            return []
        headers = {"Authorization": f"Bearer {self._key}"} if self._key else {}
        async with httpx.AsyncClient(
            headers=headers, timeout=self.timeout_s, transport=self._transport
        ) as http:
            if not self._prepared:
                await self._prepare(http)
            gate = asyncio.Semaphore(self.concurrency)

            async def one(r: ScoreRequest) -> list[float]:
                async with gate:
                    return await self._score_one(http, r)

            try:
                async with asyncio.TaskGroup() as group:
                    tasks = [group.create_task(one(r)) for r in requests]
            except ExceptionGroup as eg:
                raise eg.exceptions[0] from None
        return [t.result() for t in tasks]

    # --- protocol --------------------------------------------------------------------
    async def _score_one(self, http: httpx.AsyncClient, r: ScoreRequest) -> list[float]:
        if self.api is TeacherApi.SGLANG:
            url = f"{self.url}/generate"
            body: dict[str, Any] = {
                "input_ids": r.token_ids,
                "sampling_params": {"max_new_tokens": 1, "temperature": 0.0},
                "return_logprob": True,
                "logprob_start_len": r.start - 1,
            }
            return parse_sglang(
                r.token_ids, r.start, await self._json(http, "POST", url, body), url
            )
        url = f"{self.url}/v1/completions"
        body = {"prompt": r.token_ids, "max_tokens": 1, "temperature": 0.0, "prompt_logprobs": 0}
        if self.served_model:
            body["model"] = self.served_model
        return parse_vllm(r.token_ids, r.start, await self._json(http, "POST", url, body), url)

    async def _prepare(self, http: httpx.AsyncClient) -> None:
        """Once: the vLLM model name, and the tokenizer probe."""
        if self.api is TeacherApi.VLLM:
            if self.served_model is None:
                data = await self._json(http, "GET", f"{self.url}/v1/models", None, optional=True)
                models = data.get("data") if isinstance(data, dict) else None
                if isinstance(models, list) and models and isinstance(models[0], dict):
                    self.served_model = str(models[0].get("id") or "") or None
            if self._encode is not None:
                await self._probe(http, self._encode)
        self._prepared = True

    async def _probe(self, http: httpx.AsyncClient, encode: Callable[[str], list[int]]) -> None:
        url = f"{self.url}/tokenize"
        body: dict[str, Any] = {"prompt": PROBE_TEXT, "add_special_tokens": False}
        if self.served_model:
            body["model"] = self.served_model
        data = await self._json(http, "POST", url, body, optional=True)
        theirs = data.get("tokens") if isinstance(data, dict) else None
        if not isinstance(theirs, list):
            log.warning("teacher %s has no vLLM /tokenize: tokens are checked one by one", url)
            return
        ours = list(encode(PROBE_TEXT))
        if theirs != ours:
            raise TeacherTokenMismatchError(
                f"teacher {url} tokenizes {PROBE_TEXT!r} as {str(theirs)[:120]} but the student "
                f"as {str(ours)[:120]}; distillation needs the student's tokenizer"
            )

    # --- HTTP ------------------------------------------------------------------------
    async def _json(
        self,
        http: httpx.AsyncClient,
        method: str,
        url: str,
        body: dict[str, Any] | None,
        optional: bool = False,
    ) -> Any:
        """The JSON answer, retrying connection errors and 5xx/429 with backoff.

        ``optional``: a 404/405 answer gives None (an endpoint the server lacks).
        """
        attempts, problem = self.retries + 1, ""
        for attempt in range(attempts):
            if attempt:
                self.retried += 1
                await asyncio.sleep(min(10.0, self.backoff_s * 2 ** (attempt - 1)))
            self.requests += 1
            try:
                resp = await http.request(method, url, json=body)
            except httpx.TransportError as exc:
                problem = f"unreachable ({type(exc).__name__}: {self._redact(str(exc))})"
                log.warning("teacher %s %s; attempt %d/%d", url, problem, attempt + 1, attempts)
                continue
            if resp.status_code in _RETRY_STATUS:
                problem = f"answered {resp.status_code}: {self._redact(excerpt(resp.text))}"
                log.warning("teacher %s %s; attempt %d/%d", url, problem, attempt + 1, attempts)
                continue
            if optional and resp.status_code in (404, 405):
                return None
            if resp.status_code >= 400:
                raise TeacherResponseError(
                    f"teacher {url} answered {resp.status_code}: {self._redact(excerpt(resp.text))}"
                )
            try:
                return resp.json()
            except ValueError:
                raise TeacherResponseError(
                    f"teacher {url} answered {resp.status_code} with non-JSON: "
                    f"{self._redact(excerpt(resp.text))}"
                ) from None
        raise TeacherUnavailableError(f"teacher {url} {problem} after {attempts} attempt(s)")

    def _redact(self, text: str) -> str:
        return text.replace(self._key, "***") if self._key else text


def fill_teacher_logprobs(client: TeacherClient, seqs: list[TrainSequence]) -> None:
    """Set ``teacher_logprobs_T`` of every sequence (0.0 before its first loss token)."""
    starts = [score_start(s) for s in seqs]
    scored = client.score(
        [ScoreRequest(s.input_ids_T, st) for s, st in zip(seqs, starts, strict=True)]
    )
    for s, st, lps in zip(seqs, starts, scored, strict=True):
        s.teacher_logprobs_T = [0.0] * st + lps
