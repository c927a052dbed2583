"""Users inside a sandbox: ``name``, ``uid``, ``uid:gid`` or ``name:group`` resolved
against the sandbox's own ``/etc/passwd`` and ``/etc/group`` (read confined to its root)."""

from __future__ import annotations

from dataclasses import dataclass

from rllm.sandboxes.local.files import SandboxFiles

__all__ = ["Identity", "resolve_user"]


@dataclass(frozen=True)
class Identity:
    """Who a command runs as."""

    uid: int
    """User id."""
    gid: int
    """Primary group id."""
    home: str
    """Home directory (``HOME``)."""


def _table(files: SandboxFiles, path: str) -> list[list[str]]:
    try:
        text = files.read(path).decode("utf-8", "replace")
    except OSError:
        return []
    return [line.split(":") for line in text.splitlines() if line and not line.startswith("#")]


def resolve_user(files: SandboxFiles, user: str | None) -> Identity:
    """The identity of ``user`` (None: root).

    Raises:
        ValueError: a name that the sandbox's ``/etc/passwd`` (or ``/etc/group``) lacks.
    """
    if not user:
        return Identity(0, 0, "/root")
    name, _, group = user.partition(":")
    passwd = _table(files, "/etc/passwd")
    entry = next((e for e in passwd if len(e) >= 6 and (e[0] == name or e[2] == name)), None)
    if entry is not None:
        uid, gid, home = int(entry[2]), int(entry[3]), entry[5] or "/"
    elif name.isdigit():
        uid, gid, home = int(name), 0, "/"
    else:
        raise ValueError(
            f"user {name!r} is not in the sandbox's /etc/passwd; give a uid (e.g. '1000') "
            f"or create the user in the image (RUN useradd {name})"
        )
    if group:
        if group.isdigit():
            gid = int(group)
        else:
            groups = _table(files, "/etc/group")
            found = next((g for g in groups if len(g) >= 3 and g[0] == group), None)
            if found is None:
                raise ValueError(f"group {group!r} is not in the sandbox's /etc/group")
            gid = int(found[2])
    return Identity(uid, gid, home)
