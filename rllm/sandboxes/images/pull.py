"""Images pulled from a registry into the local store with Debian's ``skopeo``.

``skopeo copy`` fetches the linux/amd64 image into an OCI layout whose blobs live in
one directory shared by every pull (``<store>/blobs``), so a blob is downloaded once;
skopeo checks each blob's digest as it writes it. Each layer is then unpacked into a
store layer named by its ``diff_id`` (``sha256-<hex>``), so images sharing a layer
share it on disk; a layer is written to a temporary directory and renamed into place,
so a crash leaves nothing half-written. Docker Hub names go through the mirror of
``SandboxSettings.registry_mirror`` first, as dockerd's ``registry-mirrors``.
"""

from __future__ import annotations

import base64
import fcntl
import hashlib
import json
import logging
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from rllm.sandboxes.errors import (
    ImageError,
    PullError,
    RegistryUnreachableError,
    SandboxUnavailableError,
)
from rllm.sandboxes.images.oci import unpack_layer
from rllm.sandboxes.images.reference import ImageReference, is_loopback, parse_reference
from rllm.sandboxes.images.store import ImageConfig, ImageStore, LocalImage
from rllm.sandboxes.settings import SandboxSettings

__all__ = [
    "CMD_LABEL",
    "DIGEST_LABEL",
    "ENTRYPOINT_LABEL",
    "PULLED_FROM_LABEL",
    "mirror_host",
    "pull_image",
    "pull_sources",
]

log = logging.getLogger(__name__)

PULLED_FROM_LABEL = "rllm.pulled.from"
"""On a pulled image: the reference it was fetched by (the mirror's, when through one)."""
DIGEST_LABEL = "rllm.pulled.digest"
"""On a pulled image: its manifest digest."""
CMD_LABEL = "rllm.image.cmd"
"""On a pulled image: its config's ``Cmd`` as JSON."""
ENTRYPOINT_LABEL = "rllm.image.entrypoint"
"""On a pulled image: its config's ``Entrypoint`` as JSON."""

_PLATFORM = ("linux", "amd64")
_UNREACHABLE = (
    "connection refused",
    "no such host",
    "i/o timeout",
    "network is unreachable",
    "no route to host",
    "connection reset",
    "tls handshake timeout",
)
_NOT_FOUND = ("manifest unknown", "name unknown", "not found", "404")


def mirror_host(settings: SandboxSettings) -> tuple[str, bool] | None:
    """The mirror's ``host[:port]`` and whether it is spoken to without TLS, or None."""
    mirror = (settings.registry_mirror or "").strip().rstrip("/")
    if not mirror:
        return None
    plain = mirror.startswith("http://")
    host = mirror.removeprefix("http://").removeprefix("https://")
    return host, plain


def pull_sources(ref: ImageReference, settings: SandboxSettings) -> list[ImageReference]:
    """Where ``ref`` is fetched from, in order: the mirror for Docker Hub names, then
    its own registry."""
    mirror = mirror_host(settings)
    if ref.is_docker_hub and mirror is not None:
        return [ref.on(mirror[0]), ref]
    return [ref]


def _insecure(registry: str, settings: SandboxSettings) -> bool:
    mirror = mirror_host(settings)
    if mirror is not None and mirror[0] == registry and mirror[1]:
        return True
    return is_loopback(registry) or registry in settings.insecure_registries


