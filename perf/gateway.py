"""Latency the gateway adds over calling the same upstream directly, its CPU per request
(split by part), LiteLLM's beside it, time to first token, and the gateway's memory.

Starts (each as its own process): the fake vLLM-style upstream (``tests.fakes.upstream``),
two gateways (``rllm-cli gateway``, ``capture=async`` and ``capture=ack``), and the LiteLLM
proxy when ``/tmp/litellm-venv/bin/litellm`` exists (``--litellm-venv``; its own venv, as
its pins conflict with ours). A Kafka broker comes from ``--bootstrap`` or is started in a
temporary directory.

Load: open loop at ``--rate`` requests/s over ``--sessions`` sessions (each its own
``/sessions/{id}/v1`` URL), sent with aiohttp. Every target (direct, async, ack, LiteLLM)
gets the same load in ``--rounds`` interleaved rounds of ``--seconds / --rounds`` each, so
a machine shared with other work loads them alike. Added latency = percentile through the
proxy minus the same percentile direct; CPU per request = the process's CPU time over the
requests it served (by thread: the event loop's, librdkafka's, the others), and, when
py-spy is installed (``--py-spy``), split by part (upstream client, server, Kafka produce,
gateway logic, JSON, pydantic, event encoding, event loop) from ``py-spy record --gil``
samples. Then whether the targets are met (added p50 <= 1 ms async, <= 3 ms ack, p99 <= 5
ms, the whole rate served), and ``--rss-sessions`` sessions with long multi-turn contexts
go through a fresh gateway and its RSS is read. The gateways run uvloop and httptools when
they are importable (``--stack-path`` puts a directory holding them on the gateways' path).

Before and after in one run: ``--baseline REV`` (a git revision) adds two more gateways,
``capture=async`` and ``capture=ack`` of the code at ``REV`` (``git archive`` into a
temporary directory), loaded in the same interleaved rounds, and prints each figure's
ratio. The machine's load average (``os.getloadavg``) is printed with each figure: the
measured machine is shared.

Time to first token: a second fake upstream streams one token a chunk, ``--ttft-chunk-delay-ms``
apart; ``--ttft-requests`` sequential streamed calls of each API (chat, completions,
Responses, Anthropic Messages) go through a gateway (``capture=ack``), each API in one
session already open (a session's first call also waits for its SessionOpened's ack), and,
for comparison, straight to the upstream (for Responses and Anthropic its chat stream,
which the gateway translates). ``--ttft-only`` runs only this part.

Routing across replicas (``--replicas-only``): a second fake upstream, and gateways with
both as replicas (``--upstream`` twice: sessions spread over them, each sticking to one)
beside gateways with the first alone, all loaded in the same interleaved rounds; prints the
added latency of each and what the second replica's routing adds over one.

Prints one line per measurement and a JSON line last.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import numpy as np
import psutil

ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _wait_http(url: str, proc: subprocess.Popen[bytes], timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args} exited with {proc.returncode}")
        try:
            if httpx.get(url, timeout=2).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{url} did not answer in {timeout_s} s")


@contextmanager
def _process(
    cmd: list[str],
    health_url: str,
    env: dict[str, str] | None = None,
    log: Path | None = None,
    cwd: Path = ROOT,
) -> Iterator[subprocess.Popen[bytes]]:
    out = open(log, "wb") if log else subprocess.DEVNULL  # noqa: SIM115
    proc = subprocess.Popen(
        cmd, cwd=cwd, env={**os.environ, **(env or {})}, stdout=out, stderr=subprocess.STDOUT
    )
    try:
        _wait_http(health_url, proc)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if log:
            out.close()  # type: ignore[union-attr]  # out is a file when log is set


@contextmanager
def _broker(bootstrap: str | None) -> Iterator[str]:
    if bootstrap:
        yield bootstrap
        return
    from rllm.infra.broker import LocalBroker

    with tempfile.TemporaryDirectory() as tmp:
        port = _free_port()
        while True:  # the controller takes port + 1
            try:
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port + 1))
                break
            except OSError:
                port = _free_port()
        broker = LocalBroker(port, Path(tmp))
        broker.start()
        try:
            yield broker.bootstrap_servers
        finally:
            broker.stop(purge=True)


async def _load(
    url_of: Callable[[int], str],
    rate: float,
    seconds: float,
    sessions: int,
    model: str = "m",
    max_inflight: int = 256,
) -> dict[str, Any]:
    """Open-loop load (at most ``max_inflight`` requests in flight; queueing time counts),
    sent with aiohttp (a cheaper client than httpx, so the load takes less of the machine
    it measures); return every latency (ms), the errors (unfinished ones too) and the
    seconds it took."""
    total = int(rate * seconds)
    lat_ms: list[float] = []
    errors = 0
    connector = aiohttp.TCPConnector(limit=1000)
    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as client:
        inflight = asyncio.Semaphore(max_inflight)

        async def one(k: int) -> None:
            nonlocal errors
            body = {
                "model": model,
                "messages": [{"role": "user", "content": f"hello {k}"}],
                "max_tokens": 16,
            }
            t0 = time.perf_counter()
            try:
                async with (
                    inflight,
                    client.post(
                        url_of(k % sessions) + "/chat/completions",
                        json=body,
                        headers={"authorization": "Bearer sk-perf"},
                    ) as resp,
                ):
                    await resp.read()
                    ok = resp.status == 200
            except (aiohttp.ClientError, TimeoutError):
                ok = False
            if ok:
                lat_ms.append((time.perf_counter() - t0) * 1000)
            else:
                errors += 1

        tasks = []
        start = time.perf_counter()
        for k in range(total):
            delay = start + k / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(k)))
        _done, pending = await asyncio.wait(tasks, timeout=seconds * 3 + 30)
        for task in pending:
            task.cancel()
        errors += len(pending)
        elapsed = time.perf_counter() - start
    return {"lat_ms": lat_ms, "errors": errors, "seconds": elapsed}


def _percentiles(lat_ms: list[float]) -> tuple[float, float]:
    arr = np.asarray(lat_ms or [float("nan")])
    return float(np.percentile(arr, 50)), float(np.percentile(arr, 99))


TTFT_CALLS: dict[str, tuple[str, dict[str, Any]]] = {
    "chat": (
        "/chat/completions",
        {"model": "m", "messages": [{"role": "user", "content": "hello"}], "stream": True},
    ),
    "completions": (
        "/completions",
        {"model": "m", "prompt": "hello world", "max_tokens": 8, "stream": True},
    ),
    "responses": ("/responses", {"model": "m", "input": "hello", "stream": True}),
    "anthropic": (
        "/messages",
        {
            "model": "m",
            "max_tokens": 64,
            "messages": [{"role": "user", "content": "hello"}],
            "stream": True,
        },
    ),
}
"""Each API's streamed call: its path under ``/v1`` and its body."""
DIRECT_OF = {"chat": "chat", "completions": "completions", "responses": "chat", "anthropic": "chat"}
"""The upstream call an API's call becomes (Responses and Anthropic are translated to chat)."""


