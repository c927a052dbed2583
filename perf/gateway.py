"""Latency the gateway adds over calling the same upstream directly, and its memory.

Starts (each as its own process): the fake vLLM-style upstream (``tests.fakes.upstream``),
the gateway (``rllm-cli gateway``) with ``capture=async`` and then ``capture=ack``, and the
LiteLLM proxy when ``/tmp/litellm-venv/bin/litellm`` exists (``--litellm-venv``). A Kafka
broker comes from ``--bootstrap`` or is started in a temporary directory.

Load: open loop at ``--rate`` requests/s for ``--seconds``, spread over ``--sessions``
sessions (each its own ``/sessions/{id}/v1`` URL). Added latency = percentile through the
proxy minus the same percentile direct. Then ``--rss-sessions`` sessions with long
multi-turn contexts go through a fresh gateway and its RSS is read.

CPU time per request of the gateway (and of LiteLLM) is printed too: on a shared machine
it is steadier than latency.

Time to first token: a second fake upstream streams one token a chunk, ``--ttft-chunk-delay-ms``
apart; ``--ttft-requests`` sequential streamed calls of each API (chat, completions,
Responses, Anthropic Messages) go through a gateway (``capture=ack``) and, for comparison,
straight to the upstream (for Responses and Anthropic its chat stream, which the gateway
translates). ``--ttft-only`` runs only this part.

Prints one line per measurement and a JSON line last.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

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
    cmd: list[str], health_url: str, env: dict[str, str] | None = None, log: Path | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    out = open(log, "wb") if log else subprocess.DEVNULL  # noqa: SIM115
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env={**os.environ, **(env or {})}, stdout=out, stderr=subprocess.STDOUT
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
            out.close()  # type: ignore[union-attr]


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
) -> dict[str, float]:
    """Open-loop load (at most ``max_inflight`` requests in flight; queueing time counts);
    return latency percentiles (ms), the achieved rate, and errors (unfinished ones too)."""
    total = int(rate * seconds)
    lat_ms: list[float] = []
    errors = 0
    limits = httpx.Limits(max_connections=1000, max_keepalive_connections=1000)
    async with httpx.AsyncClient(limits=limits, timeout=60) as client:
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
                async with inflight:
                    resp = await client.post(
                        url_of(k % sessions) + "/chat/completions",
                        json=body,
                        headers={"authorization": "Bearer sk-perf"},
                    )
                ok = resp.status_code == 200
            except httpx.HTTPError:
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
    arr = np.asarray(lat_ms or [float("nan")])
    return {
        "p50_ms": float(np.percentile(arr, 50)),
        "p99_ms": float(np.percentile(arr, 99)),
        "requests_per_s": len(lat_ms) / elapsed,
        "errors": float(errors),
    }


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


async def _ttft(url_of: Callable[[int], str], api: str, n: int) -> dict[str, float]:
    """``n`` sequential streamed calls of ``api``: p50 and p99 of the time to the first text
    event, and p50 of the time to the whole answer (ms)."""
    path, body = TTFT_CALLS[api]
    first_ms: list[float] = []
    whole_ms: list[float] = []
    async with httpx.AsyncClient(timeout=60) as client:
        for k in range(n):
            t0 = time.perf_counter()
            first = None
            async with client.stream("POST", url_of(k) + path, json=body) as resp:
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
            via = asyncio.run(
                _ttft(lambda k, a=api: f"{gw}/sessions/ttft-{a}-{k}/v1", api, args.ttft_requests)
            )
            direct = asyncio.run(
                _ttft(lambda k: f"{upstream}/v1", DIRECT_OF[api], args.ttft_requests)
            )
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


def _gateway_cmd(
    port: int, upstream: str, capture: str, bootstrap: str, prefix: str, spool: Path
) -> list[str]:
    return [
        sys.executable,
        "-m",
        "rllm.cli",
        "gateway",
        "--port",
        str(port),
        "--upstream",
        upstream,
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
    return _process(cmd, f"http://127.0.0.1:{port}/health/liveliness", log=tmp / "litellm.log")


def main() -> None:
    """Run every measurement; print the JSON summary last."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the cleanups on SIGTERM
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--rate", type=float, default=500.0)
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--sessions", type=int, default=100)
    p.add_argument("--rss-sessions", type=int, default=1000)
    p.add_argument("--rss-turns", type=int, default=4)
    p.add_argument("--context-chars", type=int, default=4000)
    p.add_argument("--bootstrap", default=None, help="Kafka host:port (default: start one)")
    p.add_argument("--litellm-venv", type=Path, default=Path("/tmp/litellm-venv"))
    p.add_argument("--ttft-requests", type=int, default=20, help="streamed calls per API")
    p.add_argument("--ttft-chunk-delay-ms", type=float, default=20.0)
    p.add_argument("--ttft-only", action="store_true", help="measure time to first token only")
    args = p.parse_args()
    result: dict[str, Any] = {"rate_target": args.rate, "sessions": args.sessions}
    with tempfile.TemporaryDirectory() as tmp_s, _broker(args.bootstrap) as bootstrap:
        tmp = Path(tmp_s)
        from rllm.kafka import ensure_topics
        from rllm.settings import KafkaSettings

        prefix = f"perf{uuid.uuid4().hex[:6]}."
        ensure_topics(KafkaSettings(bootstrap_servers=bootstrap, topic_prefix=prefix))
        result["time_to_first_token_ms"] = _ttft_all(args, bootstrap, prefix, tmp)
        if args.ttft_only:
            print(json.dumps(result))
            return
        up_port = _free_port()
        upstream = f"http://127.0.0.1:{up_port}"
        with _process(
            [sys.executable, "-m", "tests.fakes.upstream", "--port", str(up_port)],
            f"{upstream}/v1/models",
        ):
            asyncio.run(_load(lambda i: f"{upstream}/v1", 100, 2, args.sessions))  # warm-up
            direct = asyncio.run(
                _load(lambda i: f"{upstream}/v1", args.rate, args.seconds, args.sessions)
            )
            print(f"direct: {direct}", flush=True)
            for capture in ("async", "ack"):
                port = _free_port()
                gw = f"http://127.0.0.1:{port}"
                cmd = _gateway_cmd(port, upstream, capture, bootstrap, prefix, tmp / capture)
                with _process(cmd, f"{gw}/health", log=tmp / f"gw-{capture}.log") as gp:
                    asyncio.run(
                        _load(lambda i, gw=gw: f"{gw}/sessions/w{i}/v1", 100, 2, args.sessions)
                    )
                    cpu0 = _cpu_s(gp.pid)
                    res = asyncio.run(
                        _load(
                            lambda i, gw=gw, c=capture: f"{gw}/sessions/{c}{i}/v1",
                            args.rate,
                            args.seconds,
                            args.sessions,
                        )
                    )
                    res["cpu_ms_per_request"] = (
                        (_cpu_s(gp.pid) - cpu0)
                        * 1000
                        / max(args.rate * args.seconds - res["errors"], 1)
                    )
                print(f"gateway capture={capture}: {res}", flush=True)
                result[f"gateway_cpu_ms_per_request_{capture}"] = res["cpu_ms_per_request"]
                result[f"overhead_p50_ms_{capture}"] = res["p50_ms"] - direct["p50_ms"]
                result[f"overhead_p99_ms_{capture}"] = res["p99_ms"] - direct["p99_ms"]
                result[f"requests_per_s_{capture}"] = res["requests_per_s"]
                result[f"errors_{capture}"] = res["errors"]
            result["requests_per_s"] = result["requests_per_s_async"]
            result["direct_p50_ms"], result["direct_p99_ms"] = direct["p50_ms"], direct["p99_ms"]
            result["litellm_overhead_p50_ms"] = result["litellm_overhead_p99_ms"] = None
            if (args.litellm_venv / "bin" / "litellm").exists():
                port = _free_port()
                try:
                    with _litellm(args.litellm_venv, upstream, port, tmp) as lp:
                        lurl = f"http://127.0.0.1:{port}/v1"
                        asyncio.run(_load(lambda i: lurl, 50, 2, args.sessions))
                        cpu0 = _cpu_s(lp.pid, children=True)
                        lit = asyncio.run(
                            _load(lambda i: lurl, args.rate, args.seconds, args.sessions)
                        )
                        lit["cpu_ms_per_request"] = (
                            (_cpu_s(lp.pid, children=True) - cpu0)
                            * 1000
                            / max(args.rate * args.seconds - lit["errors"], 1)
                        )
                    result["litellm_cpu_ms_per_request"] = lit["cpu_ms_per_request"]
                    print(f"litellm: {lit}", flush=True)
                    result["litellm_overhead_p50_ms"] = lit["p50_ms"] - direct["p50_ms"]
                    result["litellm_overhead_p99_ms"] = lit["p99_ms"] - direct["p99_ms"]
                    result["litellm_requests_per_s"] = lit["requests_per_s"]
                except RuntimeError as exc:
                    print(f"litellm did not run: {exc}", flush=True)
            else:
                print(f"litellm: not installed in {args.litellm_venv}; skipped", flush=True)
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
