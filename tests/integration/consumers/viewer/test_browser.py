"""``rllm-cli view`` in Debian's Chromium over the history of a real training run: rollouts
through a real gateway in front of the local model server (a tiny random model), episodes
from a real processors worker, updates by the local backend, every event sunk into chDB by
the history sink, whose query socket the viewer reads as it reads ``rllm-cli history``'s.

The run page is opened while the run trains and refreshes itself until the run is done;
every page's numbers equal the analytics queries'; a trajectory shows the tokens its steps
sampled; a screenshot of each page is written under the test's tmp dir (``screenshots/``).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

import rllm
from rllm.app import TrainReport
from rllm.consumers.history import HistorySettings, HistorySink, run_named
from rllm.consumers.history.service import serve_queries
from rllm.consumers.history.types import HistoryStore
from rllm.consumers.viewer.app import _fmt
from rllm.producers.sdk import RolloutConfig
from rllm.schemas.types import Task
from rllm.settings import KafkaSettings
from tests.fakes.server import free_port
from tests.integration.app.agents import by_index, post, short_run_config
from tests.integration.app.fixtures import LoopStack
from tests.integration.consumers.viewer.browser import chromium, wait_for
from tests.integration.consumers.viewer.process import view_process
from tests.unit.consumers.history.shared import fresh_chdb
from tests.unit.consumers.viewer.page import reward_rows

RUN = "view-run"
ADMIN = "view-admin-key"


@rllm.rollout(name="chatter")
async def chatter(task: Task, config: RolloutConfig) -> str:
    messages = [
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": task.instruction},
    ]
    answer = await post(config, "/chat/completions", {"messages": messages})
    return str(answer["choices"][0]["message"]["content"])


@contextmanager
def _history(kafka: KafkaSettings, tmp: Path) -> Iterator[tuple[HistoryStore, Path]]:
    """The history service as ``rllm-cli history`` runs it: the sink into chDB and the
    query API on a socket."""
    store = fresh_chdb("browser")
    sock = tmp / "history.sock"
    server = serve_queries(sock, store)
    settings = HistorySettings(
        history_group_id=f"{kafka.topic_prefix}history",
        history_batch_s=0.3,
        history_dir=tmp / "unused",
    )
    stop = threading.Event()
    sink = threading.Thread(
        target=HistorySink(kafka, settings, store).run, kwargs={"stop": stop}, daemon=True
    )
    sink.start()
    try:
        yield store, sock
    finally:
        stop.set()
        sink.join(timeout=30)
        server.stop()


@contextmanager
def _viewer(store: HistoryStore, sock: Path, tmp: Path) -> Iterator[str]:
    """``rllm-cli view`` in its own process, reading through the history's socket."""
    port = free_port()
    env = {
        **os.environ,
        "RLLM_HOME": str(tmp / "home"),
        "RLLM_HISTORY_DIR": str(tmp / "unused"),
        "RLLM_HISTORY_SOCKET": str(sock),
        "RLLM_HISTORY_DATABASE": store.database,
        "RLLM_VIEW_REFRESH_S": "1",
        "RLLM_VIEW_LIVE_WINDOW_S": "6",
        "RLLM_VIEW_IDLE_REFRESH_S": "2",
    }
    env.pop("RLLM_CLICKHOUSE_URL", None)
    with view_process(port, env, tmp / "view.log") as url:
        yield url


def _cells(browser: WebDriver, css: str) -> dict[str, str]:
    return {
        c.get_attribute("data-col") or "": c.text
        for c in browser.find_elements(By.CSS_SELECTOR, f"{css} td[data-col]")
    }


def _live_state(browser: WebDriver) -> tuple[str, str]:
    """The run page's state and session count, read in one script: htmx may swap the
    ``#live`` element between two WebDriver calls."""
    got = browser.execute_script(
        "const l = document.getElementById('live');"
        "return [l.dataset.state, l.querySelector('dd[data-k=\"sessions\"]').textContent];"
    )
    return str(got[0]), str(got[1]).strip()


def _live_attr(browser: WebDriver, name: str) -> str | None:
    """One attribute of the run page's ``#live`` element, read in one script for the same
    reason as ``_live_state``: a ``find_element`` then ``get_attribute`` pair can hold an
    element htmx has just replaced (a stale element reference)."""
    got = browser.execute_script(
        "return document.getElementById('live').getAttribute(arguments[0]);", name
    )
    return None if got is None else str(got)


def _summary(browser: WebDriver, key: str) -> str:
    return browser.find_element(By.CSS_SELECTOR, f'dd[data-k="{key}"]').text


def _table(browser: WebDriver, table_id: str) -> list[dict[str, str]]:
    rows = browser.find_elements(By.CSS_SELECTOR, f"table#{table_id} tbody tr")
    return [
        {c.get_attribute("data-col") or "": c.text for c in r.find_elements(By.TAG_NAME, "td")}
        for r in rows
    ]


