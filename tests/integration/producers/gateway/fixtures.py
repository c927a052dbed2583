"""Fixtures (a pytest plugin that ``tests/conftest.py`` loads): the fake model upstream, and
a real gateway (uvicorn thread) on the real broker."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from rllm.producers.gateway import GatewaySettings, create_app
from rllm.schemas.codec import AvroCodec
from rllm.schemas.topics import SESSION_EVENTS
from rllm.schemas.types import SessionEvent, StepCaptured
from rllm.settings import KafkaSettings
from tests.fakes.loopback import LoopbackServer, MockHandler
from tests.fakes.upstream import FakeUpstream, RunningUpstream, ThreadedServer, start_fake_upstream
from tests.integration.helpers import read_all

Events = Callable[[], list[tuple[str, SessionEvent]]]
"""The ``session_events`` fixture: every ``(key, event)`` on the session topic so far."""


@pytest.fixture(scope="module")
def upstream() -> Iterator[RunningUpstream]:
    """The deterministic vLLM-style upstream."""
    server = start_fake_upstream()
    yield server
    server.stop()


DRIP_DELAY_S = 0.3
"""The dripping upstream's wait between two chunks (one token each)."""


@pytest.fixture(scope="module")
def dripping() -> Iterator[RunningUpstream]:
    """The fake upstream, one token a chunk, ``DRIP_DELAY_S`` apart."""
    server = start_fake_upstream(state=FakeUpstream(chunk_delay_s=DRIP_DELAY_S, tokens_per_chunk=1))
    yield server
    server.stop()


@pytest.fixture
def start_upstream() -> Iterator[Callable[[FakeUpstream], RunningUpstream]]:
    """Start fake upstreams on states of the test's own; each is stopped at the end."""
    started: list[RunningUpstream] = []

    def start(state: FakeUpstream) -> RunningUpstream:
        started.append(start_fake_upstream(state=state))
        return started[-1]

    yield start
    for server in started:
        server.stop()


def session_steps(events: Events, sid: str) -> list[StepCaptured]:
    """The steps session ``sid`` captured, in topic order."""
    return [
        e.payload
        for _, e in events()
        if e.session_id == sid and isinstance(e.payload, StepCaptured)
    ]


ADMIN_KEY = "test-admin-key"
"""The admin key of every gateway ``start_gateway`` starts (unless a test gives its own)."""
ADMIN = {"authorization": f"Bearer {ADMIN_KEY}"}
"""Headers that carry it."""


@pytest.fixture
def start_gateway(
    kafka: KafkaSettings,
    make_topics: Callable[..., list[str]],
    tmp_path: Path,
    upstream: RunningUpstream,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Callable[..., ThreadedServer]]:
    """Start gateways on this test's topics, secure by default (admin key ``ADMIN_KEY``,
    also set as ``RLLM_ADMIN_KEY`` so the SDK's clients find it as a user's would); every
    one is stopped at the end."""
    make_topics(partitions=3)
    started: list[ThreadedServer] = []
    loopbacks: list[LoopbackServer] = []

    def start(
        kafka_settings: KafkaSettings | None = None,
        handler: MockHandler | None = None,
        **overrides: Any,
    ) -> ThreadedServer:
        """``handler``, when given, answers as the upstream instead of the fake model server
        (on its own loopback socket, reached through the gateway's own upstream stack)."""
        url = upstream.url
        if handler is not None:
            loopbacks.append(LoopbackServer(handler))
            url = loopbacks[-1].url
        fields: dict[str, Any] = {
            "upstream_url": url,
            "spool_dir": tmp_path / "spool",
            "spool_fsync": False,
            "follow_policy_updates": False,
            # the fake upstream loads no weights: it is taken to serve what the log names
            **({} if "upstream_url" in overrides else {"policy_sync": "log"}),
            **overrides,
        }
        if not fields.get("insecure"):
            fields.setdefault("admin_key", ADMIN_KEY)
            monkeypatch.setenv("RLLM_ADMIN_KEY", fields["admin_key"])
        settings = GatewaySettings(**fields)
        app = create_app(settings, kafka_settings or kafka)
        server = ThreadedServer(app, lifespan="on")
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
    for loopback in loopbacks:
        loopback.stop()


TEMPLATE = (
    "{% for m in messages %}<|im_start|> {{ m['role'] }} {{ m['content'] }} <|im_end|> "
    "{% endfor %}{% if add_generation_prompt %}<|im_start|> assistant {% endif %}"
)
"""The chat template of ``tiny_tokenizer``."""


@pytest.fixture
def tiny_tokenizer(tmp_path: Path) -> Path:
    """A tiny word-level tokenizer with a chat template, saved in a folder (an sglang
    upstream's ``--tokenizer``)."""
    import transformers  # the train extra; CI installs it
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = "<unk> </s> <|im_start|> <|im_end|> user assistant system hello world ok done"
    vocab = {w: i for i, w in enumerate(words.split())}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="<unk>", eos_token="</s>"
    )
    fast.chat_template = TEMPLATE
    fast.save_pretrained(tmp_path / "tok")
    return tmp_path / "tok"


@pytest.fixture
def start_sglang_gateway(
    start_gateway: Callable[..., ThreadedServer], tiny_tokenizer: Path
) -> Callable[..., ThreadedServer]:
    """``start_gateway`` for an sglang upstream (``/generate``) that tokenizes with
    ``tiny_tokenizer``; the fake upstream unless ``upstream_url`` says otherwise."""

    def start(**overrides: Any) -> ThreadedServer:
        return start_gateway(upstream_kind="sglang", tokenizer=str(tiny_tokenizer), **overrides)

    return start


@pytest.fixture
def session_events(kafka: KafkaSettings) -> Events:
    """Read this test's session topic: ``(key, event)`` in partition then offset order."""
    codec = AvroCodec()

    def read() -> list[tuple[str, SessionEvent]]:
        msgs = read_all(kafka, kafka.topic(SESSION_EVENTS))
        return [((m.key() or b"").decode(), codec.decode(m.value())) for m in msgs]

    return read
