"""Dockerfile text to instructions, as Docker's builder (BuildKit) reads it: comments,
parser directives, line continuations, heredocs, exec (JSON) and shell forms, flags, and
Docker's variable substitution.

The parser reads the whole file and reports every problem, each by instruction, file and
line: what Docker would refuse (unknown instructions, an unterminated heredoc) and what
the local builder cannot do the way Docker does (``RUN --mount``, ``ONBUILD``, ADD of a
git repository); ``rllm.sandboxes.images.plan`` turns what it accepts into steps.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from rllm.sandboxes.errors import DockerfileError
from rllm.sandboxes.images.words import NAME

__all__ = [
    "SUPPORTED",
    "Heredoc",
    "Instruction",
    "parse_dockerfile",
]

_DIRECTIVE = re.compile(r"^#\s*([a-zA-Z][a-zA-Z0-9]*)\s*=\s*(.+?)\s*$")
_RAW_WORD = re.compile(r"""(?:[^\s"'\\]|\\.|"(?:\\.|[^"\\])*"|'[^']*')+""")
_HEREDOC = re.compile(r"^(\d*)<<(-?)([^<]*)$")

SUPPORTED = (
    "FROM",
    "RUN",
    "COPY",
    "ADD",
    "WORKDIR",
    "ENV",
    "USER",
    "ARG",
    "LABEL",
    "EXPOSE",
    "CMD",
    "ENTRYPOINT",
    "VOLUME",
    "STOPSIGNAL",
    "HEALTHCHECK",
    "SHELL",
    "MAINTAINER",
)
"""Instructions the local builder accepts."""

_REFUSED = {
    "ONBUILD": "ONBUILD triggers are not supported by the local builder; move the "
    "instructions into the Dockerfile that uses this image",
}
_FLAGS: dict[str, set[str]] = {
    "FROM": {"platform"},
    "COPY": {"chown", "chmod", "link", "from"},
    "ADD": {"chown", "chmod", "link", "checksum"},
    "HEALTHCHECK": {"interval", "timeout", "start-period", "start-interval", "retries"},
}
_REFUSED_FLAGS = {
    "mount": "RUN --mount (cache, secret, bind mounts) is not supported by the local "
    "builder; copy what the step needs with COPY first",
    "network": "RUN --network is not supported: build steps always have the host's network",
    "security": "RUN --security is not supported by the local builder",
    "parents": "COPY --parents is not supported by the local builder",
    "exclude": "COPY --exclude is not supported by the local builder; use .dockerignore",
    "keep-git-dir": "ADD of a git repository is not supported by the local builder",
}
_HEREDOC_KEYWORDS = ("RUN", "COPY", "ADD")


@dataclass(frozen=True)
class Heredoc:
    """A here-document of a RUN, COPY or ADD (``<<EOF`` ... ``EOF``)."""

    name: str
    """Its terminator word (``EOF``), quotes removed."""
    content: str
    """The lines between the marker and the terminator, each ending in a newline; with
    ``<<-`` their leading tabs are already removed."""
    expand: bool
    """Unquoted marker: ``$VARIABLES`` in a COPY'd heredoc are substituted."""
    chomp: bool = False
    """``<<-``: leading tabs were stripped."""


@dataclass(frozen=True)
class Instruction:
    """One Dockerfile instruction, continuation lines joined and comments removed."""

    keyword: str
    """Upper-case instruction word (``RUN``)."""
    line: int
    """Line number (1-based) where it starts."""
    args: str
    """Its text after the keyword and the flags, not yet substituted."""
    flags: tuple[tuple[str, str | None], ...] = ()
    """``--name=value`` flags in order (value None for a bare ``--name``)."""
    json_args: tuple[str, ...] | None = None
    """The exec (JSON array) form's strings; None for the shell form."""
    file: str = "Dockerfile"
    """The Dockerfile it comes from, for messages."""
    escape: str = "\\"
    """The escape character (the ``# escape=`` directive), for substitution."""
    heredocs: tuple[Heredoc, ...] = ()
    """Its here-documents in the order their markers appear."""

    @property
    def where(self) -> str:
        """``RUN at path/Dockerfile:12``, the prefix of every message about it."""
        return f"{self.keyword} at {self.file}:{self.line}"

    def flag(self, name: str) -> str | None:
        """The value of flag ``--name`` (the last one given), or None."""
        found = [value for key, value in self.flags if key == name]
        return (found[-1] or "") if found else None


def parse_dockerfile(text: str, filename: str = "Dockerfile") -> tuple[Instruction, ...]:
    """Split a Dockerfile into instructions; refuse what the local builder cannot do.

    Raises:
        DockerfileError: one or more unknown or unsupported instructions, flags or forms;
            its ``problems`` name each, the file and the line.
    """
    lines = text.splitlines()
    escape = "\\"
    problems: list[str] = []
    start = 0
    for start, raw in enumerate(lines):
        match = _DIRECTIVE.match(raw.strip())
        if match is None:
            break
        if match.group(1).lower() == "escape":
            if match.group(2) in ("\\", "`"):
                escape = match.group(2)
            else:
                problems.append(
                    f"{filename}:{start + 1}: escape directive {match.group(2)!r} must be \\ or `"
                )
    else:
        start = len(lines)
    instructions: list[Instruction] = []
    index = start
    while index < len(lines):
        stripped = lines[index].strip()
        if not stripped or stripped.startswith("#"):
            index += 1
            continue
        first, parts = index + 1, []
        while True:
            body = lines[index].rstrip()
            index += 1
            if body.endswith(escape):
                parts.append(body[: -len(escape)])
                while index < len(lines) and (
                    not lines[index].strip() or lines[index].strip().startswith("#")
                ):
                    index += 1  # comment and empty lines inside a continuation are dropped
                if index < len(lines):
                    continue
            else:
                parts.append(body)
            break
        joined = "".join(parts).strip()
        heredocs: list[Heredoc] = []
        if joined.split(None, 1)[0].upper() in _HEREDOC_KEYWORDS and "<<" in joined:
            index = _read_heredocs(joined, lines, index, first, filename, heredocs, problems)
        try:
            instruction = _instruction(joined, first, filename, escape)
        except DockerfileError as exc:
            problems.append(str(exc))
            continue
        instructions.append(_with_heredocs(instruction, heredocs))
    problems += _check(instructions, filename)
    if problems:
        message = (
            problems[0]
            if len(problems) == 1
            else "\n".join([f"{len(problems)} problems in {filename}:", *problems])
        )
        raise DockerfileError(message, tuple(problems))
    return tuple(instructions)


def _with_heredocs(instruction: Instruction, heredocs: list[Heredoc]) -> Instruction:
    if not heredocs:
        return instruction
    return Instruction(
        instruction.keyword,
        instruction.line,
        instruction.args,
        instruction.flags,
        None,  # a heredoc is only read in the shell form
        instruction.file,
        instruction.escape,
        tuple(heredocs),
    )


def _read_heredocs(
    line: str,
    lines: list[str],
    index: int,
    first: int,
    filename: str,
    out: list[Heredoc],
    problems: list[str],
) -> int:
    """Read the bodies of the heredoc markers in ``line`` from ``lines[index:]``, as
    BuildKit does (a marker is one word, ``<<`` then the terminator with no space);
    returns the index of the line after the last terminator."""
    keyword = line.split(None, 1)[0].upper()
    words = _RAW_WORD.findall(line)
    for position, word in enumerate(words):
        match = _HEREDOC.match(word)
        if match is None:
            continue
        chomp, rest = match.group(2) == "-", match.group(3)
        if not rest:
            following = words[position + 1] if position + 1 < len(words) else ""
            name = following.strip("'\"")
            if NAME.fullmatch(name) and name == following.strip("'\"").strip():
                # ``<< 'PY'``: Docker reads no heredoc here, and then the body as
                # instructions; say so once instead of "unknown instruction" per line.
                end = next((i for i in range(index, len(lines)) if lines[i].strip() == name), None)
                problems.append(
                    f"{keyword} at {filename}:{first}: {word} {following} has a space after "
                    f"{word}, so Docker's builder reads no heredoc here and takes line "
                    f"{index + 1} ({lines[index].strip()[:40]!r}) as an instruction; write "
                    f"{word}{following} (no space)"
                )
                if end is not None:
                    return end + 1
            continue
        name = rest.replace("'", "").replace('"', "")
        if not NAME.fullmatch(name.replace("-", "_").replace(".", "_")):
            continue
        body: list[str] = []
        while index < len(lines):
            raw = lines[index]
            index += 1
            candidate = raw.rstrip("\r\n").lstrip("\t") if chomp else raw.rstrip("\r\n")
            if candidate == name:
                break
            body.append((raw.lstrip("\t") if chomp else raw) + "\n")
        else:
            problems.append(
                f"{keyword} at {filename}:{first}: unterminated heredoc {word}: no line "
                f"{name!r} ends it"
            )
            return index
        out.append(Heredoc(name, "".join(body), rest == name, chomp))
    return index


def _instruction(text: str, line: int, filename: str, escape: str) -> Instruction:
    word, *more = text.split(None, 1)
    rest = more[0] if more else ""
    keyword = word.upper()
    where = f"{keyword} at {filename}:{line}"
    if keyword in _REFUSED:
        raise DockerfileError(f"{where}: {_REFUSED[keyword]}")
    if keyword not in SUPPORTED:
        raise DockerfileError(
            f"unknown instruction {word!r} at {filename}:{line}; Docker's builder knows "
            f"{', '.join(SUPPORTED)} (and ONBUILD)"
        )
    rest = rest.strip()
    flags: list[tuple[str, str | None]] = []
    if keyword in ("FROM", "RUN", "COPY", "ADD", "HEALTHCHECK"):
        while rest.startswith("--"):
            token, _, rest = rest.partition(" ")
            rest = rest.lstrip()
            name, eq, value = token[2:].partition("=")
            if name in _REFUSED_FLAGS:
                raise DockerfileError(f"{where}: {_REFUSED_FLAGS[name]}")
            if name not in _FLAGS.get(keyword, set()):
                raise DockerfileError(f"{where}: unknown flag --{name} for {keyword}")
            flags.append((name, value if eq else None))
    json_args: tuple[str, ...] | None = None
    if rest.startswith("["):
        try:
            parsed = json.loads(rest)
        except ValueError:
            parsed = None  # Docker falls back to the shell form
        if isinstance(parsed, list) and all(isinstance(v, str) for v in parsed):
            json_args = tuple(parsed)
    return Instruction(keyword, line, rest, tuple(flags), json_args, filename, escape)


def _check(instructions: list[Instruction], filename: str) -> list[str]:
    problems: list[str] = []
    if not any(i.keyword == "FROM" for i in instructions):
        problems.append(f"{filename}: no FROM instruction; a Dockerfile starts FROM an image")
    for instruction in instructions:
        if instruction.keyword == "FROM":
            break
        if instruction.keyword != "ARG":
            problems.append(f"{instruction.where}: only ARG may come before the first FROM")
    for instruction in instructions:
        if not instruction.args and instruction.keyword not in ("CMD", "ENTRYPOINT"):
            problems.append(f"{instruction.where}: {instruction.keyword} needs arguments")
        if instruction.keyword == "ADD":
            sources = instruction.json_args or tuple(instruction.args.split())
            for source in sources[:-1]:
                if re.match(r"^git@|^[a-z]+://.*\.git(#.*)?$|^git://", source):
                    problems.append(
                        f"{instruction.where}: ADD of a git repository ({source}) is not "
                        f"supported by the local builder; clone it in a RUN step"
                    )
        if instruction.keyword == "SHELL" and instruction.json_args is None:
            problems.append(
                f'{instruction.where}: SHELL needs the JSON form, e.g. SHELL ["/bin/bash", "-c"]'
            )
    return problems
