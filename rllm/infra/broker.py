"""Start and stop the local Apache Kafka broker (KRaft), or a cluster of them, through the
``infra/kafka`` scripts (``start``/``stop``/``status`` for one node, ``cluster`` for N)."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from rllm.errors import InfraError

__all__ = ["LocalBroker", "LocalCluster", "kafka_dir"]


def kafka_dir() -> Path:
    """The folder with the broker's ``pom.xml`` and ``start``/``stop``/``status`` scripts.

    ``$RLLM_INFRA_DIR/kafka`` if set, else the copy inside the installed package, else the
    source tree's ``infra/kafka``.
    """
    candidates = []
    if os.environ.get("RLLM_INFRA_DIR"):
        candidates.append(Path(os.environ["RLLM_INFRA_DIR"]) / "kafka")
    here = Path(__file__).resolve().parent
    candidates += [here / "kafka", here.parents[1] / "infra" / "kafka"]
    for path in candidates:
        if (path / "start").is_file():
            return path
    raise InfraError(
        "cannot find the Kafka scripts (infra/kafka/start); looked in "
        + ", ".join(str(p) for p in candidates)
        + "; set RLLM_INFRA_DIR to the repository's infra/ folder"
    )


def _run_script(
    script: str, args: tuple[str, ...], env: dict[str, str], timeout: float
) -> subprocess.CompletedProcess[str]:
    path = kafka_dir() / script
    try:
        return subprocess.run(
            ["bash", str(path), *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise InfraError(f"{path} {' '.join(args)} did not finish in {timeout:.0f} s") from exc


@dataclass(frozen=True)
class LocalBroker:
    """One local broker: its port and data directory."""

    port: int
    data_dir: Path
    heap: str = "512m"

    @property
    def bootstrap_servers(self) -> str:
        """Where clients connect."""
        return f"127.0.0.1:{self.port}"

    def _env(self) -> dict[str, str]:
        return {
            **os.environ,
            "RLLM_KAFKA_PORT": str(self.port),
            "RLLM_KAFKA_CONTROLLER_PORT": str(self.port + 1),
            "RLLM_KAFKA_DATA_DIR": str(self.data_dir),
            "RLLM_KAFKA_HEAP": self.heap,
        }

    def _run(
        self, script: str, *args: str, timeout: float = 600
    ) -> subprocess.CompletedProcess[str]:
        return _run_script(script, args, self._env(), timeout)

    def start(self) -> str:
        """Start the broker (idempotent); return what the script printed.

        Raises:
            InfraError: with the script's output when the broker does not come up.
        """
        proc = self._run("start")
        if proc.returncode != 0:
            raise InfraError(
                f"Kafka broker did not start on port {self.port} (data {self.data_dir}):\n"
                + (proc.stdout + proc.stderr).strip()
            )
        return proc.stdout.strip()

    def stop(self, purge: bool = False) -> str:
        """Stop the broker (idempotent); ``purge`` also deletes its data."""
        proc = self._run("stop", *(["--purge"] if purge else []), timeout=120)
        if proc.returncode != 0:
            raise InfraError(f"Kafka broker did not stop:\n{(proc.stdout + proc.stderr).strip()}")
        return proc.stdout.strip()

    def is_running(self) -> bool:
        """Whether the broker runs and answers."""
        return self._run("status", timeout=60).returncode == 0


@dataclass(frozen=True)
class LocalCluster:
    """``brokers`` local KRaft nodes (each broker and controller): node ``i`` listens on
    ``port + 2(i-1)`` and keeps its data in ``data_dir/node-i``; topics get
    ``min(brokers, 3)`` replicas with one fewer in sync (``infra/kafka/cluster``)."""

    port: int
    data_dir: Path
    brokers: int = 3
    heap: str = "512m"

    @property
    def bootstrap_servers(self) -> str:
        """Every node's address, comma-separated."""
        return ",".join(f"127.0.0.1:{self.port + 2 * i}" for i in range(self.brokers))

    @property
    def replication_factor(self) -> int:
        """Replicas of each topic on this cluster."""
        return min(self.brokers, 3)

    def _cluster(self, command: str, *args: str, timeout: float = 600) -> str:
        env = {**os.environ, "RLLM_KAFKA_HEAP": self.heap}
        argv = (
            command,
            *args,
            "--brokers",
            str(self.brokers),
            "--port",
            str(self.port),
            "--data-dir",
            str(self.data_dir),
        )
        proc = _run_script("cluster", argv, env, timeout)
        if proc.returncode != 0:
            raise InfraError(
                f"infra/kafka/cluster {command} {' '.join(args)} failed ({self.brokers} "
                f"nodes from port {self.port}, data {self.data_dir}):\n"
                + (proc.stdout + proc.stderr).strip()
            )
        return (proc.stdout + proc.stderr).strip()

    def start(self) -> str:
        """Start every node at once and wait for each (idempotent).

        Raises:
            InfraError: with the failing nodes' output.
        """
        return self._cluster("start")

    def stop(self, purge: bool = False) -> str:
        """Stop every node (idempotent); ``purge`` also deletes their data."""
        return self._cluster("stop", *(["--purge"] if purge else []), timeout=300)

    def is_running(self) -> bool:
        """Whether every node runs and answers."""
        try:
            self._cluster("status", timeout=120)
        except InfraError:
            return False
        return True

    def kill(self, node: int) -> None:
        """SIGKILL node ``node`` (1-based) and wait until it is gone.

        Raises:
            InfraError: it is not running.
        """
        self._cluster("kill", str(node), timeout=60)

    def restart(self, node: int) -> None:
        """Start node ``node`` again and wait until it answers.

        Raises:
            InfraError: it did not come up.
        """
        self._cluster("restart", str(node))
