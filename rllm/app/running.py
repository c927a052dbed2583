"""A trainer consumer running inside ``AgentTrainer``'s process, on a thread of its own,
and the gateway serving what it publishes: started, waited on, stopped."""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rllm.errors import RllmError

if TYPE_CHECKING:
    from rllm.app.config import TrainConfig
    from rllm.app.served import GatewayServes
    from rllm.consumers.trainer.loop import Trainer
    from rllm.consumers.trainer.settings import TrainerSettings
    from rllm.settings import KafkaSettings

__all__ = ["RunningTrainer"]


@dataclass
class RunningTrainer:
    """A trainer consumer on its thread, and what the gateway serves of its run."""

    trainer: Trainer
    thread: threading.Thread
    settings: TrainerSettings
    served: GatewayServes
    config: TrainConfig

    @classmethod
    def start(
        cls, settings: TrainerSettings, kafka: KafkaSettings, config: TrainConfig
    ) -> RunningTrainer:
        """Load the backend, start the trainer's thread and follow what the gateway serves
        (its consumer group says the run trains: ``rllm.app.hold.training_runs``)."""
        from rllm.app.served import GatewayServes
        from rllm.consumers.backends import make_backend
        from rllm.consumers.trainer.loop import Trainer

        trainer = Trainer(settings, kafka, make_backend(settings))

        def run_trainer() -> None:
            with contextlib.suppress(BaseException):  # kept in trainer.failure
                trainer.run()

        thread = threading.Thread(target=run_trainer, name="rllm-trainer", daemon=True)
        thread.start()
        served = GatewayServes(config.gateway_url, config.run_id, kafka, config.admin_key).start()
        return cls(trainer, thread, settings, served, config)

    def raise_failure(self) -> None:
        """Raise the trainer's own failure, if it failed."""
        if self.trainer.failure is not None:
            raise self.trainer.failure

    def raise_refused(self, version: int) -> None:
        """Raise the reason the gateway's upstream gave for not loading ``version``."""
        if self.served.refused is not None:
            raise RllmError(
                f"the model server behind the gateway at {self.config.gateway_url} did not "
                f"load run {self.config.run_id}'s policy version {version}, so rollouts would "
                f"sample the old one: {self.served.refused}"
            )

    def wait_served(self, version: int) -> None:
        """Until the gateway serves ``version`` (announced by the trainer first).

        Raises:
            RllmError: the trainer failed, the upstream refused the version, or it was not
                served within ``update_timeout_s``.
        """
        cfg = self.config
        deadline = time.monotonic() + cfg.update_timeout_s
        announced = self.trainer.announced(cfg.update_timeout_s)
        if announced and self.served.wait(version, deadline, self.trainer):
            return
        self.raise_failure()
        self.raise_refused(version)
        raise RllmError(
            f"the gateway at {cfg.gateway_url} did not take run {cfg.run_id}'s policy "
            f"version {version} within {cfg.update_timeout_s:.0f} s (it follows "
            f"rllm.policy-updates; is it running with the same Kafka?)"
        )

    def wait_update(self, version: int, submitted: int) -> None:
        """Until the trainer has settled every submitted episode and trained the kept ones
        (``Trainer.flush_after``), and the model behind the gateway serves the result."""
        trainer, timeout_s = self.trainer, self.config.update_timeout_s
        deadline = time.monotonic() + timeout_s
        flushed = trainer.flushed(submitted, timeout_s)
        now = trainer.version
        if flushed and (now == version or self.served.wait(now, deadline, trainer)):
            return  # no update, or the new one is served
        self.raise_failure()
        self.raise_refused(now)
        raise RllmError(
            f"no policy update within {timeout_s:.0f} s: the trainer consumed "
            f"{trainer.report.episodes_consumed} of {submitted} episodes at version "
            f"{trainer.version}; are the processors running (rllm-cli up)?"
        )

    def close(self) -> None:
        """Stop the trainer and the following; a hosted backend's session ends with it."""
        self.trainer.stop()
        self.thread.join(timeout=120)
        self.served.close()
        if not self.thread.is_alive():
            self.trainer.core.backend.close()
