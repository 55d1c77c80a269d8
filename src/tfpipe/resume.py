"""Backups that resume training mid-epoch: weights, optimizer state and input position together.

One backup is a folder `backup-<step>` holding the model's `model.weights.h5` (weights and
optimizer state, Keras's `save_weights`) and `position.json` (the input position
`(epoch, batch)`, the step, and the `Identity` of the input). It is written under a temporary
name and renamed when complete, so a backup is always whole: its position is never newer or
older than its weights. Older backups are removed after each save.

    restart ──latest backup──▶ load weights + optimizer ──position (epoch, batch)──▶
        fit the rest of that epoch (loader.start_at(epoch, batch)) ──▶ fit the next epochs
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import warnings
from pathlib import Path
from typing import Any

import keras

from tfpipe._checks import check_int
from tfpipe.errors import SourceError
from tfpipe.loaders.pipeline import Pipeline
from tfpipe.loaders.position import Identity
from tfpipe.loaders.sequence import SequenceLoader

WEIGHTS = "model.weights.h5"
POSITION = "position.json"
_PREFIX = "backup-"
_TEMPORARY = ".partial-"


@dataclasses.dataclass(frozen=True)
class Position:
    """Where training resumes: batch `batch` of epoch `epoch` is the next to train on."""

    epoch: int
    batch: int


class Backups:
    """The backups of one training run in `directory`, for the input `identity`.

    Example:
        >>> backups = Backups("ckpt", pipeline.identity(), steps=63)  # batches per epoch
        >>> backups.restore(model)
        Position(epoch=1, batch=40)
    """

    def __init__(self, directory: str | os.PathLike[str], identity: Identity, steps: int) -> None:
        self.directory = Path(directory)
        self.identity = identity
        self.steps = steps

    def latest(self) -> Path | None:
        """The folder of the newest complete backup; None when there is none."""
        if not self.directory.is_dir():
            return None
        saved = sorted(p for p in self.directory.glob(f"{_PREFIX}*") if p.is_dir())
        return saved[-1] if saved else None

    def restore(self, model: keras.Model) -> Position:
        """Loads the newest backup into `model` (weights and optimizer state) and returns its
        position; `Position(0, 0)` when there is no backup. Refuses a backup made for another
        input, naming what differs."""
        folder = self.latest()
        if folder is None:
            return Position(0, 0)
        saved = json.loads((folder / POSITION).read_text())
        differences = self.identity.differences(Identity.from_dict(saved["identity"]))
        if saved["steps"] != self.steps:
            differences.append(f"batches per epoch: saved {saved['steps']}, now {self.steps}")
        if differences:
            raise SourceError(
                f"backup_dir={os.fspath(self.directory)!r}: the backup {folder.name} was made "
                f"with other input, it cannot resume this run. Differences: "
                f"{'; '.join(differences)}. Train with the same data, batch size and seed, or "
                "pass another backup_dir (delete this one to start over)"
            )
        model.load_weights(folder / WEIGHTS)
        return Position(saved["epoch"], saved["batch"])

    def save(self, model: keras.Model, position: Position) -> Path:
        """Writes a backup at `position` atomically (temporary folder, then rename)."""
        step = position.epoch * self.steps + position.batch
        self.directory.mkdir(parents=True, exist_ok=True)
        final = self.directory / f"{_PREFIX}{step:012d}"
        partial = self.directory / f"{_TEMPORARY}{step:012d}-{os.getpid()}"
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir()
        with warnings.catch_warnings():  # Keras 3.15's h5 writer, once per variable
            warnings.filterwarnings("ignore", "__array__ implementation", DeprecationWarning)
            model.save_weights(partial / WEIGHTS)
        record = {
            **dataclasses.asdict(position),
            "step": step,
            "steps": self.steps,
            "identity": self.identity.to_dict(),
        }
        (partial / POSITION).write_text(json.dumps(record, indent=1))
        for path in (partial / WEIGHTS, partial / POSITION, partial):
            _sync(path)
        shutil.rmtree(final, ignore_errors=True)  # a run resumed before this step
        os.rename(partial, final)
        _sync(self.directory)
        for older in self.directory.iterdir():
            if older != final and older.name.startswith((_PREFIX, _TEMPORARY)):
                shutil.rmtree(older, ignore_errors=True)
        return final

    def remove(self) -> None:
        """Removes every backup (training finished)."""
        if self.directory.is_dir():
            for path in self.directory.iterdir():
                if path.name.startswith((_PREFIX, _TEMPORARY)):
                    shutil.rmtree(path, ignore_errors=True)


def _sync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class BackupCallback(keras.callbacks.Callback):
    """Saves a backup every `save_every` batches trained (counted from the run's start, so the
    save points are the same in every run)."""

    def __init__(self, backups: Backups, save_every: int, start: Position) -> None:
        super().__init__()
        self.backups = backups
        self.save_every = save_every
        self.first_batch = start.batch  # the first Keras batch of this epoch is this one
        self.done = start.epoch * backups.steps + start.batch
        self.epoch = start.epoch

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self.epoch = epoch

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self.first_batch = 0

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        trained = self.first_batch + batch + 1
        done = self.epoch * self.backups.steps + trained
        if done // self.save_every > self.done // self.save_every:
            position = (
                Position(self.epoch + 1, 0)
                if trained >= self.backups.steps
                else Position(self.epoch, trained)
            )
            self.backups.save(self.model, position)
        self.done = done


class Resumable:
    """A `tfpipe.Pipeline` or `tfpipe.SequenceLoader` fit can resume at any position."""

    def __init__(self, loader: Pipeline | SequenceLoader, argument: str) -> None:
        problem = None
        if isinstance(loader, Pipeline):
            steps = loader.batches_per_epoch()
            try:
                loader.start_at(0)
            except ValueError as e:
                problem = str(e)
            if steps is None:
                problem = "its number of batches per epoch is unknown (a filter(), no metadata)"
        else:
            steps = len(loader)
            if loader.options.shuffle and loader.options.seed is None:
                problem = "it shuffles without a seed: pass SequenceLoader(..., seed=0)"
        if problem is not None:
            raise ValueError(
                f"backup_dir resumes an input whose batches are the same in every run; "
                f"{argument}: {problem}"
            )
        self.loader = loader
        self.steps = int(steps)  # type: ignore[arg-type]

    def rest_of_epoch(self, position: Position) -> Any:
        """The batches of `position.epoch` from `position.batch` on."""
        if isinstance(self.loader, Pipeline):
            return self.loader.start_at(position.epoch, position.batch).build()
        return self.loader.start_at(position.epoch, position.batch)

    def epochs_from(self, epoch: int) -> Any:
        """Every batch of epoch `epoch` and of the epochs after it."""
        if isinstance(self.loader, Pipeline):
            return self.loader.repeat().start_at(epoch).build()
        return self.loader.start_at(epoch)


def check_backup(backup_dir: Any, save_every: Any, model: keras.Model) -> int | None:
    """`save_every` checked (None: once per epoch); refuses one without `backup_dir`, and
    a model compiled with `steps_per_execution` other than 1 (saves fall between steps)."""
    if backup_dir is None:
        if save_every is not None:
            raise ValueError(f"save_every applies with backup_dir=... Received: {save_every!r}")
        return None
    if model.steps_per_execution != 1:
        raise ValueError(
            "backup_dir saves between steps: compile the model with steps_per_execution=1. "
            f"Received: steps_per_execution={model.steps_per_execution}"
        )
    return check_int("save_every", save_every, or_none=True)


def fit_from(
    model: keras.Model,
    resumable: Resumable,
    backups: Backups,
    save_every: int | None,
    *,
    epochs: int,
    callbacks: list[keras.callbacks.Callback],
    **fit_kwargs: Any,
) -> keras.callbacks.History:
    """Restores the newest backup, trains the rest of its epoch, then the next epochs, saving
    every `save_every` batches; removes the backups when every epoch is trained."""
    start = backups.restore(model)
    saver = BackupCallback(backups, save_every or resumable.steps, start)
    callbacks = [callbacks[0], saver, *callbacks[1:]]  # saved before user callbacks run
    logs: dict[str, list[Any]] = {}
    epoch = start.epoch
    history = None
    if start.batch and epoch < epochs:
        history = model.fit(
            resumable.rest_of_epoch(start),
            initial_epoch=epoch,
            epochs=epoch + 1,
            steps_per_epoch=resumable.steps - start.batch,
            callbacks=callbacks,
            **fit_kwargs,
        )
        logs = dict(history.history)
        epoch += 1
    if epoch < epochs or history is None:
        history = model.fit(
            resumable.epochs_from(epoch),
            initial_epoch=epoch,
            epochs=epochs,
            steps_per_epoch=resumable.steps,
            callbacks=callbacks,
            **fit_kwargs,
        )
        for name, values in logs.items():
            history.history[name] = [*values, *history.history.get(name, [])]
    backups.remove()
    return history
