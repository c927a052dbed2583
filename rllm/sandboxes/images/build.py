"""The Dockerfile builder of the local image store: no registry, no daemon.

``FROM`` resolves to an image of the store, a base image (debootstrap, ``images.base``)
or a built-in derived image (``images.derived``, itself built by this builder). Every
filesystem step becomes one layer whose id is its content hash: the parent's hash, the
step after substitution (with its env, workdir and user) and, for COPY / ADD, the hash
of the files it copies. A layer already in the store is reused, so rebuilding an
unchanged Dockerfile runs nothing and a change re-runs from that step on.

- RUN (``images.runstep``): a sandbox of the backend on an intermediate image
  (``build/<layer id>-<nonce>``, labelled ``rllm.build=intermediate``, removed after the
  step) with the host's network,
  the step's env, workdir and user; its writable layer becomes the step's layer through
  the sandbox's ``commit_layer`` (the local backend's).
- COPY / ADD: written on the host into a new layer (``images.context``); no sandbox.
- WORKDIR: a layer holding the directory, none when the image has it already.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import logging
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from rllm.sandboxes.errors import (
    DockerfileError,
    ImageError,
    RegistryUnreachableError,
)
from rllm.sandboxes.images.base import BASE_IMAGES, ensure_base
from rllm.sandboxes.images.context import (
    BuildContext,
    apply_copy,
    copy_from_image,
    download,
    owner,
)
from rllm.sandboxes.images.derived import derived_recipe, normalize_name, offline_images, refusal
from rllm.sandboxes.images.dockerfile import Instruction, parse_dockerfile
from rllm.sandboxes.images.plan import LABEL_PREFIX, Stage, plan_build, stages
from rllm.sandboxes.images.resolve import SUBSTITUTED_LABEL, find_or_pull, substitute
from rllm.sandboxes.images.rootfs import LayerView, LayerWriter
from rllm.sandboxes.images.runstep import BUILD_LABEL, build_settings, ca_bundle, run_step
from rllm.sandboxes.images.steps import CopyStep, RunStep, Step, WorkdirStep, step_text
from rllm.sandboxes.images.store import ImageConfig, ImageStore, LocalImage
from rllm.sandboxes.settings import PullPolicy
from rllm.sandboxes.types import (
    ImageInfo,
    SandboxBackend,
)

__all__ = ["BUILD_LABEL", "build_dockerfile", "build_image", "resolve_from"]

log = logging.getLogger(__name__)


async def build_image(
    backend: SandboxBackend,
    store: ImageStore,
    context_dir: Path,
    name: str | None = None,
    *,
    build_args: Mapping[str, str] | None = None,
    dockerfile: str = "Dockerfile",
    step_timeout_s: float | None = 3600.0,
) -> ImageInfo:
    """Build ``context_dir/dockerfile`` into ``store`` as ``name`` (default
    ``build-<hash>``), running its RUN steps in ``backend``'s sandboxes.

    Raises:
        DockerfileError: an instruction is refused (named with its line).
        ImageError: the Dockerfile is missing, FROM names an image that cannot be had
            here, or a RUN step fails (its line and the last lines of its output).
    """
    path = context_dir / dockerfile
    try:
        text = path.read_text(encoding="utf-8")
    except (FileNotFoundError, IsADirectoryError):
        raise ImageError(
            f"no Dockerfile at {path}; a build context is a directory with a Dockerfile "
            f"(or pass dockerfile=NAME)"
        ) from None
    image = await build_dockerfile(
        backend,
        store,
        text,
        context_dir,
        name,
        build_args=build_args,
        filename=str(path),
        step_timeout_s=step_timeout_s,
    )
    size = await asyncio.to_thread(image.size_bytes)
    return ImageInfo(image.name, backend.name, image.id, size, image.created_at)


@dataclass(frozen=True)
class _Built:
    """A stage's result (or an image a stage starts from or copies from)."""

    layers: tuple[str, ...]
    config: ImageConfig
    key: str
    """Content hash of the layers: what a step's cache key chains from."""
    labels: Mapping[str, str]

    @classmethod
    def of(cls, image: LocalImage) -> _Built:
        return cls(tuple(layer.name for layer in image.layers), image.config, image.id, {})


