"""The viewer's pages over a history the sink wrote: every number equals the analytics
query's; filters, sorts, a live run's refresh, a trajectory turn by turn, comparisons."""

from __future__ import annotations

import json
import math
import re
from datetime import UTC, datetime, timedelta

from starlette.testclient import TestClient

from rllm.consumers.history import run_named
from rllm.consumers.history.types import HistoryStore
from rllm.consumers.viewer import reads
from rllm.consumers.viewer.app import _fmt
from tests.unit.consumers.viewer.history import (
    AGENT_RUN,
    ANSWER_LOGPROBS,
    ANSWER_TOKENS,
    CHAT_SESSION,
    HARNESS_SESSION,
    OPEN_SESSION,
)
from tests.unit.consumers.viewer.page import cell, cells, reward_rows, rows, table, text

TRAINING = ("run-1", "run-3")


def test_runs_page_shows_every_run_with_the_analytics_numbers(
    client: TestClient, history: HistoryStore
) -> None:
    resp = client.get("/")
    assert resp.status_code == 200
    shown = rows(resp.text, "run")
    expected = run_named(history, "runs").records()
    assert list(shown) == [r["run_id"] for r in expected]  # newest first, as analytics
    assert len(shown) == 5
    for run in expected:
        got = cells(shown[run["run_id"]])
        passk = run_named(history, "passk", run=run["run_id"]).records()
        assert got["sessions"] == str(run["sessions"])
        assert got["mean_reward"] == _fmt(run["mean_reward"])
        assert got["accuracy"] == _fmt(run["accuracy"])
        assert got["first_seen"] == run["first_seen"].strftime("%Y-%m-%d %H:%M:%S")
        # one pass@1 per benchmark and model, as `analytics passk --run R` gives them
        want = (
            _fmt(passk[0]["pass_at_k"])
            if len(passk) == 1
            else ", ".join(f"{p['benchmark']}/{p['model']} {_fmt(p['pass_at_k'])}" for p in passk)
        )
        assert got["pass_at_k"] == want
        assert got["kind"] == ("train" if run["run_id"] in TRAINING else "eval")
        assert got["backend"] == ("local" if run["run_id"] in TRAINING else "\N{EN DASH}")
        assert got["state"] == ("running" if run["run_id"] == AGENT_RUN else "finished")


def test_passk_by_run_is_passk_of_each_run(history: HistoryStore) -> None:
    by_run = run_named(history, "passk", by="run", k=2).records()
    runs = ("agent-run", "run-0", "run-1", "run-2", "run-3")
    assert {r["run_id"] for r in by_run} == set(runs)
    for run in runs:
        alone = run_named(history, "passk", run=run, k=2).records()
        mine = [{k: v for k, v in r.items() if k != "run_id"} for r in by_run if r["run_id"] == run]
        assert mine == alone and len(alone) == (1 if run == AGENT_RUN else 3)


def test_a_run_s_mean_reward_counts_rewarded_sessions_only(history: HistoryStore) -> None:
    """The open session has no reward yet: it is not a 0 in the mean (nor in accuracy)."""
    (row,) = run_named(history, "runs", run=AGENT_RUN).records()
    assert (row["sessions"], row["mean_reward"], row["accuracy"]) == (3, 0.5, 0.5)


def test_runs_filter_and_sort(client: TestClient, history: HistoryStore) -> None:
    def shown(query: str) -> list[str]:
        resp = client.get("/" + query)
        assert resp.status_code == 200, resp.text
        return list(rows(resp.text, "run"))

    assert shown("?kind=train") == ["run-3", "run-1"]
    assert shown("?kind=eval&sort=run_id&order=asc") == ["agent-run", "run-0", "run-2"]
    assert shown("?q=AGENT") == [AGENT_RUN]
    assert shown("?state=running") == [AGENT_RUN]
    assert shown("?benchmark=calc") == [AGENT_RUN]
    assert shown("?model=qwen2.5-0.5b&sort=run_id&order=desc") == [
        "run-3",
        "run-2",
        "run-1",
        "run-0",
    ]
    rewards = {r["run_id"]: r["mean_reward"] for r in run_named(history, "runs").records()}
    assert shown("?sort=mean_reward&order=asc") == sorted(rewards, key=lambda r: (rewards[r], r))
    assert shown("?sort=mean_reward") == sorted(
        rewards, key=lambda r: (rewards[r], r), reverse=True
    )
    none = client.get("/?q=no-such-run")
    assert "No run of the 5 in the history matches this filter." in text(none.text)
    # htmx asks for the table alone
    part = client.get("/?kind=train", headers={"HX-Request": "true"})
    assert part.text.lstrip().startswith('<div id="runs-table">') and "<html" not in part.text


