"""Offline SFT: epochs over a replayed dataset file through any training backend, with
the trainer's checkpoints and, when Kafka settings are given, ``PolicyUpdated`` events.

Order of one update, as in the consumer loop: backend.update, write the checkpoint (its
``offsets`` hold the next batch position under ``sft:<file>``), publish PolicyUpdated.
A restart with the same run id resumes from the checkpoint at the batch after the last
one trained; the shuffle of each epoch is seeded, so the order is the same.
"""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rllm.consumers.trainer.checkpoint import CheckpointState, CheckpointStore
from rllm.consumers.trainer.settings import TrainerSettings
from rllm.consumers.trainer.sft_data import load_sft_dataset, read_rows
from rllm.consumers.trainer.types import LossKind, TrainBatch, TrainingBackend, check_capabilities
from rllm.errors import ConfigError
from rllm.schemas.topics import POLICY_UPDATES
from rllm.schemas.types import PolicyUpdated

if TYPE_CHECKING:
    from rllm.kafka import EventPublisher
    from rllm.settings import KafkaSettings

__all__ = ["SftProgress", "SftReport", "epoch_order", "train_sft"]

log = logging.getLogger(__name__)


@dataclass
class SftReport:
    """What an SFT run did."""

    data_file: str
    """The dataset."""
    rows: int = 0
    """Rows read (duplicates included)."""
    text_rows: int = 0
    """Rows tokenized with the chat template."""
    duplicates_skipped: int = 0
    """Identical repeated rows skipped."""
    sequences: int = 0
    """Training sequences per epoch."""
    tokens_per_epoch: int = 0
    """Loss tokens per epoch."""
    tokens: int = 0
    """Loss tokens trained by this run."""
    updates: int = 0
    """Updates made by this run."""
    losses: list[float] = field(default_factory=list)
    """Loss of each update (as the backend reports it)."""
    version: int = 0
    """Policy version at the end."""
    resumed_version: int = 0
    """Version of the checkpoint the run resumed from (0: fresh)."""
    checkpoint_uri: str = ""
    """URI of the last checkpoint written."""
    published: int = 0
    """PolicyUpdated events published."""
    epochs: int = 0
    """Epochs asked for (counted across resumes)."""
    already_complete: bool = False
    """The run's checkpoint had already trained every epoch asked for: nothing to do."""


@dataclass(frozen=True)
class SftProgress:
    """One update of a running SFT run, as ``train_sft``'s ``on_update`` sees it."""

    update: int
    """Updates this run has made, this one included (1 for the first)."""
    total: int
    """Updates this run will make (fewer epochs left after a resume, ``max_updates``)."""
    epoch: int
    """Epoch of the update, from 1."""
    version: int
    """Policy version after the update."""
    loss: float
    """The update's loss, as the backend reports it."""
    tokens: int
    """Loss tokens of the update."""
    seconds: float
    """Wall time since the first update started."""

    def __str__(self) -> str:
        """``update 3/12 · epoch 1 · loss 1.2345 · 40 tokens · v3 · 4.1s``."""
        return (
            f"update {self.update}/{self.total} · epoch {self.epoch} · loss {self.loss:.4f} · "
            f"{self.tokens} tokens · v{self.version} · {self.seconds:.1f}s"
        )


def epoch_order(n: int, epoch: int, seed: int, shuffle: bool) -> list[int]:
    """Sequence indices of one epoch: ``0..n-1``, shuffled with ``(seed, epoch)``."""
    order = list(range(n))
    if shuffle:
        random.Random(f"{seed}/{epoch}").shuffle(order)
    return order


def _sft_settings(settings: TrainerSettings) -> TrainerSettings:
    if "loss" not in settings.model_fields_set:
        return settings.model_copy(update={"loss": LossKind.SFT})
    if settings.loss is not LossKind.SFT:
        raise ConfigError(
            f"train_sft trains with loss=sft, but the settings say loss={settings.loss.value}; "
            f"set loss='sft' (--loss sft, RLLM_LOSS=sft)"
        )
    return settings


def _vocab_size(backend: Any) -> int | None:
    size = getattr(getattr(getattr(backend, "model", None), "config", None), "vocab_size", None)
    return size if isinstance(size, int) else None


