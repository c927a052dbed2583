"""The README's code blocks, run as written against the test stack, and what they print.

A fenced block runs in CI when the line before it is ``<!-- ci: run NAME -->`` (an HTML
comment, invisible on GitHub); ``CHECKS[NAME]`` asserts on its output, so every marked
block has checks and every check has its block. ``RLLM_TEST_README`` points the test at
another copy of the README (default: the repository's).

The stack is real but for the model: the session broker, a gateway in front of the fake
upstream (``tests/fakes/upstream.py``) that follows policy updates, processor and history
subprocesses, a model profile naming the fake's model, and the tiny random model for the
trainer (``RLLM_TRAIN_MODEL``). A bash block runs under ``set -euo pipefail`` with one shell
function in front of ``rllm-cli``: ``rllm-cli up`` and ``down`` are no-ops, as the test
stack stands in for them; before ``rllm-cli analytics`` it waits for the history to have
committed every event (``history_caught_up``), as a person's next line would find it; and
it prints ``### rllm-cli ARGS`` before each command, so the checks can tell them apart.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from rllm.producers.gateway import GatewaySettings, create_app
from rllm.settings import KafkaSettings
from tests.fakes.upstream import FakeUpstream, RunningUpstream, ThreadedServer, start_fake_upstream
from tests.integration.helpers import fake_model_setup
from tests.integration.processors.helpers import Workers
from tests.paths import ROOT

README = Path(os.environ.get("RLLM_TEST_README") or ROOT / "README.md")
ADMIN_KEY = "readme-admin-key"
_BLOCK = re.compile(
    r"^<!-- ci: run (?P<name>[\w-]+) -->\n```(?P<lang>python|bash)\n(?P<code>.*?)^```$",
    re.MULTILINE | re.DOTALL,
)
_PRELUDE = """set -euo pipefail
rllm-cli() {
  case "${1:-}" in
    up|down) echo "### rllm-cli $* (the test stack stands in)"; return 0 ;;
    analytics) "$RLLM_TEST_PYTHON" -m tests.integration.history_caught_up ;;
  esac
  echo "### rllm-cli $*"
  command rllm-cli "$@"
}
"""


@dataclass(frozen=True)
class Block:
    """One marked block of the README."""

    name: str
    lang: str
    code: str


@dataclass(frozen=True)
class Ran:
    """What a block printed."""

    stdout: str
    stderr: str

    def commands(self) -> dict[str, str]:
        """A bash block's stdout per ``rllm-cli`` command (its first word after the name)."""
        out: dict[str, str] = {}
        for part in self.stdout.split("### rllm-cli ")[1:]:
            head, _, body = part.partition("\n")
            out[head.split()[0]] = body
        return out


def marked_blocks(text: str) -> dict[str, Block]:
    """Every ``<!-- ci: run NAME -->`` block of ``text`` by name."""
    blocks = [Block(m["name"], m["lang"], m["code"]) for m in _BLOCK.finditer(text)]
    names = [b.name for b in blocks]
    assert len(names) == len(set(names)), f"two README blocks share a name: {names}"
    return {b.name: b for b in blocks}


