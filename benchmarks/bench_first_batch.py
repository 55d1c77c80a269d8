"""Time to the first batch: from constructing the loader to the first batch in hand.

Issue 43, part 1. The uniform benchmark's data (`bench_pipeline`: 4,002 JPEGs of 256x256 in 6
class folders, 240 with TFPIPE_BENCH_QUICK=1, and TFRecords of them), decoded to float32
batches of 64 of 128x128 in [0, 1], shuffled, each case in a fresh process with TensorFlow,
Keras and tfpipe imported and their garbage collected before the clock starts (a notebook's
re-run of a cell pays what is timed here):

- `keras.utils.image_dataset_from_directory` + rescale + prefetch: the baseline;
- the hand-tuned TFRecord pipeline of `bench_pipeline` (file shuffle, interleave, record
  shuffle, batch, vectorised parse + `map_fn` decode, prefetch);
- `tfpipe.Pipeline` over the TFRecords and over the folder (`from_directory` inside the timed
  part, as Keras lists its folder inside its own).

`first_batch_s` is the median and range of the wall time, the ratio that of the medians to
Keras's (lower is better); `cpu_s` is the process's CPU time over the same span (all
threads; what a busy machine disturbs least). The stages: `construct_s` (the folder listed or
the metadata read, the loader object made), `build_s` (`Pipeline.build()`: tracing the maps;
0 for the others, which trace while constructed), `iterator_s` (`iter()`: TensorFlow
instantiating the traced functions) and `next_s` (the first `next()`: the shuffle buffer
filled, the first 64 images decoded); `<stage>_cpu_s` is each stage's CPU time (`build_cpu_s`
...), which a shared machine disturbs least. 5 repeats, interleaved (1 with
TFPIPE_BENCH_QUICK=1).
The photo benchmark (`bench_photos`) records the same time on real photos, and the first
epoch (`first_batch_s`, `first_epoch_s`).
"""

from __future__ import annotations

import gc
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.bench_pipeline import BATCH, SIZE, decode_batch
from benchmarks.harness import compare, scale

BASELINE = "keras image_dataset_from_directory"
STAGES = ("construct_s", "build_s", "iterator_s", "next_s")


def cpu_name(stage: str) -> str:
    """The key of a stage's CPU time: "build_s" -> "build_cpu_s"."""
    return stage.replace("_s", "_cpu_s")


def _import_all() -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras  # noqa: F401
    import tensorflow  # noqa: F401

    import tfpipe  # noqa: F401
    from tfpipe.loaders import assembly  # noqa: F401  (imported lazily by build())


def _clock(construct: Callable[[], Any], build: Callable[[Any], Any]) -> dict[str, Any]:
    """Times `construct()`, `build(it)`, `iter()` of that and the first `next()`."""
    _import_all()
    gc.collect()  # importing TensorFlow leaves a full collection due: not the loader's cost
    marks = [(time.perf_counter(), time.process_time())]
    made = construct()
    marks.append((time.perf_counter(), time.process_time()))
    dataset = build(made)
    marks.append((time.perf_counter(), time.process_time()))
    batches = iter(dataset)
    marks.append((time.perf_counter(), time.process_time()))
    next(batches)
    marks.append((time.perf_counter(), time.process_time()))
    result = {name: marks[i + 1][0] - marks[i][0] for i, name in enumerate(STAGES)}
    cpu = {cpu_name(name): marks[i + 1][1] - marks[i][1] for i, name in enumerate(STAGES)}
    return {
        **result,
        **cpu,
        "first_batch_s": marks[-1][0] - marks[0][0],
        "cpu_s": marks[-1][1] - marks[0][1],
    }


def keras_folder(root: str) -> dict[str, Any]:
    """`image_dataset_from_directory` + rescale + prefetch, as the Keras guides write it."""

    def construct() -> Any:
        import keras
        import tensorflow as tf

        dataset = keras.utils.image_dataset_from_directory(
            root, image_size=SIZE, batch_size=BATCH, shuffle=True, verbose=False
        )
        return dataset.map(
            lambda x, y: (x / 255.0, y), num_parallel_calls=tf.data.AUTOTUNE
        ).prefetch(tf.data.AUTOTUNE)

    return _clock(construct, lambda dataset: dataset)


def hand_tuned_tfrecord(prefix: str) -> dict[str, Any]:
    """`bench_pipeline`'s hand-tuned TFRecord pipeline, constructed and read."""

    def construct() -> Any:
        import tensorflow as tf

        spec = {
            "image": tf.io.FixedLenFeature([], tf.string),
            "label": tf.io.FixedLenFeature([], tf.int64),
        }

        def parse(serialized: Any) -> Any:
            parsed = tf.io.parse_example(serialized, spec)
            return decode_batch(parsed["image"]), parsed["label"]

        return (
            tf.data.Dataset.list_files(f"{prefix}-*.tfrecord", shuffle=True)
            .interleave(
                tf.data.TFRecordDataset,
                cycle_length=8,
                num_parallel_calls=tf.data.AUTOTUNE,
                deterministic=False,
            )
            .shuffle(4096)
            .batch(BATCH)
            .map(parse, num_parallel_calls=tf.data.AUTOTUNE, deterministic=False)
            .prefetch(tf.data.AUTOTUNE)
        )

    return _clock(construct, lambda dataset: dataset)


def tfpipe_pipeline(source: str, folder: bool) -> dict[str, Any]:
    """`tfpipe.Pipeline` with its defaults on the folder or the TFRecords; built separately."""

    def construct() -> Any:
        import tfpipe

        pipeline = tfpipe.Pipeline(
            tfpipe.from_directory(source) if folder else source,
            image_size=SIZE,
            rescale=1 / 255,
        )
        return pipeline.shuffle().batch(BATCH).as_supervised("image", "label")

    return _clock(construct, lambda pipeline: pipeline.build())


def _prepare(work: Path) -> tuple[str, str]:
    import tfpipe
    from tfpipe.sources.synthetic import make_image_folder

    root = make_image_folder(
        work / "images", num_classes=6, per_class=scale(667, 40), size=(256, 256), seed=0
    )
    prefix = str(work / "jpeg" / "train")
    tfpipe.write_tfrecords(tfpipe.from_directory(root), prefix, progress=False)
    return str(root), prefix


def main() -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    with tempfile.TemporaryDirectory(prefix="tfpipe-bench-first-batch-") as tmp:
        root, prefix = _prepare(Path(tmp))
        cases = {
            BASELINE: (keras_folder, (root,)),
            "hand-tuned tf.data, TFRecords": (hand_tuned_tfrecord, (prefix,)),
            "Pipeline, TFRecords": (tfpipe_pipeline, (prefix, False)),
            "Pipeline, folder": (tfpipe_pipeline, (root, True)),
        }
        compare(
            "first_batch",
            cases,
            baseline=BASELINE,
            metric="first_batch_s",
            extra={
                "images": sum(1 for _ in Path(root).glob("*/*.jpg")),
                "batch": BATCH,
                "size": SIZE,
                "load_average_at_start": os.getloadavg(),
            },
            pairs={name: BASELINE for name in cases if name != BASELINE},
            repeats=5,
            spreads=("cpu_s", *STAGES, *map(cpu_name, STAGES)),
        )


if __name__ == "__main__":
    main()
