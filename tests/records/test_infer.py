"""infer_schema: what it guesses from the first records of any TFRecord file, and its limits."""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image as PILImage

import tfpipe
from detection import LISTS, write_detection_records
from tfpipe.errors import DataNotFoundError, DecodeError, SchemaError, TfpipeWarning


def _encoded(size: tuple[int, int], mode: str = "RGB", fmt: str = "JPEG") -> bytes:
    buffer = io.BytesIO()
    PILImage.new(mode, size, 120).save(buffer, format=fmt)
    return buffer.getvalue()


def _feature(value: Any) -> tf.train.Feature:
    values = value if isinstance(value, list) else [value]
    if values and isinstance(values[0], bytes):
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=values))
    if values and isinstance(values[0], float):
        return tf.train.Feature(float_list=tf.train.FloatList(value=values))
    return tf.train.Feature(int64_list=tf.train.Int64List(value=values))


def _write(path: Path, examples: Sequence[dict[str, Any]]) -> Path:
    with tf.io.TFRecordWriter(str(path)) as writer:
        for example in examples:
            features = tf.train.Features(feature={k: _feature(v) for k, v in example.items()})
            writer.write(tf.train.Example(features=features).SerializeToString())
    return path


def test_guesses_every_kind(tmp_path: Path) -> None:
    examples = [
        {
            "image/encoded": _encoded((48, 40)),
            "mask": _encoded((48, 40), "L", "PNG"),
            "rgba": _encoded((4, 4), "RGBA", "PNG"),
            "caption": f"text {i}".encode(),
            "image/class/label": i % 4,
            "height": 40,
            "box": [0.1, 0.2, 0.3, 0.4],
            "points": [1.0] * (i + 1),
            "offset": -i,
        }
        for i in range(5)
    ]
    schema = tfpipe.infer_schema(_write(tmp_path / "a.tfrecord", examples))
    assert dict(schema) == {
        "box": tfpipe.Tensor(shape=(4,), dtype="float32"),
        "caption": tfpipe.Text(),
        "height": tfpipe.Tensor(shape=(), dtype="int64"),
        "image/class/label": tfpipe.ClassLabel(num_classes=4),
        "image/encoded": tfpipe.Image(shape=(40, 48, 3), encoding="jpeg"),
        "mask": tfpipe.Mask(shape=(40, 48, 1)),  # a gray PNG under a key naming a mask
        "offset": tfpipe.Tensor(shape=(), dtype="int64"),
        "points": tfpipe.Tensor(shape=(None,), dtype="float32"),
        "rgba": tfpipe.Image(shape=(4, 4, 4), encoding="png"),
    }
    decoded = next(iter(tfpipe.read_tfrecords(tmp_path / "a.tfrecord", schema=schema)))
    assert decoded["mask"].shape == (40, 48, 1) and decoded["rgba"].shape == (4, 4, 4)


def test_jpegs_and_pngs_together_are_kept_as_they_are(tmp_path: Path) -> None:
    examples = [{"image": _encoded((8, 6), fmt=fmt)} for fmt in ("JPEG", "PNG", "JPEG")]
    schema = tfpipe.infer_schema(_write(tmp_path / "m.tfrecord", examples))
    assert schema["image"] == tfpipe.Image(shape=(6, 8, 3), encoding="auto")


def test_variable_image_sizes_give_none(tmp_path: Path) -> None:
    examples = [{"image": _encoded((10 + i, 8))} for i in range(3)]
    schema = tfpipe.infer_schema(_write(tmp_path / "v.tfrecord", examples))
    assert schema["image"] == tfpipe.Image(shape=(None, None, 3), encoding="jpeg")
    shapes = [e["image"].shape for e in tfpipe.read_tfrecords(tmp_path / "v.tfrecord")]
    assert shapes == [(8, 10, 3), (8, 11, 3), (8, 12, 3)]


def test_samples_only_the_first_records(tmp_path: Path) -> None:
    first = _write(tmp_path / "a-0.tfrecord", [{"label": 1}, {"label": 2}])
    _write(tmp_path / "a-1.tfrecord", [{"label": 9}])
    assert tfpipe.infer_schema([first])["label"] == tfpipe.ClassLabel(num_classes=3)
    assert tfpipe.infer_schema(tmp_path, num_records=2)["label"].num_classes == 3
    assert tfpipe.infer_schema(tmp_path)["label"].num_classes == 10


def test_features_it_cannot_describe_are_left_out_with_a_warning(tmp_path: Path) -> None:
    examples = [
        {"x": 1.0, "tags": [b"a", b"b"], "sometimes": 3},
        {"x": 2.0, "tags": [b"c", b"d"]},
    ]
    path = _write(tmp_path / "w.tfrecord", examples)
    with pytest.warns(TfpipeWarning, match="left out 2 feature") as caught:
        schema = tfpipe.infer_schema(path)
    message = str(caught[0].message)
    assert "'sometimes': it is missing from 1 of 2 sampled records" in message
    assert "'tags': it holds lists of strings" in message
    assert list(schema) == ["x"]


def test_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(DataNotFoundError, match="no TFRecord files"):
        tfpipe.infer_schema(str(tmp_path / "*.tfrecord"))
    empty = _write(tmp_path / "empty.tfrecord", [])
    with pytest.raises(SchemaError, match=r"no records in .*empty\.tfrecord"):
        tfpipe.infer_schema(empty)
    not_example = tmp_path / "raw.tfrecord"
    with tf.io.TFRecordWriter(str(not_example)) as writer:
        writer.write(b"\x01\x02 not a protobuf")
    with pytest.raises(DecodeError, match=r"record 0 of raw\.tfrecord is not a serialized"):
        tfpipe.infer_schema(not_example)
    mixed = _write(tmp_path / "mixed.tfrecord", [{"x": 1}, {"x": 1.5}])
    with pytest.raises(SchemaError, match=r"'x': its type varies between records"):
        tfpipe.infer_schema(mixed)
    with pytest.raises(ValueError, match="num_records must be a positive int"):
        tfpipe.infer_schema(mixed, num_records=0)


def test_infers_the_schema_tfpipe_wrote(tmp_path: Path) -> None:
    src = tfpipe.from_arrays({"image": np.zeros((4, 6, 5, 3), np.uint8), "label": np.arange(4)})
    schema = tfpipe.Schema(
        {"image": tfpipe.Image(shape=(6, 5, 3), encoding="png"), "label": src.schema["label"]}
    )
    info = tfpipe.write_tfrecords(src, tmp_path / "t", schema=schema, progress=False)
    assert tfpipe.infer_schema(info.files) == schema


def test_infers_the_object_detection_api_layout(tmp_path: Path) -> None:
    path = tmp_path / "objects.tfrecord"
    write_detection_records(path)
    with pytest.warns(TfpipeWarning, match=r"'image/object/class/text': it holds lists of str"):
        schema = tfpipe.infer_schema(path)
    assert schema["image/encoded"] == tfpipe.Image(shape=(None, None, 3), encoding="jpeg")
    for name in LISTS:
        dtype = "int64" if name.endswith("label") else "float32"
        assert schema[name] == tfpipe.Tensor(shape=(None,), dtype=dtype), name
    for name in ("image/height", "image/width"):
        assert schema[name] == tfpipe.Tensor(shape=(), dtype="int64")
    assert schema["image/filename"] == schema["image/format"] == tfpipe.Text()
    assert "image/object/class/text" not in schema
