"""Start and stop the local Apache Kafka broker (KRaft) through the ``infra/kafka`` scripts."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from rllm.errors import InfraError

__all__ = ["LocalBroker", "kafka_dir"]


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
        path = kafka_dir() / script
        try:
            return subprocess.run(
                ["bash", str(path), *args],
                env=self._env(),
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise InfraError(f"{path} {' '.join(args)} did not finish in {timeout:.0f} s") from exc

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
