"""Docker's variable substitution in Dockerfile words: ``$NAME``, ``${NAME}``,
``${NAME:-default}``, ``${NAME:+alternative}``, ``${NAME:?error}``, quotes and the
escape character, as BuildKit's shell lexer reads them (no command substitution)."""

from __future__ import annotations

import re
from collections.abc import Mapping

from rllm.sandboxes.errors import DockerfileError

__all__ = ["NAME", "expand", "expand_words"]

NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""A variable's name."""


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
            match = NAME.match(text, pos + 1)
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
        match = NAME.match(text, pos)
        if match is None:
            return "$"
        self.pos = match.end()
        return self.vars.get(match.group(0), "")