async def build_dockerfile(
    backend: SandboxBackend,
    store: ImageStore,
    text: str,
    context_dir: Path,
    name: str | None = None,
    *,
    build_args: Mapping[str, str] | None = None,
    filename: str = "Dockerfile",
    step_timeout_s: float | None = 3600.0,
    _depth: int = 0,
) -> LocalImage:
    """Build Dockerfile ``text`` with build context ``context_dir``; see ``build_image``.

    Only the final stage becomes the image; the stages it starts from or copies from are
    built first (each step cached by content hash as any other), the others not at all.
    """
    started = time.monotonic()
    instructions = parse_dockerfile(text, filename)
    all_stages = stages(instructions, build_args)
    context = BuildContext(context_dir)
    built: dict[int, _Built] = {}
    substituted: dict[str, str] = {}  # FROM name -> the substitute used (each logged)
    timings: list[str] = []

    async def image_of(index: int, ref: str, instruction: Instruction) -> _Built:
        stage = _earlier_stage(all_stages, index, ref)
        if stage is not None:
            return await build_stage(stage)
        name, asked = substitute(ref, build_settings(backend).image_substitutes)
        if asked is not None:
            substituted[asked] = name
        return _Built.of(await resolve_from(backend, store, name, instruction, _depth))

    async def build_stage(index: int) -> _Built:
        if index in built:
            return built[index]
        stage = all_stages[index]
        base = await image_of(index, stage.base, stage.instruction)
        plan = plan_build(instructions, base.config, build_args, stage=index)
        layers, key = list(base.layers), base.key
        for step in plan.steps:
            source = None
            if isinstance(step, CopyStep) and step.from_stage is not None:
                source = await image_of(index, step.from_stage, step.instruction)
            step_started = time.monotonic()
            with _sources(step, context, ca_bundle(backend)) as (step, step_context):
                key = await asyncio.to_thread(_step_key, key, step, step_context, source)
                layer_id = f"step-{key[:32]}"
                cached = store.has_layer(layer_id)
                if not cached:
                    made = await _apply(
                        backend, store, step, step_context, source, layers, layer_id, step_timeout_s
                    )
                    if not made:
                        timings.append(f"line {step.instruction.line} no-op")
                        continue
            layers.append(layer_id)
            took = "cached" if cached else f"{time.monotonic() - step_started:.2f} s"
            timings.append(f"line {step.instruction.line} {step.instruction.keyword} {took}")
        labels = {**plan.labels, LABEL_PREFIX + "from": substituted.get(stage.base, stage.base)}
        built[index] = _Built(tuple(layers), plan.config, key, labels)
        return built[index]

    final = await build_stage(len(all_stages) - 1)
    image = _store_final(store, final, name, substituted)
    log.info(
        "built image %s (%s) from %s in %.2f s: %s",
        image.name,
        image.id,
        filename,
        time.monotonic() - started,
        "; ".join(timings) or "no filesystem steps",
    )
    return image


def _earlier_stage(all_stages: Sequence[Stage], index: int, ref: str) -> int | None:
    """The stage before ``index`` that ``ref`` (a name or a number) names, or None (an
    image)."""
    by_name = [s.index for s in all_stages[:index] if s.name == ref.lower()]
    if by_name:
        return by_name[-1]
    return int(ref) if ref.isdigit() and int(ref) < index else None


def _store_final(
    store: ImageStore, final: _Built, name: str | None, substituted: Mapping[str, str]
) -> LocalImage:
    """The final stage as image ``name`` (by default named from its content hash),
    labelled with the images that substitutes stood in for."""
    config_key = hashlib.sha256(f"{final.key}{final.config}".encode()).hexdigest()[:12]
    labels = dict(final.labels)
    if substituted:
        labels[SUBSTITUTED_LABEL] = ",".join(substituted)
    return store.put(name or f"build-{config_key}", list(final.layers), final.config, labels)


