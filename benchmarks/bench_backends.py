"""Each loader on each Keras backend: the same model on the same records, training steps/s.

The records hold JPEGs of 96x96 read at 64x64 (`image_size`, the one resize) and scaled by
1/255; the model is a small CNN, trained for two epochs in each case's own process with
`KERAS_BACKEND` set before Keras is imported. Metric: training steps/s of BATCH images,
measured by the same callback in every case, the first WARMUP_STEPS left out. Cases:
- `hand-written tf.data, TensorFlow` (baseline): the tf.data guide's pipeline written by hand.
- per backend, `ideal`: arrays held in memory (the model alone, no decoding);
- per backend and loader, through `model.fit`: `Pipeline(...).build()`, `SequenceLoader` (two
  threads), Grain (batches of indices mapped by `DecodedExamples.read_batch`, main process)
  and a PyTorch `DataLoader` over the same view (two forked workers).
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.harness import compare, scale, small_cnn, step_timer

STORED = (96, 96)
SIZE = (64, 64)
BATCH = 64
NUM_CLASSES = 4
WARMUP_STEPS = 3
EPOCHS = 2
BACKENDS = ("tensorflow", "jax", "torch")


def _data(root: Path) -> str:
    """A folder of 96x96 JPEGs written to TFRecords: the prefix every case reads."""
    import tfpipe
    from tfpipe.sources.synthetic import make_image_folder

    per_class = scale(1536, 128) // NUM_CLASSES
    folder = make_image_folder(
        root / "images", num_classes=NUM_CLASSES, per_class=per_class, size=STORED
    )
    prefix = str(root / "records" / "train")
    tfpipe.write_tfrecords(tfpipe.from_directory(folder), prefix, progress=False)
    return prefix


def _use_backend(backend: str) -> None:
    """Keras on `backend`: set before Keras is first imported, in the case's own process."""
    os.environ["KERAS_BACKEND"] = backend
    import keras

    assert keras.backend.backend() == backend, keras.backend.backend()


def _train(data: Any, **fit_args: Any) -> dict[str, Any]:
    timer = step_timer(BATCH, WARMUP_STEPS)
    small_cnn((*SIZE, 3), NUM_CLASSES, (16, 32)).fit(
        data, epochs=EPOCHS, callbacks=[timer], verbose=0, **fit_args
    )
    return timer.result()


