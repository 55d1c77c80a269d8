"""Grain and a PyTorch DataLoader over `tfpipe.DecodedExamples`, next to the `Pipeline`.

Dataset: 96x96 JPEGs (3,000 of them; 300 with TFPIPE_BENCH_QUICK=1) written as 4 uncompressed
TFRecord shards, read shuffled to 64x64 float32 images in [0, 1] and their labels, in batches
of 64: what each loader hands `model.fit`. Each case runs in a fresh process (the harness);
the first batches (the start of the workers) are left out of the timing, and the seconds to
the first batch are given apart.

The baseline, written by hand here, is `tfpipe.Pipeline(prefix, image_size=..., rescale=...)
.shuffle(seed=0).batch(64)`, a tf.data graph decoding in TensorFlow's threads. The others read
one `DecodedExamples(prefix, image_size=..., rescale=..., x="image", y="label")`:

- Grain: `grain.MapDataset.source(examples).shuffle(seed=0).batch(64)` and `mp_prefetch` with
  2 worker processes (spawned: each imports TensorFlow and decodes with the Pipeline's graph);
- Grain in the main process (no workers);
- both again with batches of indices mapped by `examples.read_batch` (one decode call per
  batch instead of one per example);
- `torch.utils.data.DataLoader(examples, batch_size=64, shuffle=True, num_workers=2)`:
  forked workers, which decode with Pillow (TensorFlow must not run in a fork);
- the same DataLoader with `multiprocessing_context="spawn"` (the Pipeline's pixels).

No goal: the table says what each choice costs on this machine (2 cores here: every worker
process shares them with the main process).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.harness import compare, scale

BATCH_SIZE = 64
STORED = (96, 96)
IMAGE_SIZE = (64, 64)
NUM_CLASSES = 5
BATCHES = 30  # timed, after WARMUP
WARMUP = 5


def _measure(batches: Any) -> dict[str, Any]:
    from tfpipe.training.throughput import measure

    result = measure(batches, num_batches=scale(BATCHES, 3), warmup=scale(WARMUP, 1))
    return {"examples_per_s": result.examples_per_s, "first_batch_s": result.first_batch_s}


def pipeline(prefix: str) -> dict[str, Any]:
    """The baseline: the tf.data pipeline, shuffled, batched, rescaled, pairs for fit."""
    import tfpipe

    built = (
        tfpipe.Pipeline(prefix, image_size=IMAGE_SIZE, rescale=1 / 255)
        .shuffle(seed=0)
        .batch(BATCH_SIZE)
        .as_supervised("image", "label")
        .repeat()
        .build()
    )
    return _measure(built)


def _examples(prefix: str) -> Any:
    import tfpipe

    return tfpipe.DecodedExamples(
        prefix, image_size=IMAGE_SIZE, rescale=1 / 255, x="image", y="label"
    )


def grain_dataset(prefix: str, workers: int, batched_reads: bool = False) -> dict[str, Any]:
    """Grain's MapDataset over the decoded examples, with `workers` worker processes; with
    `batched_reads`, batches of indices mapped by `read_batch` (one decode call per batch)."""
    import grain
    from absl import flags

    flags.FLAGS.mark_as_parsed()  # Grain reads absl flags; outside absl.app, the defaults
    examples = _examples(prefix)
    if batched_reads:
        indices = grain.MapDataset.range(len(examples)).shuffle(seed=0).repeat()
        dataset = indices.batch(BATCH_SIZE).map(examples.read_batch)
    else:
        dataset = grain.MapDataset.source(examples).shuffle(seed=0).repeat().batch(BATCH_SIZE)
    iterable = dataset.to_iter_dataset()
    if workers:
        options = grain.multiprocessing.MultiprocessingOptions(num_workers=workers)
        iterable = iterable.mp_prefetch(options)
    iterator = iter(iterable)
    try:
        return _measure(iterator)
    finally:
        iterator.close()


def torch_loader(prefix: str, context: str) -> dict[str, Any]:
    """A DataLoader over the decoded examples, 2 worker processes started by `context`."""
    from torch.utils.data import DataLoader, RandomSampler

    examples = _examples(prefix)
    sampler = RandomSampler(examples, replacement=False, num_samples=10 * len(examples))
    loader = DataLoader(
        examples,
        batch_size=BATCH_SIZE,
        sampler=sampler,
        num_workers=2,
        multiprocessing_context=context,
    )
    return _measure(loader)


def main() -> None:
    from tfpipe import from_directory, from_tfrecords, write_tfrecords
    from tfpipe.sources.synthetic import make_image_folder

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    work = Path(tempfile.mkdtemp(prefix="tfpipe-bench-other-loaders-"))
    try:
        per_class = scale(600, 60)
        root = make_image_folder(
            work / "images", num_classes=NUM_CLASSES, per_class=per_class, size=STORED
        )
        prefix = work / "records" / "train"
        write_tfrecords(from_directory(root), prefix, num_shards=4, progress=False)
        from_tfrecords(prefix)  # build the index once, outside the timed cases
        records = str(prefix)
        compare(
            "other_loaders",
            {
                "Pipeline (tf.data)": (pipeline, (records,)),
                "Grain, 2 worker processes": (grain_dataset, (records, 2)),
                "Grain, main process": (grain_dataset, (records, 0)),
                "Grain, read_batch, 2 worker processes": (grain_dataset, (records, 2, True)),
                "Grain, read_batch, main process": (grain_dataset, (records, 0, True)),
                "DataLoader, 2 forked workers (Pillow)": (torch_loader, (records, "fork")),
                "DataLoader, 2 spawned workers": (torch_loader, (records, "spawn")),
            },
            baseline="Pipeline (tf.data)",
            spreads=("first_batch_s",),
            extra={
                "images": NUM_CLASSES * per_class,
                "stored_size": list(STORED),
                "image_size": list(IMAGE_SIZE),
                "batch_size": BATCH_SIZE,
                "timed_batches": scale(BATCHES, 3),
            },
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
