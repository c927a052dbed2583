"""A parsed Dockerfile, its ARGs and ENVs substituted, as the steps a build runs.

Pure: nothing here touches the disk. ``stages`` splits a Dockerfile at its FROMs (the
ARGs before the first FROM substituted in each); ``plan_build`` walks one stage's
instructions as Docker does, keeping ARG and ENV scopes, the working directory, the user
and the shell, and returns the filesystem steps (RUN, COPY/ADD, WORKDIR), each with the
state it runs in, plus the stage's image config and labels. Heredocs become the script a
RUN runs or the files a COPY writes, as in BuildKit.

Instructions without a filesystem effect are recorded in the image's labels: ``CMD``,
``ENTRYPOINT``, ``SHELL`` (as JSON argv), ``EXPOSE``, ``VOLUME`` (a volume is not mounted
during the build: later RUNs may write there and keep it), ``STOPSIGNAL``,
``HEALTHCHECK``; ``LABEL`` and ``MAINTAINER`` become labels of their own. ``SHELL``
also changes the shell of later shell-form RUNs, as in Docker.
"""

from __future__ import annotations

import json
import logging
import platform
import posixpath
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from rllm.sandboxes.errors import DockerfileError
from rllm.sandboxes.images.dockerfile import Heredoc, Instruction
from rllm.sandboxes.images.steps import BuildPlan, CopyStep, RunStep, Step, WorkdirStep
from rllm.sandboxes.images.store import ImageConfig
from rllm.sandboxes.images.words import expand, expand_words

__all__ = [
    "DEFAULT_SHELL",
    "LABEL_PREFIX",
    "Stage",
    "base_image",
    "plan_build",
    "stages",
]

log = logging.getLogger(__name__)
_T = TypeVar("_T")
_VARIABLE = re.compile(r"\\\$|\$(?:\{[^}]*\}|[A-Za-z_][A-Za-z0-9_]*)")
_SHEBANG_RUNNER = (
    'f=$(mktemp) && printf %s "$1" > "$f" && chmod 700 "$f" && "$f"; s=$?; rm -f "$f"; exit $s'
)
"""How ``RUN <<EOF`` runs a heredoc that starts with ``#!``: as a file, like BuildKit."""
_Words = Callable[[str], list[str]]
_One = Callable[[str], str]

DEFAULT_SHELL = ("/bin/sh", "-c")
"""What a shell-form RUN runs under until a SHELL instruction says otherwise."""

LABEL_PREFIX = "rllm.dockerfile."
"""Labels that record CMD, ENTRYPOINT, EXPOSE, ... (``rllm.dockerfile.cmd``)."""

_ARCH = {"x86_64": "amd64", "aarch64": "arm64", "arm64": "arm64"}.get(
    platform.machine(), platform.machine()
)
_AUTO_ARGS = {
    "TARGETPLATFORM": f"linux/{_ARCH}",
    "TARGETOS": "linux",
    "TARGETARCH": _ARCH,
    "TARGETVARIANT": "",
    "BUILDPLATFORM": f"linux/{_ARCH}",
    "BUILDOS": "linux",
    "BUILDARCH": _ARCH,
    "BUILDVARIANT": "",
}
"""BuildKit's automatic platform ARGs (usable in FROM; in the stage once declared)."""


@dataclass(frozen=True)
class Stage:
    """One ``FROM`` and the instructions up to the next."""

    index: int
    """Its position, from 0 (``COPY --from=0``)."""
    name: str | None
    """The ``AS`` name, lower-cased as Docker compares it."""
    base: str
    """What FROM names, the ARGs before the first FROM substituted: an image, or an
    earlier stage's name."""
    instruction: Instruction
    """The FROM."""
    body: tuple[Instruction, ...]
    """The instructions after it."""


