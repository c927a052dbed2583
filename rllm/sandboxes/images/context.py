"""The build context of a Dockerfile: its files as ``.dockerignore`` leaves them, the
content hash a COPY or ADD is cached by, and the layer that step writes (on the host).

Docker's rules, as far as the local builder goes: sources are relative to the context
and may not leave it; globs (``*``, ``?``, ``[...]``) match hidden files too; a directory
source copies its contents; several sources need a destination ending in ``/``; files
keep their modes (or take ``--chmod``) and belong to root (or ``--chown``, names looked
up in the image's ``/etc/passwd`` and ``/etc/group``); ADD extracts a local tar archive
(plain, gzip, bzip2 or xz). Symlinks inside a copied directory stay symlinks.

``COPY --from`` reads another stage's (or image's) merged layers instead, keeping owners
and modes; ``download`` fetches an ``ADD`` URL on the host (the build's CA bundle
trusted), never inside a sandbox.
"""

from __future__ import annotations

import fnmatch
import glob
import hashlib
import os
import posixpath
import re
import shutil
import ssl
import stat
import tarfile
import urllib.parse
from collections.abc import Iterator, Sequence
from pathlib import Path

import httpx

from rllm.sandboxes.errors import DockerfileError, ImageError
from rllm.sandboxes.images.rootfs import LayerView, LayerWriter, extract_tar
from rllm.sandboxes.images.steps import CopyStep
from rllm.tls import shared_tls

__all__ = [
    "BuildContext",
    "apply_copy",
    "copy_from_image",
    "download",
    "ignore_regex",
    "owner",
]


def ignore_regex(pattern: str) -> re.Pattern[str]:
    """A ``.dockerignore`` pattern as a regex over context-relative paths; it matches a
    path or anything below it (``**`` is any number of directories)."""
    out, i = [], 0
    while i < len(pattern):
        char = pattern[i]
        if pattern.startswith("**", i):
            i += 2
            if pattern.startswith("/", i):
                out.append("(?:.*/)?")
                i += 1
            else:
                out.append(".*")
            continue
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[" and "]" in pattern[i + 1 :]:
            end = pattern.index("]", i + 1)
            body = pattern[i + 1 : end]
            out.append("[" + ("^" + body[1:] if body[:1] in ("!", "^") else body) + "]")
            i = end
        elif char == "\\" and i + 1 < len(pattern):
            i += 1
            out.append(re.escape(pattern[i]))
        else:
            out.append(re.escape(char))
        i += 1
    return re.compile("".join(out) + "(?:/.*)?")