@pytest.fixture
def stack(
    kafka: KafkaSettings,
    make_topics: Callable[..., list[str]],
    tmp_path: Path,
) -> Iterator[dict[str, str]]:
    """The test stack; yields the environment a block runs in."""
    from rllm.models.tiny import tiny_model_dir

    make_topics(partitions=2)
    # it also lists the model the README's train and Python blocks name by default, as the
    # local model server would (AgentTrainer refuses a model the upstream does not serve)
    upstream: RunningUpstream = start_fake_upstream(
        state=FakeUpstream(extra_models=("HuggingFaceTB/SmolLM2-135M-Instruct",))
    )
    gateway = ThreadedServer(
        create_app(
            GatewaySettings(
                upstream_url=upstream.url,
                spool_dir=tmp_path / "spool",
                spool_fsync=False,
                admin_key=ADMIN_KEY,
                follow_policy_updates=True,
                policy_sync="log",  # the fake loads no weights: it serves what the log names
            ),
            kafka,
        ),
        lifespan="on",
    )
    home = tmp_path / "home"
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "RLLM_TEST_PYTHON": sys.executable,
        "RLLM_HOME": str(home),
        "RLLM_CONFIG_DIR": str(tmp_path / "config"),
        "RLLM_BOOTSTRAP_SERVERS": kafka.bootstrap_servers,
        "RLLM_TOPIC_PREFIX": kafka.topic_prefix,
        "RLLM_GATEWAY_URL": gateway.url,
        "RLLM_ADMIN_KEY": ADMIN_KEY,
        "RLLM_HISTORY_GROUP_ID": f"history-{kafka.topic_prefix}",
        "RLLM_TRAIN_MODEL": str(tiny_model_dir(tmp_path / "tiny")),
        "RLLM_CHECKPOINT_DIR": str(tmp_path / "ckpt"),
    }
    profile = subprocess.run(
        [sys.executable, "-m", "rllm.cli", *fake_model_setup(upstream.url)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert profile.returncode == 0, profile.stdout + profile.stderr
    workers = Workers(kafka, tmp_path)
    workers.start()
    history_log = open(tmp_path / "history.log", "wb")  # noqa: SIM115
    history = subprocess.Popen(
        [sys.executable, "-m", "rllm.cli", "history"],
        env=env,
        cwd=ROOT,
        stdout=history_log,
        stderr=subprocess.STDOUT,
    )
    try:
        yield env
    finally:
        history.terminate()
        history.wait(timeout=60)
        history_log.close()
        workers.close()
        gateway.stop()
        upstream.stop()


def run_block(block: Block, env: dict[str, str], tmp_path: Path) -> Ran:
    """Run one block in the repository root, as a reader would paste it."""
    if block.lang == "python":
        script = tmp_path / f"{block.name}.py"
        script.write_text(block.code)
        argv = [sys.executable, str(script)]
    else:
        script = tmp_path / f"{block.name}.sh"
        script.write_text(_PRELUDE + block.code)
        argv = ["bash", str(script)]
    proc = subprocess.run(
        argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900, check=False
    )
    assert proc.returncode == 0, (
        f"{block.name} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    return Ran(proc.stdout, proc.stderr)


def _tsv(text: str) -> list[dict[str, str]]:
    """Rows of a command's tab-separated output, by its header."""
    lines = [line.split("\t") for line in text.strip().splitlines()]
    return [dict(zip(lines[0], row, strict=True)) for row in lines[1:]]


def check_quickstart(ran: Ran, env: dict[str, str]) -> None:
    """up, eval of the shipped GSM8K sample, analytics runs, a short RL run, down."""
    out = ran.commands()
    assert list(out) == ["up", "eval", "analytics", "train", "down"], list(out)
    summary = {row["metric"]: row["value"] for row in _tsv(out["eval"])}
    assert (summary["tasks"], summary["attempts per task"], summary["errors"]) == ("5", "1", "0")
    assert summary["accuracy"] == "0.0%"  # the fake answers "ok:<prompt's tail>"
    run_id = re.findall(r"eval gsm8k · model fake-model · run (eval-\w+)", ran.stderr)
    assert len(run_id) == 1, ran.stderr
    runs = {row["run_id"]: row for row in _tsv(out["analytics"])}
    assert runs[run_id[0]]["benchmarks"] == "gsm8k" and runs[run_id[0]]["sessions"] == "5"
    assert runs[run_id[0]]["models"] == "fake-model"
    train = out["train"].splitlines()
    assert train[0].startswith("training on multiply: 81 tasks x 8 rollouts, 4 tasks per update")
    batches = [line for line in train if line.startswith("rollouts of v0: reward 0.000")]
    assert len(batches) >= 1, out["train"]
    assert re.fullmatch(r"policy version 0; \d+ uniform episodes dropped", train[-1]), train[-1]
    assert "{" not in train[-1]


def check_python_api(ran: Ran, env: dict[str, str]) -> None:
    """evaluate() and train() show progress on stderr and return summaries that print."""
    err = ran.stderr.splitlines()
    evaluating = [line for line in err if line.startswith("evaluate train-")]
    said = re.search(  # which policy it measures, said before the first result
        r"-val: 81 tasks x 1 attempt\(s\) of HuggingFaceTB/SmolLM2-135M-Instruct, policy "
        r"(base: version 0 \(base weights\)), through (\S+)$",  # a fresh trainer: base
        evaluating[0],
    )
    assert said is not None and said[2] == env["RLLM_GATEWAY_URL"], evaluating[0]
    counts = [int(m[1]) for line in evaluating if (m := re.search(r": (\d+)/81 attempts", line))]
    assert counts == [9, 18, 27, 36, 45, 54, 63, 72, 81], evaluating
    training = [line for line in err if line.startswith("train train-")]
    # the fake model's groups are all 0 and dropped: no batch makes one of the 2 updates,
    # so every batch of the epoch runs
    assert "81 tasks x 8 rollouts, 4 tasks per update, 21 batch(es)" in training[0]
    assert [re.search(r"batch \d+/21", line)[0] for line in training[1:3]] == [  # type: ignore[index]  # a line without the match fails the test here anyway
        "batch 1/21",
        "batch 2/21",
    ]
    assert "done after 21 batch(es) at policy version 0" in training[-1]
    printed = ran.stdout.splitlines()
    assert printed[0].startswith("multiply · HuggingFaceTB/SmolLM2-135M-Instruct · run train-")
    assert printed[1] == "  81 tasks x 1 attempt · accuracy 0.0% · mean reward 0.000"
    report = [line for line in printed if line.startswith("run train-")]
    assert len(report) == 1 and report[0].endswith(": 21 batches, 0 updates, policy version 0")


CHECKS: dict[str, Callable[[Ran, dict[str, str]], None]] = {
    "quickstart": check_quickstart,
    "python-api": check_python_api,
}


def test_every_marked_block_has_checks() -> None:
    assert sorted(marked_blocks(README.read_text())) == sorted(CHECKS)


@pytest.mark.timeout(900)  # the python block's train() runs its whole epoch (21 batches):
# with the fake model every group is dropped, so no batch makes one of its 2 updates
@pytest.mark.parametrize("name", sorted(CHECKS))
def test_readme_block_runs_as_written(name: str, stack: dict[str, str], tmp_path: Path) -> None:
    blocks = marked_blocks(README.read_text())
    assert name in blocks, f"{README} has no block marked <!-- ci: run {name} -->"
    CHECKS[name](run_block(blocks[name], stack, tmp_path), stack)
