"""Replay: filters checked by counts, prompt restoration, dedup, JSONL/Parquet, from history."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from rllm.cli.main import cli
from rllm.consumers.replay import (
    ReplayFilter,
    select_examples,
    session_examples,
    sessions_from_history,
    write_dataset,
)
from rllm.consumers.replay.select import SessionRecord
from rllm.errors import ConfigError
from tests.unit.consumers.history.shared import fresh_chdb, load, serving


def _step(
    i: int, prompt: list[int], resp: list[int], prefix: int = 0, **kw: object
) -> dict[str, object]:
    return {
        "step_id": f"x{i}",
        "step_index": i,
        "parent_step_id": f"x{i - 1}" if prefix else "",
        "prompt_prefix_len": prefix,
        "prompt_token_ids": prompt,
        "response_token_ids": resp,
        "request_json": '{"messages": [{"role": "user", "content": "q"}]}',
        "response_json": '{"choices": [{"message": {"content": "a"}}]}',
        "error_kind": "",
        "token_status": "ok",
        "model": "m",
        **kw,
    }


def _session(sid: str, task: str, reward: float, run: str = "r", bench: str = "b") -> SessionRecord:
    return {
        "session_id": sid,
        "run_id": run,
        "task_id": task,
        "benchmark": bench,
        "model": "m",
        "reward": reward,
        "is_correct": reward >= 1.0,
        "steps": [_step(0, [1, 2], [3, int(reward * 10)]), _step(1, [5], [6], prefix=4)],
    }


def test_delta_prompts_are_restored() -> None:
    ex = session_examples(_session("s", "t", 1.0))
    assert [e.prompt_token_ids for e in ex] == [[1, 2], [1, 2, 3, 10, 5]]
    assert ex[0].messages == [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "a"},
    ]


def test_filters_by_counts() -> None:
    sessions = [
        _session(
            f"s{i}",
            f"t{i % 3}",
            reward=(i % 4) / 3,
            run=f"r{i % 2}",
            bench="gsm8k" if i < 6 else "math",
        )
        for i in range(12)
    ]
    n = lambda f: len(select_examples(sessions, f))  # noqa: E731
    assert n(ReplayFilter(dedup=False)) == 24
    assert n(ReplayFilter(correct_only=True, dedup=False)) == 6  # reward 1.0 for i % 4 == 3
    assert n(ReplayFilter(min_reward=0.5, dedup=False)) == 12
    assert n(ReplayFilter(benchmark="gsm8k", dedup=False)) == 12
    assert n(ReplayFilter(run="r1", dedup=False)) == 12
    assert n(ReplayFilter(best_of_n=1, dedup=False)) == 12  # 6 (run, task) groups
    assert n(ReplayFilter()) == 8  # 4 distinct rewards x 2 steps after dedup


def test_writers(tmp_path: Path) -> None:
    ex = select_examples([_session("s", "t", 1.0)], ReplayFilter())
    assert write_dataset(ex, tmp_path / "d.jsonl") == 2
    rows = [json.loads(line) for line in (tmp_path / "d.jsonl").read_text().splitlines()]
    assert (
        rows[1]["prompt_token_ids"] == [1, 2, 3, 10, 5]
        and rows[1]["messages"][1]["role"] == "assistant"
    )
    write_dataset(ex, tmp_path / "d.parquet")
    tbl = pq.read_table(tmp_path / "d.parquet")
    assert tbl.num_rows == 2 and tbl.column("response_token_ids").to_pylist()[0] == [3, 10]
    with pytest.raises(ConfigError, match=r"d\.csv"):
        write_dataset(ex, tmp_path / "d.csv")


def test_from_history(tmp_path: Path) -> None:
    store = fresh_chdb("replay")
    load(store, 2_000, tokens_per_step=50)
    sessions = sessions_from_history(store)
    assert len(sessions) == 400 and all(len(s["steps"]) == 5 for s in sessions)
    all_ok = select_examples(sessions, ReplayFilter(dedup=False))
    failed = store.query(f"SELECT countIf(error_kind != '') FROM `{store.database}`.steps").rows[0][
        0
    ]
    assert len(all_ok) == 2_000 - failed
    correct = select_examples(sessions, ReplayFilter(correct_only=True, dedup=False))
    n_correct = sum(1 for s in sessions if s["is_correct"])
    assert 0 < len(correct) <= 5 * n_correct
    assert all(len(e.response_token_ids) == 10 for e in correct)
    run1 = sessions_from_history(store, run="run-1")
    assert len(run1) == 100

    with serving(tmp_path / "h.sock", store) as env:
        out = tmp_path / "sft.jsonl"
        res = CliRunner().invoke(
            cli, ["replay", "--out", str(out), "--correct-only", "--no-dedup"], env=env
        )
        assert res.exit_code == 0, res.output
        assert len(out.read_text().splitlines()) == len(correct)
        bad = CliRunner().invoke(cli, ["replay", "--out", str(tmp_path / "x.csv")], env=env)
        assert bad.exit_code == 1 and "x.csv" in bad.output
