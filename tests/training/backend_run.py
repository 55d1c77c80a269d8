"""Trains tiny Keras models through tfpipe under the Keras backend `KERAS_BACKEND` names (jax,
torch: tests/training/test_backends.py).

Prints one JSON object as its last line: the losses per epoch of each loader and of
`tfpipe.fit` (with validation and a user callback), the report's fields, what `tfpipe.fit`
chose for a small fast model and did with one compiled with `steps_per_execution=2`, whether
TensorFlow sees a GPU, and where an interrupted run with `backup_dir` resumed.

    KERAS_BACKEND=torch python tests/training/backend_run.py WORKDIR
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from typing import Any

import keras
import numpy as np
from test_breakdown import timings  # this folder is the script's first import path

import tfpipe
from tfpipe.training import backend, model_probe
from tfpipe.training.breakdown import Breakdown

EPOCHS = 2
BATCH = 8
SIZE = (8, 8)


class _Interrupt(keras.callbacks.Callback):
    """Stops the run with an exception after batch 1 of epoch 1, as a preemption would."""

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        if self.params.get("epochs", 0) > 1 and self._epoch == 1 and batch == 1:
            raise KeyboardInterrupt

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self._epoch = epoch


class _Calls(keras.callbacks.Callback):
    """Counts the hooks Keras calls, as a user's callback sees them."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = {"train_batch_end": 0, "epoch_end": 0, "test_end": 0}

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        self.calls["train_batch_end"] += 1

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self.calls["epoch_end"] += 1

    def on_test_end(self, logs: dict[str, Any] | None = None) -> None:
        self.calls["test_end"] += 1


def _model(**compile_kwargs: Any) -> keras.Model:
    model = keras.Sequential(
        [
            keras.Input((*SIZE, 3)),
            keras.layers.Flatten(),
            keras.layers.Dense(3, activation="softmax"),
        ]
    )
    model.compile(keras.optimizers.Adam(0.01), "sparse_categorical_crossentropy", **compile_kwargs)
    return model


def _small_model(**compile_kwargs: Any) -> keras.Model:
    """One Dense unit: steps of a few ms, short enough for tfpipe.fit to try more per call."""
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse", **compile_kwargs)
    return model


def _losses(history: keras.callbacks.History) -> list[float]:
    return [float(loss) for loss in history.history["loss"]]


def _report(report: Any) -> dict[str, Any]:
    return {
        "verdict": report.verdict,
        "rates": [
            report.input_examples_per_s,
            report.model_examples_per_s,
            report.achieved_examples_per_s,
        ],
        "steps_per_execution": [report.steps_per_execution, report.steps_per_execution_chosen],
        "advice": list(report.advice),
        "text": str(report),
    }


def short_probes() -> None:
    """Probes of a few hundred ms, as tests/conftest.py's `short_probes`: their length is not
    under test."""
    fit_module = importlib.import_module("tfpipe.training.fit")  # `tfpipe.fit` is the function
    model_probe.PROBE_SECONDS = 0.2
    fit_module.INPUT_PROBE_SECONDS = 0.3
    fit_module.STAGE_PROBE_SECONDS = 0.3


def loaders(workdir: Path, result: dict[str, Any]) -> tuple[Any, Path]:
    """A `Pipeline(...).build()` and a `SequenceLoader` through Keras's own `fit`; the
    tfpipe.benchmark of the Pipeline. Returns the source and the prefix of its TFRecords."""
    from tfpipe.sources.synthetic import make_image_folder

    source = tfpipe.from_directory(
        make_image_folder(workdir / "images", per_class=8, size=SIZE), image_shape=(*SIZE, 3)
    )
    prefix = workdir / "train"
    tfpipe.write_tfrecords(source, prefix, progress=False)
    keras.utils.set_random_seed(0)
    pipeline = tfpipe.Pipeline(prefix, rescale=1 / 255).as_supervised("image", "label").batch(BATCH)
    built = pipeline.build()
    result["pipeline_build"] = _losses(_model().fit(built, epochs=EPOCHS, shuffle=False, verbose=0))
    loader = tfpipe.SequenceLoader(source, batch_size=BATCH, image_size=SIZE, seed=1)
    result["sequence_loader"] = _losses(_model().fit(loader, epochs=EPOCHS, verbose=0))
    result["benchmark_examples_per_s"] = tfpipe.benchmark(pipeline, batches=5).examples_per_s
    return source, prefix