def test_runs_page_refuses_a_bad_parameter_by_name(client: TestClient) -> None:
    for query, said in (
        ("?sort=bogus", "parameter 'sort': one of run_id, kind,"),
        ("?order=up", "parameter 'order': one of asc, desc, got 'up'"),
        ("?k=0", "parameter 'k': must be between 1 and 10000, got 0"),
        ("?k=two", "parameter 'k': expected an integer, got 'two'"),
        ("?colour=red", "unknown query parameter 'colour'"),
        ("?kind=train&kind=eval", "parameter 'kind' given twice"),
    ):
        resp = client.get("/" + query)
        assert resp.status_code == 400, query
        assert said in text(resp.text), (query, text(resp.text))
        assert "Traceback" not in resp.text


def test_run_page_equals_the_analytics_queries(client: TestClient, history: HistoryStore) -> None:
    resp = client.get("/runs/run-1")
    assert resp.status_code == 200
    page = resp.text
    (run,) = run_named(history, "runs", run="run-1").records()
    assert cell(page, "sessions") == str(run["sessions"]) == "100"
    assert cell(page, "steps") == str(run["steps"])
    assert cell(page, "mean_reward") == _fmt(run["mean_reward"])
    assert cell(page, "state") == "finished" and cell(page, "backend") == "local"

    rewards = run_named(history, "rewards", run="run-1").records()
    assert len(rewards) == 13  # v0 … v12
    assert table(page, "rewards") == reward_rows(rewards)
    chart = json.loads(
        re.search(r"data-chart='([^']*)'", page).group(1).replace("&#34;", '"')  # type: ignore[union-attr]  # a page without it fails the test here anyway
    )
    assert chart == {
        "policy_version": [r["policy_version"] for r in rewards],
        "mean_reward": [r["mean_reward"] for r in rewards],
        "accuracy": [r["accuracy"] for r in rewards],
    }
    for name, key in (("tokens", "steps"), ("latency", "steps"), ("staleness", "lag")):
        want = run_named(history, name, run="run-1").records()
        got = table(page, name)
        assert [g[key] for g in got] == [str(w[key]) for w in want] and want, name
    latency = run_named(history, "latency", run="run-1").records()
    assert [g["upstream_ms"] for g in table(page, "latency")] == [
        _fmt(w["upstream_ms"]) for w in latency
    ]
    staleness = run_named(history, "staleness", run="run-1").records()
    assert [g["pct_tokens"] for g in table(page, "staleness")] == [
        _fmt(w["pct_tokens"]) for w in staleness
    ]
    failures = run_named(history, "failures", run="run-1").records()
    assert [(f["kind"], f["count"]) for f in table(page, "failures")] == [
        (w["kind"], str(w["count"])) for w in failures
    ]
    updates = history.query(
        f"SELECT count() FROM `{history.database}`.policy_updates FINAL WHERE run_id = 'run-1'"
    ).rows[0][0]
    assert len(table(page, "updates")) == updates == int(cell(page, "updates"))
    assert len(rows(page, "session")) == 100
    # a finished run is polled slowly: its events may resume after a long update or the
    # history sink's lag
    assert 'hx-get="/live/runs/run-1?k=1" hx-trigger="every 30.0s" hx-swap="outerHTML"' in page


def test_a_run_still_being_written_refreshes_itself(
    client: TestClient, history: HistoryStore
) -> None:
    page = client.get(f"/runs/{AGENT_RUN}").text
    assert cell(page, "state") == "running"
    assert 'hx-get="/live/runs/agent-run?k=1" hx-trigger="every 3.0s" hx-swap="outerHTML"' in page
    assert "This run is still being written: last event" in text(page)
    assert "UTC, 1 session open." in text(page)
    sessions = rows(page, "session")
    assert list(sessions) == [CHAT_SESSION, HARNESS_SESSION, OPEN_SESSION]
    assert "open" in text(sessions[OPEN_SESSION]) and cells(sessions[OPEN_SESSION])["reward"] == ""
    live = client.get(f"/live/runs/{AGENT_RUN}")
    assert live.status_code == 200
    assert live.text.lstrip().startswith('<div id="live" data-state="running"')
    assert "<html" not in live.text