def _global_args(
    instructions: Sequence[Instruction], build_args: Mapping[str, str]
) -> dict[str, str]:
    scope = dict(_AUTO_ARGS)
    for instruction in instructions:
        if instruction.keyword == "FROM":
            break
        _declare(instruction, scope, scope, build_args, {})
    return scope


def stages(
    instructions: Sequence[Instruction], build_args: Mapping[str, str] | None = None
) -> tuple[Stage, ...]:
    """The stages of a parsed Dockerfile, in order.

    Raises:
        DockerfileError: a FROM is malformed or asks for another platform.
    """
    scope = _global_args(instructions, build_args or {})
    starts = [i for i, ins in enumerate(instructions) if ins.keyword == "FROM"]
    found: list[Stage] = []
    for number, start in enumerate(starts):
        ins = instructions[start]
        end = starts[number + 1] if number + 1 < len(starts) else len(instructions)
        base, name = _from(ins, scope)
        found.append(Stage(number, name, base, ins, tuple(instructions[start + 1 : end])))
    return tuple(found)


def _from(instruction: Instruction, scope: Mapping[str, str]) -> tuple[str, str | None]:
    words = _located(instruction, lambda: expand_words(instruction.args, scope, instruction.escape))
    platform_flag = instruction.flag("platform")
    if platform_flag:
        wanted = _located(instruction, lambda: expand(platform_flag, scope, instruction.escape))
        if wanted not in ("", _AUTO_ARGS["TARGETPLATFORM"], "$BUILDPLATFORM"):
            raise DockerfileError(
                f"{instruction.where}: --platform={wanted} cannot be built on this "
                f"{_AUTO_ARGS['TARGETPLATFORM']} machine (no emulation); drop the flag"
            )
    if len(words) == 3 and words[1].lower() == "as":
        return words[0], words[2].lower()
    if len(words) != 1:
        raise DockerfileError(
            f"{instruction.where}: expected FROM IMAGE [AS NAME], got {instruction.args!r}"
        )
    return words[0], None


def base_image(
    instructions: Sequence[Instruction], build_args: Mapping[str, str] | None = None
) -> tuple[str, str | None, Instruction]:
    """The image the final stage's FROM names (ARGs before the first FROM substituted),
    its ``AS`` name, and the FROM."""
    last = stages(instructions, build_args)[-1]
    return last.base, last.name, last.instruction


def plan_build(
    instructions: Sequence[Instruction],
    base: ImageConfig,
    build_args: Mapping[str, str] | None = None,
    stage: int = -1,
) -> BuildPlan:
    """The steps of stage ``stage`` (default the last) of a parsed Dockerfile on top of
    an image configured ``base``.

    Raises:
        DockerfileError: substitutions or instructions' arguments are malformed; every
            such problem of the stage is in its ``problems``.
    """
    build_args = dict(build_args or {})
    all_stages = stages(instructions, build_args)
    this = all_stages[stage]
    name, stage_name, body = this.base, this.name, this.body
    global_scope = _global_args(instructions, build_args)
    env, args = dict(base.env), dict[str, str]()
    workdir, user = base.workdir or "/", base.user
    shell: tuple[str, ...] = DEFAULT_SHELL
    labels: dict[str, str] = {}
    steps: list[Step] = []
    declared: set[str] = set()
    problems: list[str] = []
    for ins in body:
        scope = {**args, **env}

        def one(text: str, scope: Mapping[str, str] = scope, ins: Instruction = ins) -> str:
            return _located(ins, lambda: expand(text, scope, ins.escape))

        def words(text: str, scope: Mapping[str, str] = scope, ins: Instruction = ins) -> list[str]:
            return _located(ins, lambda: expand_words(text, scope, ins.escape))

        try:
            keyword = ins.keyword
            if keyword == "ARG":
                declared.update(_declare(ins, args, scope, build_args, global_scope))
            elif keyword in ("ENV", "LABEL"):
                target = env if keyword == "ENV" else labels
                target.update(_pairs(ins, words, one))
            elif keyword == "WORKDIR":
                workdir = posixpath.normpath(posixpath.join(workdir, one(ins.args)))
                workdir = "/" + workdir.lstrip("/")
                steps.append(WorkdirStep(ins, workdir, user))
            elif keyword == "USER":
                user = one(ins.args) or None
            elif keyword == "RUN":
                argv = _run_argv(ins, shell)
                if not argv:
                    raise DockerfileError(f"{ins.where}: RUN needs a command")
                steps.append(RunStep(ins, tuple(argv), {**args, **env}, workdir, user))
            elif keyword in ("COPY", "ADD"):
                steps.append(_copy(ins, words, one, workdir))
            elif keyword == "SHELL":
                shell = tuple(ins.json_args or ())
                labels[LABEL_PREFIX + "shell"] = json.dumps(list(shell))
            else:
                _record(ins, labels, shell, words, one)
        except DockerfileError as exc:
            problems.append(str(exc))
    unused = sorted(set(build_args) - declared - {n for n in global_scope if n in build_args})
    if unused:
        log.warning("build args %s were not declared by an ARG and are ignored", unused)
    if problems:
        message = problems[0] if len(problems) == 1 else "\n".join(problems)
        raise DockerfileError(message, tuple(problems))
    if stage_name:
        labels[LABEL_PREFIX + "stage"] = stage_name
    config = ImageConfig(env=env, workdir=None if workdir == "/" else workdir, user=user)
    return BuildPlan(name, stage_name, tuple(steps), config, labels)