def fits(workdir: Path, prefix: Path, result: dict[str, Any]) -> None:
    """`tfpipe.fit` with validation and a user callback, its report; a run with `backup_dir`
    interrupted, then resumed."""
    calls = _Calls()
    # batches of 7: each epoch ends with a short one of 3, which JAX compiles the step for
    history = tfpipe.fit(
        _model(),
        prefix,
        epochs=EPOCHS,
        batch_size=BATCH - 1,
        validation=prefix,
        callbacks=[calls],
        verbose=0,
    )
    result["fit"] = _losses(history)
    result["val_loss"] = [float(loss) for loss in history.history["val_loss"]]
    result["callback_calls"] = calls.calls
    result["report"] = _report(history.report)

    backups = workdir / "backups"
    fit = {"epochs": EPOCHS, "batch_size": BATCH, "backup_dir": backups, "save_every": 2}
    try:
        tfpipe.fit(_model(), prefix, **fit, callbacks=[_Interrupt()], report=False, verbose=0)
    except KeyboardInterrupt:
        saved = json.loads(next(backups.glob("backup-*/position.json")).read_text())
        result["interrupted_at"] = [saved["epoch"], saved["batch"]]
    resumed = tfpipe.fit(_model(), prefix, **fit, report=False, verbose=0)
    result["resumed"] = _losses(resumed)
    result["backups_left"] = sorted(p.name for p in backups.iterdir())
    result["finite"] = bool(np.isfinite(result["fit"] + result["resumed"]).all())


def small_model(result: dict[str, Any]) -> None:
    """A model of steps of a few ms (where tfpipe.fit tries several steps per execution), one
    compiled with `steps_per_execution=2`, the probe's restore of the variables, and the
    advice for a run spent between steps."""
    rng = np.random.default_rng(0)
    table = tfpipe.from_arrays(
        {"x": rng.random((64, 4), np.float32), "y": rng.random((64, 1), np.float32)}
    )
    pipeline = tfpipe.Pipeline(table).batch(8).as_supervised("x", "y")
    history = tfpipe.fit(_small_model(), pipeline, epochs=EPOCHS, verbose=0)
    result["small"] = {"losses": _losses(history), "report": _report(history.report)}
    try:
        compiled = tfpipe.fit(
            _small_model(steps_per_execution=2), pipeline, epochs=EPOCHS, verbose=0
        )
        result["compiled_two"] = {"steps_per_execution": compiled.report.steps_per_execution}
    except ValueError as e:
        result["compiled_two"] = {"error": str(e)}

    model = _small_model()
    batch = next(pipeline.build().as_numpy_iterator())
    model(batch[0])
    before = [v.numpy().tolist() for v in model.weights]
    probe = model_probe.probe_model(model, batch, steps=8)
    result["probe_restored"] = before == [v.numpy().tolist() for v in model.weights]
    result["probe_step_s"] = probe.step_seconds
    result["compiles_each_batch_shape"] = [
        backend.compiles_each_batch_shape(model),
        backend.compiles_each_batch_shape(_small_model(jit_compile=True)),
    ]
    host = timings(compute=6.5, **{"host overhead": 3.0})  # the breakdown's tests' figures
    result["host_advice"] = list(Breakdown.build(host).advice)


def main(workdir: Path) -> dict[str, Any]:
    import tensorflow as tf

    result: dict[str, Any] = {"backend": keras.backend.backend()}
    _, prefix = loaders(workdir, result)
    result["tensorflow_gpus"] = [d.name for d in tf.config.get_visible_devices("GPU")]
    fits(workdir, prefix, result)
    small_model(result)
    return result


if __name__ == "__main__":
    short_probes()
    print(json.dumps(main(Path(sys.argv[1]))))