def test_trajectory_turn_by_turn_with_tokens_and_versions(client: TestClient) -> None:
    resp = client.get(f"/trajectories/{CHAT_SESSION}")
    assert resp.status_code == 200
    page = resp.text
    steps = re.findall(
        r'<article class="step" id="step-(\d+)" data-policy-version="(\d+)">(.*?)</article>',
        page,
        flags=re.S,
    )
    assert [(i, v) for i, v, _ in steps] == [("0", "2"), ("1", "3")]
    first, second = (text(body) for _, _, body in steps)
    assert "system You are a calculator. user What is 7 times 8?" in first
    assert 'multiply call_7 {"a": 7, "b": 8}' in first
    assert "tool answers call_7 56" in second and "assistant The answer is 56" in second
    assert "You are a calculator" not in second  # only the turn's new messages
    for (_, _, body), ids, lps in zip(steps, ANSWER_TOKENS, ANSWER_LOGPROBS, strict=True):
        toks = re.findall(r'<span class="tok (lp\w)" data-id="(\d+)" data-logprob="([^"]*)"', body)
        assert [int(i) for _, i, _ in toks] == ids
        assert [round(float(lp), 4) for _, _, lp in toks] == lps
        assert [c for c, _, _ in toks] == [f"lp{min(9, int(math.exp(lp) * 10))}" for lp in lps]
    assert cell(page, "reward") == "1" and cell(page, "is_correct") == "yes"
    assert cell(page, "status") == "ok"
    assert "still open" not in page


def test_trajectory_shows_its_advantage_and_group(
    client: TestClient, history: HistoryStore
) -> None:
    db = history.database
    sid, adv = history.query(
        f"SELECT session_ids[2], advantages[2] FROM `{db}`.episodes FINAL "
        f"WHERE run_id = 'run-1' ORDER BY task_id LIMIT 1"
    ).rows[0]
    page = client.get(f"/trajectories/{sid}").text
    assert cell(page, "advantage") == _fmt(adv) and cell(page, "estimator") == "grpo"
    assert "this one is #2" in text(page)


def test_harness_logs_and_an_open_trajectory(client: TestClient) -> None:
    page = client.get(f"/trajectories/{HARNESS_SESSION}").text
    harness = text(re.search(r'<section id="harness">(.*?)</section>', page, flags=re.S).group(1))  # type: ignore[union-attr]  # a page without it fails the test here anyway
    assert "$ echo 56 > answer.txt verifier: 1 of 1 passed" in harness
    assert "verifier: answer.txt: expected 56, got 65" in harness
    assert "tests/test.sh exit code 1" in harness
    assert "Verifier output (tail of test-stdout.txt) FAILED test_answer - 65 != 56" in harness
    assert "agent_log: /var/tmp/artifacts/agent.log" in harness
    assert cell(page, "reward") == "0" and cell(page, "is_correct") == "no"
    still = client.get(f"/trajectories/{OPEN_SESSION}")
    assert still.status_code == 200
    assert "This trajectory is still open" in text(still.text)
    assert cell(still.text, "status") == "open" and cell(still.text, "reward") == "none yet"