def pull_image(store: ImageStore, name: str, settings: SandboxSettings) -> LocalImage:
    """Pull ``name`` (any reference Docker understands) into ``store``, stored under its
    familiar name (``python:3.13-slim``); layers already stored are not unpacked again.

    Raises:
        PullError: not found, refused, corrupt, or not linux/amd64 (with reference,
            registry and layer); ``RegistryUnreachableError`` when no source answered.
        SandboxUnavailableError: skopeo is not installed.
    """
    try:
        ref = parse_reference(name)
    except ValueError as exc:
        raise ImageError(f"cannot pull {name!r}: {exc}") from exc
    skopeo = shutil.which("skopeo")
    if skopeo is None:
        raise SandboxUnavailableError(
            f"skopeo is not installed; it pulls {ref} from its registry: apt-get install -y skopeo"
        )
    failures: list[PullError] = []
    lock_name = hashlib.sha256(ref.canonical.encode()).hexdigest()[:12]
    with open(store.root / f".pull-{lock_name}.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one pull of a name at a time; the others wait
        for source in pull_sources(ref, settings):
            try:
                return _pull(skopeo, store, ref, source, settings)
            except PullError as exc:
                failures.append(exc)
                if source is not ref:
                    log.warning(
                        "pulling %s through the mirror failed (%s); trying %s",
                        ref,
                        exc,
                        ref.registry,
                    )
    if all(isinstance(f, RegistryUnreachableError) for f in failures):
        raise RegistryUnreachableError("; ".join(str(f) for f in failures))
    raise next(f for f in reversed(failures) if not isinstance(f, RegistryUnreachableError))


def _pull(
    skopeo: str,
    store: ImageStore,
    ref: ImageReference,
    source: ImageReference,
    settings: SandboxSettings,
) -> LocalImage:
    started = time.monotonic()
    blobs = store.root / "blobs"
    blobs.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".pull-", dir=store.root) as tmp:
        layout = Path(tmp) / "oci"
        argv = [skopeo, "--command-timeout", "3600s"]
        argv += ["--override-os", _PLATFORM[0], "--override-arch", _PLATFORM[1], "copy"]
        argv += ["--quiet", "--dest-shared-blob-dir", str(blobs)]
        if _insecure(source.registry, settings):
            argv.append("--src-tls-verify=false")
        auth = _auth_file(Path(tmp), source, settings)
        if auth is not None:
            argv += ["--src-authfile", str(auth)]
        argv += [f"docker://{source.canonical}", f"oci:{layout}:image"]
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise _pull_error(ref, source, proc.stderr.strip() or proc.stdout.strip())
        manifest_digest, manifest = _manifest(layout, blobs)
        config = json.loads(_blob(layout, blobs, manifest["config"]["digest"]).read_bytes())
        platform = (config.get("os"), config.get("architecture"))
        if platform != _PLATFORM:
            raise PullError(
                f"{ref} from {source.registry} is a {platform[0]}/{platform[1]} image; "
                f"sandboxes run linux/amd64 images only"
            )
        diff_ids = list(config.get("rootfs", {}).get("diff_ids", []))
        layers = manifest.get("layers", [])
        if len(diff_ids) != len(layers):
            raise PullError(
                f"{ref} from {source.registry}: the config lists {len(diff_ids)} "
                f"layers, the manifest {len(layers)}"
            )
        layer_ids = []
        for layer, diff_id in zip(layers, diff_ids, strict=True):
            layer_ids.append(_layer(store, layout, blobs, layer, diff_id, ref, source))
    image = store.put(ref.familiar, layer_ids, *_config(config, source, manifest_digest))
    log.info(
        "pulled %s from %s (%d layers, %s) in %.1f s",
        ref,
        source.registry,
        len(layer_ids),
        manifest_digest,
        time.monotonic() - started,
    )
    return image


