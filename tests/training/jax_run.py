"""Trains tiny Keras models through tfpipe under `KERAS_BACKEND=jax`
(tests/training/test_jax_backend.py).

Prints one JSON object as its last line: the losses per epoch of each loader and of
`tfpipe.fit`, the report's fields, whether TensorFlow sees a GPU, and where an interrupted run
with `backup_dir` resumed.

    KERAS_BACKEND=jax python tests/training/jax_run.py WORKDIR
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from typing import Any

import keras
import numpy as np

import tfpipe
from tfpipe.training import model_probe

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


def _model() -> keras.Model:
    model = keras.Sequential(
        [
            keras.Input((*SIZE, 3)),
            keras.layers.Flatten(),
            keras.layers.Dense(3, activation="softmax"),
        ]
    )
    model.compile(keras.optimizers.Adam(0.01), "sparse_categorical_crossentropy")
    return model


def _losses(history: keras.callbacks.History) -> list[float]:
    return [float(loss) for loss in history.history["loss"]]


def short_probes() -> None:
    """Probes of a few hundred ms, as tests/conftest.py's `short_probes`: their length is not
    under test."""
    fit_module = importlib.import_module("tfpipe.training.fit")  # `tfpipe.fit` is the function
    model_probe.PROBE_SECONDS = 0.2
    fit_module.INPUT_PROBE_SECONDS = 0.3
    fit_module.STAGE_PROBE_SECONDS = 0.3


def main(workdir: Path) -> dict[str, Any]:
    import tensorflow as tf

    from tfpipe.sources.synthetic import make_image_folder

    source = tfpipe.from_directory(
        make_image_folder(workdir / "images", per_class=8, size=SIZE), image_shape=(*SIZE, 3)
    )
    prefix = workdir / "train"
    tfpipe.write_tfrecords(source, prefix, progress=False)
    result: dict[str, Any] = {
        "backend": keras.backend.backend(),
        "tensorflow_gpus": [d.name for d in tf.config.get_visible_devices("GPU")],
    }
    keras.utils.set_random_seed(0)
    pipeline = tfpipe.Pipeline(prefix, rescale=1 / 255).as_supervised("image", "label").batch(BATCH)
    built = pipeline.build()
    result["pipeline_build"] = _losses(_model().fit(built, epochs=EPOCHS, shuffle=False, verbose=0))
    loader = tfpipe.SequenceLoader(source, batch_size=BATCH, image_size=SIZE, seed=1)
    result["sequence_loader"] = _losses(_model().fit(loader, epochs=EPOCHS, verbose=0))

    # batches of 7: each epoch ends with a short one of 3, which JAX compiles the step for
    history = tfpipe.fit(_model(), prefix, epochs=EPOCHS, batch_size=BATCH - 1, verbose=0)
    report = history.report
    result["fit"] = _losses(history)
    result["report"] = {
        "verdict": report.verdict,
        "rates": [
            report.input_examples_per_s,
            report.model_examples_per_s,
            report.achieved_examples_per_s,
        ],
        "advice": list(report.advice),
        "text": str(report),
    }

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
    return result


if __name__ == "__main__":
    short_probes()
    print(json.dumps(main(Path(sys.argv[1]))))