def train_sft(
    settings: TrainerSettings,
    data_file: Path,
    *,
    kafka: KafkaSettings | None = None,
    backend: TrainingBackend | None = None,
    epochs: int = 1,
    batch_size: int | None = None,
    shuffle: bool = True,
    tokenizer: Any | None = None,
    on_update: Callable[[SftProgress], None] | None = None,
) -> SftReport:
    """Train ``epochs`` passes over ``data_file`` with cross-entropy on its sampled tokens.

    Args:
        settings: Trainer settings (``loss`` must be sft or unset; ``run_id``,
            ``checkpoint_dir``, ``max_updates``, ``merge_steps``, ``seed`` apply).
        data_file: A .jsonl or .parquet dataset from ``rllm-cli replay --out``.
        kafka: Publish PolicyUpdated to this broker after each checkpoint (None: offline).
        backend: A built backend (None: ``make_backend(settings)``).
        epochs: Total passes over the data, counted across resumes.
        batch_size: Sequences per update (None: ``settings.batch_size``).
        shuffle: Shuffle each epoch (seeded by ``settings.seed`` and the epoch).
        tokenizer: Tokenizer for text-only rows (None: the backend's ``tokenizer``).
        on_update: Called after each update's checkpoint (and publish) with its progress.

    Raises:
        SftDataError: for a bad file or row, before the backend is built.
        ConfigError: for loss other than sft, ``epochs`` or ``batch_size`` below 1, or a
            checkpoint of this run that trained on a different dataset layout.
        CapabilityError: if the backend cannot honour the settings.
        KafkaUnavailableError: if ``kafka`` is given and no broker answers.
    """
    settings = _sft_settings(settings)
    size = settings.batch_size if batch_size is None else batch_size
    if epochs < 1 or size < 1:
        raise ConfigError(f"epochs={epochs} and batch_size={size} must both be at least 1")
    rows = list(read_rows(data_file))  # a bad file fails before any model loads
    if kafka is not None:  # so does an unreachable broker
        from rllm.kafka import check_broker

        check_broker(kafka)
    built = backend is None
    if backend is None:
        from rllm.consumers.backends import make_backend

        backend = make_backend(settings)
    else:
        check_capabilities(settings, backend.name, backend.capabilities)
    data = load_sft_dataset(
        data_file,
        tokenizer if tokenizer is not None else getattr(backend, "tokenizer", None),
        rows=rows,
        merge_steps=settings.merge_steps,
        vocab_size=_vocab_size(backend),
    )
    for note in data.notes:
        log.warning(note)
    report = SftReport(
        data_file=str(data_file),
        rows=data.rows,
        text_rows=data.text_rows,
        duplicates_skipped=data.duplicates,
        sequences=len(data.sequences),
        tokens_per_epoch=data.num_tokens,
        epochs=epochs,
    )
    store = CheckpointStore(settings.checkpoint_dir, settings.run_id, settings.keep_checkpoints)
    state = CheckpointState(run_id=settings.run_id, base_model=backend.base_model)
    found = store.latest()
    if found is not None:
        path, state = found
        backend.load(path, state.version)
        report.resumed_version = state.version
        log.info("resumed from %s (version %d)", path, state.version)
    key = f"sft:{data_file.resolve()}"
    layout = {"sequences": len(data.sequences), "batch_size": size}
    saved = state.offsets.get(key, {})
    if saved and {k: saved.get(k) for k in layout} != layout:
        raise ConfigError(
            f"checkpoint v{state.version} of run {settings.run_id} trained on {key} with "
            f"{saved}, now {layout}: the file or batch size changed; use another --run-id"
        )
    per_epoch = math.ceil(len(data.sequences) / size)
    position = saved.get("position", 0)
    left = max(0, epochs * per_epoch - position)
    report.already_complete = found is not None and left == 0
    total = min(left, settings.max_updates) if settings.max_updates else left
    began = time.perf_counter()
    publisher: EventPublisher | None = None
    if kafka is not None:
        from rllm.kafka import EventPublisher

        publisher = EventPublisher(kafka)
    try:
        if publisher is not None and state.version > 0:  # the last publish may have been lost
            publisher.publish_sync(
                POLICY_UPDATES, settings.run_id, _event(settings, backend, state)
            )
        while position < epochs * per_epoch:
            if settings.max_updates and report.updates >= settings.max_updates:
                break
            epoch, index = divmod(position, per_epoch)
            order = epoch_order(len(data.sequences), epoch, settings.seed, shuffle)
            seqs = [data.sequences[i] for i in order[index * size : (index + 1) * size]]
            batch = TrainBatch(
                sequences=seqs, episode_ids=list(dict.fromkeys(s.episode_id for s in seqs))
            )
            result = backend.update(batch)
            position += 1
            metrics = {**result.metrics, "epoch": float(epoch)}
            state = CheckpointState(
                version=result.version,
                offsets={**state.offsets, key: {**layout, "position": position}},
                history=[
                    *state.history,
                    {"version": result.version, "data_file": key, "epoch": epoch, "batch": index},
                ],
                run_id=settings.run_id,
                base_model=backend.base_model,
                metrics=metrics,
            )
            store.write(state, backend.save)
            report.updates += 1
            report.tokens += batch.num_tokens
            report.losses.append(float(metrics.get("loss", math.nan)))
            event = _event(settings, backend, state, len(batch.episode_ids), batch.num_tokens)
            if publisher is not None:
                publisher.publish_sync(POLICY_UPDATES, settings.run_id, event)
                report.published += 1
            if on_update is not None:
                on_update(
                    SftProgress(
                        update=report.updates,
                        total=total,
                        epoch=epoch + 1,
                        version=result.version,
                        loss=report.losses[-1],
                        tokens=batch.num_tokens,
                        seconds=time.perf_counter() - began,
                    )
                )
            log.info(
                "sft epoch %d batch %d: version %d loss %.4f",
                epoch,
                index,
                result.version,
                report.losses[-1],
            )
    finally:
        if publisher is not None:
            publisher.close()
        if built:
            backend.close()
    report.version = state.version
    report.checkpoint_uri = state.checkpoint_uri
    return report


def _event(
    settings: TrainerSettings,
    backend: TrainingBackend,
    state: CheckpointState,
    num_episodes: int = 0,
    num_tokens: int = 0,
) -> PolicyUpdated:
    """PolicyUpdated for ``state`` (event id run_id/v<version>, as the consumer loop's)."""
    return PolicyUpdated(
        event_id=f"{settings.run_id}/v{state.version}",
        run_id=settings.run_id,
        version=state.version,
        checkpoint_uri=state.checkpoint_uri,
        base_model=backend.base_model,
        backend=backend.name,
        metrics=state.metrics,
        num_episodes=num_episodes,
        num_tokens=num_tokens,
    )