class BuildContext:
    """The files a Dockerfile's COPY and ADD can see."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self.rules: list[tuple[bool, re.Pattern[str]]] = []
        ignore = self.root / ".dockerignore"
        if ignore.is_file():
            for raw in ignore.read_text(encoding="utf-8").splitlines():
                line = raw.strip()
                if not line or line.startswith("#"):
                    continue
                negate = line.startswith("!")
                cleaned = posixpath.normpath(line.lstrip("!").strip().lstrip("/"))
                if cleaned != ".":
                    self.rules.append((negate, ignore_regex(cleaned)))

    def ignored(self, rel: str) -> bool:
        """Whether ``.dockerignore`` leaves the context-relative path out (last rule wins)."""
        result = False
        for negate, regex in self.rules:
            if regex.fullmatch(rel):
                result = not negate
        return result

    def match(self, source: str, where: str) -> list[str]:
        """Context-relative paths a COPY source names (a path or a glob), sorted.

        Raises:
            DockerfileError: it leaves the context, or matches nothing.
        """
        clean = posixpath.normpath(source.lstrip("/"))
        if clean == ".." or clean.startswith("../"):
            raise DockerfileError(f"{where}: source {source!r} is outside the build context")
        if clean == ".":
            return ["."]
        if any(c in clean for c in "*?["):
            found = glob.glob(clean, root_dir=self.root, include_hidden=True)
        else:
            found = [clean] if os.path.lexists(self.root / clean) else []
        kept = sorted(f for f in found if not self.ignored(f))
        if not kept:
            hint = " (all excluded by .dockerignore)" if found else ""
            raise DockerfileError(
                f"{where}: source {source!r} matches no file in the build context {self.root}{hint}"
            )
        for rel in kept:
            real = (self.root / rel).resolve()
            if real != self.root and self.root not in real.parents:
                raise DockerfileError(
                    f"{where}: source {rel!r} is a symlink out of the build context ({real})"
                )
        return kept

    def walk(self, rel: str) -> Iterator[tuple[str, Path, os.stat_result]]:
        """Entries under a directory source (path relative to it, host path, lstat),
        parents first, sorted; what ``.dockerignore`` excludes is left out."""
        top = (self.root / rel).resolve()
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames.sort()
            base = Path(dirpath)
            for name in [*dirnames, *sorted(filenames)]:
                host = base / name
                inner = host.relative_to(top).as_posix()
                context_rel = posixpath.normpath(posixpath.join(rel, inner))
                if self.ignored(context_rel):
                    continue
                yield inner, host, os.lstat(host)

    def digest(self, sources: Sequence[str], where: str) -> str:
        """Content hash of what ``sources`` copy: paths, types, modes, bytes, link targets."""
        digest = hashlib.sha256()
        for rel in (m for s in sources for m in self.match(s, where)):
            top = (self.root / rel).resolve()
            entries = [("", top, os.stat(top))]
            if top.is_dir():
                entries += list(self.walk(rel))
            digest.update(f"\0{rel}".encode())
            for inner, host, st in entries:
                digest.update(f"\0{inner}\0{st.st_mode:o}".encode())
                if stat.S_ISLNK(st.st_mode):
                    digest.update(os.readlink(host).encode())
                elif stat.S_ISREG(st.st_mode):
                    with open(host, "rb") as handle:
                        digest.update(hashlib.file_digest(handle, "sha256").digest())
        return digest.hexdigest()


def apply_copy(step: CopyStep, context: BuildContext, writer: LayerWriter) -> int:
    """Write what a COPY or ADD puts into the image into the writer's layer; returns how
    many entries it wrote.

    Raises:
        DockerfileError: a source is missing or outside the context, several sources go
            to a destination without a trailing ``/``, or ``--chown`` names no user.
    """
    where = step.instruction.where
    matches = [m for s in step.sources for m in context.match(s, where)]
    if len(matches) > 1 and not step.dest.endswith("/"):
        raise DockerfileError(
            f"{where}: copying {len(matches)} sources ({', '.join(matches[:5])}) needs a "
            f"destination directory ending in '/', not {step.dest!r}"
        )
    uid, gid = owner(step.chown, writer.view, where) if step.chown else (0, 0)
    count = 0
    for rel in matches:
        host = (context.root / rel).resolve()
        if host.is_dir():
            _make_dest_dir(writer, step.dest, uid, gid)
            dirs = []
            for inner, src, st in context.walk(rel):
                target = _put(writer, f"{step.dest.rstrip('/')}/{inner}", src, st)
                mode = step.chmod if step.chmod is not None else stat.S_IMODE(st.st_mode)
                if stat.S_ISDIR(st.st_mode):
                    dirs.append((target, mode, st.st_mtime))
                else:
                    writer.finish(target, mode, uid, gid, st.st_mtime)
                count += 1
            for target, mode, mtime in reversed(dirs):
                writer.finish(target, mode, uid, gid, mtime)
        elif step.extract and tarfile.is_tarfile(host):
            _make_dest_dir(writer, step.dest, uid, gid)
            chown = (uid, gid) if step.chown else None
            count += extract_tar(host, writer, step.dest, strip_absolute=True, owner=chown)
        else:
            into = step.dest.endswith("/") or writer.view.is_dir(step.dest)
            image_path = f"{step.dest.rstrip('/')}/{host.name}" if into else step.dest
            st = os.stat(host)
            target = _put(writer, image_path, host, st)
            mode = step.chmod if step.chmod is not None else stat.S_IMODE(st.st_mode)
            writer.finish(target, mode, uid, gid, st.st_mtime)
            count += 1
    return count


def copy_from_image(step: CopyStep, view: LayerView, writer: LayerWriter) -> int:
    """Write what ``COPY --from`` takes from another stage's tree (``view``) into the
    writer's layer, keeping owners (unless ``--chown``) and modes (unless ``--chmod``);
    returns how many entries it wrote.

    Raises:
        DockerfileError: a source is missing in that stage, or several sources go to a
            destination without a trailing ``/``.
    """
    where = step.instruction.where
    matches: list[str] = []
    for source in step.sources:
        parent, _, last = ("/" + source.lstrip("/")).rpartition("/")
        if any(c in last for c in "*?["):
            found = [
                f"{parent}/{n}" for n in view.listdir(parent or "/") if fnmatch.fnmatch(n, last)
            ]
        else:
            found = [source] if view.lstat(view.resolve(source)) is not None else []
        if not found:
            raise DockerfileError(f"{where}: {source!r} does not exist in --from={step.from_stage}")
        matches += found
    if len(matches) > 1 and not step.dest.endswith("/"):
        raise DockerfileError(
            f"{where}: copying {len(matches)} sources needs a destination directory ending "
            f"in '/', not {step.dest!r}"
        )
    chown = owner(step.chown, writer.view, where) if step.chown else None
    count = 0

    def put(image_src: str, image_dest: str) -> None:
        nonlocal count
        found = view.lstat(image_src)
        if found is None:
            return
        host, st = found
        uid, gid = chown or (st.st_uid, st.st_gid)
        mode = step.chmod if step.chmod is not None else stat.S_IMODE(st.st_mode)
        target = _put(writer, image_dest, host, st)
        count += 1
        if stat.S_ISDIR(st.st_mode):
            for name in view.listdir(image_src):
                put(f"{image_src.rstrip('/')}/{name}", f"{image_dest.rstrip('/')}/{name}")
        writer.finish(target, mode, uid, gid, st.st_mtime)

    for match in matches:
        resolved = view.resolve(match)
        if view.is_dir(resolved):
            uid, gid = chown or (0, 0)
            _make_dest_dir(writer, step.dest, uid, gid)
            for name in view.listdir(resolved):
                put(f"{resolved.rstrip('/')}/{name}", f"{step.dest.rstrip('/')}/{name}")
            continue
        into = step.dest.endswith("/") or writer.view.is_dir(step.dest)
        base = posixpath.basename(match.rstrip("/"))
        put(resolved, f"{step.dest.rstrip('/')}/{base}" if into else step.dest)
    return count


def download(url: str, root: Path, ca_bundle: Path | None, where: str) -> str:
    """Fetch ``url`` into directory ``root`` on the host, as ``ADD`` does; returns the
    file's name (the URL path's last part). ``ca_bundle`` is trusted when given.

    Raises:
        ImageError: the download failed (its status or the transport error).
    """
    name = posixpath.basename(urllib.parse.urlsplit(url).path) or "index.html"
    verify = ssl.create_default_context(cafile=str(ca_bundle)) if ca_bundle else shared_tls()
    try:
        with httpx.stream("GET", url, verify=verify, follow_redirects=True, timeout=60) as r:
            if r.status_code != 200:
                raise ImageError(f"{where}: ADD {url}: the server answered {r.status_code}")
            with open(root / name, "wb") as out:
                for chunk in r.iter_bytes(1 << 20):
                    out.write(chunk)
    except httpx.HTTPError as exc:
        raise ImageError(f"{where}: ADD {url} could not be downloaded: {exc}") from exc
    return name


def _make_dest_dir(writer: LayerWriter, dest: str, uid: int, gid: int) -> None:
    if dest.rstrip("/") and not writer.view.is_dir(dest):
        writer.mkdir(writer.host_path(dest.rstrip("/")), 0o755, uid, gid)


def _put(writer: LayerWriter, image_path: str, src: Path, st: os.stat_result) -> Path:
    target = writer.host_path(image_path)
    if stat.S_ISDIR(st.st_mode):
        if target.is_symlink() or (target.exists() and not target.is_dir()):
            target.unlink()
        target.mkdir(exist_ok=True)
        return target
    if target.is_dir() and not target.is_symlink():
        shutil.rmtree(target)
    writer.replace(target)
    if stat.S_ISLNK(st.st_mode):
        os.symlink(os.readlink(src), target)
    else:
        shutil.copyfile(src, target)
    return target


def owner(spec: str, view: LayerView, where: str, primary_group: bool = False) -> tuple[int, int]:
    """``user[:group]`` (names or numbers) as numbers; names are looked up in the image.

    Without a group, ``--chown`` takes the uid as the gid, as Docker documents;
    ``primary_group`` takes the user's group from ``/etc/passwd`` instead (WORKDIR).
    """
    user, _, group = spec.partition(":")

    def entry(name: str, file: str) -> list[str] | None:
        for line in (view.read_text(file) or "").splitlines():
            fields = line.split(":")
            if len(fields) > 3 and name in (fields[0], fields[2]) and fields[2].isdigit():
                return fields
        return None

    def lookup(name: str, file: str) -> int:
        if name.isdigit():
            return int(name)
        found = entry(name, file)
        if found is None:
            raise DockerfileError(
                f"{where}: {spec!r}: no {'user' if file.endswith('passwd') else 'group'} "
                f"{name!r} in the image's {file}; create it in an earlier RUN (useradd) or "
                f"use numbers (--chown=1000:1000)"
            )
        return int(found[2])

    uid = lookup(user, "/etc/passwd")
    if group:
        return uid, lookup(group, "/etc/group")
    if primary_group:
        found = entry(user, "/etc/passwd")
        return uid, int(found[3]) if found is not None and found[3].isdigit() else uid
    return uid, uid
