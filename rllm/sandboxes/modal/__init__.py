"""The ``modal`` sandbox backend: sandboxes on Modal through its SDK (``backend``), one
sandbox (``sandbox``), and the SDK client and its errors (``client``)."""

from __future__ import annotations

from rllm.sandboxes.modal.backend import ModalBackend, ModalSnapshots
from rllm.sandboxes.modal.sandbox import ModalSandbox

__all__ = ["ModalBackend", "ModalSandbox", "ModalSnapshots"]