def handwritten(prefix: str) -> dict[str, Any]:
    """The tf.data performance guide applied by hand, on the TensorFlow backend."""
    _use_backend("tensorflow")
    import tensorflow as tf

    autotune = tf.data.AUTOTUNE
    spec = {
        "image": tf.io.FixedLenFeature([], tf.string),
        "label": tf.io.FixedLenFeature([], tf.int64),
    }

    def parse(serialized: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        example = tf.io.parse_single_example(serialized, spec)
        image = tf.image.resize(tf.io.decode_jpeg(example["image"], channels=3), SIZE) / 255.0
        return image, example["label"]

    files = tf.data.Dataset.list_files(f"{prefix}-*.tfrecord", shuffle=True)
    dataset = (
        files.interleave(tf.data.TFRecordDataset, num_parallel_calls=autotune, deterministic=False)
        .shuffle(1024)
        .map(parse, num_parallel_calls=autotune, deterministic=False)
        .batch(BATCH)
        .prefetch(autotune)
    )
    return _train(dataset)


def ideal(backend: str, prefix: str) -> dict[str, Any]:
    """The model alone on `backend`: arrays in memory, through Keras's own array adapter (a
    tf.data slice on TensorFlow, numpy batches on JAX and PyTorch), no decoding."""
    _use_backend(backend)
    import numpy as np

    import tfpipe

    count = len(tfpipe.from_tfrecords(prefix))
    rng = np.random.default_rng(0)
    images = rng.random((count, *SIZE, 3), dtype=np.float32)
    labels = rng.integers(0, NUM_CLASSES, count)
    return _train(images, y=labels, batch_size=BATCH, shuffle=False)


def pipeline(backend: str, prefix: str) -> dict[str, Any]:
    """`model.fit(tfpipe.Pipeline(...).build())` on `backend`."""
    _use_backend(backend)
    import tfpipe

    data = (
        tfpipe.Pipeline(prefix, image_size=SIZE, rescale=1 / 255)
        .shuffle(seed=0)
        .batch(BATCH)
        .as_supervised("image", "label")
    )
    return _train(data.build())


def sequence_loader(backend: str, prefix: str) -> dict[str, Any]:
    """`model.fit(tfpipe.SequenceLoader(...))` on `backend`, two worker threads."""
    _use_backend(backend)
    import tfpipe

    loader = tfpipe.SequenceLoader(
        prefix, batch_size=BATCH, image_size=SIZE, rescale=1 / 255, seed=0, workers=2
    )
    return _train(loader)


def grain_dataset(backend: str, prefix: str) -> dict[str, Any]:
    """`model.fit` on Grain's batches of shuffled indices mapped by
    `tfpipe.DecodedExamples(...).read_batch`, in the main process (Keras's Grain adapter)."""
    _use_backend(backend)
    import grain

    import tfpipe

    examples = tfpipe.DecodedExamples(
        prefix, image_size=SIZE, rescale=1 / 255, x="image", y="label"
    )
    indices = grain.MapDataset.range(len(examples)).shuffle(seed=0)
    return _train(indices.batch(BATCH).map(examples.read_batch))


def torch_data_loader(backend: str, prefix: str) -> dict[str, Any]:
    """`model.fit` on a `torch.utils.data.DataLoader` over `tfpipe.DecodedExamples(...)`,
    two forked worker processes (Keras's PyTorch adapter)."""
    _use_backend(backend)
    from torch.utils.data import DataLoader

    import tfpipe

    examples = tfpipe.DecodedExamples(
        prefix, image_size=SIZE, rescale=1 / 255, x="image", y="label"
    )
    # Forked, as in a training script's own process on Linux: this case runs in a process the
    # harness spawned, where a DataLoader would otherwise spawn its workers too (a TensorFlow
    # start in each, every epoch: 2-5 steps/s instead of 12-25).
    loader = DataLoader(
        examples, batch_size=BATCH, shuffle=True, num_workers=2, multiprocessing_context="fork"
    )
    return _train(loader)


LOADERS = {
    "ideal": ideal,
    "Pipeline": pipeline,
    "SequenceLoader": sequence_loader,
    "Grain": grain_dataset,
    "torch DataLoader": torch_data_loader,
}


def main() -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        prefix = _data(Path(tmp))
        prepare_s = time.perf_counter() - start
        cases = {"hand-written tf.data, TensorFlow": (handwritten, (prefix,))}
        for backend in BACKENDS:
            for name, case in LOADERS.items():
                cases[f"{name}, {backend}"] = (case, (backend, prefix))
        report = compare(
            "backends",
            cases,
            baseline="hand-written tf.data, TensorFlow",
            metric="steps_per_s",
            extra={
                "batch_size": BATCH,
                "stored": STORED,
                "image_size": SIZE,
                "epochs": EPOCHS,
                "prepare_s": prepare_s,
            },
            optional=frozenset(name for name in cases if not name.endswith("TensorFlow")),
        )
    rows = {row["case"]: row for row in report["rows"]}
    print("\nsteps/s per loader and backend, and its ratio to the backend's model alone (ideal)")
    for backend in BACKENDS:
        alone = rows.get(f"ideal, {backend}")
        for name in LOADERS:
            row = rows.get(f"{name}, {backend}")
            if row is None or alone is None:
                continue
            share = row["steps_per_s"] / alone["steps_per_s"]
            print(f"  {backend:<11} {name:<22} {row['steps_per_s']:7.2f} {share:6.2f}")
