"""`tfpipe.verify` against a hand-written tf.data check of the same shards.

Issue 11, `tfpipe verify`. On 128x128 JPEGs in 8 uncompressed shards:

- the baseline reads every record with `tf.data.TFRecordDataset` (both frame checksums),
  parses it with `tf.io.parse_single_example` and decodes the image in a parallel map: what
  one writes by hand to see whether a dataset is readable. It stops at the first fault and
  names neither file nor record;
- `tfpipe.verify` does the same checks record by record, parses each record against the
  schema in Python, decodes the images in a parallel map, checks the shapes, sizes and counts
  against the metadata, and names every fault. The ratio is what naming them costs.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.harness import compare, scale

IMAGE_SIZE = (128, 128)


def _result(examples: int, seconds: float) -> dict[str, Any]:
    return {"examples": examples, "seconds": seconds, "examples_per_s": examples / seconds}


def hand_written_check(prefix: str) -> dict[str, Any]:
    import tensorflow as tf

    from tfpipe.format.metadata import DatasetInfo

    files = [str(f) for f in DatasetInfo.load(prefix).files]
    spec = {
        "image": tf.io.FixedLenFeature([], tf.string),
        "label": tf.io.FixedLenFeature([], tf.int64),
    }

    def decode(record: tf.Tensor) -> tf.Tensor:
        example = tf.io.parse_single_example(record, spec)
        image = tf.io.decode_image(example["image"], channels=3, expand_animations=False)
        return tf.reduce_max(image)

    start = time.perf_counter()
    dataset = tf.data.TFRecordDataset(files).map(decode, num_parallel_calls=tf.data.AUTOTUNE)
    examples = sum(int(batch.shape[0]) for batch in dataset.batch(256))
    return _result(examples, time.perf_counter() - start)


def tfpipe_verify(prefix: str) -> dict[str, Any]:
    import tfpipe

    start = time.perf_counter()
    report = tfpipe.verify(prefix, progress=False)
    seconds = time.perf_counter() - start
    if not report.ok:
        raise RuntimeError(str(report))
    return _result(report.num_records, seconds)


def main() -> None:
    import tfpipe
    from tfpipe.sources.synthetic import make_image_folder

    per_class = scale(500, 40)
    root = tempfile.mkdtemp(prefix="tfpipe-bench-verify-")
    try:
        images = make_image_folder(
            Path(root) / "images", num_classes=6, per_class=per_class, size=IMAGE_SIZE
        )
        prefix = str(Path(root) / "out" / "train")
        src = tfpipe.from_directory(images, image_shape=(*IMAGE_SIZE, 3))
        tfpipe.write_tfrecords(src, prefix, num_shards=8, progress=False)
        compare(
            "verify",
            {
                "hand-written tf.data read+parse+decode": (hand_written_check, (prefix,)),
                "tfpipe.verify": (tfpipe_verify, (prefix,)),
            },
            baseline="hand-written tf.data read+parse+decode",
            extra={"examples": 6 * per_class, "image_size": IMAGE_SIZE, "cpus": os.cpu_count()},
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