async def resolve_from(
    backend: SandboxBackend,
    store: ImageStore,
    name: str,
    instruction: Instruction,
    depth: int = 0,
) -> LocalImage:
    """The image FROM ``name`` starts with: one of the store, a base image (built by
    debootstrap the first time) or a derived one (built from its recipe the first time).

    Raises:
        ImageError: none of these; the message says how to import one.
    """
    normalized = normalize_name(name)
    settings = build_settings(backend)
    unreachable: RegistryUnreachableError | None = None
    for candidate in dict.fromkeys((name, normalized)):
        found = store.find(candidate)
        if found is not None and found.labels.get(BUILD_LABEL) != "intermediate":
            break
    else:
        found = None
    try:
        pulled = await asyncio.to_thread(find_or_pull, store, name, settings)
    except RegistryUnreachableError as exc:
        unreachable, pulled = exc, None
    if pulled is not None and pulled.labels.get(BUILD_LABEL) != "intermediate":
        return pulled
    if found is not None:
        return found
    base_name = next((n for n in (name, normalized) if n in BASE_IMAGES), None)
    if base_name is not None:
        if unreachable is not None:
            log.warning("%s; building %s offline from Debian's packages", unreachable, base_name)
        return await asyncio.to_thread(ensure_base, store, base_name)
    recipe = derived_recipe(normalized)
    if recipe is not None and depth < 3:
        lock = store.root / f".derived-{hashlib.sha256(recipe.encode()).hexdigest()[:12]}.lock"
        async with _file_lock(lock):
            found = store.find(normalized)
            if found is not None:
                return found
            log.info("building the derived image %s from its built-in recipe", normalized)
            with tempfile.TemporaryDirectory(prefix="rllm-derived-") as empty:
                return await build_dockerfile(
                    backend,
                    store,
                    recipe,
                    Path(empty),
                    normalized,
                    filename=f"<built-in recipe of {normalized}>",
                    _depth=depth + 1,
                )
    hint = refusal(normalized)
    reason = hint or "it is not in the local image store"
    if unreachable is not None:
        reason += f", and {unreachable}"
    elif settings.pull_policy == PullPolicy.NEVER:
        reason += ", and the pull policy is never"
    raise ImageError(
        f"FROM {name} at {instruction.file}:{instruction.line}: {reason}. Known here: the "
        f"store's images; offline: {offline_images()}. To use another image, export its root "
        f"filesystem where "
        f"a registry is reachable (docker export $(docker create {name}) > rootfs.tar) and "
        f"import it: rllm-cli sandbox image import {name} rootfs.tar"
    )


def _step_key(parent: str, step: Step, context: BuildContext, source: _Built | None = None) -> str:
    digest = hashlib.sha256(f"{parent}\0{step_text(step)}".encode())
    if isinstance(step, CopyStep) and source is not None:
        digest.update(f"\0from {source.key}".encode())
    elif isinstance(step, CopyStep):
        digest.update(context.digest(step.sources, step.instruction.where).encode())
    return digest.hexdigest()


@contextlib.contextmanager
def _sources(
    step: Step, context: BuildContext, ca_bundle: Path | None
) -> Iterator[tuple[Step, BuildContext]]:
    """The step with the context its sources come from: heredoc files and the downloads
    of an ADD of URLs are written to a scratch context first."""
    if not isinstance(step, CopyStep) or not (step.inline or step.urls):
        yield step, context
        return
    where = step.instruction.where
    if step.urls and step.context_sources:
        raise DockerfileError(f"{where}: one ADD cannot mix URLs and build-context files")
    with tempfile.TemporaryDirectory(prefix="rllm-sources-") as scratch:
        root = Path(scratch)
        if step.inline:
            for file_name, content in step.inline:
                (root / file_name).write_text(content, encoding="utf-8")
                (root / file_name).chmod(0o644)
            yield step, BuildContext(root)
            return
        names = [download(url, root, ca_bundle, where) for url in step.urls]
        chmod = step.chmod if step.chmod is not None else 0o600  # as Docker's ADD of a URL
        yield replace(step, sources=tuple(names), extract=False, chmod=chmod), BuildContext(root)


async def _apply(
    backend: SandboxBackend,
    store: ImageStore,
    step: Step,
    context: BuildContext,
    source: _Built | None,
    layers: list[str],
    layer_id: str,
    timeout_s: float | None,
) -> bool:
    """Make the step's layer; False when it has nothing to add (WORKDIR that exists)."""
    if isinstance(step, RunStep):
        await run_step(backend, store, step, layers, layer_id, timeout_s)
        return True
    lower = [store.layer_path(layer) for layer in layers]
    directory = store.new_layer_dir()
    directory.chmod(0o755)  # a layer's root is the image's /
    writer = LayerWriter(directory, lower)
    try:
        if isinstance(step, WorkdirStep):
            if writer.view.is_dir(step.path):
                directory.rmdir()
                return False
            where = step.instruction.where
            uid, gid = owner(step.user, writer.view, where, True) if step.user else (0, 0)
            writer.mkdir(writer.host_path(step.path), 0o755, uid, gid)
        elif source is not None:
            view = LayerView([store.layer_path(layer) for layer in source.layers])
            await asyncio.to_thread(copy_from_image, step, view, writer)
        else:
            await asyncio.to_thread(apply_copy, step, context, writer)
    except BaseException:
        await asyncio.to_thread(_remove, directory)
        raise
    store.commit_layer(directory, layer_id)
    return True


def _remove(directory: Path) -> None:
    shutil.rmtree(directory, ignore_errors=True)


@contextlib.asynccontextmanager
async def _file_lock(path: Path) -> AsyncIterator[None]:
    """An exclusive lock across processes, waited for without blocking the event loop."""
    with open(path, "a+") as handle:
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                await asyncio.sleep(0.2)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
