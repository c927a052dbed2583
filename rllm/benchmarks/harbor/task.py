"""One Harbor task directory (Terminal-Bench 2.0's format) as a frozen ``HarborTask``.

::

    my-task/
    ├── task.toml          configuration (``rllm.benchmarks.harbor.config``)
    ├── instruction.md     the agent's prompt
    ├── environment/       Dockerfile and its build context (not needed with docker_image)
    ├── tests/test.sh      the verifier: writes /logs/verifier/reward.txt or reward.json
    └── solution/solve.sh  the oracle (optional): proves the task solvable
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from rllm.benchmarks.errors import HarborTaskError
from rllm.benchmarks.harbor.config import HarborNetworkMode, TaskConfig, parse_config
from rllm.errors import ConfigError
from rllm.sandboxes.errors import DockerfileError
from rllm.sandboxes.types import NetworkMode, SandboxSpec

__all__ = ["HarborTask", "HarborTaskError", "inspect_task", "load_task", "sandbox_network"]

_CANARY = re.compile(r"^(<!--.*canary.*-->|#.*canary.*)$", re.IGNORECASE)


@dataclass(frozen=True)
class HarborTask:
    """A parsed, checked task directory. Timeouts are the task's times its multipliers."""

    name: str
    """``[task] name``, else the folder's name."""
    path: Path
    """The task directory (absolute)."""
    instruction: str
    """``instruction.md``, leading canary lines removed (as Harbor does)."""
    config: TaskConfig
    """Everything ``task.toml`` says, Harbor's defaults filled in."""
    workdir: str
    """Where the agent, oracle and verifier start: ``[environment] workdir``, else the
    Dockerfile's last ``WORKDIR``, else ``/``."""
    agent_timeout_s: float
    """``[agent] timeout_sec`` times the agent timeout multiplier."""
    verifier_timeout_s: float
    """``[verifier] timeout_sec`` times the verifier timeout multiplier."""
    warnings: tuple[str, ...] = ()
    """What is odd but usable (unknown keys, no oracle)."""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    """``[metadata]`` (author, difficulty, category, tags, ...)."""

    @property
    def environment_dir(self) -> Path:
        """``environment/``: the image's build context."""
        return self.path / "environment"

    @property
    def dockerfile(self) -> Path | None:
        """``environment/Dockerfile``; None when the task names a prebuilt ``docker_image``
        and has none."""
        path = self.environment_dir / "Dockerfile"
        return path if path.is_file() else None

    @property
    def tests_dir(self) -> Path:
        """``tests/``: uploaded to ``/tests`` before the verifier runs."""
        return self.path / "tests"

    @property
    def solution_dir(self) -> Path | None:
        """``solution/`` with its ``solve.sh``; None when the task ships no oracle."""
        path = self.path / "solution"
        return path if (path / "solve.sh").is_file() else None

    @property
    def network(self) -> NetworkMode:
        """The sandbox network of its verifier and oracle (``sandbox_network``)."""
        return sandbox_network(self.config.verifier_network_mode or self.config.network_mode)

    def sandbox_spec(self, image: str, *, limits: bool = True, **overrides: Any) -> SandboxSpec:
        """A sandbox for this task from ``image`` (its built environment): its workdir,
        network, and, with ``limits``, its cpus, memory_mb and storage_mb (as
        ``disk_mb``); ``overrides`` are further ``SandboxSpec`` fields (labels, network)."""
        fields: dict[str, Any] = {"image": image, "workdir": self.workdir, "network": self.network}
        if limits:
            config = self.config
            fields.update(cpus=config.cpus, memory_mb=config.memory_mb, disk_mb=config.storage_mb)
        return SandboxSpec(**{**fields, **overrides})


def sandbox_network(mode: HarborNetworkMode | None) -> NetworkMode:
    """rllm's sandbox network for a Harbor mode: ``public``, and a task that says nothing
    (Harbor's default is public, ``allow_internet = true``), is the host's network;
    ``no-network`` and ``allowlist`` (no host allow-lists here) are none. An agent's run
    takes ``gateway`` whatever the task says (the harness decides that)."""
    if mode is None or mode is HarborNetworkMode.PUBLIC:
        return NetworkMode.HOST
    return NetworkMode.NONE


def _strip_canary(text: str) -> str:
    lines = text.split("\n")
    index = 0
    while index < len(lines) and _CANARY.match(lines[index].strip()):
        index += 1
    while index < len(lines) and not lines[index].strip():
        index += 1
    return "\n".join(lines[index:])


