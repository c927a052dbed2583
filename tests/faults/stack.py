"""The whole pipeline in its own processes on a fresh broker (or a three-node cluster) in a
temporary directory: gateway (``capture=ack``), processors, history and trainer, each a
:class:`Service` that a fault can SIGKILL and start again."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from rllm.errors import InfraError
from rllm.infra.broker import LocalBroker, LocalCluster
from rllm.kafka import end_offsets, ensure_topics
from rllm.schemas.topics import POLICY_UPDATES, TOPICS
from rllm.settings import KafkaSettings
from tests.integration.helpers import members
from tests.paths import ROOT
from tests.ports import free_broker_port, free_ports

__all__ = ["ADMIN_KEY", "HISTORY_GROUP", "PROCESSORS_GROUP", "Service", "Stack", "count", "members"]

ADMIN_KEY = "faults-admin-key"
"""The gateway's admin key (the driver opens and closes sessions with it)."""
PROCESSORS_GROUP = "rllm-processors"
"""The processors' consumer group (``ProcessorSettings.app_id``)."""
HISTORY_GROUP = "rllm-history"
"""The history sink's consumer group (``HistorySettings.history_group_id``)."""


def count(kafka: KafkaSettings, name: str) -> int:
    """Records on a topic, by its end offsets."""
    return sum(end_offsets(kafka, kafka.topic(name)).values())


class Service:
    """One component in its own process: its command, environment and logs (one file per
    start, ``<name>-<n>.log``); it runs in ``log_dir``'s parent (faust keeps its
    ``<app>-data`` folder in the working directory)."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], log_dir: Path) -> None:
        self.name, self.argv, self.env, self.log_dir = name, argv, env, log_dir
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self._terminated = self._killed = False

    @property
    def crashed(self) -> bool:
        """Whether the process exited without being told to (SIGTERM or SIGKILL)."""
        return (
            self.proc is not None
            and self.proc.poll() is not None
            and not (self._terminated or self._killed)
        )

    @property
    def running(self) -> bool:
        """Whether the process was started and has not exited."""
        return self.proc is not None and self.proc.poll() is None

    def start(self, *extra: str) -> Service:
        """Start the process (with ``extra`` arguments for this start only)."""
        if self.running:
            raise InfraError(f"{self.name} is already running (pid {self.proc.pid})")  # type: ignore[union-attr]  # running is True: proc is set
        with open(self.log_dir / f"{self.name}-{self.starts}.log", "wb") as log:
            self.proc = subprocess.Popen(
                [*self.argv, *extra],
                cwd=self.log_dir.parent,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self.starts += 1
        self._terminated = self._killed = False
        return self

    def kill(self) -> None:
        """SIGKILL the process and reap it."""
        if self.proc is not None and self.proc.poll() is None:
            self._killed = True
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)

    def terminate(self) -> None:
        """Send SIGTERM once if it runs (``stop`` waits for it)."""
        if self.proc is not None and self.proc.poll() is None and not self._terminated:
            self.proc.send_signal(signal.SIGTERM)
            self._terminated = True

    def stop(self, timeout_s: float = 30.0) -> int | None:
        """SIGTERM (unless sent already) and wait, SIGKILL after ``timeout_s``; the exit
        code, None if never started."""
        if self.proc is None:
            return None
        if self.proc.returncode is None:
            self.terminate()
            try:
                return self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.proc.returncode

    def grep(self, text: str) -> list[str]:
        """Lines holding ``text`` in the logs of every start."""
        logs = [self.log_dir / f"{self.name}-{n}.log" for n in range(self.starts)]
        return [
            line
            for log in logs
            for line in log.read_text(errors="replace").splitlines()
            if text in line
        ]

    def log(self, chars: int = 3000) -> str:
        """The end of the latest start's output."""
        path = self.log_dir / f"{self.name}-{max(self.starts - 1, 0)}.log"
        return path.read_text(errors="replace")[-chars:] if path.is_file() else ""