def _is_token(api: str, payload: str) -> bool:
    """Whether one stream event of ``api`` carries answer text."""
    try:
        data = json.loads(payload)
    except ValueError:
        return False
    if api == "responses":
        return bool(data.get("type") == "response.output_text.delta" and data.get("delta"))
    if api == "anthropic":
        return bool(data.get("type") == "content_block_delta")
    choices = data.get("choices") or [{}]
    part = choices[0].get("delta", {}).get("content") if api == "chat" else choices[0].get("text")
    return bool(part)


async def _ttft(url: str, api: str, n: int) -> dict[str, float]:
    """``n`` sequential streamed calls of ``api`` to ``url``, after one untimed call (which,
    through the gateway, opens the session: that waits for SessionOpened's ack, once per
    session): p50 and p99 of the time to the first text event, and p50 of the time to the
    whole answer (ms)."""
    path, body = TTFT_CALLS[api]
    first_ms: list[float] = []
    whole_ms: list[float] = []
    async with httpx.AsyncClient(timeout=60) as client:
        async with client.stream("POST", url + path, json=body) as resp:
            await resp.aread()
        for _ in range(n):
            t0 = time.perf_counter()
            first = None
            async with client.stream("POST", url + path, json=body) as resp:
                if resp.status_code != 200:
                    raise RuntimeError(f"{api} stream answered {resp.status_code}")
                async for line in resp.aiter_lines():
                    if first is None and line.startswith("data:") and _is_token(api, line[5:]):
                        first = time.perf_counter()
            if first is None:
                raise RuntimeError(f"the {api} stream had no text")
            first_ms.append((first - t0) * 1000)
            whole_ms.append((time.perf_counter() - t0) * 1000)
    return {
        "p50_ms": float(np.percentile(first_ms, 50)),
        "p99_ms": float(np.percentile(first_ms, 99)),
        "whole_p50_ms": float(np.percentile(whole_ms, 50)),
    }