def _dockerfile_workdir(dockerfile: Path) -> str | None:
    """The last ``WORKDIR`` of a Dockerfile (relative ones joined); None when it has none
    or cannot be parsed (``bench check`` reports that)."""
    from rllm.sandboxes.images.dockerfile import parse_dockerfile
    from rllm.sandboxes.images.words import expand

    try:
        instructions = parse_dockerfile(dockerfile.read_text(), str(dockerfile))
        workdir: PurePosixPath | None = None
        for instruction in instructions:
            if instruction.keyword == "WORKDIR":
                target = PurePosixPath(expand(instruction.args, {}))
                workdir = target if workdir is None else workdir / target
    except (DockerfileError, OSError, UnicodeDecodeError):
        return None
    return None if workdir is None else str(PurePosixPath("/") / workdir)


def inspect_task(
    path: Path,
    *,
    agent_timeout_multiplier: float = 1.0,
    verifier_timeout_multiplier: float = 1.0,
) -> tuple[HarborTask | None, list[str], list[str]]:
    """The task in ``path`` (None when it has problems), its problems and its warnings.

    Each problem names the file it is about; ``load_task`` raises them, ``bench check``
    lists them.
    """
    path = path.resolve()
    problems: list[str] = []
    warnings: list[str] = []
    for multiplier in (agent_timeout_multiplier, verifier_timeout_multiplier):
        if not multiplier > 0:
            raise ConfigError(f"timeout multiplier {multiplier!r} must be a positive number")
    if not path.is_dir():
        return None, [f"{path} is not a directory"], []
    config = TaskConfig()
    toml_path = path / "task.toml"
    if not toml_path.is_file():
        problems.append(f"missing task.toml ({toml_path})")
    else:
        try:
            data = tomllib.loads(toml_path.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            problems.append(f"task.toml is not valid TOML: {exc}")
        else:
            config, config_problems, config_warnings = parse_config(data)
            problems += [f"task.toml: {p}" for p in config_problems]
            warnings += [f"task.toml: {w}" for w in config_warnings]
    instruction = ""
    instruction_path = path / "instruction.md"
    if not instruction_path.is_file():
        problems.append(f"missing instruction.md ({instruction_path})")
    else:
        instruction = _strip_canary(instruction_path.read_text(encoding="utf-8"))
        if not instruction.strip():
            problems.append(f"instruction.md is empty ({instruction_path})")
    if not (path / "tests" / "test.sh").is_file():
        problems.append(f"missing tests/test.sh ({path / 'tests' / 'test.sh'}): the verifier")
    dockerfile = path / "environment" / "Dockerfile"
    if not dockerfile.is_file() and not config.docker_image:
        problems.append(
            f"missing environment/Dockerfile ({dockerfile}); or name a prebuilt image in "
            f"task.toml: [environment] docker_image = '...'"
        )
    if not (path / "solution" / "solve.sh").is_file():
        warnings.append("no solution/solve.sh: no oracle proves this task solvable")
    if problems:
        return None, problems, warnings
    workdir = config.workdir or (_dockerfile_workdir(dockerfile) if dockerfile.is_file() else None)
    task = HarborTask(
        name=config.name or path.name,
        path=path,
        instruction=instruction,
        config=config,
        workdir=workdir or "/",
        agent_timeout_s=config.agent_timeout_s * agent_timeout_multiplier,
        verifier_timeout_s=config.verifier_timeout_s * verifier_timeout_multiplier,
        warnings=tuple(warnings),
        metadata=config.metadata,
    )
    return task, problems, warnings


def load_task(
    path: Path,
    *,
    agent_timeout_multiplier: float = 1.0,
    verifier_timeout_multiplier: float = 1.0,
) -> HarborTask:
    """Parse and check the task directory ``path``.

    Args:
        path: The task directory.
        agent_timeout_multiplier: Scales ``[agent] timeout_sec`` (slow machines).
        verifier_timeout_multiplier: Scales ``[verifier] timeout_sec``.

    Raises:
        HarborTaskError: naming the task, the file and every problem found.
    """
    task, problems, _ = inspect_task(
        path,
        agent_timeout_multiplier=agent_timeout_multiplier,
        verifier_timeout_multiplier=verifier_timeout_multiplier,
    )
    if task is None:
        raise HarborTaskError(f"Harbor task {Path(path).name!r} ({path}): " + "; ".join(problems))
    return task
