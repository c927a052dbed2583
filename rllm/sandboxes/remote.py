"""What the hosted backends (daytona, modal) share: the shell script that runs one command
in a remote sandbox and returns its exit status and bounded output, the checks of a spec
against what a hosted service can honour, and the tar plumbing of directory copies.

A hosted service's own exec call returns the whole output in one response (Daytona merges
stdout and stderr, and has no stdin or user). So every command runs inside a small POSIX
script: the command's streams go to files inside the sandbox; GNU ``timeout`` kills its
process group at the deadline and a sweep of ``/proc`` kills whatever carries the
command's ``RLLM_EXEC_TOKEN`` (what left the group too); ``setpriv`` runs it as the asked
user; and the response carries only the exit status, the byte counts and the first
``limit`` bytes of each stream (base64), so a flood is cut in the sandbox and never
crosses the network. The image needs ``sh``, coreutils, grep, tar and util-linux's
``setpriv`` (every Debian or Ubuntu image has them).

The Modal backend imports this module too; it belongs at ``rllm/sandboxes/remote.py``.
"""

from __future__ import annotations

import base64
import io
import math
import re
import shlex
import tarfile
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from rllm.errors import ConfigError
from rllm.sandboxes.errors import SandboxError
from rllm.sandboxes.types import ExecResult, NetworkMode, SandboxSpec

__all__ = [
    "TIMEOUT_EXIT",
    "TOKEN_VAR",
    "RemoteCommand",
    "check_spec",
    "cut_counted",
    "env_of",
    "pack_dir",
    "tar_command",
    "tar_paths",
    "unpack_dir",
    "untar_command",
    "user_prefix",
    "whole_units",
    "workdir_command",
]

TIMEOUT_EXIT = 124
"""GNU ``timeout``'s exit status when the deadline killed the command."""

TOKEN_VAR = "RLLM_EXEC_TOKEN"
"""Set, with a fresh value, in the environment of every command: every process it starts
inherits it, so a timeout finds and kills them all, even those that left its process
group (``setsid``), the way a pid namespace would."""

_SWEEP = (
    "for pass in 1 2; do for e in /proc/[0-9]*/environ; do"
    f' if tr "\\0" "\\n" 2>/dev/null <"$e" | grep -qx "{TOKEN_VAR}=$1"; then'
    ' p=${e#/proc/}; kill -9 "${p%/environ}" 2>/dev/null; fi; done; done'
)
"""Kills every process whose environment holds the token ``$1``."""

_KILL_GRACE_S = 2
"""Seconds between the TERM and the KILL that ``timeout`` sends."""

_COUNTS = re.compile(r"^\d+ \d+ \d+$")
_USER = re.compile(r"^(?:(\d+)(?::(\d+))?|([a-z_][a-z0-9_.-]*))$")


def cut_counted(head: bytes, total: int, limit: int) -> str:
    """``cut_output`` for a stream of ``total`` bytes of which only the first ``limit``
    (``head``) were fetched: the same text and marker, without the dropped bytes."""
    if total <= limit:
        return head.decode("utf-8", "replace")
    kept = head[:limit].decode("utf-8", "ignore")
    return f"{kept}\n[rllm: output cut, {total - limit} of {total} bytes dropped]\n"


_AS_ROOT = 'if [ "$(id -u)" = 0 ]; then S=; else S="sudo -n -E"; fi'
"""Sets ``$S`` to what makes a command root: nothing as root, else ``sudo`` (Daytona's
default user is ``daytona``, with password-less sudo)."""


def user_prefix(user: str | None) -> str:
    """Shell words that run what follows as ``user`` (a name or ``uid[:gid]``), or "".
    They use ``$S`` (``_AS_ROOT``), so the script must set it first."""
    if user is None:
        return ""
    match = _USER.match(user)
    if match is None:
        raise ConfigError(f"user {user!r} is neither a user name nor uid[:gid]")
    uid, gid, name = match.groups()
    if name is not None:
        q = shlex.quote(name)
        return f'$S setpriv --reuid="$(id -u {q})" --regid="$(id -g {q})" --init-groups -- '
    return f"$S setpriv --reuid={uid} --regid={gid or uid} --clear-groups -- "


