"""Backups that resume training mid-epoch: weights, optimizer state and input position together.

One backup is a folder `backup-<step>` holding the model's `model.weights.h5` (weights and
optimizer state, Keras's `save_weights`) and `position.json` (the input position
`(epoch, batch)`, the step, the `Identity` of the input, the model's layers and weight shapes,
and a SHA-256 checksum of all of these,
so that a position edited by hand is refused). It is written under a temporary
name and renamed when complete, so a backup is always whole: its position is never newer or
older than its weights. Older backups are removed after each save.

    restart ──latest backup──▶ load weights + optimizer ──position (epoch, batch)──▶
        fit the rest of that epoch (loader.start_at(epoch, batch)) ──▶ fit the next epochs

Under `MultiWorkerMirroredStrategy` the position is global (`batch` counts steps of the global
batch, and each worker starts at its part of that step: `build_distributed`). Every worker
saves, as Keras's checkpoint callbacks do (reading the weights may take part in collective
ops), but only the chief's copy is kept: the others write to a temporary folder and delete it.
On restart every worker reads the same `backup_dir` (a folder on storage they all see), and
they check together that they found the same backup, then that every one of them loaded it,
before training: a worker that failed alone would leave the others waiting at an all-reduce.
"""

from __future__ import annotations

import abc
import dataclasses
import hashlib
import json
import os
import re
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Any, Generic, TypeVar

import keras
import tensorflow as tf

from tfpipe.checks import check_int
from tfpipe.distribute.agreement import gather, gather_text, settle
from tfpipe.distribute.sharding import DistributedFeed, Layout
from tfpipe.errors import SourceError, TfpipeWarning
from tfpipe.loaders.pipeline import Pipeline
from tfpipe.loaders.position import Identity
from tfpipe.loaders.sequence import SequenceLoader
from tfpipe.training.architecture import describe_model, model_differences
from tfpipe.training.timing import BACKUP_SAVES

WEIGHTS = "model.weights.h5"
POSITION = "position.json"
_PREFIX = "backup-"
_TEMPORARY = ".partial-"
# The names this module gives backups and their temporary folders: nothing else in backup_dir
# is read or removed (a user's "backup-old" copy is neither a backup nor ours to delete).
_BACKUP = re.compile(rf"{_PREFIX}\d{{12}}")
_OURS = re.compile(rf"{_BACKUP.pattern}|{re.escape(_TEMPORARY)}\d{{12}}-\d+")

Loader = TypeVar("Loader", Pipeline, SequenceLoader)


@dataclasses.dataclass(frozen=True)
class Position:
    """Where training resumes: batch `batch` of epoch `epoch` is the next to train on."""

    epoch: int
    batch: int