def _ttft_all(args: argparse.Namespace, bootstrap: str, prefix: str, tmp: Path) -> dict[str, Any]:
    """Time to first token of every API through a gateway and direct, one row each."""
    up_port, gw_port = _free_port(), _free_port()
    upstream, gw = f"http://127.0.0.1:{up_port}", f"http://127.0.0.1:{gw_port}"
    fake = [sys.executable, "-m", "tests.fakes.upstream", "--port", str(up_port)]
    fake += ["--chunk-delay-ms", str(args.ttft_chunk_delay_ms), "--tokens-per-chunk", "1"]
    cmd = _gateway_cmd(gw_port, upstream, "ack", bootstrap, prefix, tmp / "ttft")
    out: dict[str, Any] = {"chunk_delay_ms": args.ttft_chunk_delay_ms}
    with (
        _process(fake, f"{upstream}/v1/models"),
        _process(cmd, f"{gw}/health", log=tmp / "gw-ttft.log"),
    ):
        for api in TTFT_CALLS:
            via = asyncio.run(_ttft(f"{gw}/sessions/ttft-{api}/v1", api, args.ttft_requests))
            direct = asyncio.run(_ttft(f"{upstream}/v1", DIRECT_OF[api], args.ttft_requests))
            out[api] = {
                "gateway_ms": via["p50_ms"],
                "gateway_p99_ms": via["p99_ms"],
                "direct_ms": direct["p50_ms"],
                "added_ms": via["p50_ms"] - direct["p50_ms"],
                "whole_answer_ms": via["whole_p50_ms"],
            }
            print(
                f"time_to_first_token {api:<12} gateway p50 {via['p50_ms']:7.1f} ms "
                f"(p99 {via['p99_ms']:.1f})  direct p50 {direct['p50_ms']:7.1f} ms  "
                f"added {via['p50_ms'] - direct['p50_ms']:6.1f} ms  "
                f"whole answer {via['whole_p50_ms']:.0f} ms",
                flush=True,
            )
    return out


def _cpu_s(pid: int, children: bool = False) -> float:
    """CPU seconds (user + system) a process (and its children) used so far."""
    procs = [psutil.Process(pid)]
    if children:
        procs += procs[0].children(recursive=True)
    total = 0.0
    for proc in procs:
        times = proc.cpu_times()
        total += times.user + times.system
    return total


def _sessions_at(base: str, name: str) -> Callable[[int], str]:
    """The base URL of session ``i`` of a load named ``name`` at the gateway ``base``."""
    return lambda i: f"{base}/sessions/{name}{i}/v1"


@dataclass
class Target:
    """One thing the load is sent to: the upstream itself, a gateway or LiteLLM."""

    url_of: Callable[[int], str]
    """The base URL (``.../v1``) of session ``i``."""
    pid: int | None = None
    """Its process, whose CPU time is counted (None: the upstream, counted apart)."""
    children: bool = False
    """Count its child processes' CPU too (LiteLLM's workers)."""
    lat_ms: list[float] = field(default_factory=list)
    errors: int = 0
    sent: int = 0
    seconds: float = 0.0
    cpu_s: float = 0.0
    threads_s: dict[str, float] = field(default_factory=dict)
    """CPU seconds by thread: the event loop's (``main``), Kafka's and the others."""
    loads: list[float] = field(default_factory=list)
    """The machine's 1-minute load average after each of its rounds."""


