"""The options ``rllm-cli train``, ``train consume`` and ``train sft`` share, each made from
its settings field: the type and choices from the field's annotation (an enum's values),
the default and the environment variable shown from the field, never written again here.

A ``TrainerSettings`` option defaults to None, so an unset flag leaves the field to its
``RLLM_`` variable and then its default; the loop's options (``TrainConfig`` fields) take
the field's default.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from typing import Any, TypeVar

import click
from pydantic.fields import FieldInfo

from rllm.app.config import TrainConfig
from rllm.consumers.trainer.settings import TrainerSettings

__all__ = [
    "DISTILL",
    "KAFKA",
    "OBJECTIVE",
    "RUN",
    "config_option",
    "options",
    "preflight",
    "rl_option_groups",
    "setting",
]

F = TypeVar("F", bound=Callable[..., Any])

RUN = ("backend", "model", "run_id", "checkpoint_dir", "batch_size", "max_updates")
"""The trainer's options in every mode (``--help``'s first group)."""
OBJECTIVE = (
    "loss",
    "loss_agg",
    "lr",
    "kl_coef",
    "clip_eps_low",
    "clip_eps_high",
    "lora_rank",
    "precision",
)
"""What the update optimises, in every mode."""
DISTILL = ("teacher_model", "teacher_url", "teacher_api")
"""The teacher of ``--loss distill``."""
KAFKA = ("Kafka", ("bootstrap_servers", "topic_prefix"))
"""``--help``'s last group in every mode: ``kafka_options``."""

OptionGroups = tuple[tuple[str, tuple[str, ...]], ...]


def rl_option_groups(episodes: tuple[str, ...], *loop: tuple[str, tuple[str, ...]]) -> OptionGroups:
    """How ``--help`` groups an RL trainer's options: the trainer, its objective, the
    ``episodes`` it trains, the teacher of distillation, then the ``loop``'s groups (the
    whole loop's rollouts) and Kafka."""
    return (
        ("Trainer", RUN),
        ("Objective", OBJECTIVE),
        ("Episodes and staleness", episodes),
        ("Distillation (--loss distill)", DISTILL),
        *loop,
        KAFKA,
    )


_FLAGS = {"idle_exit_s": "--idle-exit"}
"""Flags that are not the field's name with dashes."""
_HELP = {
    "backend": "Training backend.",
    "model": "Local HF model dir or .gguf file.",
    "batch_size": "Episodes (tasks) per update; with `train sft`, sequences per update.",
    "max_updates": "Stop after N policy updates made (a batch whose groups were all "
    "dropped, as uniform or stale, makes none and does not count; 0: no limit).",
    "loss": "Objective.",
    "lr": "AdamW learning rate.",
    "kl_coef": "KL penalty to the reference.",
    "clip_eps_low": "In [0, 1): the ratio's floor is 1 - this.",
    "lora_rank": "0 trains all weights.",
    "precision": "Local backend arithmetic; bf16 keeps float32 master weights.",
    "teacher_model": "Teacher model dir (loss=distill).",
    "teacher_url": "Served teacher's base URL (loss=distill; vLLM, SGLang or rllm-cli "
    "serve; key in RLLM_TEACHER_API_KEY).",
    "teacher_api": "How the teacher is asked.",
    "checkpoint_dir": "Where checkpoints go.",
    "run_id": "Training run id.",
    "max_staleness": "Versions, in async mode.",
    "idle_exit_s": "Stop after this many seconds without episodes.",
}
"""Help of the trainer's options where the field's name does not say enough."""


def _click_type(field: FieldInfo) -> Any:
    """The click type of a field: its enum's values as choices, else int, float or text."""
    kind = field.annotation
    if isinstance(kind, type) and issubclass(kind, Enum):
        return click.Choice([str(m.value) for m in kind])
    return kind if kind in (int, float) else None


def _shown(value: Any) -> str:
    return str(value.value) if isinstance(value, Enum) else str(value)


def _env(name: str) -> str:
    """The variable a TrainerSettings field reads."""
    moved = {m.field: m.new for m in TrainerSettings.moved_env}
    return moved.get(name, f"RLLM_{name.upper()}")


def setting(name: str) -> Callable[[F], F]:
    """``--<name>`` for ``TrainerSettings.<name>`` (default None: the variable, then the
    field's default, which the help shows with the variable)."""
    field = TrainerSettings.model_fields[name]
    shown = field.default_factory is None and field.default not in ("", None)
    default = f"default: {_shown(field.default)}; " if shown else ""
    help_text = f"{_HELP.get(name, '')} [{default}env {_env(name)}]".strip()
    flag = _FLAGS.get(name, f"--{name.replace('_', '-')}")
    return click.option(flag, name, type=_click_type(field), default=None, help=help_text)


def config_option(name: str, help: str) -> Callable[[F], F]:
    """``--<name>`` for ``TrainConfig.<name>`` (a loop option), its default the field's."""
    field = TrainConfig.model_fields[name]
    default = field.default
    return click.option(
        f"--{name.replace('_', '-')}",
        name,
        type=_click_type(field),
        default=default.value if isinstance(default, Enum) else default,
        show_default=True,
        help=help,
    )


def options(*names: str) -> Callable[[F], F]:
    """The trainer options ``names``, in that order in ``--help``."""

    def apply(func: F) -> F:
        for name in reversed(names):
            func = setting(name)(func)
        return func

    return apply


def preflight(kafka: Any, gateway_url: str | None) -> None:
    """Check the broker (and the gateway the rollouts go through) answer before anything
    loads a model or writes a checkpoint.

    Raises:
        KafkaUnavailableError / ConfigError: naming the address and ``rllm-cli up``.
    """
    import httpx

    from rllm.errors import ConfigError
    from rllm.kafka import check_broker

    check_broker(kafka, timeout_s=5.0)
    if gateway_url is None:
        return
    try:
        httpx.get(f"{gateway_url.rstrip('/')}/health", timeout=5.0).raise_for_status()
    except httpx.HTTPError as exc:
        raise ConfigError(
            f"the gateway at {gateway_url} does not answer ({type(exc).__name__}: {exc}); "
            f"start the stack with `rllm-cli up`, or pass --gateway-url"
        ) from exc
