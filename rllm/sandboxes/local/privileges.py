"""What a process in a local sandbox may do: Docker's defaults, for every process.

- **Ids.** Sandbox uids and gids 0..65535 are host ids ``id_base``..``id_base+65535``
  (100000 by default, as rootless containers and Docker's ``userns-remap`` do), never host
  uid 0. Image layers keep their owners on disk and are mounted id-mapped through a user
  namespace with the same map (``IdMap``), so files inside belong to whom the image says.
- **Capabilities.** Root inside has Docker's default set (``DOCKER_CAPS``), in its
  permitted, effective and bounding sets; other users have none but the same bounding set.
- **no_new_privs and seccomp.** Every process runs with ``no_new_privs`` and Docker's
  default seccomp profile, read from Debian's copy of it (``golang-github-docker-docker-dev``)
  and compiled to BPF by libseccomp (``enter.c --compile-seccomp``) once per machine.

Commands start through ``rllm-sandbox-enter`` (``enter.c``, compiled here once with gcc and
libseccomp; its header says why nsenter cannot do it).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import shutil
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rllm.sandboxes.errors import SandboxUnavailableError

__all__ = [
    "DOCKER_CAPS",
    "DOCKER_CAPS_MASK",
    "DOCKER_SECCOMP_PROFILE",
    "ID_RANGE",
    "IdMap",
    "enter_program",
    "profile_rules",
    "seccomp_filter",
]

ID_RANGE = 65536
"""Ids mapped into every sandbox (0..65535 inside)."""

_CAP_NUMBERS = {
    "CHOWN": 0,
    "DAC_OVERRIDE": 1,
    "DAC_READ_SEARCH": 2,
    "FOWNER": 3,
    "FSETID": 4,
    "KILL": 5,
    "SETGID": 6,
    "SETUID": 7,
    "SETPCAP": 8,
    "LINUX_IMMUTABLE": 9,
    "NET_BIND_SERVICE": 10,
    "NET_BROADCAST": 11,
    "NET_ADMIN": 12,
    "NET_RAW": 13,
    "IPC_LOCK": 14,
    "IPC_OWNER": 15,
    "SYS_MODULE": 16,
    "SYS_RAWIO": 17,
    "SYS_CHROOT": 18,
    "SYS_PTRACE": 19,
    "SYS_PACCT": 20,
    "SYS_ADMIN": 21,
    "SYS_BOOT": 22,
    "SYS_NICE": 23,
    "SYS_RESOURCE": 24,
    "SYS_TIME": 25,
    "SYS_TTY_CONFIG": 26,
    "MKNOD": 27,
    "LEASE": 28,
    "AUDIT_WRITE": 29,
    "AUDIT_CONTROL": 30,
    "SETFCAP": 31,
}

DOCKER_CAPS = (
    "CHOWN",
    "DAC_OVERRIDE",
    "FSETID",
    "FOWNER",
    "MKNOD",
    "NET_RAW",
    "SETGID",
    "SETUID",
    "SETFCAP",
    "SETPCAP",
    "NET_BIND_SERVICE",
    "SYS_CHROOT",
    "KILL",
    "AUDIT_WRITE",
)
"""Docker's default capability set (root's inside; everyone's bounding set)."""

DOCKER_CAPS_MASK = sum(1 << _CAP_NUMBERS[name] for name in DOCKER_CAPS)
"""``DOCKER_CAPS`` as the bit mask ``/proc/PID/status`` shows (``00000000a80425fb``)."""

DOCKER_SECCOMP_PROFILE = Path(
    "/usr/share/gocode/src/github.com/docker/docker/profiles/seccomp/default.json"
)
"""Docker's default seccomp profile as Debian ships it."""