@dataclass(frozen=True)
class RemoteCommand:
    """One command wrapped for a hosted sandbox; ``script`` runs it, ``parse`` reads back."""

    script: str
    """The POSIX shell script to hand to the service's exec call."""
    stdin_path: str | None
    """Where the caller must upload the command's stdin first (None: no stdin)."""
    limit: int
    """Bytes of each stream kept."""
    timeout_s: float | None
    """The command's deadline."""

    @classmethod
    def build(
        cls,
        cmd: str | Sequence[str],
        *,
        cwd: str,
        limit: int,
        timeout_s: float | None,
        user: str | None,
        has_stdin: bool,
    ) -> RemoteCommand:
        """Wrap ``cmd`` (a shell string or an argv list) to run in ``cwd`` as ``user``."""
        if isinstance(cmd, str):
            inner = f"cd -- {shlex.quote(cwd)} || exit 1\n{cmd}"
        else:
            if not cmd:
                raise ConfigError("exec got an empty argv list; give a command to run")
            inner = f"cd -- {shlex.quote(cwd)} || exit 1\nexec {shlex.join(cmd)}"
        work = f"/tmp/.rllm-exec-{uuid.uuid4().hex}"
        stdin_path = f"{work}.in" if has_stdin else None
        deadline = ""
        if timeout_s is not None:
            deadline = f"timeout -k {_KILL_GRACE_S} {max(timeout_s, 0.001):.3f} "
        redirect = shlex.quote(stdin_path) if stdin_path else "/dev/null"
        token = uuid.uuid4().hex
        script = "\n".join(
            [
                f"d={shlex.quote(work)}",
                'mkdir -p "$d" || exit 125',
                _AS_ROOT,
                f"{TOKEN_VAR}={token} {deadline}{user_prefix(user)}/bin/sh -c {shlex.quote(inner)}"
                f' <{redirect} >"$d/o" 2>"$d/e"',
                "rc=$?",
                f'if [ "$rc" = {TIMEOUT_EXIT} ] || [ "$rc" = 137 ]; then'
                f" $S /bin/sh -c {shlex.quote(_SWEEP)} sh {token} 2>/dev/null; fi",
                'printf "%s %s %s\\n" "$rc" "$(wc -c <"$d/o")" "$(wc -c <"$d/e")"',
                f"head -c {limit} \"$d/o\" | base64 | tr -d '\\n'; echo",
                f"head -c {limit} \"$d/e\" | base64 | tr -d '\\n'; echo",
                f'rm -rf "$d" {redirect if stdin_path else ""}',
                "exit 0",
            ]
        )
        return cls(script=script, stdin_path=stdin_path, limit=limit, timeout_s=timeout_s)

    def server_timeout_s(self, fallback_s: float) -> int:
        """Whole seconds to give the service's own exec deadline: past ours, so our
        ``timeout`` always fires first (``fallback_s`` when the command has none)."""
        if self.timeout_s is None:
            return max(1, math.ceil(fallback_s))
        return math.ceil(self.timeout_s) + _KILL_GRACE_S + 5

    def parse(self, output: str, duration_s: float) -> ExecResult:
        """The command's result from the script's output.

        Raises:
            SandboxError: the output is not the script's (the image lacks coreutils?).
        """
        lines = output.split("\n")
        try:
            at = max(i for i, line in enumerate(lines) if _COUNTS.match(line))
            rc, out_total, err_total = (int(word) for word in lines[at].split())
            out_head = base64.b64decode(lines[at + 1])
            err_head = base64.b64decode(lines[at + 2])
        except (IndexError, ValueError) as exc:
            raise SandboxError(
                f"the exec wrapper's output was not understood ({output[-300:]!r}); the "
                "image needs sh, GNU coreutils (timeout, head, base64, wc) and setpriv"
            ) from exc
        timed_out = (
            self.timeout_s is not None
            and rc in (TIMEOUT_EXIT, 128 + 9)
            and duration_s >= self.timeout_s * 0.9
        )
        return ExecResult(
            stdout=cut_counted(out_head, out_total, self.limit),
            stderr=cut_counted(err_head, err_total, self.limit),
            exit_code=None if timed_out else rc,
            timed_out=timed_out,
            duration_s=duration_s,
            truncated=out_total > self.limit or err_total > self.limit,
            error=f"timed out after {self.timeout_s:g} s" if timed_out else None,
        )


