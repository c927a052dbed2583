"""``code``: HumanEval's check semantics in the bubblewrap sandbox; loops, network, memory."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from rllm.benchmarks import get_reward_fn, load_tasks
from rllm.benchmarks.graders.coding import extract_code
from rllm.benchmarks.graders.sandbox import CodeSandboxSettings, run_python
from rllm.schemas.types import Task

from .test_loaders import fixture_for

code = get_reward_fn("code")


@pytest.fixture(scope="module")
def humaneval() -> list[Task]:
    return load_tasks("humaneval")


def test_whole_function_in_a_fence_and_a_wrong_one(humaneval: list[Task]) -> None:
    task = humaneval[0]
    good = (
        "Here you go:\n```python\nfrom typing import List\n\n"
        "def has_close_elements(numbers: List[float], threshold: float) -> bool:\n"
        "    return any(abs(a - b) < threshold for i, a in enumerate(numbers)\n"
        "               for b in numbers[i + 1:])\n```\nDone."
    )
    assert code(task, good).is_correct is True
    bad = "```python\ndef has_close_elements(numbers, threshold):\n    return False\n```"
    result = code(task, bad)
    assert result.is_correct is False and result.metadata["result"].startswith("failed:")
    assert "AssertionError" in result.metadata["result"]


def test_code_that_loops_forever_times_out_cleanly(
    humaneval: list[Task], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RLLM_SANDBOX_TIMEOUT_S", "1.5")
    start = time.monotonic()
    result = code(humaneval[0], "    while True:\n        pass\n")
    assert result.metadata["result"] == "timed out" and result.reward == 0.0
    assert time.monotonic() - start < 5


def test_code_that_tries_the_network_fails_cleanly(humaneval: list[Task]) -> None:
    body = (
        "    import socket\n    socket.create_connection(('1.1.1.1', 80), timeout=3)\n"
        "    return True\n"
    )
    result = code(humaneval[0], body)
    assert result.is_correct is False
    assert "Network is unreachable" in result.metadata["result"]


def test_sandbox_limits_memory_and_keeps_the_host_out() -> None:
    settings = CodeSandboxSettings(memory_mb=256)
    hog = run_python(
        "x = bytearray(1024 ** 3); x[::4096] = b'1' * len(x[::4096])", settings=settings
    )
    assert (hog.status, hog.returncode) == ("failed", 137)
    assert hog.error_line == "killed: over the 256 MB memory limit"
    # the host's /usr is read-only; its home, /tmp and /etc are not there at all
    denied = run_python("open('/usr/rllm-sandbox-test', 'w')")
    assert denied.status == "failed" and "Read-only file system" in denied.error_line
    unseen = run_python(
        f"import os; print(os.listdir('/tmp'), os.path.exists({__file__!r}), os.listdir('/etc'))"
    )
    assert unseen.stdout == "[] False ['ld.so.cache']\n", unseen
    # the program runs as nobody without capabilities: root's files are not its own
    who = run_python(
        "import os; print(os.getuid(), os.getgid()); "
        "print([l.split()[1] for l in open('/proc/self/status') if l.startswith('CapEff')][0])"
    )
    assert who.stdout == "65534 65534\n0000000000000000\n", who
    refused = run_python("open('/etc/passwd', 'w').write('x')")
    assert refused.status == "failed" and "Permission denied" in refused.error_line
    # a write to its own directory lands in the sandbox's own overlay and goes with it
    kept = run_python("open('out.txt', 'w').write('x'); print(open('/sandbox/out.txt').read())")
    assert (kept.status, kept.stdout) == ("passed", "x\n")
    assert Path("/etc/passwd").read_text() != "x"
    echo = run_python("print(input()[::-1])", stdin="abc\n")
    assert (echo.status, echo.stdout) == ("passed", "cba\n")


def test_mbpp_asserts_with_setup_code() -> None:
    task = load_tasks("mbpp", data_file=fixture_for("mbpp"))[1]  # sq, setup "import math"
    assert code(task, "```python\ndef sq(x):\n    return x * x\n```").is_correct is True
    assert code(task, "```python\ndef sq(x):\n    return x + x\n```").is_correct is False


def test_mbpp_sanitized_runs_the_tests_imports_first() -> None:
    task = load_tasks("mbpp_sanitized", data_file=fixture_for("mbpp_sanitized"))[1]
    uses_math = (
        "def is_not_prime(n):\n    return any(n % i == 0 for i in range(2, math.isqrt(n) + 1))"
    )
    assert code(task, f"```python\n{uses_math}\n```").is_correct is True  # its test_imports
    assert code(task, "```python\ndef is_not_prime(n):\n    return True\n```").is_correct is False


def test_stdio_and_functional_cases() -> None:
    contest = load_tasks("code_contests", data_file=fixture_for("code_contests"))[0]
    program = (
        "```python\nimport math\nn, m, a = map(int, input().split())\n"
        "print(math.ceil(n / a) * math.ceil(m / a))\n```"
    )
    result = code(contest, program)
    assert result.is_correct is True and result.signals["cases_passed"] == 1.0
    wrong = code(contest, "```python\nprint(4)\n```")  # passes the public case only
    assert wrong.is_correct is False and wrong.metadata["result"] == "case 1: wrong answer"
    lcb = load_tasks("livecodebench", data_file=fixture_for("livecodebench"))
    functional = (
        "```python\nclass Solution:\n    def add(self, a: int, b: int) -> int:\n"
        "        return a + b\n```"
    )
    assert code(lcb[1], functional).is_correct is True
    assert "Start from this code" in lcb[1].instruction
    apps = load_tasks("apps", data_file=fixture_for("apps"))
    assert code(apps[0], "print(int(input()) * 2)").is_correct is True
    assert code(apps[1], "def f(x):\n    return x + 1").is_correct is True


def test_extract_code_takes_the_last_fence() -> None:
    assert extract_code("```\na = 1\n```\ntext\n```python\nb = 2\n```") == "b = 2\n"
    assert extract_code("no fences") == "no fences"
    assert extract_code("```python\nc = 3\n") == "c = 3\n"
