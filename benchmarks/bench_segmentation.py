"""Segmentation input: `tfpipe.Pipeline` with a joint flip against the same by hand in tf.data.

Issue 12. Batches of 64 (image, mask) pairs at 128x128 from 256x256 JPEG images and PNG masks
(`tfpipe.sources.synthetic.make_segmentation_folder`) written to TFRecords by tfpipe (image as JPEG,
mask as a `tfpipe.Mask` grayscale PNG), every loader shuffled and repeated, each case in its
own process. Table "segmentation" (ratios to the hand-written pipeline):

- hand-written tf.data, following the tf.data guide over the same records (the baseline):
  file shuffle, parallel interleave, record shuffle, batch, one vectorised parse_example per
  batch, unbatch, then per example in a parallel map: decode the JPEG and the PNG mask,
  resize (image bilinear, mask nearest) to 128x128, one random flip for both, image x 1/255;
  batch, prefetch;
- the same decoding in a `tf.map_fn` over each parsed batch (informative: the other way the
  guide's "vectorise" advice is read);
- `Pipeline(prefix, image_size=(128, 128), rescale=1/255).shuffle().repeat().map(Joint(...))
  .batch(64).as_supervised("image", "mask")`, as docs/guides/augmentation.md writes it
  (goal >= 1.0, also paired run by run with the baseline);
- the same Pipeline over the image and mask files (`from_dataframe(image_cols=[...])`),
  informative;
- the ceiling: decode + resize of the JPEG and PNG bytes in memory (no I/O, parsing or flip).

Every case also reports the process's CPU time per example, which depends less than the
throughput on the share of the 2 shared cores a process gets.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.harness import compare, scale

SIZE = (128, 128)
STORED = (256, 256)
BATCH = 64
CLASSES = 4  # background + the 3 shapes of make_segmentation_folder


def _measure(dataset: Any) -> dict[str, Any]:
    """Throughput, and the process's CPU time per example over the timed batches (after the
    warm-up, which holds the one-time cost of building the functions): on a shared machine
    the first depends on the share of the cores a case gets, the second much less."""
    from tfpipe.training.throughput import measure

    warmup, timed = scale(10, 2), scale(100, 8)
    batches = iter(dataset)
    start = time.perf_counter()
    next(batches)
    first_batch_s = time.perf_counter() - start
    for _ in range(warmup - 1):
        next(batches)
    before = os.times()
    result = measure(batches, num_batches=timed, warmup=0)
    after = os.times()
    cpu = after.user + after.system - before.user - before.system
    return {
        "examples_per_s": result.examples_per_s,
        "first_batch_s": first_batch_s,
        "cpu_us_per_example": cpu / result.examples * 1e6,
    }


def _decode_pair(image: Any, mask: Any) -> tuple[Any, Any]:
    """One example as the tf.data guide writes it: decode, resize, one flip for both."""
    import tensorflow as tf

    image = tf.image.resize(tf.io.decode_jpeg(image, channels=3), SIZE)
    mask = tf.image.resize(tf.io.decode_png(mask, channels=1), SIZE, method="nearest")
    flip = tf.random.uniform([]) < 0.5
    image = tf.cond(flip, lambda: tf.image.flip_left_right(image), lambda: image)
    mask = tf.cond(flip, lambda: tf.image.flip_left_right(mask), lambda: mask)
    return image / 255.0, mask


def hand_written(prefix: str, map_fn: bool) -> dict[str, Any]:
    """The pipeline a good engineer writes from the tf.data performance guide: records
    shuffled and parsed in batches, then decoded one example at a time in a parallel map (or,
    with `map_fn`, in a `tf.map_fn` over each parsed batch)."""
    import tensorflow as tf

    autotune = tf.data.AUTOTUNE
    files = tf.data.Dataset.list_files(f"{prefix}-*.tfrecord", shuffle=True)
    spec = {
        "image": tf.io.FixedLenFeature([], tf.string),
        "mask": tf.io.FixedLenFeature([], tf.string),
    }

    def parse(serialized: Any) -> Any:
        parsed = tf.io.parse_example(serialized, spec)
        return parsed["image"], parsed["mask"]

    def decode_batch(images: Any, masks: Any) -> Any:
        return tf.map_fn(
            lambda pair: _decode_pair(*pair),
            (images, masks),
            fn_output_signature=(
                tf.TensorSpec((*SIZE, 3), tf.float32),
                tf.TensorSpec((*SIZE, 1), tf.uint8),
            ),
        )

    dataset = (
        files.interleave(
            tf.data.TFRecordDataset,
            cycle_length=8,
            num_parallel_calls=autotune,
            deterministic=False,
        )
        .shuffle(4096)
        .repeat()
        .batch(BATCH)
        .map(parse, num_parallel_calls=autotune)
    )
    if map_fn:
        dataset = dataset.map(decode_batch, num_parallel_calls=autotune, deterministic=False)
    else:
        dataset = (
            dataset.unbatch()
            .map(_decode_pair, num_parallel_calls=autotune, deterministic=False)
            .batch(BATCH)
        )
    return _measure(dataset.prefetch(autotune))


def tfpipe_pipeline(source: Any) -> dict[str, Any]:
    """`tfpipe.Pipeline` with a joint flip, as the augmentation guide writes it."""
    import tfpipe

    if isinstance(source, tuple):  # the folder: a DataFrame of image and mask paths
        source = _dataframe_source(*source)
    joint = tfpipe.augment.Joint(images="image", masks="mask", flip="horizontal", seed=0)
    dataset = (
        tfpipe.Pipeline(source, image_size=SIZE, rescale=1 / 255)
        .shuffle()
        .repeat()
        .map(joint)
        .batch(BATCH)
        .as_supervised("image", "mask")
        .build()
    )
    return _measure(dataset)


def ceiling_decode(root: str) -> dict[str, Any]:
    """Decode + resize of the JPEG and PNG bytes in memory: no I/O, parsing or flip."""
    import tensorflow as tf

    images = [p.read_bytes() for p in sorted(Path(root, "images").glob("*.jpg"))]
    masks = [p.read_bytes() for p in sorted(Path(root, "masks").glob("*.png"))]

    def decode(image: Any, mask: Any) -> Any:
        return (
            tf.image.resize(tf.io.decode_jpeg(image, channels=3), SIZE) / 255.0,
            tf.image.resize(tf.io.decode_png(mask, channels=1), SIZE, method="nearest"),
        )

    dataset = (
        tf.data.Dataset.from_tensor_slices((images, masks))
        .repeat()
        .map(decode, num_parallel_calls=tf.data.AUTOTUNE, deterministic=False)
        .batch(BATCH)
        .prefetch(tf.data.AUTOTUNE)
    )
    return _measure(dataset)


def _schema() -> Any:
    import tfpipe

    return tfpipe.Schema(
        {
            "image": tfpipe.Image(shape=(*STORED, 3), encoding="jpeg"),
            "mask": tfpipe.Mask(shape=(*STORED, 1), num_classes=CLASSES),
        }
    )


def _dataframe_source(root: str, count: int) -> Any:
    import pandas as pd

    import tfpipe

    names = [f"{i:05d}" for i in range(count)]
    df = pd.DataFrame(
        {"image": [f"images/{n}.jpg" for n in names], "mask": [f"masks/{n}.png" for n in names]}
    )
    return tfpipe.from_dataframe(df, image_cols=["image", "mask"], schema=_schema(), base_dir=root)


def _prepare(work: Path) -> tuple[str, str, int]:
    import tfpipe
    from tfpipe.sources.synthetic import make_segmentation_folder

    count = scale(2000, 128)
    root = make_segmentation_folder(work / "seg", count=count, num_classes=CLASSES - 1, size=STORED)
    prefix = str(work / "records" / "train")
    tfpipe.write_tfrecords(_dataframe_source(str(root), count), prefix, progress=False)
    return str(root), prefix, count


def main() -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    with tempfile.TemporaryDirectory(prefix="tfpipe-bench-segmentation-") as tmp:
        root, prefix, count = _prepare(Path(tmp))
        baseline = "hand-written tf.data, TFRecords (baseline)"
        compare(
            "segmentation",
            {
                baseline: (hand_written, (prefix, False)),
                "hand-written, decode in tf.map_fn per batch": (hand_written, (prefix, True)),
                "Pipeline + Joint flip, TFRecords": (tfpipe_pipeline, (prefix,)),
                "Pipeline + Joint flip, image and mask files": (
                    tfpipe_pipeline,
                    ((root, count),),
                ),
                "ceiling: decode+resize in memory": (ceiling_decode, (root,)),
            },
            baseline=baseline,
            goals={"Pipeline + Joint flip, TFRecords": 1.0},
            pairs={"Pipeline + Joint flip, TFRecords": baseline},
            extra={"pairs": count, "stored": STORED, "batch": BATCH, "size": SIZE},
        )


if __name__ == "__main__":
    main()