def _threads_cpu(pid: int) -> dict[str, float]:
    """CPU seconds of each thread of ``pid`` so far, by kind: ``main`` (the event loop),
    ``kafka`` (librdkafka's threads), ``other`` (Python's threads: the producer's poll,
    the policy follower)."""
    out: dict[str, float] = {"main": 0.0, "kafka": 0.0, "other": 0.0}
    for thread in psutil.Process(pid).threads():
        try:
            name = Path(f"/proc/{pid}/task/{thread.id}/comm").read_text().strip()
        except OSError:
            name = ""
        kind = "main" if thread.id == pid else "kafka" if name.startswith("rdk:") else "other"
        out[kind] += thread.user_time + thread.system_time
    return out


PARTS = (
    ("kafka produce", ("rllm/kafka/", "confluent_kafka", "gateway/sink.py", "gateway/spool")),
    ("event encoding", ("fastavro", "rllm/schemas/", "numpy")),
    ("pydantic", ("pydantic",)),
    ("json", ("json/", "orjson", "gateway/jsonio.py")),
    (
        "upstream client",
        (
            "httpx",
            "httpcore",
            "aiohttp",
            "aiohappyeyeballs",
            "yarl",
            "multidict",
            "gateway/transport.py",
            "gateway/http1.py",
            "gateway/upstreams.py",
        ),
    ),
    ("server (uvicorn, starlette)", ("uvicorn", "starlette", "httptools")),
    ("gateway logic", ("rllm/",)),
    ("event loop", ("asyncio/", "uvloop", "selectors")),
)
"""The parts a gateway's CPU is split into: a py-spy sample counts for the first part one
of whose patterns names its innermost frame that names any (h11 and stdlib helpers are
passed over upward, so they count for whoever called them). ``--gil`` samples count a
syscall made without the GIL (a socket send that wakes the peer, librdkafka's produce) for
the part that made it, until another thread takes the GIL."""


def _parts(raw: Path) -> dict[str, float]:
    """Shares of ``py-spy record --gil --format raw`` samples by part (summing to 1)."""
    counts: dict[str, int] = {}
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if not n.isdigit():
            continue
        part = "other"
        for frame in reversed(stack.split(";")):
            hit = next((name for name, pats in PARTS if any(p in frame for p in pats)), None)
            if hit is not None:
                part = hit
                break
        counts[part] = counts.get(part, 0) + int(n)
        total += int(n)
    return {k: v / total for k, v in sorted(counts.items(), key=lambda kv: -kv[1])} if total else {}