def _shot(browser: WebDriver, path: Path) -> None:
    """A screenshot of the whole page."""
    height = browser.execute_script("return document.documentElement.scrollHeight")
    browser.set_window_size(1400, min(int(height) + 40, 8000))
    assert browser.save_screenshot(str(path)), path
    browser.set_window_size(1400, 1000)


def _no_console_errors(browser: WebDriver) -> None:
    """No script error, no refused resource (the CSP), no failed request."""
    severe = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert severe == [], severe


def test_the_viewer_in_chromium_over_a_real_training_run(
    kafka: KafkaSettings,
    tiny_model: Path,
    loop_stack: Callable[..., LoopStack],
    tmp_path: Path,
) -> None:
    shots = tmp_path / "screenshots"
    shots.mkdir()
    stack = loop_stack(ADMIN, run_id=RUN)
    gateway = stack.gateway
    tasks = [Task(task_id=f"t{i}", instruction=f"say {i}") for i in range(2)]
    trainer = rllm.AgentTrainer(
        rollout=chatter,
        evaluator=by_index,
        train_dataset=tasks,
        val_dataset=tasks,
        kafka=kafka,
        config=short_run_config(RUN, gateway.url, ADMIN, tiny_model, tmp_path, tokens=6),
    )
    done: dict[str, Any] = {}

    def train() -> None:
        try:
            done["report"] = trainer.train(on_update=lambda u: u.version < 2, progress=False)
            done["eval"] = trainer.evaluate(attempts=2, progress=False)
        except BaseException as exc:  # reported by the test, not lost in the thread
            done["error"] = exc

    try:
        with _history(kafka, tmp_path) as (store, sock), _viewer(store, sock, tmp_path) as url:
            training = threading.Thread(target=train, daemon=True)
            training.start()
            with chromium(tmp_path / "profile") as browser:
                # the run's page while it trains: it says so and refreshes itself
                wait_for(
                    "the run in the history", lambda: run_named(store, "runs", run=RUN).rows, 120
                )
                browser.get(f"{url}/runs/{RUN}")
                assert _live_attr(browser, "data-state") == "running"
                note = browser.execute_script(
                    "return document.getElementById('live-note').textContent;"
                )
                assert "This run is still being written" in note
                first = _live_attr(browser, "data-refreshed")
                wait_for(
                    "htmx to refresh the run's page",
                    lambda: _live_attr(browser, "data-refreshed") != first,
                    30,
                )
                _shot(browser, shots / "run-live.png")
                training.join(timeout=300)
                assert not training.is_alive(), "training did not end"
                assert "error" not in done, done.get("error")
                report: TrainReport = done["report"]
                assert [u.version for u in report.updates] == [1, 2]
                val = f"{RUN}-val"
                wait_for(
                    "every session in the history",
                    lambda: [r["sessions"] for r in run_named(store, "runs").records()] == [4, 8],
                    60,
                )
                # The page itself (no reload) reaches the run's end with every session:
                # under load a long update can leave the run without an event for longer
                # than the live window (the page said "finished" with 4 of 8 sessions
                # written), so a finished page keeps polling, slower.
                wait_for(
                    "the page to show the finished run with its 8 sessions",
                    lambda: _live_state(browser) == ("finished", "8"),
                    60,
                )
                assert _live_attr(browser, "hx-trigger") == "every 2.0s"
                # the reads below compare one DOM: cancel the page's further polls
                browser.execute_script(
                    "document.body.addEventListener('htmx:beforeRequest', e => e.preventDefault());"
                )
                # ... and let a poll sent before that land first (htmx marks its element
                # with ``htmx-request`` until the answer is swapped in)
                wait_for(
                    "the last poll to be swapped in",
                    lambda: not browser.find_elements(By.CSS_SELECTOR, ".htmx-request"),
                    10,
                )
                (run,) = run_named(store, "runs", run=RUN).records()
                assert _summary(browser, "sessions") == str(run["sessions"]) == "8"
                assert _summary(browser, "mean_reward") == _fmt(run["mean_reward"]) == "0.5"
                assert _summary(browser, "backend") == "local"
                assert _summary(browser, "updates") == "3"  # v0 (the base weights), v1, v2
                rewards = run_named(store, "rewards", run=RUN).records()
                assert [r["policy_version"] for r in rewards] == [0, 1]
                assert _table(browser, "rewards") == reward_rows(rewards)
                tokens = run_named(store, "tokens", run=RUN).records()
                assert [t["completion_tokens"] for t in _table(browser, "tokens")] == [
                    str(t["completion_tokens"]) for t in tokens
                ]
                assert browser.find_elements(By.CSS_SELECTOR, "#reward-chart canvas")
                assert "mean reward" in browser.find_element(By.ID, "reward-chart").text
                _shot(browser, shots / "run.png")

                # the runs page: each row's numbers as analytics gives them
                browser.get(url + "/")
                for row in run_named(store, "runs").records():
                    got = _cells(browser, f'tr[data-run="{row["run_id"]}"]')
                    passk = run_named(store, "passk", run=row["run_id"]).records()
                    assert got["sessions"] == str(row["sessions"])
                    assert got["mean_reward"] == _fmt(row["mean_reward"])
                    assert got["accuracy"] == _fmt(row["accuracy"])
                    assert got["pass_at_k"] == _fmt(passk[0]["pass_at_k"])
                    assert got["kind"] == ("train" if row["run_id"] == RUN else "eval")
                    assert got["state"] in ("running", "finished")
                where = browser.find_element(By.CSS_SELECTOR, "header .where").text
                assert where == f"the history service on {sock}"  # read as beside `up`'s
                _shot(browser, shots / "runs.png")
                # the filter, through htmx
                browser.find_element(
                    By.CSS_SELECTOR, 'select[name="kind"] option[value="eval"]'
                ).click()
                wait_for(
                    "the filtered table",
                    lambda: (
                        [
                            r.get_attribute("data-run")
                            for r in browser.find_elements(By.CSS_SELECTOR, "tr[data-run]")
                        ]
                        == [val]
                    ),
                    20,
                )
                assert "kind=eval" in browser.current_url

                # a trajectory: the tokens its steps sampled, with their policy versions
                browser.get(f"{url}/runs/{RUN}")
                link = browser.find_element(By.CSS_SELECTOR, "table#sessions tbody tr a")
                session = link.get_attribute("href").split("/trajectories/", 1)[1]
                link.click()
                wait_for("the trajectory page", lambda: browser.find_elements(By.ID, "steps"), 20)
                db = store.database
                steps = store.query(
                    f"SELECT step_index, policy_version, response_token_ids, response_logprobs "
                    f"FROM `{db}`.steps FINAL WHERE session_id = {{s:String}} ORDER BY step_index",
                    {"s": session.replace("%2F", "/")},
                ).rows
                assert steps and all(len(ids) > 0 for _, _, ids, _ in steps)
                shown = browser.find_elements(By.CSS_SELECTOR, "article.step")
                assert [s.get_attribute("data-policy-version") for s in shown] == [
                    str(v) for _, v, _, _ in steps
                ]
                for article, (_, _, ids, lps) in zip(shown, steps, strict=True):
                    toks = article.find_elements(By.CSS_SELECTOR, "span.tok")
                    assert [int(t.get_attribute("data-id")) for t in toks] == list(ids)
                    assert [round(float(t.get_attribute("data-logprob")), 4) for t in toks] == [
                        round(x, 4) for x in lps
                    ]
                    assert all(t.is_displayed() for t in toks)
                    assert (
                        "Answer briefly." in article.text or article.get_attribute("id") != "step-0"
                    )
                assert _summary(browser, "reward") in ("0", "1")
                _shot(browser, shots / "trajectory.png")

                # two policy versions of the run, then the run against its evaluation
                browser.get(f"{url}/compare?a={RUN}&av=0&b={RUN}&bv=1")
                by_version = {r["policy_version"]: r for r in rewards}
                assert _summary(browser, "a_mean") == _fmt(by_version[0]["mean_reward"])
                assert _summary(browser, "b_mean") == _fmt(by_version[1]["mean_reward"])
                _shot(browser, shots / "compare-versions.png")
                browser.get(f"{url}/compare?a={RUN}&b={val}")
                (ev,) = run_named(store, "rewards", run=val).records()
                assert _summary(browser, "b_mean") == _fmt(ev["mean_reward"])
                assert _summary(browser, "common") == "2"  # t0 and t1; epochs 2+ are t0@e2 …
                _shot(browser, shots / "compare-runs.png")
                _no_console_errors(browser)  # every page so far: no CSP refusal, no error

                # bad input: a page that says so
                browser.get(f"{url}/runs/no-such-run")
                assert browser.find_element(By.CSS_SELECTOR, "#error h1").text == "Not found"
                assert (
                    "no run 'no-such-run' in the history"
                    in browser.find_element(By.ID, "error").text
                )
                _shot(browser, shots / "not-found.png")
    finally:
        stack.close()
    names = sorted(p.name for p in shots.iterdir())
    assert names == [
        "compare-runs.png",
        "compare-versions.png",
        "not-found.png",
        "run-live.png",
        "run.png",
        "runs.png",
        "trajectory.png",
    ]
    assert all((shots / n).stat().st_size > 10_000 for n in names)
    assert done["eval"].run_id == f"{RUN}-val"
    print(f"screenshots in {shots}")
