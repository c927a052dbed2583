"""Import a root filesystem tarball (``docker export``, a distribution's rootfs) as a
one-layer image of the local store: how an image no recipe here builds gets in.

``rllm-cli sandbox image import NAME ROOTFS.tar`` calls ``import_rootfs``.
"""

from __future__ import annotations

import hashlib
import logging
import shutil
import time
from pathlib import Path

from rllm.sandboxes.errors import ImageError
from rllm.sandboxes.images.rootfs import LayerWriter, extract_tar
from rllm.sandboxes.images.store import ImageConfig, ImageStore, LocalImage

__all__ = ["IMPORT_LABEL", "import_rootfs"]

log = logging.getLogger(__name__)

IMPORT_LABEL = "rllm.imported.from"
"""Label naming the tarball an image was imported from."""

_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def import_rootfs(
    store: ImageStore, name: str, tar_path: Path, config: ImageConfig | None = None
) -> LocalImage:
    """Make image ``name`` of the root filesystem in ``tar_path`` (tar, tar.gz, tar.xz,
    tar.bz2), keeping its owners, modes and links; replaces an image of that name.

    The layer's id is the tarball's content hash, so importing the same file twice
    stores it once. Device nodes are skipped (a sandbox mounts its own ``/dev``).

    Args:
        store: The image store.
        name: The image's name (what FROM and ``SandboxSpec.image`` will say).
        tar_path: The tarball.
        config: ENV, WORKDIR and USER of the image; default a standard ``PATH``.

    Raises:
        ImageError: the file is missing or not a tar archive, or it has a member with
            an absolute path or ``..`` (nothing is imported then).
    """
    started = time.monotonic()
    if not tar_path.is_file():
        raise ImageError(f"cannot import {name!r}: no file at {tar_path}")
    with open(tar_path, "rb") as handle:
        digest = hashlib.file_digest(handle, "sha256")
    layer_id = f"import-{digest.hexdigest()[:32]}"
    if not store.has_layer(layer_id):
        directory = store.new_layer_dir()
        directory.chmod(0o755)  # the image's /
        try:
            count = extract_tar(tar_path, LayerWriter(directory, []), "/", strip_absolute=False)
        except BaseException:
            shutil.rmtree(directory, ignore_errors=True)
            raise
        if count == 0:
            shutil.rmtree(directory, ignore_errors=True)
            raise ImageError(f"cannot import {name!r}: {tar_path} holds no files")
        store.commit_layer(directory, layer_id)
    image = store.put(
        name,
        [layer_id],
        config or ImageConfig(env={"PATH": _PATH}),
        {IMPORT_LABEL: str(tar_path)},
    )
    log.info(
        "imported %s as %s (%s) in %.2f s", tar_path, name, image.id, time.monotonic() - started
    )
    return image
