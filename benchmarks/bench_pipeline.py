"""`tfpipe.Pipeline` against hand-tuned tf.data and `keras.utils.image_dataset_from_directory`.

Issue 4. Batches of 64 float32 images of 128x128 in [0, 1] from 256x256 JPEGs (10 class
folders), every loader shuffled and repeated, each case in its own process:

- table "pipeline_tfrecord" (ratios to a hand-tuned TFRecord pipeline written following the
  tf.data guide: file shuffle, parallel interleave, record shuffle, batch, vectorised
  parse_example + map_fn decode, prefetch): Pipeline defaults (a DCT-scale JPEG decode, the
  one resize of every tfpipe path; goal >= 1.0), Pipeline with a full decode
  (`reduced_decode=False`), and the ceilings: TFRecord bytes alone, decode + resize of
  in-memory JPEG bytes alone as the baseline decodes, and as tfpipe's defaults decode;
- table "pipeline_folder" (ratios to `image_dataset_from_directory` + prefetch): the same
  hand-tuned pipeline over the file list, Pipeline defaults on the folder (goal >= 1.0),
  with a full decode, and on records written at training size 128x128 by
  `tfpipe write --image-size 128x128` (raw pixels by default; goal >= 4.0; the one-time write
  cost is reported beside it), next to the same size stored as JPEG.
"""

from __future__ import annotations

import contextlib
import io
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.harness import compare, scale

SIZE = (128, 128)
BATCH = 64


def _measure(dataset: Any) -> dict[str, Any]:
    from tfpipe.training.throughput import measure

    result = measure(dataset, num_batches=scale(100, 8), warmup=scale(10, 2))
    return {"examples_per_s": result.examples_per_s, "first_batch_s": result.first_batch_s}


def _decode_resize(data: Any) -> Any:
    import tensorflow as tf

    image = tf.io.decode_jpeg(data, channels=3)
    return tf.image.resize(image, SIZE) / 255.0


def _tfpipe_decode(data: Any) -> Any:
    import tfpipe

    return tfpipe.Image().decode_tensor(data, SIZE, rescale=1 / 255)


def decode_batch(data: Any) -> Any:
    """Decode + resize of a batch of JPEG bytes with `tf.map_fn`, as the hand-tuned pipelines do."""
    import tensorflow as tf

    return tf.map_fn(
        _decode_resize, data, fn_output_signature=tf.TensorSpec((*SIZE, 3), tf.float32)
    )


def hand_tuned_tfrecord(prefix: str) -> dict[str, Any]:
    """The best TFRecord pipeline written by hand from the tf.data performance guide."""
    import tensorflow as tf

    files = tf.data.Dataset.list_files(f"{prefix}-*.tfrecord", shuffle=True)
    spec = {
        "image": tf.io.FixedLenFeature([], tf.string),
        "label": tf.io.FixedLenFeature([], tf.int64),
    }

    def parse(serialized: Any) -> Any:
        parsed = tf.io.parse_example(serialized, spec)
        return decode_batch(parsed["image"]), parsed["label"]

    dataset = (
        files.interleave(
            tf.data.TFRecordDataset,
            cycle_length=8,
            num_parallel_calls=tf.data.AUTOTUNE,
            deterministic=False,
        )
        .shuffle(4096)
        .repeat()
        .batch(BATCH)
        .map(parse, num_parallel_calls=tf.data.AUTOTUNE, deterministic=False)
        .prefetch(tf.data.AUTOTUNE)
    )
    return _measure(dataset)


def hand_tuned_folder(root: str) -> dict[str, Any]:
    """The same, over the file list: shuffle paths, batch, read + decode with map_fn."""
    import tensorflow as tf

    import tfpipe

    source = tfpipe.from_directory(root)

    def load(paths: Any, labels: Any) -> Any:
        data = tf.map_fn(tf.io.read_file, paths)
        return decode_batch(data), labels

    dataset = (
        tf.data.Dataset.from_tensor_slices((source.paths, source.labels()))
        .shuffle(len(source))
        .repeat()
        .batch(BATCH)
        .map(load, num_parallel_calls=tf.data.AUTOTUNE, deterministic=False)
        .prefetch(tf.data.AUTOTUNE)
    )
    return _measure(dataset)


def keras_folder(root: str) -> dict[str, Any]:
    """`image_dataset_from_directory` + rescale + prefetch, as the Keras guides write it."""
    import keras
    import tensorflow as tf

    dataset = keras.utils.image_dataset_from_directory(
        root, image_size=SIZE, batch_size=BATCH, shuffle=True, seed=0, verbose=False
    )
    dataset = (
        dataset.map(lambda x, y: (x / 255.0, y), num_parallel_calls=tf.data.AUTOTUNE)
        .repeat()
        .prefetch(tf.data.AUTOTUNE)
    )
    return _measure(dataset)


def tfpipe_pipeline(source: str, folder: bool, reduced: bool, image_size: bool) -> dict[str, Any]:
    """`tfpipe.Pipeline` with its defaults (plus the switch under test)."""
    import tfpipe

    pipeline = tfpipe.Pipeline(
        tfpipe.from_directory(source) if folder else source,
        image_size=SIZE if image_size else None,
        reduced_decode=reduced,
        rescale=1 / 255,
    )
    dataset = pipeline.shuffle().repeat().batch(BATCH).as_supervised("image", "label").build()
    return _measure(dataset)