class Stack:
    """A broker (``brokers`` = 1) or a cluster (3), its topics, and the four services.

    Args:
        root: a fresh directory for everything (broker data, spool, history, checkpoints).
        brokers: 1 or 3.
        upstream_url: the model server the gateway forwards to.
        model_dir: the trainer's tiny model (made on first use, shared by every run).
    """

    def __init__(self, root: Path, brokers: int, upstream_url: str, model_dir: Path) -> None:
        self.root = root
        self.logs = root / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.broker: LocalBroker | LocalCluster = (
            LocalBroker(free_broker_port(), root / "kafka", heap="384m")
            if brokers == 1
            else LocalCluster(free_ports(2 * brokers), root / "kafka", brokers, heap="384m")
        )
        replicas = 1 if brokers == 1 else min(brokers, 3)
        self.kafka = KafkaSettings(
            bootstrap_servers=self.broker.bootstrap_servers,
            replication_factor=replicas,
            request_timeout_s=15,
        )
        self.gateway_port = free_broker_port()
        self.gateway_url = f"http://127.0.0.1:{self.gateway_port}"
        self.checkpoints = root / "checkpoints"
        self.history_dir = root / "history"
        env = {
            **os.environ,
            "RLLM_HOME": str(root / "home"),
            "RLLM_BOOTSTRAP_SERVERS": self.kafka.bootstrap_servers,
            "RLLM_TOPIC_PREFIX": "",
            "RLLM_REPLICATION_FACTOR": str(replicas),
            "PYTHONUNBUFFERED": "1",
            "PYTHONPATH": os.pathsep.join(  # tests.faults.* from any working directory
                p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p
            ),
        }
        cli = [sys.executable, "-m", "rllm.cli"]
        self.gateway = Service(
            "gateway",
            [*cli, "gateway", "--port", str(self.gateway_port), "--upstream", upstream_url],
            {
                **env,
                "RLLM_GATEWAY_CAPTURE": "ack",
                "RLLM_GATEWAY_ADMIN_KEY": ADMIN_KEY,
                "RLLM_GATEWAY_SPOOL_DIR": str(root / "spool"),
                "RLLM_GATEWAY_ACK_TIMEOUT_S": "3",
                "RLLM_GATEWAY_DRAIN_INTERVAL_S": "0.3",
                "RLLM_GATEWAY_FOLLOW_POLICY_UPDATES": "false",
            },
            self.logs,
        )
        self._worker_env = {
            **env,
            "RLLM_SESSION_TIMEOUT_S": "6",
            "RLLM_TICK_INTERVAL_S": "0.5",
            "RLLM_COMMIT_INTERVAL_S": "0.5",
        }
        self._worker_argv = [*cli, "process"]
        self.workers: list[Service] = []
        self.history = Service(
            "history",
            [sys.executable, "-m", "tests.faults.history_proc", "--dir", str(self.history_dir)],
            env,
            self.logs,
        )
        self.trainer = Service(
            "trainer",
            [
                *(sys.executable, "-m", "tests.faults.trainer_proc"),
                *("--model", str(model_dir), "--checkpoints", str(self.checkpoints)),
            ],
            {**env, "OMP_NUM_THREADS": "1"},
            self.logs,
        )

    # --- lifecycle ------------------------------------------------------------------
    def start(self, trainer_args: tuple[str, ...] = (), history_args: tuple[str, ...] = ()) -> None:
        """Start the broker, create the topics, start every service; return once each is
        at work: the gateway answers, the worker and the history sink hold their
        partitions, the trainer announced its base policy.

        Raises:
            InfraError: a service exited or was not ready in time, with its log.
        """
        self.broker.start()
        ensure_topics(self.kafka, TOPICS, partitions=3)
        self.gateway.start()
        self.add_worker()
        self.history.start(*history_args)
        self.trainer.start(*trainer_args)
        self.wait_gateway()
        ready: dict[Service, Callable[[], bool]] = {
            self.workers[0]: lambda: members(self.kafka, PROCESSORS_GROUP) == 1,
            self.history: lambda: members(self.kafka, HISTORY_GROUP) == 1,
            self.trainer: lambda: count(self.kafka, POLICY_UPDATES) >= 1,
        }
        deadline = time.monotonic() + 180
        for service, is_ready in ready.items():
            while not is_ready():
                if not service.running or time.monotonic() > deadline:
                    raise InfraError(f"{service.name} is not at work:\n{service.log()}")
                time.sleep(0.2)

    def add_worker(self) -> Service:
        """Start one more ``rllm-cli process`` worker (same consumer group)."""
        worker = Service(
            f"worker{len(self.workers)}", self._worker_argv, self._worker_env, self.logs
        )
        self.workers.append(worker.start())
        return worker

    def services(self) -> list[Service]:
        """Every service started so far."""
        return [self.gateway, *self.workers, self.history, self.trainer]

    def close(self) -> None:
        """Stop every service and the broker; delete the broker's data."""
        for service in self.services():
            service.terminate()  # all at once: each takes a few seconds to stop
        for service in self.services():
            service.stop(timeout_s=20)
        if isinstance(self.broker, LocalCluster):
            # a cluster stopped node by node waits out controller elections (about 40 s):
            # its data is thrown away, so each node is SIGKILLed instead
            for node in range(1, self.broker.brokers + 1):
                with contextlib.suppress(InfraError):  # not running
                    self.broker.kill(node)
            shutil.rmtree(self.broker.data_dir, ignore_errors=True)
        else:
            self.broker.stop(purge=True)

    # --- the gateway ----------------------------------------------------------------
    def health(self) -> dict[str, Any]:
        """The gateway's ``/health`` (spool depth, spooling)."""
        answer: dict[str, Any] = httpx.get(f"{self.gateway_url}/health", timeout=10).json()
        return answer

    def wait_gateway(self, timeout_s: float = 60.0) -> None:
        """Wait until the gateway answers ``/health``.

        Raises:
            InfraError: it exited or did not answer in time, with its log.
        """
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self.gateway.running:
                raise InfraError(f"the gateway exited:\n{self.gateway.log()}")
            try:
                self.health()
                return
            except httpx.HTTPError:
                time.sleep(0.2)
        raise InfraError(f"the gateway did not answer in {timeout_s:.0f} s:\n{self.gateway.log()}")