_ACTIONS = {
    "SCMP_ACT_KILL": 0x00000000,
    "SCMP_ACT_KILL_THREAD": 0x00000000,
    "SCMP_ACT_KILL_PROCESS": 0x80000000,
    "SCMP_ACT_TRAP": 0x00030000,
    "SCMP_ACT_ERRNO": 0x00050000,
    "SCMP_ACT_TRACE": 0x7FF00000,
    "SCMP_ACT_LOG": 0x7FFC0000,
    "SCMP_ACT_ALLOW": 0x7FFF0000,
}
_OPS = {
    "SCMP_CMP_NE": 1,
    "SCMP_CMP_LT": 2,
    "SCMP_CMP_LE": 3,
    "SCMP_CMP_EQ": 4,
    "SCMP_CMP_GE": 5,
    "SCMP_CMP_GT": 6,
    "SCMP_CMP_MASKED_EQ": 7,
}
_EPERM = 1
_GO_ARCH = {"x86_64": "amd64", "aarch64": "arm64"}
_SOURCE = Path(__file__).with_name("enter.c")
_LOCK = threading.Lock()


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    path = Path(base) / "rllm" / "sandbox"
    path.mkdir(parents=True, exist_ok=True)
    return path


def enter_program() -> str:
    """Path of ``rllm-sandbox-enter``, compiled from ``enter.c`` on first use.

    Raises:
        SandboxUnavailableError: gcc or libseccomp's headers are missing.
    """
    source = _SOURCE.read_bytes()
    key = hashlib.sha256(source + platform.machine().encode()).hexdigest()[:16]
    target = _cache_dir() / f"rllm-sandbox-enter-{key}"
    with _LOCK:
        if target.exists():
            return str(target)
        gcc = shutil.which("gcc") or shutil.which("cc")
        if gcc is None or not Path("/usr/include/seccomp.h").exists():
            raise SandboxUnavailableError(
                "the local sandbox backend compiles its entry program with gcc and "
                "libseccomp: apt-get install -y gcc libseccomp-dev"
            )
        partial = target.with_name(f"{target.name}.{os.getpid()}.tmp")
        proc = subprocess.run(
            [gcc, "-O2", "-o", str(partial), str(_SOURCE), "-lseccomp"],
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            partial.unlink(missing_ok=True)
            raise SandboxUnavailableError(
                f"compiling {_SOURCE.name} failed: {proc.stderr.strip()[-800:]}"
            )
        os.replace(partial, target)
    return str(target)


def _kernel() -> tuple[int, ...]:
    numbers = platform.release().split("-")[0].split(".")
    return tuple(int(n) for n in numbers if n.isdigit())


def profile_rules(profile: dict[str, Any], caps: tuple[str, ...], machine: str) -> list[str]:
    """Docker's reading of a seccomp profile for a container with ``caps`` on ``machine``
    (``uname -m``), as lines for ``rllm-sandbox-enter --compile-seccomp``.

    Entries apply when their ``includes`` (caps, arches, minKernel) hold and their
    ``excludes`` do not; several conditions on one argument become one rule each, as
    libseccomp cannot AND them (Docker does the same).
    """
    arch = _GO_ARCH.get(machine, machine)
    held = {f"CAP_{c}" for c in caps}
    default_errno = int(profile.get("defaultErrnoRet") or _EPERM)
    lines = [f"default {_action(profile['defaultAction'], default_errno)}"]
    native = {"x86_64": "SCMP_ARCH_X86_64", "aarch64": "SCMP_ARCH_AARCH64"}.get(machine)
    for entry in profile.get("archMap") or []:
        if entry["architecture"] == native:
            for name in [entry["architecture"], *entry.get("subArchitectures", [])]:
                lines.append(f"arch {name.removeprefix('SCMP_ARCH_').lower()}")
    for rule in profile["syscalls"]:
        includes, excludes = rule.get("includes") or {}, rule.get("excludes") or {}
        if not set(includes.get("caps") or []) <= held:
            continue
        if includes.get("arches") and arch not in includes["arches"]:
            continue
        minimum = includes.get("minKernel")
        if minimum and _kernel() < tuple(int(n) for n in minimum.split(".")):
            continue
        if set(excludes.get("caps") or []) & held or arch in (excludes.get("arches") or []):
            continue
        action = _action(rule["action"], int(rule.get("errnoRet") or _EPERM))
        args = [
            f"{a['index']} {_OPS[a['op']]} {a['value']} {a.get('valueTwo', 0)}"
            for a in rule.get("args") or []
        ]
        indices = [a["index"] for a in rule.get("args") or []]
        groups = [[a] for a in args] if len(set(indices)) < len(indices) else [args]
        for name in rule.get("names") or [rule.get("name")]:
            for group in groups:
                lines.append(" ".join(["rule", str(action), name, *group]))
    return lines


def _action(name: str, errno: int) -> int:
    if name not in _ACTIONS:
        raise SandboxUnavailableError(f"seccomp action {name!r} is not supported here")
    value = _ACTIONS[name]
    return value | (errno & 0xFFFF) if name in ("SCMP_ACT_ERRNO", "SCMP_ACT_TRACE") else value


def seccomp_filter(profile_path: Path = DOCKER_SECCOMP_PROFILE) -> Path:
    """The BPF program of Docker's default profile for Docker's default capabilities,
    compiled once per profile, kernel and entry program.

    Raises:
        SandboxUnavailableError: the profile is not installed or does not compile.
    """
    try:
        text = profile_path.read_bytes()
    except FileNotFoundError:
        raise SandboxUnavailableError(
            f"Docker's default seccomp profile is not at {profile_path}; the local sandbox "
            f"backend applies it to every process: apt-get install -y "
            f"golang-github-docker-docker-dev"
        ) from None
    program = enter_program()
    key = hashlib.sha256(text + platform.release().encode() + program.encode()).hexdigest()[:16]
    target = _cache_dir() / f"docker-default-{key}.bpf"
    if target.exists():
        return target
    rules = profile_rules(json.loads(text), DOCKER_CAPS, platform.machine())
    proc = subprocess.run(
        [program, "--compile-seccomp"],
        input="\n".join(rules).encode(),
        capture_output=True,
        check=False,
    )
    if proc.returncode != 0 or not proc.stdout:
        raise SandboxUnavailableError(
            f"compiling the seccomp profile {profile_path} failed: "
            f"{proc.stderr.decode(errors='replace').strip()}"
        )
    partial = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    partial.write_bytes(proc.stdout)
    os.replace(partial, target)
    return target


@dataclass
class IdMap:
    """The id map of every sandbox: inside 0..ID_RANGE-1 is host ``base``..; and a user
    namespace holding it, whose fd id-maps image layers (one per process)."""

    base: int
    """First host id."""
    _userns: int | None = None
    _pid: int = 0

    def line(self) -> str:
        """The ``uid_map`` / ``gid_map`` line."""
        return f"0 {self.base} {ID_RANGE}\n"

    def host(self, inside: int) -> int:
        """The host id of id ``inside``."""
        return self.base + inside

    def inside(self, host: int) -> int | None:
        """The id inside of host id ``host`` (None: not mapped)."""
        return host - self.base if self.base <= host < self.base + ID_RANGE else None

    def userns_fd(self) -> int:
        """An fd of a user namespace with this map (made once per process)."""
        with _LOCK:
            if self._userns is None or self._pid != os.getpid():
                self._userns, self._pid = self._make(), os.getpid()
            return self._userns

    def _make(self) -> int:
        unshare = shutil.which("unshare")
        if unshare is None:
            raise SandboxUnavailableError("unshare is missing: apt-get install -y util-linux")
        proc = subprocess.Popen(
            [unshare, "--user", "sh", "-c", "echo; read _"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdout.readline()  # the namespace exists: write its maps and hold it
            for kind in ("uid_map", "gid_map"):
                with open(f"/proc/{proc.pid}/{kind}", "w", encoding="ascii") as file:
                    file.write(self.line())
            return os.open(f"/proc/{proc.pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
        finally:
            with contextlib.suppress(BrokenPipeError):
                proc.stdin.close()
            proc.wait()
            proc.stdout.close()