def ceiling_bytes(prefix: str) -> dict[str, Any]:
    """Reading the TFRecord bytes alone: no parsing, no decoding."""
    import tensorflow as tf

    files = tf.data.Dataset.list_files(f"{prefix}-*.tfrecord")
    dataset = (
        files.interleave(
            tf.data.TFRecordDataset, cycle_length=8, num_parallel_calls=tf.data.AUTOTUNE
        )
        .repeat()
        .batch(BATCH)
        .prefetch(tf.data.AUTOTUNE)
    )
    return _measure(dataset)


def ceiling_decode(root: str) -> dict[str, Any]:
    """Decode + resize of JPEG bytes already in memory: no I/O, no parsing."""
    import tensorflow as tf

    data = [p.read_bytes() for p in sorted(Path(root).glob("*/*.jpg"))]
    dataset = (
        tf.data.Dataset.from_tensor_slices(data)
        .repeat()
        .batch(BATCH)
        .map(decode_batch, num_parallel_calls=tf.data.AUTOTUNE, deterministic=False)
        .prefetch(tf.data.AUTOTUNE)
    )
    return _measure(dataset)


def ceiling_tfpipe_decode(root: str) -> dict[str, Any]:
    """tfpipe's own decode + resize (`Image.decode_tensor`, its defaults) of JPEG bytes in
    memory, one image per parallel call: the ceiling of what the Pipeline's defaults do."""
    import tensorflow as tf

    data = [p.read_bytes() for p in sorted(Path(root).glob("*/*.jpg"))]
    dataset = (
        tf.data.Dataset.from_tensor_slices(data)
        .repeat()
        .map(_tfpipe_decode, num_parallel_calls=tf.data.AUTOTUNE, deterministic=False)
        .batch(BATCH)
        .prefetch(tf.data.AUTOTUNE)
    )
    return _measure(dataset)


def _prepare(work: Path) -> tuple[str, str, str, str, float]:
    import tfpipe
    import tfpipe.cli.parser as cli
    from tfpipe.sources.synthetic import make_image_folder

    root = make_image_folder(
        work / "images", num_classes=6, per_class=scale(667, 40), size=(256, 256), seed=0
    )
    prefix = str(work / "jpeg" / "train")
    tfpipe.write_tfrecords(tfpipe.from_directory(root), prefix, progress=False)
    small_jpeg = str(work / "small-jpeg" / "train")
    tfpipe.write_tfrecords(
        tfpipe.from_directory(root, image_shape=(*SIZE, 3)), small_jpeg, progress=False
    )
    small = str(work / "small" / "train")
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):  # the command's summary
        status = cli.main(["write", str(root), small, "--image-size", f"{SIZE[0]}x{SIZE[1]}"])
    if status != 0:
        raise RuntimeError(f"tfpipe write --image-size failed with status {status}")
    return str(root), prefix, small_jpeg, small, time.perf_counter() - start


def main() -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    with tempfile.TemporaryDirectory(prefix="tfpipe-bench-pipeline-") as tmp:
        root, prefix, small_jpeg, small, write_s = _prepare(Path(tmp))
        images = sum(1 for _ in Path(root).glob("*/*.jpg"))
        extra = {"images": images, "batch": BATCH, "size": SIZE}
        compare(
            "pipeline_tfrecord",
            {
                "hand-tuned tf.data, TFRecords (baseline)": (hand_tuned_tfrecord, (prefix,)),
                "Pipeline defaults, TFRecords": (tfpipe_pipeline, (prefix, False, True, True)),
                "Pipeline full decode, TFRecords": (
                    tfpipe_pipeline,
                    (prefix, False, False, True),
                ),
                "ceiling: TFRecord bytes only": (ceiling_bytes, (prefix,)),
                "ceiling: decode+resize in memory": (ceiling_decode, (root,)),
                "ceiling: tfpipe's decode+resize in memory": (ceiling_tfpipe_decode, (root,)),
            },
            baseline="hand-tuned tf.data, TFRecords (baseline)",
            goals={"Pipeline defaults, TFRecords": 1.0},
            extra=extra,
        )
        compare(
            "pipeline_folder",
            {
                "keras image_dataset_from_directory": (keras_folder, (root,)),
                "hand-tuned tf.data, folder": (hand_tuned_folder, (root,)),
                "Pipeline defaults, folder": (tfpipe_pipeline, (root, True, True, True)),
                "Pipeline full decode, folder": (tfpipe_pipeline, (root, True, False, True)),
                "Pipeline, records stored at 128x128 (JPEG)": (
                    tfpipe_pipeline,
                    (small_jpeg, False, False, False),
                ),
                "Pipeline, `tfpipe write --image-size 128x128`": (
                    tfpipe_pipeline,
                    (small, False, False, False),
                ),
            },
            baseline="keras image_dataset_from_directory",
            goals={
                "Pipeline defaults, folder": 1.0,
                "Pipeline, `tfpipe write --image-size 128x128`": 4.0,
            },
            extra={**extra, "write_128x128_seconds": write_s},
        )
        print(
            f"one-time cost of `tfpipe write --image-size 128x128` ({images} images, raw "
            f"pixels): {write_s:.1f} s"
        )


if __name__ == "__main__":
    main()