def _side_by_side(args: argparse.Namespace, targets: dict[str, Target]) -> dict[str, Any]:
    """The load of every target in ``args.rounds`` interleaved rounds (a round sends
    ``rate`` requests/s for ``seconds / rounds`` to each, in a rotating order), so a machine
    shared with other work loads them alike; then each one's latency, rate, errors and CPU
    per request, and each gateway's CPU split by part (py-spy, when installed)."""
    for target in targets.values():  # warm-up: connections, imports, first sessions
        asyncio.run(_load(target.url_of, 50, 2, args.sessions))
    spies: dict[str, tuple[subprocess.Popen[bytes], Path]] = {}
    spy = None if args.py_spy == "off" else args.py_spy or shutil.which("py-spy")
    if spy is None and args.py_spy != "off" and (Path(sys.executable).parent / "py-spy").exists():
        spy = str(Path(sys.executable).parent / "py-spy")
    per_round = args.seconds / args.rounds
    if spy:
        for name in [n for n in targets if n not in ("direct", "litellm")]:
            raw = Path(tempfile.mkdtemp()) / f"{name}.txt"
            duration = int(per_round * args.rounds * len(targets) * 1.5) + 30
            cmd = [spy, "record", "--pid", str(targets[name].pid), "--gil", "--nonblocking"]
            cmd += ["--format", "raw", "--rate", "100", "--duration", str(duration), "-o", str(raw)]
            spies[name] = (
                subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
                raw,
            )
    names = list(targets)
    for r in range(args.rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            t = targets[name]
            cpu0 = _cpu_s(t.pid, t.children) if t.pid else 0.0
            th0 = _threads_cpu(t.pid) if t.pid and not t.children else {}
            res = asyncio.run(_load(t.url_of, args.rate, per_round, args.sessions))
            if t.pid:
                t.cpu_s += _cpu_s(t.pid, t.children) - cpu0
            for kind, v in (_threads_cpu(t.pid) if th0 and t.pid else {}).items():
                t.threads_s[kind] = t.threads_s.get(kind, 0.0) + v - th0[kind]
            t.lat_ms += res["lat_ms"]
            t.errors += res["errors"]
            t.sent += int(args.rate * per_round)
            t.seconds += res["seconds"]
            t.loads.append(os.getloadavg()[0])
    parts: dict[str, dict[str, float]] = {}
    for name, (proc, raw) in spies.items():
        proc.send_signal(signal.SIGINT)  # py-spy writes what it has on SIGINT
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        parts[name] = _parts(raw) if raw.exists() else {}
    out: dict[str, Any] = {}
    d50, d99 = _percentiles(targets["direct"].lat_ms)
    print(f"direct: p50 {d50:.2f} ms p99 {d99:.2f} ms{_load_of(targets['direct'])}", flush=True)
    out["direct_p50_ms"], out["direct_p99_ms"] = d50, d99
    for name, t in targets.items():
        if name == "direct":
            continue
        p50, p99 = _percentiles(t.lat_ms)
        served = max(t.sent - t.errors, 1)
        cpu_ms = t.cpu_s * 1000 / served
        key = name if name == "litellm" else f"gateway_{name}"
        out[f"{key}_added_p50_ms"], out[f"{key}_added_p99_ms"] = p50 - d50, p99 - d99
        out[f"{key}_requests_per_s"] = len(t.lat_ms) / max(t.seconds, 1e-9)
        out[f"{key}_errors"] = t.errors
        out[f"{key}_cpu_ms_per_request"] = cpu_ms
        out[f"{key}_load_average"] = [min(t.loads), max(t.loads)]
        threads = {k: v * 1000 / served for k, v in t.threads_s.items()}
        print(
            f"{key}: added p50 {p50 - d50:.2f} ms p99 {p99 - d99:.2f} ms, "
            f"{out[f'{key}_requests_per_s']:.0f} req/s, {t.errors} errors, "
            f"CPU {cpu_ms:.2f} ms/request"
            + (
                " (" + ", ".join(f"{k} {v:.2f}" for k, v in threads.items()) + ")"
                if threads
                else ""
            )
            + _load_of(t),
            flush=True,
        )
        if threads:
            out[f"{key}_cpu_ms_per_request_by_thread"] = threads
        if parts.get(name):
            split = {part: share * cpu_ms for part, share in parts[name].items()}
            out[f"{key}_cpu_ms_per_request_by_part"] = split
            print(
                f"  {key} CPU ms/request by part: "
                + ", ".join(f"{part} {ms:.3f}" for part, ms in split.items()),
                flush=True,
            )
    for mode in ("async", "ack"):
        if f"{mode}_before" not in targets:
            continue
        now, was = f"gateway_{mode}", f"gateway_{mode}_before"
        ratios = {
            what: out[f"{was}_{what}"] / out[f"{now}_{what}"]
            if out[f"{now}_{what}"] > 0
            else float("nan")
            for what in ("added_p50_ms", "added_p99_ms", "cpu_ms_per_request")
        }
        out[f"{now}_before_over_after"] = ratios
        print(
            f"capture={mode} before -> after: added p50 {out[f'{was}_added_p50_ms']:.2f} -> "
            f"{out[f'{now}_added_p50_ms']:.2f} ms ({ratios['added_p50_ms']:.1f}x), p99 "
            f"{out[f'{was}_added_p99_ms']:.2f} -> {out[f'{now}_added_p99_ms']:.2f} ms "
            f"({ratios['added_p99_ms']:.1f}x), CPU {out[f'{was}_cpu_ms_per_request']:.2f} -> "
            f"{out[f'{now}_cpu_ms_per_request']:.2f} ms/request "
            f"({ratios['cpu_ms_per_request']:.1f}x)",
            flush=True,
        )
    if "litellm" in targets:
        for mode in ("async", "ack"):
            ratio = out["litellm_cpu_ms_per_request"] / max(
                out[f"gateway_{mode}_cpu_ms_per_request"], 1e-9
            )
            out[f"litellm_cpu_over_gateway_{mode}"] = ratio
            print(f"LiteLLM spends {ratio:.1f}x the CPU per request of capture={mode}", flush=True)
    limits = {  # (figure, limit): a figure at or under its limit meets its target
        "async added p50 <= 1 ms": (out["gateway_async_added_p50_ms"], 1.0),
        "ack added p50 <= 3 ms": (out["gateway_ack_added_p50_ms"], 3.0),
        "async added p99 <= 5 ms": (out["gateway_async_added_p99_ms"], 5.0),
        "ack added p99 <= 5 ms": (out["gateway_ack_added_p99_ms"], 5.0),
    }
    checks = {what: value <= limit for what, (value, limit) in limits.items()}
    for what, (value, limit) in limits.items():
        verdict = "met" if checks[what] else f"NOT met, {value - limit:.2f} ms over"
        print(f"target {what}: {verdict} ({value:.2f} ms)", flush=True)
    rates = {m: out[f"gateway_{m}_requests_per_s"] for m in ("async", "ack")}
    whole_rate = "100% of the rate served (async, ack)"
    checks[whole_rate] = all(rate >= 0.97 * args.rate for rate in rates.values())
    print(
        f"target {whole_rate}: {'met' if checks[whole_rate] else 'NOT met'} "
        f"({rates['async']:.0f} and {rates['ack']:.0f} of {args.rate:.0f} req/s)",
        flush=True,
    )
    out["targets_met"] = checks
    return out


def _load_of(target: Target) -> str:
    """The machine's load average over a target's rounds, for its line."""
    if not target.loads:
        return ""
    return f"  [load {min(target.loads):.1f}-{max(target.loads):.1f}]"


def _baseline_tree(rev: str, into: Path) -> Path:
    """The gateway's code at git revision ``rev`` (the package and the test fakes),
    unpacked under ``into``; a gateway started there runs that code."""
    tree = into / f"baseline-{rev.replace('/', '_')}"
    tree.mkdir()
    archive = subprocess.run(
        ["git", "archive", rev, "rllm", "tests/__init__.py", "tests/fakes"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return tree


def _stack_of(env: dict[str, str], tree: Path) -> str:
    """The event loop and HTTP parser a gateway started with ``env`` in ``tree`` runs."""
    probe = "from rllm.producers.gateway.server import server_stack; print(*server_stack())"
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tree,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return "+".join(done.stdout.split())


def _gateway_cmd(
    port: int, upstream: str | list[str], capture: str, bootstrap: str, prefix: str, spool: Path
) -> list[str]:
    upstreams = [upstream] if isinstance(upstream, str) else upstream
    return [
        sys.executable,
        "-m",
        "rllm.cli",
        "gateway",
        "--port",
        str(port),
        *(arg for url in upstreams for arg in ("--upstream", url)),
        "--capture",
        capture,
        "--spool-dir",
        str(spool),
        "-b",
        bootstrap,
        "--topic-prefix",
        prefix,
        "--insecure",  # the load opens sessions implicitly by made-up id, as before the keys
    ]


async def _rss_run(url: str, sessions: int, turns: int, context_chars: int) -> None:
    sem = asyncio.Semaphore(32)
    filler = "x" * context_chars
    async with httpx.AsyncClient(timeout=120) as client:

        async def session(i: int) -> None:
            messages: list[dict[str, str]] = []
            base = f"{url}/sessions/rss-{i}/v1/chat/completions"
            for t in range(turns):
                messages.append({"role": "user", "content": f"{t} {filler}"})
                async with sem:
                    resp = await client.post(base, json={"model": "m", "messages": messages})
                if resp.status_code != 200:
                    raise RuntimeError(
                        f"session {i} turn {t}: {resp.status_code} {resp.text[:300]}"
                    )
                messages.append(
                    {
                        "role": "assistant",
                        "content": resp.json()["choices"][0]["message"]["content"],
                    }
                )

        await asyncio.gather(*(session(i) for i in range(sessions)))


def _litellm(venv: Path, upstream: str, port: int, tmp: Path) -> Any:
    config = tmp / "litellm.yaml"
    config.write_text(
        json.dumps(
            {
                "model_list": [
                    {
                        "model_name": "m",
                        "litellm_params": {
                            "model": "openai/m",
                            "api_base": f"{upstream}/v1",
                            "api_key": "x",
                        },
                    }
                ],
                "general_settings": {"master_key": "sk-perf"},
            }
        )
    )
    cmd = [
        str(venv / "bin" / "litellm"),
        "--config",
        str(config),
        "--port",
        str(port),
        "--host",
        "127.0.0.1",
        "--num_workers",
        "1",
    ]
    # its own venv: none of ours on its path (PYTHONPATH may name our extras)
    env = {"PYTHONPATH": ""}
    return _process(
        cmd, f"http://127.0.0.1:{port}/health/liveliness", env=env, log=tmp / "litellm.log"
    )


def _replicas(args: argparse.Namespace, bootstrap: str, prefix: str, tmp: Path) -> dict[str, Any]:
    """The latency a gateway routing across two replicas adds, beside one with the first
    replica alone (``capture`` async and ack), in the same interleaved rounds."""
    with contextlib.ExitStack() as stack:
        upstreams = []
        for _ in range(2):
            port = _free_port()
            url = f"http://127.0.0.1:{port}"
            cmd = [sys.executable, "-m", "tests.fakes.upstream", "--port", str(port)]
            stack.enter_context(_process(cmd, f"{url}/v1/models"))
            upstreams.append(url)
        targets = {"direct": Target(lambda i: f"{upstreams[0]}/v1")}
        for capture in ("async", "ack"):
            for name, behind in ((capture, upstreams[:1]), (f"{capture}_2replicas", upstreams)):
                port = _free_port()
                gw = f"http://127.0.0.1:{port}"
                cmd = _gateway_cmd(port, behind, capture, bootstrap, prefix, tmp / name)
                log = tmp / f"gw-{name}.log"
                proc = stack.enter_context(_process(cmd, f"{gw}/health", log=log))
                targets[name] = Target(_sessions_at(gw, name), proc.pid)
        out = _side_by_side(args, targets)
        for capture in ("async", "ack"):
            one, two = f"gateway_{capture}", f"gateway_{capture}_2replicas"
            for what in ("added_p50_ms", "added_p99_ms", "cpu_ms_per_request"):
                out[f"{two}_over_one_{what}"] = out[f"{two}_{what}"] - out[f"{one}_{what}"]
            print(
                f"capture={capture}: 2 replicas add p50 {out[f'{two}_added_p50_ms']:.2f} ms "
                f"(one: {out[f'{one}_added_p50_ms']:.2f}, routing "
                f"{out[f'{two}_over_one_added_p50_ms']:+.2f}), p99 "
                f"{out[f'{two}_added_p99_ms']:.2f} ms, {out[f'{two}_errors']} errors",
                flush=True,
            )
        for capture, limit in (("async", 1.0), ("ack", 3.0)):
            value = out[f"gateway_{capture}_2replicas_added_p50_ms"]
            out["targets_met"][f"2 replicas {capture} added p50 <= {limit:g} ms"] = value <= limit
        return out


def main() -> None:
    """Run every measurement; print the JSON summary last."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the cleanups on SIGTERM
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--rate", type=float, default=500.0)
    p.add_argument("--seconds", type=float, default=20.0, help="load seconds per target")
    p.add_argument("--sessions", type=int, default=100)
    p.add_argument("--rss-sessions", type=int, default=1000)
    p.add_argument("--rss-turns", type=int, default=4)
    p.add_argument("--context-chars", type=int, default=4000)
    p.add_argument("--bootstrap", default=None, help="Kafka host:port (default: start one)")
    p.add_argument("--litellm-venv", type=Path, default=Path("/tmp/litellm-venv"))
    p.add_argument("--ttft-requests", type=int, default=20, help="streamed calls per API")
    p.add_argument("--ttft-chunk-delay-ms", type=float, default=20.0)
    p.add_argument("--ttft-only", action="store_true", help="measure time to first token only")
    p.add_argument(
        "--replicas-only",
        action="store_true",
        help="measure only the latency added routing across two replicas (and one)",
    )
    p.add_argument("--rounds", type=int, default=5, help="interleaved rounds of the load")
    p.add_argument(
        "--py-spy",
        default=None,
        help="py-spy binary (default: on PATH or beside this Python); 'off': no CPU split, "
        "and no sampler taking the machine's CPU during the latency rounds",
    )
    p.add_argument(
        "--baseline",
        default=None,
        help="a git revision whose gateways are measured beside these (before and after)",
    )
    p.add_argument(
        "--stack-path",
        action="append",
        default=[],
        help="a directory put first on the gateways' path (one holding uvloop and httptools)",
    )
    args = p.parse_args()
    result: dict[str, Any] = {"rate_target": args.rate, "sessions": args.sessions}
    with tempfile.TemporaryDirectory() as tmp_s, _broker(args.bootstrap) as bootstrap:
        tmp = Path(tmp_s)
        from rllm.kafka import ensure_topics
        from rllm.settings import KafkaSettings

        prefix = f"perf{uuid.uuid4().hex[:6]}."
        ensure_topics(KafkaSettings(bootstrap_servers=bootstrap, topic_prefix=prefix))
        if args.replicas_only:
            result.update(_replicas(args, bootstrap, prefix, tmp))
            print(json.dumps(result))
            return
        result["time_to_first_token_ms"] = _ttft_all(args, bootstrap, prefix, tmp)
        if args.ttft_only:
            print(json.dumps(result))
            return
        up_port = _free_port()
        upstream = f"http://127.0.0.1:{up_port}"
        with contextlib.ExitStack() as stack:
            stack.enter_context(
                _process(
                    [sys.executable, "-m", "tests.fakes.upstream", "--port", str(up_port)],
                    f"{upstream}/v1/models",
                )
            )
            targets = {"direct": Target(lambda i: f"{upstream}/v1")}
            trees = [("", ROOT)]
            if args.baseline:
                trees.append(("_before", _baseline_tree(args.baseline, tmp)))
            for suffix, tree in trees:
                env = {"PYTHONPATH": os.pathsep.join([*args.stack_path, str(tree)])}
                print(f"gateway{suffix or ''} ({tree}): {_stack_of(env, tree)}", flush=True)
                for capture in ("async", "ack"):
                    name, port = f"{capture}{suffix}", _free_port()
                    gw = f"http://127.0.0.1:{port}"
                    cmd = _gateway_cmd(port, upstream, capture, bootstrap, prefix, tmp / name)
                    log = tmp / f"gw-{name}.log"
                    proc = stack.enter_context(
                        _process(cmd, f"{gw}/health", env=env, log=log, cwd=tree)
                    )
                    targets[name] = Target(_sessions_at(gw, name), proc.pid)
            if (args.litellm_venv / "bin" / "litellm").exists():
                port = _free_port()
                try:
                    lp = stack.enter_context(_litellm(args.litellm_venv, upstream, port, tmp))
                    lurl = f"http://127.0.0.1:{port}/v1"
                    targets["litellm"] = Target(lambda i: lurl, lp.pid, children=True)
                except RuntimeError as exc:
                    print(f"litellm did not run: {exc}", flush=True)
            else:
                print(f"litellm: not installed in {args.litellm_venv}; skipped", flush=True)
            result.update(_side_by_side(args, targets))
            port = _free_port()
            gw = f"http://127.0.0.1:{port}"
            cmd = _gateway_cmd(port, upstream, "async", bootstrap, prefix, tmp / "rss")
            with _process(cmd, f"{gw}/health", log=tmp / "gw-rss.log") as proc:
                t0 = time.perf_counter()
                asyncio.run(_rss_run(gw, args.rss_sessions, args.rss_turns, args.context_chars))
                rss_mb = psutil.Process(proc.pid).memory_info().rss / 2**20
                print(
                    f"rss after {args.rss_sessions} sessions x {args.rss_turns} turns "
                    f"(~{args.context_chars * args.rss_turns} chars of context): {rss_mb:.0f} MB "
                    f"in {time.perf_counter() - t0:.1f} s",
                    flush=True,
                )
            result["rss_mb_1000_sessions"] = rss_mb
            result["rss_sessions"] = args.rss_sessions
    print(json.dumps(result))


if __name__ == "__main__":
    main()
