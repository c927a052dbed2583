"""Dockerfile text to instructions: comments, parser directives, line continuations,
exec (JSON) and shell forms, flags, and Docker's variable substitution.

The parser refuses, by instruction and line, what the local builder cannot do the way
Docker does (multi-stage builds, ``RUN --mount``, heredocs, ``ONBUILD``, URLs in ``ADD``,
unknown instructions); ``rllm.sandboxes.images.plan`` turns what it accepts into steps.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

from rllm.sandboxes.errors import DockerfileError

__all__ = ["SUPPORTED", "Instruction", "expand", "expand_words", "parse_dockerfile"]

_DIRECTIVE = re.compile(r"^#\s*([a-zA-Z][a-zA-Z0-9]*)\s*=\s*(.+?)\s*$")
_HEREDOC = re.compile(r"(?:^|(?<=\s))<<-?([\"']?)[A-Za-z_][A-Za-z0-9_]*\1(?:\s|$)")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

SUPPORTED = (
    "FROM", "RUN", "COPY", "ADD", "WORKDIR", "ENV", "USER", "ARG", "LABEL", "EXPOSE",
    "CMD", "ENTRYPOINT", "VOLUME", "STOPSIGNAL", "HEALTHCHECK", "SHELL", "MAINTAINER",
)  # fmt: skip
"""Instructions the local builder accepts."""

_REFUSED = {
    "ONBUILD": "ONBUILD triggers are not supported by the local builder; move the "
    "instructions into the Dockerfile that uses this image",
}
_FLAGS: dict[str, set[str]] = {
    "FROM": {"platform"},
    "COPY": {"chown", "chmod", "link"},
    "ADD": {"chown", "chmod", "link"},
    "HEALTHCHECK": {"interval", "timeout", "start-period", "start-interval", "retries"},
}
_REFUSED_FLAGS = {
    "from": "multi-stage builds are not supported by the local builder (COPY --from); "
    "build in one stage",
    "mount": "RUN --mount (cache, secret, bind mounts) is not supported by the local "
    "builder; copy what the step needs with COPY first",
    "network": "RUN --network is not supported: build steps always have the host's network",
    "security": "RUN --security is not supported by the local builder",
    "parents": "COPY --parents is not supported by the local builder",
    "exclude": "COPY --exclude is not supported by the local builder; use .dockerignore",
    "checksum": "ADD --checksum is for URLs, which the local builder does not fetch",
    "keep-git-dir": "ADD of a git repository is not supported by the local builder",
}


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
        DockerfileError: an unknown or unsupported instruction, flag or form; the message
            names it, the file and the line.
    """
    lines = text.splitlines()
    escape = "\\"
    start = 0
    for start, raw in enumerate(lines):
        match = _DIRECTIVE.match(raw.strip())
        if match is None:
            break
        if match.group(1).lower() == "escape":
            escape = match.group(2)
            if escape not in ("\\", "`"):
                raise DockerfileError(
                    f"{filename}:{start + 1}: escape directive {escape!r} must be \\ or `"
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
        instructions.append(_instruction("".join(parts).strip(), first, filename, escape))
    _check(instructions, filename)
    return tuple(instructions)


def _instruction(text: str, line: int, filename: str, escape: str) -> Instruction:
    word, *more = text.split(None, 1)
    rest = more[0] if more else ""
    keyword = word.upper()
    where = f"{keyword} at {filename}:{line}"
    if keyword in _REFUSED:
        raise DockerfileError(f"{where}: {_REFUSED[keyword]}")
    if keyword not in SUPPORTED:
        raise DockerfileError(
            f"unknown instruction {word!r} at {filename}:{line}; the local builder supports "
            f"{', '.join(SUPPORTED)}"
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
    if keyword in ("RUN", "COPY", "ADD") and _HEREDOC.search(rest):
        raise DockerfileError(
            f"{where}: heredocs (<<EOF) are not supported by the local builder; write the "
            f"script to a file in the build context and COPY it, or use RUN with && and \\"
        )
    json_args: tuple[str, ...] | None = None
    if rest.startswith("["):
        try:
            parsed = json.loads(rest)
        except ValueError:
            parsed = None  # Docker falls back to the shell form
        if isinstance(parsed, list) and all(isinstance(v, str) for v in parsed):
            json_args = tuple(parsed)
    return Instruction(keyword, line, rest, tuple(flags), json_args, filename, escape)


def _check(instructions: list[Instruction], filename: str) -> None:
    froms = [i for i in instructions if i.keyword == "FROM"]
    if not froms:
        raise DockerfileError(f"{filename}: no FROM instruction; a Dockerfile starts FROM an image")
    if len(froms) > 1:
        raise DockerfileError(
            f"{froms[1].where}: multi-stage builds are not supported by the local builder "
            f"(a second FROM; the first is at line {froms[0].line}); build in one stage"
        )
    for instruction in instructions:
        if instruction.keyword == "FROM":
            break
        if instruction.keyword != "ARG":
            raise DockerfileError(f"{instruction.where}: only ARG may come before FROM")
    for instruction in instructions:
        if not instruction.args and instruction.keyword not in ("CMD", "ENTRYPOINT"):
            raise DockerfileError(f"{instruction.where}: {instruction.keyword} needs arguments")
        if instruction.keyword == "ADD":
            sources = instruction.json_args or tuple(instruction.args.split())
            for source in sources[:-1]:
                if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*://|^git@", source):
                    raise DockerfileError(
                        f"{instruction.where}: ADD of a URL ({source}) is not supported: "
                        f"nothing is fetched during a local build; download it into the "
                        f"build context and COPY it, or fetch it in a RUN step"
                    )
        if instruction.keyword == "SHELL" and instruction.json_args is None:
            raise DockerfileError(
                f'{instruction.where}: SHELL needs the JSON form, e.g. SHELL ["/bin/bash", "-c"]'
            )


def expand(text: str, variables: Mapping[str, str], escape: str = "\\") -> str:
    """Substitute ``$VAR``, ``${VAR}``, ``${VAR:-default}`` and friends and remove quotes,
    as Docker does for one word (``WORKDIR``, ``USER``, a value of ``ENV``)."""
    return "".join(_Lexer(text, variables, escape).words(split=False))


def expand_words(text: str, variables: Mapping[str, str], escape: str = "\\") -> list[str]:
    """Split on unquoted whitespace, then substitute and remove quotes in each word."""
    return _Lexer(text, variables, escape).words(split=True)


class _Lexer:
    """Docker's shell-word rules: quotes, the escape character, ``$`` substitution."""

    def __init__(self, text: str, variables: Mapping[str, str], escape: str) -> None:
        self.text, self.vars, self.escape, self.pos = text, variables, escape, 0

    def words(self, split: bool, stop: str = "") -> list[str]:
        words: list[str] = []
        word: list[str] = []
        started = False
        while self.pos < len(self.text):
            char = self.text[self.pos]
            if stop and char == stop:
                break
            self.pos += 1
            if split and char.isspace():
                if started:
                    words.append("".join(word))
                word, started = [], False
                continue
            started = True
            if char == self.escape:
                if self.pos < len(self.text):
                    word.append(self.text[self.pos])
                    self.pos += 1
                else:
                    word.append(char)
            elif char == "'":
                end = self.text.find("'", self.pos)
                if end < 0:
                    raise DockerfileError(f"unmatched single quote in {self.text!r}")
                word.append(self.text[self.pos : end])
                self.pos = end + 1
            elif char == '"':
                word.append(self._double_quoted())
            elif char == "$":
                word.append(self._dollar())
            else:
                word.append(char)
        if started:
            words.append("".join(word))
        return words

    def _double_quoted(self) -> str:
        out: list[str] = []
        while self.pos < len(self.text):
            char = self.text[self.pos]
            self.pos += 1
            if char == '"':
                return "".join(out)
            if char == self.escape and self.pos < len(self.text):
                nxt = self.text[self.pos]
                if nxt in ('"', "$", self.escape):
                    out.append(nxt)
                    self.pos += 1
                    continue
            out.append(self._dollar() if char == "$" else char)
        raise DockerfileError(f"unmatched double quote in {self.text!r}")

    def _dollar(self) -> str:
        text, pos = self.text, self.pos
        if pos < len(text) and text[pos] == "{":
            match = _NAME.match(text, pos + 1)
            if match is None:
                raise DockerfileError(f"bad substitution at {text[pos - 1 :]!r}")
            name, self.pos = match.group(0), match.end()
            if text.startswith("}", self.pos):
                self.pos += 1
                return self.vars.get(name, "")
            for modifier in (":-", ":+", ":?", "-", "+", "?"):
                if text.startswith(modifier, self.pos):
                    break
            else:
                raise DockerfileError(
                    f"unsupported substitution ${{{name}{text[self.pos : self.pos + 1]}...}} "
                    f"in {text!r}; the local builder knows ${{VAR}}, ${{VAR:-default}}, "
                    f"${{VAR:+value}} and ${{VAR:?message}}"
                )
            self.pos += len(modifier)
            word = "".join(self.words(split=False, stop="}"))
            if not text.startswith("}", self.pos):
                raise DockerfileError(f"missing '}}' in {text!r}")
            self.pos += 1
            value = self.vars.get(name)
            unset = value is None or (modifier.startswith(":") and value == "")
            if modifier.endswith("-"):
                return word if unset else str(value)
            if modifier.endswith("+"):
                return "" if unset else word
            if unset:
                raise DockerfileError(f"{name}: {word or 'is not set'}")
            return str(value)
        match = _NAME.match(text, pos)
        if match is None:
            return "$"
        self.pos = match.end()
        return self.vars.get(match.group(0), "")
