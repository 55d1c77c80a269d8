"""Round trips of every feature kind through encode -> serialize -> decode / parse, failures too."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest
import tensorflow as tf

import tfpipe
from tfpipe.errors import DecodeError, EncodeError, SchemaError


@dataclasses.dataclass
class Case:
    """One value through encode -> decode (numpy) and encode -> parse (tf.data)."""

    feature: tfpipe.Feature
    value: Any
    expected: Any = None
    raises: type[Exception] | None = None
    match: str = ""


RGB = np.arange(8 * 6 * 3, dtype=np.uint8).reshape(8, 6, 3)

CASES = {
    "image_raw": Case(tfpipe.Image(shape=(8, 6, 3), encoding="raw"), RGB, RGB),
    "image_png_lossless": Case(tfpipe.Image(shape=(8, 6, 3), encoding="png"), RGB, RGB),
    "image_png_gray": Case(
        tfpipe.Image(shape=(8, 6, 1), encoding="png"), RGB[..., :1], RGB[..., :1]
    ),
    "label_name": Case(tfpipe.ClassLabel(names=["cat", "dog"]), "dog", 1),
    "label_index": Case(tfpipe.ClassLabel(num_classes=3), 2, 2),
    "multi_label_string": Case(
        tfpipe.ClassLabel(num_classes=4, multi_label=True), "[1, 0, 3]", [1.0, 1.0, 0.0, 1.0]
    ),
    "tensor_fixed": Case(
        tfpipe.Tensor(shape=(2, 2), dtype="float32"),
        [[1, 2], [3, 4]],
        np.array([[1, 2], [3, 4]], np.float32),
    ),
    "tensor_int": Case(
        tfpipe.Tensor(shape=(3,), dtype="int32"), [1, -2, 3], np.array([1, -2, 3], np.int32)
    ),
    "tensor_variable": Case(
        tfpipe.Tensor(shape=(None, 2), dtype="int64"),
        [[1, 2], [3, 4], [5, 6]],
        np.array([[1, 2], [3, 4], [5, 6]]),
    ),
    "tensor_bytes": Case(
        tfpipe.Tensor(shape=(2, 3), dtype="int16", encoding="bytes"),
        [[1, -2, 3], [4, 5, -32768]],
        np.array([[1, -2, 3], [4, 5, -32768]], np.int16),
    ),
    "tensor_zlib_float64": Case(
        tfpipe.Tensor(shape=(2,), dtype="float64", encoding="zlib"),
        [1 / 3, 1e300],
        np.array([1 / 3, 1e300]),  # exactly: a float list would round to float32
    ),
    "text": Case(tfpipe.Text(), "héllo", "héllo"),
    "unknown_name": Case(
        tfpipe.ClassLabel(names=["cat"]),
        "cow",
        raises=EncodeError,
        match="unknown class name 'cow'",
    ),
    "label_not_int": Case(
        tfpipe.ClassLabel(num_classes=2),
        1.5,
        raises=EncodeError,
        match="expected an int64 index",
    ),
    "label_out_of_range": Case(
        tfpipe.ClassLabel(num_classes=2), 5, raises=EncodeError, match="out of range"
    ),
    "tensor_wrong_dtype": Case(
        tfpipe.Tensor(shape=(), dtype="int64"),
        "cat",
        raises=EncodeError,
        match="expected int64, got 'cat'",
    ),
    "tensor_wrong_shape": Case(
        tfpipe.Tensor(shape=(3,)),
        [1.0, 2.0],
        raises=EncodeError,
        match=r"expected shape \(3,\)",
    ),
    "image_not_an_image": Case(tfpipe.Image(), b"not an image", raises=EncodeError, match="image"),
}


@pytest.mark.parametrize("name", CASES)
def test_round_trip(name: str) -> None:
    case = CASES[name]
    schema = tfpipe.Schema({"x": case.feature})
    if case.raises is not None:
        with pytest.raises(case.raises, match=case.match) as info:
            schema.encode({"x": case.value}, where="example 17")
        assert "x:" in str(info.value) and "example 17" in str(info.value)
        return
    serialized = schema.encode({"x": case.value})
    decoded = schema.decode(serialized)["x"]
    parsed = schema.parse(tf.constant(serialized))["x"].numpy()
    if isinstance(case.feature, tfpipe.Text):
        assert str(decoded) == case.expected and parsed.decode() == case.expected
        return
    np.testing.assert_array_equal(decoded, case.expected)
    np.testing.assert_array_equal(parsed, case.expected)
    assert decoded.dtype == np.dtype(case.feature.dtype)


def test_schema_json_round_trip() -> None:
    schema = tfpipe.Schema(
        {
            "image": tfpipe.Image(shape=(None, None, 3)),
            "label": tfpipe.ClassLabel(names=["a", "b"]),
            "tags": tfpipe.ClassLabel(num_classes=5, multi_label=True),
            "box": tfpipe.Tensor(shape=(None, 4), dtype="float32"),
            "raw": tfpipe.Tensor(shape=(2,), dtype="uint16", encoding="zlib"),
            "caption": tfpipe.Text(),
        }
    )
    assert tfpipe.Schema.from_json(schema.to_json()) == schema
    assert "encoding" not in schema["box"].to_json()  # older metadata files read the same


@pytest.mark.fault(
    "a zlib tensor whose bytes are not zlib data",
    reader="Schema.decode",
    outcome="DecodeError naming the feature and the record",
)
def test_a_corrupt_zlib_tensor_is_named() -> None:
    schema = tfpipe.Schema({"v": tfpipe.Tensor((3,), "float64", encoding="zlib")})
    bad = tf.train.Example(
        features=tf.train.Features(
            feature={"v": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"not zlib"]))}
        )
    ).SerializeToString()
    with pytest.raises(DecodeError, match=r"^v: expected zlib.* in record 4 of x"):
        schema.decode(bad, where="record 4 of x")


def test_tensors_stored_as_bytes_parse_in_batches() -> None:
    schema = tfpipe.Schema({"x": tfpipe.Tensor(shape=(2, 2), dtype="uint8", encoding="bytes")})
    values = [np.full((2, 2), i, np.uint8) for i in range(3)]
    batch = schema.parse(tf.constant([schema.encode({"x": v}) for v in values]))["x"]
    assert batch.dtype == tf.uint8
    np.testing.assert_array_equal(batch.numpy(), np.stack(values))
    with pytest.raises(SchemaError, match="needs a fixed shape"):
        tfpipe.Tensor(shape=(None,), encoding="bytes")
    with pytest.raises(SchemaError, match=r"Tensor\.encoding must be one of"):
        tfpipe.Tensor(encoding="npy")


def test_jpeg_file_is_copied_byte_for_byte(image_folder) -> None:
    path = next(image_folder.glob("*/*.jpg"))
    stored = tfpipe.Image(encoding="jpeg").encode_bytes(path)
    assert stored == path.read_bytes()


def test_jpeg_is_resized_to_declared_shape(image_folder) -> None:
    path = next(image_folder.glob("*/*.jpg"))
    feature = tfpipe.Image(shape=(16, 20, 3), encoding="jpeg")
    stored = feature.encode_bytes(path)
    assert stored != path.read_bytes()
    assert feature.load(stored).shape == (16, 20, 3)


def test_auto_keeps_each_image_s_format(image_folder) -> None:
    jpeg = next(image_folder.glob("*/*.jpg"))
    png = tfpipe.Image(encoding="png").encode_bytes(RGB)
    auto = tfpipe.Image(encoding="auto")
    assert auto.encode_bytes(jpeg) == jpeg.read_bytes()
    assert auto.encode_bytes(png) == png
    assert auto.encode_bytes(RGB) == png  # an array (or BMP, GIF): PNG, lossless
    at_size = {
        encoding: tfpipe.Image(shape=(16, 20, 3), encoding=encoding)
        for encoding in ("auto", "jpeg", "png")
    }
    assert at_size["auto"].encode_bytes(jpeg) == at_size["jpeg"].encode_bytes(jpeg)
    assert at_size["auto"].encode_bytes(png) == at_size["png"].encode_bytes(png)
    rgba = tfpipe.Image(shape=(None, None, 4), encoding="auto").encode_bytes(jpeg)
    assert rgba[:4] == b"\x89PNG"  # JPEG has no alpha


def test_batched_parse_decodes_images_per_element() -> None:
    schema = tfpipe.Schema(
        {
            "image": tfpipe.Image(shape=(8, 6, 3), encoding="png"),
            "label": tfpipe.ClassLabel(num_classes=2),
        }
    )
    records = [schema.encode({"image": RGB, "label": i % 2}) for i in range(4)]
    parsed = schema.parse(tf.constant(records))
    assert parsed["image"].shape == (4, 8, 6, 3)
    np.testing.assert_array_equal(parsed["label"].numpy(), [0, 1, 0, 1])


def test_bad_declarations_raise_schema_error() -> None:
    with pytest.raises(SchemaError, match="channels"):
        tfpipe.Image(shape=(8, 8, 2))
    with pytest.raises(SchemaError, match="raw"):
        tfpipe.Image(encoding="raw")
    with pytest.raises(SchemaError, match=r"'raw' or 'auto'\. Received: encoding='webp'"):
        tfpipe.Image(encoding="webp")
    with pytest.raises(SchemaError, match=r"positive ints or None\. .*\(True, 8, 3\)"):
        tfpipe.Image(shape=(True, 8, 3))  # a bool is not a height of 1
    with pytest.raises(SchemaError, match=r"names=|num_classes"):
        tfpipe.ClassLabel()
    with pytest.raises(SchemaError, match="Text"):
        tfpipe.Tensor(dtype="str")


@pytest.mark.parametrize("encoding", ["raw", "png"])
def test_batched_parse_resizes_and_rescales_like_single_parse(encoding: str) -> None:
    schema = tfpipe.Schema({"image": tfpipe.Image(shape=(8, 6, 3), encoding=encoding)})
    records = [schema.encode({"image": np.roll(RGB, i)}) for i in range(3)]
    batch = schema.parse(tf.constant(records), image_size=(4, 3), rescale=1 / 255)["image"]
    assert batch.dtype == tf.float32 and batch.shape == (3, 4, 3, 3)
    for i, record in enumerate(records):
        single = schema.parse(tf.constant(record), image_size=(4, 3), rescale=1 / 255)["image"]
        np.testing.assert_allclose(batch[i].numpy(), single.numpy(), rtol=1e-6)
    same_size = schema.parse(tf.constant(records), rescale=1 / 255)["image"].numpy()
    np.testing.assert_allclose(same_size[1] * 255, np.roll(RGB, 1), atol=1e-4)


@pytest.mark.parametrize("batched", [False, True], ids=["one", "batch"])
def test_images_stored_at_the_requested_size_are_not_resized(batched: bool) -> None:
    feature = tfpipe.Image(shape=(8, 6, 3), encoding="raw")
    decode = feature.decode_batch if batched else feature.decode_tensor
    spec = tf.TensorSpec([None] if batched else [], tf.string)

    def resize_ops(size: tuple[int, int]) -> list[str]:
        graph = tf.function(lambda data: decode(data, size, rescale=1 / 255))
        ops = graph.get_concrete_function(spec).graph.get_operations()
        return [op.type for op in ops if op.type.startswith("Resize") or op.type.endswith("If")]

    assert resize_ops((8, 6)) == []
    assert resize_ops((4, 3)) != []


def test_encoded_bytes_do_not_depend_on_the_process() -> None:
    # A protobuf map serializes in its hash order, which differs from process to process: the
    # features map is written sorted by name, so the same example gives the same bytes anywhere.
    names = [f"f{i}" for i in range(12)]
    schema = tfpipe.Schema({name: tfpipe.Tensor(shape=(), dtype="int64") for name in names})
    data = schema.encode({name: i for i, name in enumerate(names)})
    assert data == tf.train.Example.FromString(data).SerializeToString(deterministic=True)
