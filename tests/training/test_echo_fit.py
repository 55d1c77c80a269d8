"""`tfpipe.fit` on an echoed Pipeline: echoed epochs, and an exact resume from a backup."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import keras
import numpy as np
import pytest

import tfpipe
from tfpipe.errors import SourceError

pytestmark = pytest.mark.usefixtures("short_probes")  # their length is not under test


class _Preempted(Exception):
    pass


class _Steps(keras.callbacks.Callback):
    """The steps trained in each epoch; raises after step `stop` of the run, as a preemption
    would."""

    def __init__(self, stop: int | None = None) -> None:
        super().__init__()
        self.stop = stop
        self.steps = 0
        self.epochs: list[int] = []

    def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
        self.epochs.append(0)

    def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
        self.steps += 1
        self.epochs[-1] += 1
        if self.steps == self.stop:
            raise _Preempted


def _model() -> keras.Model:
    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(2)])
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def _pipeline(factor: int) -> tfpipe.Pipeline:
    ids = np.arange(40, dtype=np.float32)[:, None]
    source = tfpipe.from_arrays({"x": ids, "label": np.arange(40) % 2})
    pipeline = tfpipe.Pipeline(source).shuffle(seed=5).echo(factor, buffer_size=8)
    return pipeline.batch(4).as_supervised("x", "label")


@pytest.mark.slow
@pytest.mark.fault(
    "a backup of an echoed Pipeline resumed with another echo factor",
    reader="tfpipe.fit(backup_dir=...)",
    outcome="SourceError naming the saved and the new echo (factor, unit, window)",
)
def test_fit_trains_echoed_epochs_and_resumes_only_with_the_same_factor(tmp_path: Path) -> None:
    """40 examples, factor 2, batch 4: 20 steps an epoch. A run preempted at step 26 resumes
    from its backup at step 24 (epoch 1, batch 4) and trains the rest: 16 + 20 steps."""
    counted = _Steps()
    history = tfpipe.fit(_model(), _pipeline(2), epochs=2, callbacks=[counted], verbose=0)
    assert counted.epochs == [20, 20] and len(history.history["loss"]) == 2
    backup = tmp_path / "backup"
    with pytest.raises(_Preempted):
        tfpipe.fit(_model(), _pipeline(2), epochs=3, backup_dir=backup, save_every=8,
                   callbacks=[_Steps(stop=26)], report=False, verbose=0)  # fmt: skip
    with pytest.raises(SourceError, match="echo: saved 2 per example, window 8, now 3 per"):
        tfpipe.fit(_model(), _pipeline(3), epochs=3, backup_dir=backup, report=False, verbose=0)
    resumed = _Steps()
    history = tfpipe.fit(_model(), _pipeline(2), epochs=3, backup_dir=backup,
                         callbacks=[resumed], report=False, verbose=0)  # fmt: skip
    assert resumed.epochs == [16, 20] and len(history.history["loss"]) == 2
