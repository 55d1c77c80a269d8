"""Records in the layout of the TensorFlow Object Detection API, written by plain TensorFlow.

The layout of a great many public detection datasets: one JPEG per example with its size, file
name and format, and per object a box (four float lists of fractions of the image) and a class
(an int64 list of ids, a bytes list of names). Images have different sizes, examples 0 to 3
objects (one has none).
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf
from PIL import Image as PILImage

BOX_KEYS = ("ymin", "xmin", "ymax", "xmax")
LISTS = (
    *(f"image/object/bbox/{key}" for key in BOX_KEYS),
    "image/object/class/label",
)
SIZES = [(40, 56), (32, 32), (48, 24), (36, 44), (28, 60), (52, 40), (30, 30)]
OBJECTS = [2, 0, 3, 1, 3, 2, 1]


def _bytes(values: list[bytes]) -> tf.train.Feature:
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=values))


def _floats(values: list[float]) -> tf.train.Feature:
    return tf.train.Feature(float_list=tf.train.FloatList(value=values))


def _ints(values: list[int]) -> tf.train.Feature:
    return tf.train.Feature(int64_list=tf.train.Int64List(value=values))


def write_detection_records(path: Path) -> list[dict[str, Any]]:
    """Writes the examples to `path` (one TFRecord file); returns each example's height,
    filename, boxes (n, 4) float32 as [ymin, xmin, ymax, xmax], labels and class names."""
    rng = np.random.default_rng(0)
    written = []
    with tf.io.TFRecordWriter(str(path)) as writer:
        for i, ((height, width), count) in enumerate(zip(SIZES, OBJECTS, strict=True)):
            buffer = io.BytesIO()
            pixels = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
            PILImage.fromarray(pixels).save(buffer, format="JPEG")
            low = rng.uniform(0, 0.5, (count, 2)).astype(np.float32)
            high = (low + rng.uniform(0.1, 0.5, (count, 2))).astype(np.float32)
            boxes = np.concatenate([low, high], axis=1)  # ymin, xmin, ymax, xmax
            labels = [int(n) for n in rng.integers(1, 5, count)]
            names = [f"class{n}".encode() for n in labels]
            feature = {
                "image/encoded": _bytes([buffer.getvalue()]),
                "image/height": _ints([height]),
                "image/width": _ints([width]),
                "image/filename": _bytes([f"{i}.jpg".encode()]),
                "image/format": _bytes([b"jpeg"]),
                **{
                    f"image/object/bbox/{key}": _floats(boxes[:, k].tolist())
                    for k, key in enumerate(BOX_KEYS)
                },
                "image/object/class/label": _ints(labels),
                "image/object/class/text": _bytes(names),
            }
            example = tf.train.Example(features=tf.train.Features(feature=feature))
            writer.write(example.SerializeToString())
            written.append(
                {"height": height, "filename": f"{i}.jpg", "boxes": boxes, "labels": labels}
            )
    return written
