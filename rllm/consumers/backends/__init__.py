"""Training backends behind one flag, ``--backend local|verl|tinker|fireworks``.

``make_backend`` checks the settings against the backend's declared capabilities before
building it, so a setting a backend cannot honour is refused before training starts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rllm.consumers.trainer.settings import BackendName, TrainerSettings
from rllm.consumers.trainer.types import Capabilities, TrainingBackend, check_capabilities
from rllm.errors import ConfigError

__all__ = ["backend_capabilities", "detokenize_with", "make_backend"]


def backend_capabilities(name: BackendName) -> Capabilities:
    """The capabilities a backend declares (without building it)."""
    if name is BackendName.LOCAL:
        from rllm.consumers.backends.local.backend import LOCAL_CAPABILITIES

        return LOCAL_CAPABILITIES
    if name is BackendName.VERL:
        from rllm.consumers.backends.verl.backend import VERL_CAPABILITIES

        return VERL_CAPABILITIES
    if name is BackendName.TINKER:
        with _sdk(name, "tinker"):
            from rllm.consumers.backends.tinker.backend import TINKER_CAPABILITIES

        return TINKER_CAPABILITIES
    with _sdk(name, "fireworks"):
        from rllm.consumers.backends.fireworks.backend import FIREWORKS_CAPABILITIES

    return FIREWORKS_CAPABILITIES


@contextmanager
def _sdk(name: BackendName, module: str) -> Iterator[None]:
    """Refuse a hosted backend whose SDK is not installed, naming the extra to install."""
    try:
        yield
    except ModuleNotFoundError as exc:
        if exc.name != module:
            raise
        raise ConfigError(
            f"backend {name.value!r} calls its service through the {module!r} SDK, which is "
            f"not installed: pip install 'rllm-stream[{name.value}]'"
        ) from exc


def make_backend(settings: TrainerSettings) -> TrainingBackend:
    """Check capabilities, then build the backend named by ``settings.backend``.

    Raises:
        CapabilityError: naming the setting and the backend, before anything loads.
    """
    check_capabilities(settings, settings.backend.value, backend_capabilities(settings.backend))
    if settings.backend is BackendName.LOCAL:
        from rllm.consumers.backends.local.backend import LocalBackend

        return LocalBackend(settings)
    if settings.backend is BackendName.VERL:
        from rllm.consumers.backends.verl.backend import VerlBackend

        return VerlBackend(settings)
    if settings.backend is BackendName.TINKER:
        from rllm.consumers.backends.tinker.backend import TinkerBackend

        return TinkerBackend(settings)
    from rllm.consumers.backends.fireworks.backend import FireworksBackend

    return FireworksBackend(
        settings, detokenize_with(settings.tokenizer), settings.fireworks_deployment
    )


def detokenize_with(tokenizer: str | None) -> Callable[[list[int]], str]:
    """Token IDs to text with the tokenizer in a local directory or .gguf (None: the
    default local model's), loaded offline.

    Raises:
        ConfigError: the path holds no tokenizer.
    """
    from rllm.models.loading import load_tokenizer

    tok = load_tokenizer(tokenizer or "")

    def detokenize(ids: list[int]) -> str:
        return str(tok.decode(ids, skip_special_tokens=False))

    return detokenize
