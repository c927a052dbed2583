"""Every named query on a 20k-step generated history, and the CLI through the service."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from rllm.cli.main import cli
from rllm.consumers.history.queries import QUERIES, run_named, run_sql
from rllm.consumers.history.types import HistoryStore, QueryError
from tests.unit.consumers.history.shared import serving


def test_runs(history_20k: HistoryStore) -> None:
    res = run_named(history_20k, "runs")
    assert sorted(res.column("run_id")) == ["run-0", "run-1", "run-2", "run-3"]
    assert sum(res.column("steps")) == 20_000
    assert sum(res.column("sessions")) == 4_000


def test_rewards_by_version_and_time(history_20k: HistoryStore) -> None:
    by_version = run_named(history_20k, "rewards", run="run-1")
    assert set(by_version.column("run_id")) == {"run-1"}
    versions = by_version.column("policy_version")
    assert versions == sorted(versions) and versions[0] == 0 and len(versions) > 5
    acc = by_version.column("accuracy")
    assert acc[-1] > acc[0]  # the synthetic training run learns
    by_time = run_named(history_20k, "rewards", by="time", bucket_s=3600)
    assert sum(by_time.column("sessions")) == 4_000


def test_rewards_without_a_run_keep_each_run_apart(history_20k: HistoryStore) -> None:
    every = run_named(history_20k, "rewards").records()
    runs = [r["run_id"] for r in every]
    assert sorted(set(runs)) == [f"run-{i}" for i in range(4)]
    assert runs == sorted(runs), "one run's versions together, runs in order"
    for run in set(runs):  # each run's rows are exactly what --run gives
        alone = run_named(history_20k, "rewards", run=run).records()
        assert [r for r in every if r["run_id"] == run] == alone
    by_time = run_named(history_20k, "rewards", by="time", bucket_s=3600).records()
    assert sorted({r["run_id"] for r in by_time}) == sorted(set(runs))


def test_passk_is_monotone_in_k(history_20k: HistoryStore) -> None:
    p1 = run_named(history_20k, "passk", k=1).records()
    p4 = run_named(history_20k, "passk", k=4).records()
    assert len(p1) == 6  # 3 benchmarks x 2 models
    for a, b in zip(p1, p4, strict=True):
        assert a["pass_at_k"] == pytest.approx(a["pass_at_1"], abs=1e-3)
        assert b["pass_at_k"] >= a["pass_at_k"]


def test_tokens_latency_staleness_failures(history_20k: HistoryStore) -> None:
    tokens = run_named(history_20k, "tokens")
    assert sum(tokens.column("steps")) == 20_000
    assert set(tokens.column("agent")) == {"react", "codex"}
    lat = run_named(history_20k, "latency").records()
    for row in lat:
        p50, p95, p99 = row["upstream_ms"]
        assert 0 < p50 <= p95 <= p99
    stale = run_named(history_20k, "staleness").records()
    assert [r["lag"] for r in stale][:3] == [0, 1, 2]
    assert sum(r["pct_tokens"] for r in stale) == pytest.approx(100, abs=0.1)
    fails = {r["source"]: r["count"] for r in run_named(history_20k, "failures").records()}
    assert fails["step"] > 0 and fails["session"] > 0


@pytest.mark.parametrize(
    ("params", "named"),
    [
        ({"k": "x"}, "'k'"),
        ({"k": 0}, "'k'"),
        ({"bucket_s": -5}, "'bucket_s'"),
        ({"limit": "many"}, "'limit'"),
        ({"color": "red"}, "'color'"),
    ],
)
def test_bad_parameters_are_named(
    history_20k: HistoryStore, params: dict[str, object], named: str
) -> None:
    query = "rewards" if "bucket_s" in params else "passk"
    with pytest.raises(QueryError, match=named):
        run_named(history_20k, query, **params)
    with pytest.raises(QueryError, match="'by'"):
        run_named(history_20k, "rewards", by="colour")


def test_sql_escape_hatch(history_20k: HistoryStore) -> None:
    db = history_20k.database
    assert run_sql(history_20k, f"SELECT count() FROM `{db}`.steps FINAL").rows == [(20_000,)]
    with pytest.raises(QueryError, match="only SELECT"):
        run_sql(history_20k, f"DROP TABLE `{db}`.steps")
    assert run_sql(history_20k, f"SELECT count() FROM `{db}`.steps").rows == [(20_000,)]


@pytest.fixture(scope="module")
def service(
    history_20k: HistoryStore, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, str]]:
    with serving(tmp_path_factory.mktemp("svc") / "history.sock", history_20k) as env:
        yield env


@pytest.mark.parametrize("name", [n for n in QUERIES])
def test_cli_prints_every_query_as_tab_separated_rows_in_a_pipe(
    service: dict[str, str], history_20k: HistoryStore, name: str
) -> None:
    res = CliRunner().invoke(cli, ["analytics", name], env=service)
    assert res.exit_code == 0, res.output
    expected = run_named(history_20k, name)
    lines = res.stdout.splitlines()
    assert lines[0].split("\t") == list(expected.columns)
    assert len(lines) == 1 + len(expected.rows) >= 3
    assert all(line.count("\t") == len(expected.columns) - 1 for line in lines), lines[:3]
    assert (
        res.stdout
        == CliRunner().invoke(cli, ["analytics", name, "--format", "tsv"], env=service).stdout
    )


def test_cli_tsv_keeps_run_ids_whole_and_values_exact(
    service: dict[str, str], history_20k: HistoryStore
) -> None:
    res = CliRunner().invoke(cli, ["analytics", "runs"], env=service)
    assert res.exit_code == 0, res.output
    rows = [line.split("\t") for line in res.stdout.splitlines()]
    header, body = rows[0], rows[1:]
    expected = run_named(history_20k, "runs").records()
    assert [r[header.index("run_id")] for r in body] == [e["run_id"] for e in expected]
    first_seen = [r[header.index("first_seen")] for r in body]
    assert first_seen == [e["first_seen"].isoformat() for e in expected]
    assert [float(r[header.index("mean_reward")]) for r in body] == [
        e["mean_reward"] for e in expected
    ]


def test_a_terminal_table_has_short_times_and_plain_numbers() -> None:
    from datetime import UTC, datetime

    from rllm.consumers.history.render import short_cell, to_rich
    from rllm.consumers.history.types import QueryResult

    assert short_cell(80360.0) == "80,360"
    assert short_cell(12.3456) == "12.35" and short_cell(0.5) == "0.5"
    assert short_cell(0.00001234) == "1.2e-05" and short_cell(7066) == "7066"
    assert short_cell("2026-11-01T10:20:30.123456+00:00") == "2026-11-01 10:20:30"
    assert short_cell(datetime(2026, 11, 1, 10, 20, 30, 999, tzinfo=UTC)) == "2026-11-01 10:20:30"
    assert short_cell([1.5, 2000.25]) == "1.5 / 2,000" and short_cell(None) == "-"
    assert short_cell("run [x]") == "run [x]"
    table = to_rich(QueryResult(("run_id", "ms"), [("run [x]", 80360.0)]))
    assert [list(c.cells) for c in table.columns] == [["run \\[x]"], ["80,360"]]


def test_cli_json_csv_and_plot(service: dict[str, str], tmp_path: Path) -> None:
    out = CliRunner().invoke(cli, ["analytics", "runs", "--format", "json"], env=service)
    assert out.exit_code == 0, out.output
    assert sorted(r["run_id"] for r in json.loads(out.output)) == [f"run-{i}" for i in range(4)]
    csv = CliRunner().invoke(cli, ["analytics", "tokens", "--format", "csv"], env=service)
    assert csv.output.splitlines()[0].startswith("model,agent,steps")
    png = tmp_path / "rewards.png"
    res = CliRunner().invoke(
        cli, ["analytics", "rewards", "--by", "time", "--plot", str(png)], env=service
    )
    assert res.exit_code == 0, res.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


def test_cli_bad_parameter_says_which(service: dict[str, str]) -> None:
    res = CliRunner().invoke(cli, ["analytics", "passk", "--k", "zero"], env=service)
    assert res.exit_code == 1 and "'k'" in res.output
    res = CliRunner().invoke(cli, ["analytics", "sql", "DELETE FROM x WHERE 1"], env=service)
    assert res.exit_code == 1 and "only SELECT" in res.output
    res = CliRunner().invoke(cli, ["analytics", "runs", "--plot", "x.png"], env=service)
    assert res.exit_code == 1 and "not a time series" in res.output


def test_plot_refusal_names_only_the_flags_given(service: dict[str, str]) -> None:
    res = CliRunner().invoke(cli, ["analytics", "passk", "--plot", "x.png"], env=service)
    assert res.exit_code == 1
    said = res.output.split("error: ", 1)[1]
    assert said.startswith("--plot: passk is not a time series; --plot draws rewards, ")
    assert "passk --by" not in said and "--by benchmark" not in said
    res = CliRunner().invoke(
        cli, ["analytics", "latency", "--by", "model", "--plot", "x.png"], env=service
    )
    assert "--plot: latency --by model is not a time series" in res.output
    assert "latency --by time" in res.output


def test_rewards_plot_draws_one_line_per_run(service: dict[str, str], tmp_path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    drawn: list[list[str]] = []
    real_savefig = plt.Figure.savefig

    def record(fig: plt.Figure, *args: object, **kwargs: object) -> None:
        drawn.append([line.get_label() for ax in fig.axes for line in ax.get_lines()])
        real_savefig(fig, *args, **kwargs)

    png = tmp_path / "by-run.png"
    plt.Figure.savefig = record  # type: ignore[attr-defined,method-assign,assignment]  # records the figure instead of writing it; restored below
    try:
        res = CliRunner().invoke(cli, ["analytics", "rewards", "--plot", str(png)], env=service)
    finally:
        plt.Figure.savefig = real_savefig  # type: ignore[attr-defined,method-assign]  # restores the real savefig
    assert res.exit_code == 0, res.output
    assert drawn == [[f"run-{i} {y}" for y in ("mean_reward", "accuracy") for i in range(4)]]