def whole_units(value_mb: int | None, unit_mb: int, what: str, backend: str) -> int | None:
    """``value_mb`` in whole ``unit_mb`` units; refuses a value that is not a multiple."""
    if value_mb is None:
        return None
    if value_mb % unit_mb:
        up = math.ceil(value_mb / unit_mb) * unit_mb
        raise ConfigError(
            f"{backend} sets {what} in whole GiB; {what}={value_mb} MB cannot be honoured: "
            f"ask for {up} (or {up - unit_mb or unit_mb})"
        )
    return value_mb // unit_mb


def check_spec(spec: SandboxSpec, backend: str, *, disk: bool) -> None:
    """Refuse what no hosted backend can honour: ``network=gateway``, a pids limit, host
    mounts, a local root filesystem, and (when ``disk`` is False) a disk limit.

    Raises:
        ConfigError: names the field, its value and what to do instead.
    """
    if spec.network == NetworkMode.GATEWAY:
        raise ConfigError(
            f"network='gateway' cannot be honoured by {backend}: a hosted sandbox cannot "
            f"reach a gateway on this host's loopback ({spec.gateway_url}). Expose the "
            "gateway on an address the service can reach and use network='host'"
        )
    if "pids" in spec.model_fields_set and spec.pids is not None:
        raise ConfigError(
            f"{backend} has no per-sandbox process limit; pids={spec.pids} cannot be "
            "honoured: leave pids unset (or None)"
        )
    if not disk and spec.disk_mb is not None:
        raise ConfigError(
            f"{backend} has no disk limit; disk_mb={spec.disk_mb} cannot be honoured: leave it None"
        )
    if spec.mounts:
        sources = ", ".join(str(m.source) for m in spec.mounts)
        raise ConfigError(
            f"{backend} runs on another machine and cannot bind this host's {sources}: "
            "remove the mounts and upload what the sandbox needs (upload_dir), or bake it "
            "into the image"
        )
    if spec.image.startswith("/"):
        raise ConfigError(
            f"image {spec.image!r} is a local root filesystem, which {backend} cannot use: "
            "give a registry image, a snapshot or an image built with build_image"
        )


def env_of(spec: SandboxSpec, env: Mapping[str, str] | None) -> dict[str, str]:
    """The spec's environment with one command's ``env`` over it."""
    return {**spec.env, **(env or {})}


def pack_dir(local: Path) -> bytes:
    """A tar of ``local``'s contents (its entries at the archive's top)."""
    if not local.is_dir():
        raise FileNotFoundError(f"upload_dir: {local} is not a directory on this host")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for child in sorted(local.iterdir()):
            tar.add(child, arcname=child.name)
    return buffer.getvalue()


def workdir_command(workdir: str, user: str | None) -> str:
    """Shell that creates ``workdir`` (through sudo when the image's user cannot, then
    owned by that user) and, for a spec's ``user``, gives it to them."""
    w = shlex.quote(workdir)
    lines = [
        _AS_ROOT,
        f"[ -d {w} ] || mkdir -p -- {w} 2>/dev/null || "
        f'{{ $S mkdir -p -- {w} && $S chown -- "$(id -u):$(id -g)" {w}; }} || exit 1',
    ]
    if user:
        lines.append(f"$S chown -- {shlex.quote(user)} {w}")
    return "\n".join(lines)


def tar_paths() -> str:
    """A fresh path in the sandbox's /tmp for a directory copy's tar."""
    return f"/tmp/.rllm-copy-{uuid.uuid4().hex}.tar"


def untar_command(tar_path: str, remote: str) -> str:
    """Shell that extracts ``tar_path`` into ``remote`` (created) and removes the tar."""
    t, r = shlex.quote(tar_path), shlex.quote(remote)
    return f"mkdir -p -- {r} && tar -xf {t} -C {r}; rc=$?; rm -f {t}; exit $rc"


def tar_command(remote: str, tar_path: str) -> str:
    """Shell that packs ``remote``'s contents into ``tar_path``."""
    return f"tar -cf {shlex.quote(tar_path)} -C {shlex.quote(remote)} ."


def unpack_dir(data: bytes, local: Path) -> None:
    """Extract a tar made in a sandbox into ``local`` (created), refusing unsafe members."""
    local.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r") as tar:
        tar.extractall(local, filter="data")