class Backups:
    """The backups of one training run in `directory`, for the input `identity`, trained
    under `strategy` (its number of workers is part of what a position is valid for).

    Examples:
        >>> backups = Backups("ckpt", pipeline.identity(), steps=63)  # batches per epoch
        >>> backups.restore(model, epochs=3)
        Position(epoch=1, batch=40)
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        identity: Identity,
        steps: int,
        strategy: tf.distribute.Strategy | None = None,
    ) -> None:
        self.directory = Path(directory)
        self.identity = identity
        self.steps = steps
        self.strategy = strategy or tf.distribute.get_strategy()
        self.workers = Layout.of(self.strategy).num_workers
        self.chief = bool(self.strategy.extended.should_checkpoint)

    def latest(self) -> Path | None:
        """The folder of the newest complete backup; None when there is none."""
        if not self.directory.is_dir():
            return None
        backups = (p for p in self.directory.iterdir() if _BACKUP.fullmatch(p.name))
        saved = sorted(p for p in backups if p.is_dir())
        return saved[-1] if saved else None

    def restore(self, model: keras.Model, *, epochs: int) -> Position:
        """Loads the newest backup into `model` (weights and optimizer state) and returns its
        position; `Position(0, 0)` when there is no backup. Refuses a backup made for another
        input or another number of workers, or saved from a model of another architecture,
        naming what differs (the layers and weight shapes), one past `epochs` (the run
        asked for fewer epochs than it trained already), and (with several workers)
        workers that found different backups. With several workers, when one fails to load
        the backup, all fail together, each naming that worker's error (the others would
        otherwise wait for it at their first all-reduce)."""
        folder = self.latest()
        if self.workers > 1:
            self._check_same_backup(folder)
        if folder is None:
            return Position(0, 0)
        if self.workers == 1:
            return self._load(folder, model, epochs)
        position, failure = None, None
        try:
            position = self._load(folder, model, epochs)
        except Exception as error:  # re-raised below, on every worker
            failure = error
        problems = gather_text(self.strategy, "" if failure is None else _describe(failure))
        failed = "; ".join(f"worker {w}: {p}" for w, p in enumerate(problems) if p)
        if failed:
            settle(self.strategy)
            raise SourceError(
                f"backup_dir={os.fspath(self.directory)!r}: not every worker could restore "
                f"the backup {folder.name}, so none trains ({failed})"
            ) from failure
        assert position is not None
        return position

    def _load(self, folder: Path, model: keras.Model, epochs: int) -> Position:
        """Loads the backup in `folder` into `model` after checking that it was made for this
        run and is not past `epochs`; its position."""
        path = folder / POSITION
        try:
            saved = json.loads(path.read_text())
            saved_identity = Identity.from_dict(saved["identity"])
            position = Position(int(saved["epoch"]), int(saved["batch"]))
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise SourceError(f"{path} cannot be read: {_describe(e)}") from e
        _check_checksum(path, saved)
        differences = []
        workers = saved.get("workers", 1)
        if workers != self.workers:
            differences.append(
                f"workers: saved {workers}, now {self.workers} (the global batch is split over "
                "the workers, each reading its own part of the data)"
            )
        differences += self.identity.differences(saved_identity)
        if saved.get("steps") != self.steps:
            differences.append(f"batches per epoch: saved {saved.get('steps')}, now {self.steps}")
        if differences:
            raise SourceError(
                f"backup_dir={os.fspath(self.directory)!r}: the backup {folder.name} was made "
                f"with other input, it cannot resume this run. Differences: "
                f"{'; '.join(differences)}. Train with the same data, batch size, seed and "
                "number of workers, or pass another backup_dir (delete this one to start over)"
            )
        if (position.epoch, position.batch) > (epochs, 0):
            trained = f"{position.epoch} epoch(s)" + (
                f" and {position.batch} batch(es)" if position.batch else ""
            )
            raise ValueError(
                f"epochs={epochs}, but the backup {folder.name} in "
                f"backup_dir={os.fspath(self.directory)!r} has trained {trained} already "
                f"(position: epoch {position.epoch}, batch {position.batch}): resuming it "
                f"would train nothing and return weights trained longer than asked. Pass "
                f"epochs={position.epoch + 1 if position.batch else position.epoch} or more "
                "to resume it, or another backup_dir (delete this one to start over)"
            )
        _check_model(saved.get("model"), model, folder, self.directory)
        _check_optimizer(saved.get("optimizer"), model, folder, self.directory)
        weights = folder / WEIGHTS
        try:
            model.load_weights(weights)
        except (OSError, ValueError, KeyError) as e:
            raise SourceError(f"{weights} cannot be loaded: {_describe(e)}") from e
        return position

    def _check_same_backup(self, folder: Path | None) -> None:
        """Refuses to train when the workers found different newest backups (all call it)."""
        steps = gather(self.strategy, -1 if folder is None else int(folder.name[len(_PREFIX) :]))
        if len(set(steps)) > 1:
            settle(self.strategy)
            found = ", ".join(
                f"worker {w}: {'none' if s < 0 else f'{_PREFIX}{s:012d}'}"
                for w, s in enumerate(steps)
            )
            raise SourceError(
                f"backup_dir={os.fspath(self.directory)!r}: the workers found different newest "
                f"backups ({found}), so they would resume at different positions. backup_dir "
                "must be one folder that every worker reads (shared storage), the same on all"
            )

    def save(self, model: keras.Model, position: Position) -> Path:
        """Writes a backup at `position` atomically (temporary folder, then rename); on a
        worker other than the chief, into a temporary folder that is then deleted."""
        step = position.epoch * self.steps + position.batch
        final = self.directory / f"{_PREFIX}{step:012d}"
        if not self.chief:
            scratch = Path(tempfile.mkdtemp(prefix="tfpipe-backup-worker-"))
            try:
                _save_weights(model, scratch / WEIGHTS)
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
            return final
        self.directory.mkdir(parents=True, exist_ok=True)
        partial = self.directory / f"{_TEMPORARY}{step:012d}-{os.getpid()}"
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir()
        _save_weights(model, partial / WEIGHTS)
        record = {
            **dataclasses.asdict(position),
            "step": step,
            "steps": self.steps,
            "workers": self.workers,
            "identity": self.identity.to_dict(),
            "optimizer": describe_optimizer(model),
            "model": describe_model(model),
        }
        record["checksum"] = _checksum(record)
        (partial / POSITION).write_text(json.dumps(record, indent=1))
        for path in (partial / WEIGHTS, partial / POSITION, partial):
            _sync(path)
        shutil.rmtree(final, ignore_errors=True)  # a run resumed before this step
        os.rename(partial, final)
        _sync(self.directory)
        for older in self.directory.iterdir():
            if older != final and _OURS.fullmatch(older.name):
                shutil.rmtree(older, ignore_errors=True)
        return final

    def remove(self) -> None:
        """Removes every backup (training finished); the chief's job under several workers."""
        if self.chief and self.directory.is_dir():
            for path in self.directory.iterdir():
                if _OURS.fullmatch(path.name):
                    shutil.rmtree(path, ignore_errors=True)


