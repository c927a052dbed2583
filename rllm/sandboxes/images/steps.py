"""The steps a Dockerfile build runs, as ``plan_build`` returns them: RUN, COPY/ADD and
WORKDIR, each with the state it runs in, and the plan of one stage. Pure data."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from rllm.sandboxes.images.dockerfile import Instruction
from rllm.sandboxes.images.store import ImageConfig

__all__ = ["BuildPlan", "CopyStep", "RunStep", "Step", "WorkdirStep", "step_text"]

_URL = re.compile(r"^https?://")


@dataclass(frozen=True)
class RunStep:
    """A RUN: ``argv`` run in a sandbox of the image so far."""

    instruction: Instruction
    """Where it comes from."""
    argv: tuple[str, ...]
    """The command: the shell and the shell-form text, or the exec form as given."""
    env: Mapping[str, str]
    """Its environment: the image's ENV over the ARGs in scope."""
    workdir: str
    """Working directory."""
    user: str | None
    """User it runs as (None: root)."""


@dataclass(frozen=True)
class CopyStep:
    """A COPY or ADD of build-context files."""

    instruction: Instruction
    """Where it comes from."""
    sources: tuple[str, ...]
    """Source paths or globs, relative to the build context."""
    dest: str
    """Absolute destination in the image; a trailing ``/`` means "into this directory"."""
    chown: str | None
    """``--chown`` (``user[:group]``, names or numbers); None: root."""
    chmod: int | None
    """``--chmod`` mode bits; None keeps the sources' modes."""
    extract: bool
    """ADD: a local tar archive is extracted into ``dest``."""
    from_stage: str | None = None
    """``COPY --from``: a stage's name or index, or an image; sources are its paths."""
    inline: tuple[tuple[str, str], ...] = ()
    """Heredoc files (``COPY <<EOF /dest``): name and content, substituted unless the
    marker was quoted; these sources are not read from the context."""

    @property
    def urls(self) -> tuple[str, ...]:
        """ADD sources that are URLs (downloaded on the host, never extracted)."""
        if self.instruction.keyword != "ADD" or self.from_stage is not None:
            return ()
        return tuple(s for s in self.sources if _URL.match(s))

    @property
    def context_sources(self) -> tuple[str, ...]:
        """Sources read from the build context (not URLs, not another stage)."""
        if self.from_stage is not None:
            return ()
        return tuple(s for s in self.sources if not _URL.match(s))


@dataclass(frozen=True)
class WorkdirStep:
    """A WORKDIR: the directory is created when the image lacks it."""

    instruction: Instruction
    """Where it comes from."""
    path: str
    """Absolute path."""
    user: str | None = None
    """The USER at that point: owns the directory if it is created, as in BuildKit."""


Step = RunStep | CopyStep | WorkdirStep


@dataclass(frozen=True)
class BuildPlan:
    """What ``build_image`` does: the base image, the steps, the final config."""

    base: str
    """The FROM image, substituted."""
    stage: str | None
    """The ``AS`` name, if any."""
    steps: tuple[Step, ...]
    """Filesystem steps in order."""
    config: ImageConfig
    """Final ENV, WORKDIR, USER."""
    labels: Mapping[str, str] = field(default_factory=dict)
    """LABELs and the recorded metadata instructions."""


def step_text(step: Step) -> str:
    """Canonical text of a step for its cache key: everything but its line number."""
    fields = {k: v for k, v in vars(step).items() if k != "instruction"}
    fields["keyword"] = step.instruction.keyword
    return json.dumps(fields, sort_keys=True, default=lambda v: dict(v))
