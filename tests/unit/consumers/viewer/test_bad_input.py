"""What the viewer says to bad input: an empty history, unknown runs and trajectories, a
history that cannot be read, a bug; loopback only, no foreign host, nothing from a CDN."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner
from starlette.testclient import TestClient

from rllm.cli.main import cli
from rllm.consumers.history import HistoryError, HistorySettings
from rllm.consumers.history.service import serve_queries
from rllm.consumers.history.types import HistoryStore
from rllm.consumers.viewer import HistorySource, ViewerSettings, create_app, fixed_source
from rllm.errors import ConfigError
from tests.paths import ROOT
from tests.unit.consumers.history.shared import fresh_chdb
from tests.unit.consumers.viewer.page import cells, rows, text

STATIC = ROOT / "rllm" / "consumers" / "viewer" / "static"


def _client(store: HistoryStore, **settings: object) -> TestClient:
    app = create_app(fixed_source(store), ViewerSettings(**settings))  # type: ignore[arg-type]  # settings fields of several types
    return TestClient(app, base_url="http://127.0.0.1:8500", raise_server_exceptions=False)


def test_an_empty_history_says_so_on_every_page() -> None:
    client = _client(fresh_chdb("empty"))
    runs = client.get("/")
    assert runs.status_code == 200
    assert "The history is empty" in text(runs.text) and not rows(runs.text, "run")
    compare = client.get("/compare")
    assert compare.status_code == 200 and "There is no run to compare yet." in text(compare.text)
    assert client.get("/runs/anything").status_code == 404


def test_unknown_runs_trajectories_and_pages_are_404s_that_say_what(
    client: TestClient,
) -> None:
    for url, said in (
        ("/runs/no-such-run", "no run 'no-such-run' in the history"),
        ("/live/runs/no-such-run", "no run 'no-such-run' in the history"),
        ("/trajectories/run-1/nope", "no trajectory (session) 'run-1/nope' in the history"),
        ("/nowhere", "no page at /nowhere"),
    ):
        resp = client.get(url)
        assert resp.status_code == 404, url
        assert said in text(resp.text), (url, text(resp.text))
        assert "Traceback" not in resp.text
    bad = client.get("/trajectories/run-1/gsm8k/1/36?x=1")
    assert bad.status_code == 400 and "takes no query parameters" in text(bad.text)
    assert client.get("/runs/run-1?k=x").status_code == 400


class _Broken:
    """A store whose reads fail as a stopped history service's would, or with a bug."""

    database = "rllm"

    def __init__(self, error: Exception) -> None:
        self.error = error

    def query(self, *_: object, **__: object) -> None:
        raise self.error

    query_user = query


def test_a_history_that_cannot_be_read_is_a_503_and_a_bug_a_500_without_a_trace() -> None:
    down = _client(_Broken(HistoryError("cannot open the chDB history at /x: locked")))  # type: ignore[arg-type]  # a store whose every call raises
    resp = down.get("/")
    assert resp.status_code == 503
    assert "The history cannot be read" in text(resp.text)
    assert "cannot open the chDB history at /x: locked" in text(resp.text)
    bug = _client(_Broken(ZeroDivisionError("secret detail")))  # type: ignore[arg-type]  # a store whose every call raises
    resp = bug.get("/runs/run-1")
    assert resp.status_code == 500
    assert "ZeroDivisionError while showing this page" in text(resp.text)
    assert "secret detail" not in resp.text and "Traceback" not in resp.text


def test_only_this_machine_s_host_names_and_a_strict_policy(client: TestClient) -> None:
    evil = client.get("/", headers={"Host": "attacker.example"})
    assert evil.status_code == 400  # a page of another site, rebound to 127.0.0.1
    page = client.get("/")
    csp = page.headers["Content-Security-Policy"]
    assert "default-src 'self'" in csp and "script-src 'self'" in csp and "unsafe" not in csp
    assert page.headers["X-Content-Type-Options"] == "nosniff"
    # every script and stylesheet comes from the package, none from a CDN
    refs = re.findall(r'(?:src|href)="([^"]+)"', page.text)
    assert [r for r in refs if r.startswith("/static/")] == [
        "/static/vendor/uPlot-1.6.32.min.css",
        "/static/viewer.css",
        "/static/vendor/htmx-2.0.11.min.js",
        "/static/vendor/uPlot-1.6.32.iife.min.js",
        "/static/viewer.js",
    ]
    assert not [r for r in refs if "//" in r]
    for ref in refs:
        if ref.startswith("/static/"):
            got = client.get(ref)
            assert got.status_code == 200, ref
            assert got.content == (STATIC / ref.removeprefix("/static/")).read_bytes()


def test_the_vendored_files_carry_their_licences() -> None:
    vendor = STATIC / "vendor"
    assert "Zero-Clause BSD" in (vendor / "htmx-2.0.11.LICENSE").read_text()
    assert "The MIT License" in (vendor / "uPlot-1.6.32.LICENSE").read_text()
    assert (vendor / "htmx-2.0.11.min.js").read_text().count("htmx") > 100
    assert "uPlot" in (vendor / "uPlot-1.6.32.iife.min.js").read_text()


def test_a_host_other_than_loopback_is_refused_unless_insecure() -> None:
    for host in ("127.0.0.1", "127.0.0.2", "::1", "localhost"):
        ViewerSettings(host=host).check_host()
    for host in ("0.0.0.0", "10.1.2.3", "example.org"):
        with pytest.raises(ConfigError, match=f"host '{re.escape(host)}' is not a loopback"):
            ViewerSettings(host=host).check_host()
        ViewerSettings(host=host, insecure=True).check_host()
    res = CliRunner().invoke(cli, ["view", "--host", "0.0.0.0", "--port", "1"])
    assert res.exit_code == 1
    assert "host '0.0.0.0' is not a loopback address" in res.output
    assert "--insecure" in res.output


@contextmanager
def _service(history: HistoryStore, tmp: Path) -> Iterator[HistorySource]:
    sock = tmp / "h.sock"
    server = serve_queries(sock, history)
    source = HistorySource(
        HistorySettings(
            history_dir=tmp / "unused", history_socket=sock, history_database=history.database
        )
    )
    try:
        yield source
    finally:
        source.close()
        server.stop()


def test_pages_through_the_history_service_equal_pages_over_the_store(
    client: TestClient, history: HistoryStore, tmp_path: Path
) -> None:
    """``rllm-cli view`` beside ``rllm-cli history`` reads through its socket, whose JSON
    carries times as text: the pages say the same."""
    with _service(history, tmp_path) as source:
        app = create_app(source, ViewerSettings(live_window_s=3600), where="the test history")
        served = TestClient(app, base_url="http://127.0.0.1:8500")
        for url in ("/", "/runs/run-1", "/runs/agent-run", "/trajectories/agent-run/calc/0"):
            direct, through = client.get(url), served.get(url)
            assert through.status_code == direct.status_code == 200, url
            mask = re.compile(r'data-refreshed="[^"]*"|\(last [^)]*\)')
            assert mask.sub("", through.text) == mask.sub("", direct.text), url
        assert [cells(r)["sessions"] for r in rows(served.get("/").text, "run").values()] == [
            "3",
            "100",
            "100",
            "100",
            "100",
        ]