def _pull_error(ref: ImageReference, source: ImageReference, detail: str) -> PullError:
    text = detail.lower()
    where = f"pulling {ref} from {source.registry} ({source.canonical})"
    tail = detail.splitlines()[-1] if detail else "(no output)"
    if "digest did not match" in text or "digest mismatch" in text:
        return PullError(f"{where}: a layer is corrupt in the registry: {tail}")
    if "no image found in manifest list" in text or "no matching manifest" in text:
        return PullError(f"{where}: the registry has no linux/amd64 image of it: {tail}")
    if "unauthorized" in text or "authentication required" in text or "denied" in text:
        return PullError(
            f"{where}: the registry refused our credentials: {tail}; log in with "
            f"`docker login {source.registry}`, or set RLLM_SANDBOX_REGISTRY_AUTH_FILE, or "
            f"RLLM_SANDBOX_REGISTRY_USERNAME and RLLM_SANDBOX_REGISTRY_PASSWORD"
        )
    if "http response to https client" in text:
        return PullError(
            f"{where}: the registry speaks plain HTTP; name it in "
            f'RLLM_SANDBOX_INSECURE_REGISTRIES=["{source.registry}"] if that is intended'
        )
    if any(word in text for word in _UNREACHABLE):
        return RegistryUnreachableError(f"{where}: the registry cannot be reached: {tail}")
    if any(word in text for word in _NOT_FOUND):
        return PullError(f"{where}: the registry has no such image: {tail}")
    return PullError(f"{where} failed: {tail}")


def _auth_file(tmp: Path, source: ImageReference, settings: SandboxSettings) -> Path | None:
    """A Docker-format credentials file for skopeo: ours (0600, in the pull's temp dir)
    from the username/password settings, else the configured one, else skopeo's own."""
    if settings.registry_username and settings.registry_password is not None:
        secret = f"{settings.registry_username}:{settings.registry_password.get_secret_value()}"
        path = tmp / "auth.json"
        path.touch(mode=0o600)
        token = base64.b64encode(secret.encode()).decode()
        path.write_text(json.dumps({"auths": {source.registry: {"auth": token}}}))
        return path
    return settings.registry_auth_file


def _blob(layout: Path, blobs: Path, digest: str) -> Path:
    algorithm, _, hexdigest = digest.partition(":")
    for root in (blobs, layout / "blobs"):
        path = root / algorithm / hexdigest
        if path.is_file():
            return path
    raise ImageError(f"blob {digest} is missing from the pulled layout {layout}")


def _manifest(layout: Path, blobs: Path) -> tuple[str, dict[str, Any]]:
    index = json.loads((layout / "index.json").read_text())
    digest = str(index["manifests"][0]["digest"])
    return digest, json.loads(_blob(layout, blobs, digest).read_bytes())


def _layer(
    store: ImageStore,
    layout: Path,
    blobs: Path,
    layer: dict[str, Any],
    diff_id: str,
    ref: ImageReference,
    source: ImageReference,
) -> str:
    layer_id = diff_id.replace(":", "-")
    if store.has_layer(layer_id):
        return layer_id
    blob = _blob(layout, blobs, str(layer["digest"]))
    directory = store.new_layer_dir()
    directory.chmod(0o755)  # the image's /
    try:
        unpack_layer(blob, str(layer.get("mediaType", "")), diff_id, directory)
    except ImageError as exc:
        shutil.rmtree(directory, ignore_errors=True)
        blob.unlink(missing_ok=True)  # a bad blob is fetched again next time
        raise PullError(
            f"pulling {ref} from {source.registry}: layer {layer['digest']} is unusable: {exc}"
        ) from exc
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)
        raise
    return store.commit_layer(directory, layer_id)


def _config(
    config: dict[str, Any], source: ImageReference, digest: str
) -> tuple[ImageConfig, dict[str, str]]:
    """The store's config and labels of an OCI image config."""
    run = config.get("config") or {}
    env = dict(item.partition("=")[::2] for item in run.get("Env") or [])
    labels = {str(k): str(v) for k, v in (run.get("Labels") or {}).items()}
    labels[PULLED_FROM_LABEL] = source.canonical
    labels[DIGEST_LABEL] = digest
    for key, label in (("Cmd", CMD_LABEL), ("Entrypoint", ENTRYPOINT_LABEL)):
        if run.get(key):
            labels[label] = json.dumps(run[key])
    image_config = ImageConfig(
        env=env, workdir=run.get("WorkingDir") or None, user=run.get("User") or None
    )
    return image_config, labels
