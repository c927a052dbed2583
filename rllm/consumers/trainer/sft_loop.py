"""Offline SFT: epochs over a replayed dataset file through any training backend, with
the trainer's checkpoints and, when Kafka settings are given, ``PolicyUpdated`` events.

Each update is ``TrainerCore.update``, as in the consumer loop: backend.update, write the
checkpoint (its ``offsets`` hold the next batch position under ``sft:<file>``), then
publish PolicyUpdated.
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

from rllm.consumers.trainer.core import TrainerCore
from rllm.consumers.trainer.settings import TrainerSettings
from rllm.consumers.trainer.sft_data import SftDataset, load_sft_dataset, read_rows
from rllm.consumers.trainer.types import LossKind, TrainBatch, TrainingBackend, check_capabilities
from rllm.errors import ConfigError
from rllm.schemas.topics import POLICY_UPDATES

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
    backend = _built(settings, backend)
    data = load_sft_dataset(
        data_file,
        tokenizer if tokenizer is not None else getattr(backend, "tokenizer", None),
        rows=rows,
        merge_steps=settings.merge_steps,
        vocab_size=_vocab_size(backend),
    )
    for note in data.notes:
        log.warning(note)
    core = TrainerCore(settings, backend)
    run = _SftRun(core, data, data_file, size, epochs, shuffle)
    publisher: EventPublisher | None = None
    if kafka is not None:
        from rllm.kafka import EventPublisher

        publisher = EventPublisher(kafka)
    try:
        if publisher is not None and core.state.version > 0:  # the last may have been lost
            publisher.publish_sync(POLICY_UPDATES, settings.run_id, core.policy_event())
        run.train(publisher, on_update)
    finally:
        if publisher is not None:
            publisher.close()
        if built:
            backend.close()
    run.report.version = core.state.version
    run.report.checkpoint_uri = core.state.checkpoint_uri
    return run.report


def _built(settings: TrainerSettings, backend: TrainingBackend | None) -> TrainingBackend:
    """The backend given (checked against the settings), else the one they name."""
    if backend is None:
        from rllm.consumers.backends import make_backend

        return make_backend(settings)
    check_capabilities(settings, backend.name, backend.capabilities)
    return backend


class _SftRun:
    """The epochs of one SFT run over a loaded dataset, from where its checkpoint left."""

    def __init__(
        self,
        core: TrainerCore,
        data: SftDataset,
        data_file: Path,
        size: int,
        epochs: int,
        shuffle: bool,
    ) -> None:
        self.core = core
        self.data = data
        self.size = size
        """Sequences per update."""
        self.epochs = epochs
        self.shuffle = shuffle
        self.key = f"sft:{data_file.resolve()}"
        """Where the checkpoint's ``offsets`` keep this file's batch position."""
        self.layout = {"sequences": len(data.sequences), "batch_size": size}
        saved = core.state.offsets.get(self.key, {})
        if saved and {k: saved.get(k) for k in self.layout} != self.layout:
            raise ConfigError(
                f"checkpoint v{core.state.version} of run {core.settings.run_id} trained on "
                f"{self.key} with {saved}, now {self.layout}: the file or batch size changed; "
                f"use another --run-id"
            )
        self.per_epoch = math.ceil(len(data.sequences) / size)
        self.position = saved.get("position", 0)
        """Batches trained so far, over every epoch."""
        left = max(0, epochs * self.per_epoch - self.position)
        limit = core.settings.max_updates
        self.total = min(left, limit) if limit else left
        self.report = SftReport(
            data_file=str(data_file),
            rows=data.rows,
            text_rows=data.text_rows,
            duplicates_skipped=data.duplicates,
            sequences=len(data.sequences),
            tokens_per_epoch=data.num_tokens,
            epochs=epochs,
            resumed_version=core.state.version if core.resumed else 0,
            already_complete=core.resumed and left == 0,
        )

    def train(
        self, publisher: EventPublisher | None, on_update: Callable[[SftProgress], None] | None
    ) -> None:
        """Update batch after batch until the epochs or ``max_updates`` are done."""
        settings, report = self.core.settings, self.report
        began = time.perf_counter()
        while self.position < self.epochs * self.per_epoch:
            if settings.max_updates and report.updates >= settings.max_updates:
                break
            epoch, index = divmod(self.position, self.per_epoch)
            batch = self._batch(epoch, index)
            self.position += 1
            offsets = {
                **self.core.state.offsets,
                self.key: {**self.layout, "position": self.position},
            }
            entry = {"data_file": self.key, "epoch": epoch, "batch": index}
            result, event = self.core.update(batch, offsets, entry, {"epoch": float(epoch)})
            report.updates += 1
            report.tokens += batch.num_tokens
            report.losses.append(float(event.metrics.get("loss", math.nan)))
            if publisher is not None:
                publisher.publish_sync(POLICY_UPDATES, settings.run_id, event)
                report.published += 1
            if on_update is not None:
                on_update(
                    SftProgress(
                        update=report.updates,
                        total=self.total,
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

    def _batch(self, epoch: int, index: int) -> TrainBatch:
        """Batch ``index`` of ``epoch``, in the epoch's seeded order."""
        order = epoch_order(len(self.data.sequences), epoch, self.core.settings.seed, self.shuffle)
        seqs = [self.data.sequences[i] for i in order[index * self.size : (index + 1) * self.size]]
        return TrainBatch(
            sequences=seqs, episode_ids=list(dict.fromkeys(s.episode_id for s in seqs))
        )
