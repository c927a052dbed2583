"""``bench check``: validate Harbor task folders without running them (like ``harbor
check``): required files, ``task.toml`` types and values, a Dockerfile the local builder
accepts, every stage FROM an image that builds here. Every problem of every task is
listed: one bad task never stops the others, one problem never hides the next."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rllm.benchmarks.harbor.dataset import task_dirs
from rllm.benchmarks.harbor.task import inspect_task
from rllm.sandboxes.errors import DockerfileError

__all__ = ["TaskCheck", "check_task", "check_tasks", "local_images"]


@dataclass(frozen=True)
class TaskCheck:
    """What checking one task folder found."""

    name: str
    """The task's name (its folder's when ``task.toml`` cannot say)."""
    path: Path
    """The task folder."""
    problems: tuple[str, ...] = ()
    """What makes it unusable, each naming the file."""
    warnings: tuple[str, ...] = ()
    """What is odd but usable."""

    @property
    def ok(self) -> bool:
        """No problems."""
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (``bench check --json``)."""
        return {
            "name": self.name,
            "path": str(self.path),
            "ok": self.ok,
            "problems": list(self.problems),
            "warnings": list(self.warnings),
        }


def _substitutes(given: Mapping[str, str] | None) -> Mapping[str, str]:
    if given is not None:
        return given
    from rllm.sandboxes.settings import SandboxSettings

    return SandboxSettings().image_substitutes


def local_images() -> set[str]:
    """Image names a task's ``FROM`` may use: the base images built here from Debian's
    packages and the derived ones built from built-in recipes (``python:3.11-slim``, ...);
    no registry is reachable."""
    from rllm.sandboxes.images.base import BASE_IMAGES
    from rllm.sandboxes.images.derived import DERIVED_IMAGES

    return set(BASE_IMAGES) | set(DERIVED_IMAGES)


def _unknown_image(
    image: str, known: Collection[str], substitutes: Mapping[str, str] | None = None
) -> str | None:
    """Why ``image`` (or the substitute the user named for it) does not build here, or
    None when it does."""
    from rllm.sandboxes.images.derived import derived_recipe, normalize_name, refusal
    from rllm.sandboxes.images.resolve import substitution_for

    image = substitution_for(image, substitutes or {}) or image
    if image in known or normalize_name(image) in known or derived_recipe(image):
        return None
    hint = refusal(normalize_name(image))
    return hint or f"use one built here ({_summary(known)}) or --image-substitute {image}=NAME"


def _summary(known: Collection[str]) -> str:
    """``known`` in a line: each repository with a few of its tags."""
    tags: dict[str, list[str]] = {}
    for name in sorted(known):
        repository, _, tag = name.partition(":")
        tags.setdefault(repository, []).append(tag or "latest")
    parts = []
    for repository, names in tags.items():
        shown = ", ".join(names[:4]) + (f", … {len(names) - 4} more" if len(names) > 4 else "")
        parts.append(f"{repository}: {shown}")
    return "; ".join(parts)


def _check_dockerfile(
    dockerfile: Path, known: Collection[str], substitutes: Mapping[str, str]
) -> list[str]:
    """Every problem of a task's Dockerfile: what the parser refuses, each stage's FROM
    that names no image built here, what planning each stage refuses."""
    from rllm.sandboxes.images.dockerfile import parse_dockerfile
    from rllm.sandboxes.images.plan import plan_build, stages
    from rllm.sandboxes.images.store import ImageConfig

    try:
        text = dockerfile.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return [f"environment/Dockerfile cannot be read: {exc}"]
    try:
        instructions = parse_dockerfile(text, str(dockerfile))
    except DockerfileError as exc:
        return [f"environment/Dockerfile: {problem}" for problem in exc.problems]
    try:
        found = stages(instructions)
    except DockerfileError as exc:
        return [f"environment/Dockerfile: {problem}" for problem in exc.problems]
    problems: list[str] = []
    names: set[str] = set()

    def image(name: str, where: str) -> None:
        why = _unknown_image(name, known, substitutes)
        if why is not None:
            problems.append(
                f"environment/Dockerfile: {where} names {name!r}, not an image that builds "
                f"here (no registry is reachable): {why}"
            )

    for stage in found:
        if stage.base.lower() not in names:
            image(stage.base, f"FROM at line {stage.instruction.line}")
        earlier = {str(i) for i in range(stage.index)} | names
        for ins in stage.body:
            source = (ins.flag("from") or "").lower() if ins.keyword == "COPY" else ""
            if source and source not in earlier and "$" not in source:
                image(source, f"COPY --from at line {ins.line}")
        try:
            plan_build(instructions, ImageConfig(), stage=stage.index)
        except DockerfileError as exc:
            problems += [f"environment/Dockerfile: {problem}" for problem in exc.problems]
        if stage.name:
            names.add(stage.name)
    return problems


def check_task(
    path: Path,
    *,
    known_images: Collection[str] | None = None,
    substitutes: Mapping[str, str] | None = None,
) -> TaskCheck:
    """Check one task folder.

    Args:
        path: The task folder.
        known_images: Images ``FROM`` may name (default: ``local_images()``).
        substitutes: The user's image substitutes (default: ``SandboxSettings``'s); an
            image with a buildable substitute is no problem.
    """
    known = local_images() if known_images is None else known_images
    substitutes = _substitutes(substitutes)
    task, problems, warnings = inspect_task(path)
    dockerfile = Path(path) / "environment" / "Dockerfile"
    if dockerfile.is_file():
        problems += _check_dockerfile(dockerfile, known, substitutes)
    elif task is not None and _unknown_image(task.config.docker_image or "", known, substitutes):
        warnings.append(
            f"docker_image {task.config.docker_image!r} is not a local base image: only a "
            f"backend that already has it can start this task"
        )
    test_sh = Path(path) / "tests" / "test.sh"
    if test_sh.is_file() and not test_sh.read_bytes().strip():
        problems.append(f"tests/test.sh is empty ({test_sh}): it must write a reward")
    elif test_sh.is_file():
        texts = [p.read_bytes() for p in test_sh.parent.rglob("*") if p.is_file()]
        if not any(b"reward" in t or b"/logs/verifier" in t for t in texts):
            warnings.append(
                "nothing in tests/ mentions reward.txt, reward.json or /logs/verifier: "
                "test.sh must write /logs/verifier/reward.txt (or reward.json)"
            )
    name = task.name if task is not None else Path(path).name
    return TaskCheck(name, Path(path).resolve(), tuple(problems), tuple(warnings))


def check_tasks(
    root: Path,
    *,
    known_images: Collection[str] | None = None,
    substitutes: Mapping[str, str] | None = None,
) -> list[TaskCheck]:
    """Check every task folder under ``root`` (``root`` itself when it is one).

    Raises:
        HarborTaskError: ``root`` is not a directory.
    """
    known = local_images() if known_images is None else known_images
    substitutes = _substitutes(substitutes)
    checks = []
    for folder in task_dirs(root):
        try:
            checks.append(check_task(folder, known_images=known, substitutes=substitutes))
        except OSError as exc:  # an unreadable folder is this task's problem only
            checks.append(TaskCheck(folder.name, folder.resolve(), (f"cannot read: {exc}",)))
    return checks