def _checksum(record: dict[str, Any]) -> str:
    """The SHA-256 of a position record's fields but its checksum, as canonical JSON."""
    fields = {name: value for name, value in record.items() if name != "checksum"}
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()


def _check_checksum(path: Path, saved: dict[str, Any]) -> None:
    """Refuses a `position.json` whose checksum is missing or does not match its fields."""
    if saved.get("checksum") == _checksum(saved):
        return
    found = "has no checksum" if "checksum" not in saved else "does not match its checksum"
    raise SourceError(
        f"{path} {found}: it was changed after tfpipe.fit wrote it (edited by hand?), or "
        "written by an older tfpipe that kept none, so its position may not be the one its "
        "weights were saved at, and resuming could train batches twice or skip them. Delete "
        f"{path.parent} (or all of backup_dir) to start over"
    )


def describe_optimizer(model: keras.Model) -> str:
    """The model's optimizer as a backup records it: its class and how many variables its
    state has (e.g. "Adam with 5 variables"); "no optimizer" without one."""
    optimizer = model.optimizer
    if optimizer is None:
        return "no optimizer"
    return f"{type(optimizer).__name__} with {len(optimizer.variables)} variables"


def _check_optimizer(saved: Any, model: keras.Model, folder: Path, directory: Path) -> None:
    """Refuses a backup whose optimizer state the model's optimizer cannot take: Keras would
    only warn and drop it, and training would go on with a fresh state (backups made before
    the optimizer was recorded are not checked)."""
    now = describe_optimizer(model)
    if saved is None or saved == now:
        return
    raise SourceError(
        f"backup_dir={os.fspath(directory)!r}: the backup {folder.name} holds the state of "
        f"the optimizer {saved}, but the model is compiled with {now}: loading it would drop "
        "the optimizer state (Keras only warns) and train on with a fresh one. Compile the "
        "model with the backup's optimizer, or pass another backup_dir (delete this one to "
        "start over)"
    )


def _check_model(saved: Any, model: keras.Model, folder: Path, directory: Path) -> None:
    """Refuses a backup saved from a model of another architecture, naming the layers and
    weights that differ (Keras's own error speaks of the optimizer's variables, or of a
    variable count; backups made before the architecture was recorded are not checked)."""
    differences = [] if saved is None else model_differences(saved, model)
    if differences:
        raise SourceError(
            f"backup_dir={os.fspath(directory)!r}: the backup {folder.name} was saved from a "
            f"model of another architecture, so its weights cannot be loaded into this one: "
            f"{'; '.join(differences)}. Build the model as it was when the backup was saved, "
            "or pass another backup_dir (delete this one to start over)"
        )


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


def _save_weights(model: keras.Model, path: Path) -> None:
    with warnings.catch_warnings():  # Keras 3.15's h5 writer, once per variable
        warnings.filterwarnings("ignore", "__array__ implementation", DeprecationWarning)
        model.save_weights(path)


def _sync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class BackupCallback(keras.callbacks.Callback):
    """Saves a backup every `save_every` batches trained (counted from the run's start, so the
    save points are the same in every run), from the position given to `start_at` on.
    The report times it as its own part, `BACKUP_SAVES`."""

    report_name = BACKUP_SAVES

    def __init__(self, backups: Backups, save_every: int) -> None:
        super().__init__()
        self.backups = backups
        self.save_every = save_every
        self.saves = 0
        self.start_at(Position(0, 0))

    def start_at(self, start: Position) -> None:
        """Training goes on at `start` (the position of the backup restored)."""
        self.first_batch = start.batch  # the first Keras batch of this epoch is this one
        self.done = start.epoch * self.backups.steps + start.batch
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
            self.saves += 1
        self.done = done