def test_compare_two_policy_versions_and_two_runs(
    client: TestClient, history: HistoryStore
) -> None:
    rewards = {r["policy_version"]: r for r in run_named(history, "rewards", run="run-1").records()}
    page = client.get("/compare?a=run-1&av=2&b=run-1&bv=6").text
    assert cell(page, "a") == "run-1 @ v2" and cell(page, "b") == "run-1 @ v6"
    assert cell(page, "a_mean") == _fmt(rewards[2]["mean_reward"])
    assert cell(page, "b_mean") == _fmt(rewards[6]["mean_reward"])

    page = client.get("/compare?a=run-0&b=run-2").text
    (a,) = run_named(history, "rewards", run="run-0").records()
    (b,) = run_named(history, "rewards", run="run-2").records()
    assert (cell(page, "a_mean"), cell(page, "b_mean")) == (
        _fmt(a["mean_reward"]),
        _fmt(b["mean_reward"]),
    )
    # per task, on the tasks both scored: the mean of each side's session rewards
    db = history.database
    per_task = history.query(
        f"""SELECT task_id, run_id, avg(r) FROM (
                SELECT s.task_id AS task_id, s.run_id AS run_id, argMax(w.reward, w.emitted_at) AS r
                FROM `{db}`.rewards AS w INNER JOIN `{db}`.sessions AS s
                  ON s.session_id = w.session_id AND s.kind = 'opened'
                WHERE s.run_id IN ('run-0', 'run-2') GROUP BY s.task_id, s.run_id, w.session_id)
            GROUP BY task_id, run_id"""
    ).rows
    means: dict[str, dict[str, float]] = {}
    for task_id, run, mean in per_task:
        means.setdefault(task_id, {})[run] = mean
    common = sorted(t for t, m in means.items() if len(m) == 2)
    shown = rows(page, "task")
    assert list(shown) == common and len(common) == 7
    for task_id in common:
        got = cells(shown[task_id])
        want = means[task_id]
        assert got["a_reward"] == _fmt(want["run-0"]) and got["b_reward"] == _fmt(want["run-2"])
        assert got["delta"] == _fmt(want["run-2"] - want["run-0"])
    assert cell(page, "only") == "18 / 18"


def test_compare_says_what_is_missing(client: TestClient) -> None:
    form = client.get("/compare")
    assert form.status_code == 200 and "Pick two runs" in text(form.text)
    missing = client.get("/compare?a=run-1&av=99&b=run-0")
    assert missing.status_code == 404
    assert "run-1 @ v99: no rewarded session in the history" in text(missing.text)
    bad = client.get("/compare?a=run-1&av=x&b=run-0")
    assert bad.status_code == 400 and "parameter 'av': expected an integer, got 'x'" in text(
        bad.text
    )


def test_a_run_s_state_from_its_last_event_and_open_sessions() -> None:
    now = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    ago = lambda s: now - timedelta(seconds=s)  # noqa: E731
    state = reads._state
    assert state({"opened": 4, "closed": 4, "last_event": ago(10)}, now, 60) == "running"
    assert state({"opened": 4, "closed": 3, "last_event": ago(10)}, now, 60) == "running"
    assert state({"opened": 4, "closed": 3, "last_event": ago(61)}, now, 60) == "unfinished"
    assert state({"opened": 4, "closed": 4, "last_event": ago(61)}, now, 60) == "finished"
    # the history service's JSON carries the time as text
    assert state({"opened": 1, "closed": 0, "last_event": ago(5).isoformat()}, now, 60) == "running"


def test_the_run_page_heads_each_passk_column_once(client: TestClient) -> None:
    heads = lambda page: re.findall(  # noqa: E731
        r"<th>([^<]*)</th>", page.split('id="passk"', 1)[1].split("</thead>", 1)[0]
    )
    assert heads(client.get("/runs/run-1").text) == [
        "benchmark",
        "model",
        "tasks",
        "samples",
        "pass@1",
    ]
    assert heads(client.get("/runs/run-1?k=2").text) == [
        "benchmark",
        "model",
        "tasks",
        "samples",
        "pass@2",
        "pass@1",
    ]


def test_tokens_the_answer_spelled_out_need_no_tokenizer(client: TestClient) -> None:
    page = client.get(f"/trajectories/{CHAT_SESSION}").text  # calc-model: no tokenizer here
    texts = re.findall(
        r'<span class="tok lp\w" data-id="\d+" data-logprob="[^"]*" title="[^"]*">([^<]*)<', page
    )
    assert texts and "⟨" not in "".join(texts)
    assert "no-tokenizer-" not in page


def test_policy_updates_show_the_key_metrics_in_columns(
    client: TestClient, history: HistoryStore
) -> None:
    page = client.get("/runs/run-1").text
    shown = table(page, "updates")
    losses = history.query(
        f"SELECT version, metrics['loss'] FROM `{history.database}`.policy_updates FINAL "
        "WHERE run_id = 'run-1' ORDER BY version"
    ).rows
    assert shown and [(int(u["version"]), u["loss"]) for u in shown] == [
        (v, _fmt(loss)) for v, loss in losses
    ]
    assert {u["grad_norm"] for u in shown} == {"\u2013"}  # not in these updates: a dash
    assert {u["other"] for u in shown} == {""}  # nothing else to fold