def _record(
    ins: Instruction, labels: dict[str, str], shell: tuple[str, ...], words: _Words, one: _One
) -> None:
    """Record an instruction without a filesystem effect in the image's ``labels``:
    MAINTAINER, CMD, ENTRYPOINT, EXPOSE, VOLUME, STOPSIGNAL, HEALTHCHECK."""
    keyword = ins.keyword
    if keyword == "MAINTAINER":
        labels["maintainer"] = ins.args
    elif keyword in ("CMD", "ENTRYPOINT"):
        argv = ins.json_args if ins.json_args is not None else (*shell, ins.args)
        labels[LABEL_PREFIX + keyword.lower()] = json.dumps(list(argv) if ins.args else [])
    elif keyword in ("EXPOSE", "VOLUME"):
        key = LABEL_PREFIX + keyword.lower()
        found = [one(v) for v in ins.json_args] if ins.json_args else words(ins.args)
        labels[key] = " ".join(filter(None, (labels.get(key), *found)))
    elif keyword == "STOPSIGNAL":
        labels[LABEL_PREFIX + "stopsignal"] = one(ins.args)
    elif keyword == "HEALTHCHECK":
        flags = " ".join(f"--{k}={v}" for k, v in ins.flags)
        labels[LABEL_PREFIX + "healthcheck"] = f"{flags} {ins.args}".strip()


def _located(instruction: Instruction, call: Callable[[], _T]) -> _T:
    """Run a substitution, prefixing its error with the instruction and line."""
    try:
        return call()
    except DockerfileError as exc:
        raise DockerfileError(f"{instruction.where}: {exc}") from None


def _declare(
    ins: Instruction,
    target: dict[str, str],
    scope: Mapping[str, str],
    build_args: Mapping[str, str],
    outer: Mapping[str, str],
) -> list[str]:
    names = []
    for word in _located(ins, lambda: expand_words(ins.args, scope, ins.escape)):
        name, eq, default = word.partition("=")
        if not name.replace("_", "a").isalnum() or name[0].isdigit():
            raise DockerfileError(f"{ins.where}: bad ARG name {name!r}")
        names.append(name)
        if name in build_args:
            target[name] = build_args[name]
        elif eq:
            target[name] = default
        elif name in outer:
            target[name] = outer[name]
    return names