class Resumable(abc.ABC, Generic[Loader]):
    """A loader fit can resume at any position (`start_at`); under a multi-worker `strategy`,
    split over the workers (`build_distributed`), the position counting global steps.

    One subclass per kind of loader: `ResumablePipeline` and `ResumableSequence`. Made for the
    training input `argument` (named in errors); `steps_per_epoch` is fit's, refused (a
    position counts whole epochs).
    """

    def __init__(
        self,
        loader: Loader,
        argument: str,
        strategy: tf.distribute.Strategy | None = None,
        *,
        steps_per_epoch: int | None = None,
    ) -> None:
        if steps_per_epoch is not None:
            raise ValueError(
                "backup_dir counts positions in whole epochs (one pass each): drop "
                f"steps_per_epoch. Received: steps_per_epoch={steps_per_epoch}"
            )
        self.loader: Loader = loader
        steps, problem = self.epoch_length()
        if problem is not None:
            raise ValueError(
                f"backup_dir resumes an input whose batches are the same in every run; "
                f"{argument}: {problem}"
            )
        self.strategy = strategy or tf.distribute.get_strategy()
        self.split = Layout.of(self.strategy).num_workers > 1
        self._first: DistributedFeed | None = None
        if self.split:  # the steps every worker can fill, and the first epochs' input
            self._first = loader.start_at(0).build_distributed(self.strategy)
            steps = self._first.steps_per_epoch
        self.steps = int(steps)  # type: ignore[arg-type]

    @abc.abstractmethod
    def epoch_length(self) -> tuple[int | None, str | None]:
        """The loader's batches per epoch, and why its batches are not the same in every run
        (None when they are)."""

    @abc.abstractmethod
    def batches_from(self, epoch: int, batch: int) -> Any:
        """The batches of `epoch` from `batch` on, read by this process alone."""

    @abc.abstractmethod
    def every_epoch_from(self, epoch: int) -> Any:
        """Every batch of `epoch` and of the epochs after it, read by this process alone."""

    def rest_of_epoch(self, position: Position) -> Any:
        """The batches of `position.epoch` from `position.batch` on."""
        if self.split:
            return self._distributed(position.epoch, position.batch)
        return self.batches_from(position.epoch, position.batch)

    def epochs_from(self, epoch: int) -> Any:
        """Every batch of epoch `epoch` and of the epochs after it."""
        if self.split:
            return self._distributed(epoch, 0)
        return self.every_epoch_from(epoch)

    def _distributed(self, epoch: int, batch: int) -> Any:
        """Each worker's part of the global batches from `(epoch, batch)` on, forever."""
        if (epoch, batch) == (0, 0) and self._first is not None:
            first, self._first = self._first, None
            return first.dataset
        with warnings.catch_warnings():  # the examples left out were counted at __init__
            warnings.simplefilter("ignore", TfpipeWarning)
            return self.loader.start_at(epoch, batch).build_distributed(self.strategy).dataset


class ResumablePipeline(Resumable[Pipeline]):
    """A `tfpipe.Pipeline` fit resumes (also the default one it builds for a path or a source):
    seeded, and of a length its metadata gives."""

    def epoch_length(self) -> tuple[int | None, str | None]:
        """`batches_per_epoch()`, and the problem `start_at` or an unknown length names."""
        steps, problem = self.loader.batches_per_epoch(), None
        try:
            self.loader.start_at(0)
        except ValueError as e:
            problem = str(e)
        if steps is None:
            problem = "its number of batches per epoch is unknown (a filter(), no metadata)"
        return steps, problem

    def batches_from(self, epoch: int, batch: int) -> Any:
        """The dataset of `epoch` from `batch` on."""
        return self.loader.start_at(epoch, batch).build()

    def every_epoch_from(self, epoch: int) -> Any:
        """The dataset repeated from `epoch` on."""
        return self.loader.repeat().start_at(epoch).build()


class ResumableSequence(Resumable[SequenceLoader]):
    """A `tfpipe.SequenceLoader` fit resumes: one that shuffles does so with a seed."""

    def epoch_length(self) -> tuple[int | None, str | None]:
        """`len(loader)`, and the problem of a shuffle without a seed."""
        unseeded = self.loader.options.shuffle and self.loader.options.seed is None
        return len(self.loader), (
            "it shuffles without a seed: pass SequenceLoader(..., seed=0)" if unseeded else None
        )

    def batches_from(self, epoch: int, batch: int) -> Any:
        """The loader positioned at `(epoch, batch)`; its epochs after that one are whole."""
        return self.loader.start_at(epoch, batch)

    def every_epoch_from(self, epoch: int) -> Any:
        """The loader positioned at `epoch` (Keras iterates a PyDataset epoch after epoch)."""
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
    saver: BackupCallback,
    *,
    epochs: int,
    callbacks: list[keras.callbacks.Callback],
    **fit_kwargs: Any,
) -> keras.callbacks.History:
    """Restores the newest backup, trains the rest of its epoch, then the next epochs, saving
    with `saver` (one of `callbacks`); removes the backups when every epoch is trained."""
    start = saver.backups.restore(model, epochs=epochs)
    saver.start_at(start)
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
    saver.backups.remove()
    return history