def _pairs(ins: Instruction, words: _Words, one: _One) -> dict[str, str]:
    """``KEY=VALUE ...`` or the legacy ``KEY VALUE`` of ENV and LABEL."""
    found = words(ins.args)
    if found and "=" not in found[0]:
        key, _, rest = ins.args.partition(" ")
        if not rest.strip():
            raise DockerfileError(f"{ins.where}: {ins.keyword} {key} needs a value")
        return {one(key): one(rest.strip())}
    pairs = {}
    for word in found:
        key, eq, value = word.partition("=")
        if not eq or not key:
            raise DockerfileError(
                f"{ins.where}: {word!r} is not KEY=VALUE (mixing the KEY VALUE and "
                f"KEY=VALUE forms is not allowed)"
            )
        pairs[key] = value
    return pairs


def _run_argv(ins: Instruction, shell: tuple[str, ...]) -> tuple[str, ...]:
    """What a RUN runs. Heredocs as BuildKit runs them: ``RUN <<EOF`` alone runs the
    heredoc as the script (a file when it starts with ``#!``); otherwise the shell gets
    the line with the heredocs after it and reads them itself."""
    if ins.json_args is not None:
        return ins.json_args
    if not ins.heredocs:
        return (*shell, ins.args)
    (marker, *more) = ins.args.split() or [""]
    if len(ins.heredocs) == 1 and not more and marker.lstrip("0123456789").startswith("<<"):
        content = ins.heredocs[0].content
        if content.startswith("#!"):
            return ("/bin/sh", "-c", _SHEBANG_RUNNER, "rllm-heredoc", content)
        return (*shell, content)
    return (*shell, "\n".join([ins.args, *(h.content + h.name for h in ins.heredocs)]) + "\n")


def _inline(ins: Instruction, heredoc: Heredoc, one: _One) -> str:
    """A COPY heredoc's content, its ``$VARIABLES`` substituted unless the marker was
    quoted (the rest of the text, quotes included, is kept as written)."""
    if not heredoc.expand:
        return heredoc.content
    return _VARIABLE.sub(lambda m: "$" if m.group(0) == "\\$" else one(m.group(0)), heredoc.content)


def _copy(ins: Instruction, words: _Words, one: _One, workdir: str) -> CopyStep:
    found = [one(w) for w in ins.json_args] if ins.json_args else words(ins.args)
    if len(found) < 2:
        raise DockerfileError(f"{ins.where}: {ins.keyword} needs a source and a destination")
    *sources, dest = found
    inline: list[tuple[str, str]] = []
    heredocs = {h.name: h for h in ins.heredocs}
    for number, source in enumerate(sources):
        match = re.fullmatch(r"\d*<<-?(.+)", source)
        if match is not None and match.group(1) in heredocs:
            heredoc = heredocs[match.group(1)]
            inline.append((heredoc.name, _inline(ins, heredoc, one)))
            sources[number] = heredoc.name
    trailing = dest.endswith("/") or dest in (".", "..") or dest.endswith(("/.", "/.."))
    dest = posixpath.normpath(posixpath.join(workdir, dest))
    dest = "/" + dest.lstrip("/")
    if trailing and dest != "/":
        dest += "/"
    chmod_text = ins.flag("chmod")
    chmod = None
    if chmod_text is not None:
        try:
            chmod = int(one(chmod_text), 8)
        except ValueError:
            raise DockerfileError(
                f"{ins.where}: --chmod={chmod_text} is not an octal mode (such as 0755)"
            ) from None
    chown = ins.flag("chown")
    from_text = ins.flag("from")
    from_stage = one(from_text).lower() if from_text else None
    if inline and len(inline) != len(sources):
        raise DockerfileError(
            f"{ins.where}: mixing heredocs and other sources in one {ins.keyword} is not "
            f"supported by the local builder; use one {ins.keyword} for each"
        )
    return CopyStep(
        ins,
        tuple(sources),
        dest,
        one(chown) if chown else None,
        chmod,
        ins.keyword == "ADD" and not inline,
        from_stage,
        tuple(inline),
    )
