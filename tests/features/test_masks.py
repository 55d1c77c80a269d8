"""`tfpipe.Mask`: a mask keeps its exact integer values through every path, is resized with
nearest neighbour only, never rescaled; lossy, colour and out-of-range masks are named errors."""

from __future__ import annotations

import io
import re
import struct
import zlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf
from PIL import Image as PILImage

import tfpipe
from tfpipe.cli.parser import main
from tfpipe.errors import DecodeError, EncodeError, SchemaError, SourceError
from tfpipe.features.mask import resize_nearest
from tfpipe.format.metadata import DatasetInfo

VALUES = np.array([0, 1, 2, 7, 255], np.uint8)
SHAPE = (12, 16)
COUNT = 6
MASK = tfpipe.Mask(shape=(*SHAPE, 1), num_classes=8, ignore_value=255)


def _palette_png(values: np.ndarray) -> PILImage.Image:
    """A palette PNG whose indices are `values` and whose colours are something else."""
    image = PILImage.fromarray(values, "P")
    image.putpalette([(37 * i + 11) % 256 for i in range(768)])
    return image


def _masks() -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    masks = [VALUES[rng.integers(0, len(VALUES), SHAPE)] for _ in range(COUNT)]
    masks[0][:] = 0  # one mask of a single class, one with every value
    masks[1].flat[: len(VALUES)] = VALUES
    return masks


@pytest.fixture(scope="module")
def segmentation(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, pd.DataFrame]:
    """COUNT RGB PNG images and palette PNG masks (every second one 8-bit grayscale)."""
    folder = tmp_path_factory.mktemp("segmentation")
    rng = np.random.default_rng(1)
    rows = []
    for i, mask in enumerate(_masks()):
        image = rng.integers(0, 256, (*SHAPE, 3), np.uint8)
        PILImage.fromarray(image).save(folder / f"image{i}.png")
        saved = _palette_png(mask) if i % 2 == 0 else PILImage.fromarray(mask, "L")
        saved.save(folder / f"mask{i}.png")
        rows.append((f"image{i}.png", f"mask{i}.png"))
    return folder, pd.DataFrame(rows, columns=["path", "mask"])


def _schema(mask: tfpipe.Mask = MASK) -> tfpipe.Schema:
    return tfpipe.Schema({"image": tfpipe.Image(shape=(*SHAPE, 3), encoding="png"), "mask": mask})


def _source(segmentation: tuple[Path, pd.DataFrame], mask: tfpipe.Mask = MASK) -> tfpipe.Source:
    folder, df = segmentation
    return tfpipe.from_dataframe(df, label_cols=["mask"], schema=_schema(mask), base_dir=folder)


@pytest.fixture(scope="module")
def records(segmentation: tuple[Path, pd.DataFrame], tmp_path_factory: pytest.TempPathFactory):
    """The segmentation source written in order to one shard."""
    prefix = tmp_path_factory.mktemp("records") / "train"
    tfpipe.write_tfrecords(
        _source(segmentation), prefix, num_shards=1, shuffle=False, progress=False
    )
    return prefix


def _expected(size: tuple[int, int] = SHAPE) -> np.ndarray:
    return np.stack([resize_nearest(m, size) for m in _masks()])[..., np.newaxis]


def _assert_masks(masks: np.ndarray, size: tuple[int, int] = SHAPE) -> None:
    masks = np.asarray(masks)
    assert masks.dtype == np.uint8
    np.testing.assert_array_equal(masks, _expected(size))


def test_the_fixture_masks_hold_every_value_and_palette_colours_differ(segmentation) -> None:
    folder, _ = segmentation
    palette = PILImage.open(folder / "mask0.png")
    assert palette.mode == "P"
    assert not np.array_equal(np.asarray(palette.convert("L")), _masks()[0])  # colours differ
    assert set(np.unique(np.stack(_masks())).tolist()) == set(VALUES.tolist())


def test_write_then_read_tfrecords_keeps_the_values(records: Path) -> None:
    examples = list(tfpipe.read_tfrecords(records).as_numpy_iterator())
    _assert_masks(np.stack([e["mask"] for e in examples]))


def test_schema_decode_and_from_tfrecords_keep_the_values(records: Path) -> None:
    info = DatasetInfo.load(records)
    assert info.schema["mask"] == MASK
    serialized = tf.data.TFRecordDataset([str(f) for f in info.files]).as_numpy_iterator()
    _assert_masks(np.stack([info.schema.decode(r)["mask"] for r in serialized]))
    source = tfpipe.from_tfrecords(records)
    _assert_masks(np.stack([source.schema.load(source[i])["mask"] for i in range(COUNT)]))


@pytest.mark.parametrize("batched", [True, False])
def test_pipeline_over_records_rescales_images_but_not_masks(records: Path, batched) -> None:
    pipeline = tfpipe.Pipeline(records, image_size=SHAPE, rescale=1 / 255)
    pipeline = pipeline.batch(COUNT) if batched else pipeline
    examples = list(pipeline.build().as_numpy_iterator())
    masks = examples[0]["mask"] if batched else np.stack([e["mask"] for e in examples])
    _assert_masks(masks)
    image = examples[0]["image"]
    assert image.dtype == np.float32 and image.max() <= 1.0


@pytest.mark.parametrize("first", ["map", "filter"])
def test_a_map_decodes_per_example_with_the_values_of_the_batch_decode(
    records: Path, first: str
) -> None:
    """Images and masks are decoded one example at a time (in a map's own calls, or before a
    filter), to the same values as the decode of a whole batch (before a cache)."""
    base = tfpipe.Pipeline(records, image_size=(5, 7), rescale=1 / 255).options(deterministic=True)
    if first == "map":
        mapped = base.map(lambda example: example).batch(COUNT)
    else:
        mapped = base.filter(lambda example: example["mask"][0, 0, 0] <= 255).batch(COUNT)
    stages = mapped.explain()
    assert stages.index("unbatch") < stages.index("decode images per example")
    assert stages.index("decode images per example") < stages.index(f". {first}(")
    fused = ", in the parallel calls of map(<lambda>)" in stages
    assert fused == (first == "map")
    per_batch = base.cache().batch(COUNT)
    assert "decode images per example" not in per_batch.explain()
    by_example, by_batch = next(iter(mapped.build())), next(iter(per_batch.build()))
    _assert_masks(by_example["mask"].numpy(), (5, 7))
    for name in ("image", "mask"):
        assert by_example[name].dtype == by_batch[name].dtype
        np.testing.assert_array_equal(by_example[name].numpy(), by_batch[name].numpy())


def test_pipeline_over_a_dataframe_keeps_the_palette_indices(segmentation) -> None:
    pipeline = tfpipe.Pipeline(_source(segmentation), rescale=1 / 255).batch(COUNT)
    assert "masks: nearest-neighbour resize, integer values, never rescaled" in pipeline.explain()
    batch = next(iter(pipeline.build()))
    _assert_masks(batch["mask"].numpy())
    assert batch["image"].dtype == tf.float32


def test_sequence_loader_default_rescale_leaves_masks_alone(segmentation, records) -> None:
    for source in (_source(segmentation), tfpipe.from_tfrecords(records)):
        loader = tfpipe.SequenceLoader(
            source, batch_size=COUNT, x="image", y="mask", image_size=SHAPE, shuffle=False
        )
        images, masks = loader[0]
        assert images.dtype == np.float32 and images.max() <= 1.0
        _assert_masks(masks)


@pytest.mark.parametrize("size", [(5, 7), (31, 23)])
def test_every_path_resizes_masks_with_the_same_nearest_neighbour(
    segmentation, records, size
) -> None:
    """Downsized and upsized, every value comes from the original, the same on every path."""
    from_records = next(iter(tfpipe.Pipeline(records, image_size=size).batch(COUNT).build()))
    from_frame = next(
        iter(tfpipe.Pipeline(_source(segmentation), image_size=size).batch(COUNT).build())
    )
    loader = tfpipe.SequenceLoader(
        _source(segmentation), batch_size=COUNT, y="mask", image_size=size, shuffle=False
    )
    for masks in (from_records["mask"].numpy(), from_frame["mask"].numpy(), loader[0][1]):
        _assert_masks(masks, size)
    for mask, original in zip(_expected(size), _masks(), strict=True):
        assert set(np.unique(mask)) <= set(np.unique(original))
    # the images went through the bilinear resize: values that are in no original image
    assert from_records["image"].shape == (COUNT, *size, 3)


def test_nearest_indices_pick_the_pixel_under_each_centre() -> None:
    ramp = np.arange(8, dtype=np.uint8)[np.newaxis, :]
    assert resize_nearest(ramp, (1, 4)).tolist() == [[1, 3, 5, 7]]  # centres 1.0, 3.0, ...
    assert resize_nearest(ramp, (1, 16)).tolist() == [np.repeat(np.arange(8), 2).tolist()]
    assert resize_nearest(ramp, (1, 8)) is ramp


def test_a_mask_without_channel_axis_stays_rank_two(segmentation, tmp_path: Path) -> None:
    flat = tfpipe.Mask(shape=SHAPE, num_classes=8, ignore_value=255)
    prefix = tmp_path / "flat"
    source = _source(segmentation, flat)
    tfpipe.write_tfrecords(source, prefix, num_shards=1, shuffle=False, progress=False)
    batch = next(iter(tfpipe.Pipeline(prefix, image_size=(6, 8)).batch(COUNT).build()))
    np.testing.assert_array_equal(batch["mask"].numpy(), _expected((6, 8))[..., 0])
    example = next(iter(tfpipe.read_tfrecords(prefix)))
    assert example["mask"].shape == SHAPE


def test_masks_from_arrays_are_checked_and_resized_with_nearest() -> None:
    masks = np.stack(_masks())
    schema = tfpipe.Schema({"mask": tfpipe.Mask(shape=SHAPE, num_classes=8, ignore_value=255)})
    source = tfpipe.from_arrays({"mask": masks.astype(np.int64)}, schema=schema)
    batch = next(iter(tfpipe.Pipeline(source, image_size=(6, 8)).batch(COUNT).build()))
    np.testing.assert_array_equal(batch["mask"].numpy(), _expected((6, 8))[..., 0])
    assert batch["mask"].dtype == tf.uint8


def test_sixteen_bit_masks_keep_values_above_255(tmp_path: Path) -> None:
    wide = tfpipe.Mask(shape=(4, 5, 1), num_classes=1000)
    assert wide.dtype == "uint16"
    values = np.arange(20, dtype=np.int64).reshape(4, 5) * 47
    buffer = io.BytesIO()
    PILImage.fromarray(values.astype(np.uint16)).save(buffer, "PNG")  # a 16-bit gray PNG
    schema = tfpipe.Schema({"mask": wide})
    source = tfpipe.from_arrays({"mask": values[np.newaxis]}, schema=schema)
    tfpipe.write_tfrecords(source, tmp_path / "wide", progress=False)
    stored = next(iter(tfpipe.read_tfrecords(tmp_path / "wide")))["mask"]
    assert stored.dtype == tf.uint16
    np.testing.assert_array_equal(stored.numpy()[..., 0], values)
    np.testing.assert_array_equal(wide.load(buffer.getvalue())[..., 0], values)


def test_mask_json_round_trip_and_declaration_errors() -> None:
    assert tfpipe.Feature.from_json(MASK.to_json()) == MASK
    assert tfpipe.Schema.from_json(_schema().to_json()) == _schema()
    assert MASK.to_json() == {"kind": "mask", "shape": [*SHAPE, 1], "num_classes": 8,
                              "ignore_value": 255, "colors": None}  # fmt: skip
    for bad in (
        {"shape": (4, 4, 3)},
        {"shape": (0, 4)},
        {"num_classes": 0},
        {"num_classes": 70000},
        {"ignore_value": -1},
        {"colors": [(0, 0, 0), (0, 0, 0)]},
        {"colors": [(0, 0, 256)]},
        {"colors": [(0, 0)]},
    ):
        with pytest.raises(SchemaError, match=f"Received: {next(iter(bad))}="):
            tfpipe.Mask(**bad)  # type: ignore[arg-type]


def test_inspect_lists_the_mask_values(records: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", str(records)]) == 0
    printed = capsys.readouterr().out
    assert "Mask(shape=(12, 16, 1), num_classes=8, ignore_value=255, colors=None)" in printed
    assert "mask   uint8 (12, 16, 1) values [0]" in printed  # the first mask is all class 0


def test_verify_decodes_masks(records: Path) -> None:
    report = tfpipe.verify(records, progress=False)
    assert report.ok and report.num_images == 2 * COUNT


def _saved(values: np.ndarray, mode: str, fmt: str = "PNG") -> bytes:
    buffer = io.BytesIO()
    PILImage.fromarray(values).convert(mode).save(buffer, fmt)
    return buffer.getvalue()


def _with_bad_mask(segmentation, tmp_path: Path, data: bytes, name: str) -> tfpipe.Source:
    """The segmentation source with the last mask replaced by `data` in a file `name`."""
    folder, df = segmentation
    (tmp_path / name).write_bytes(data)
    df = df.copy()
    df.loc[COUNT - 1, "mask"] = str(tmp_path / name)
    return tfpipe.from_dataframe(df, label_cols=["mask"], schema=_schema(), base_dir=folder)


@pytest.mark.fault(
    "a mask of another size than its image in one example",
    reader="write_tfrecords, SequenceLoader, Pipeline over files or records of undeclared "
    "size, verify, Schema.decode / from_tfrecords, from_arrays",
    outcome="EncodeError / DecodeError naming the example (record) and both sizes (was "
    "accepted: the mask resized onto the image)",
)
def test_a_mask_of_another_size_than_its_image_is_named(segmentation, tmp_path: Path) -> None:
    half = _masks()[COUNT - 1][::2, ::2]  # 6x8 for a 12x16 image
    source = _with_bad_mask(segmentation, tmp_path, _saved(half, "L"), "half.png")
    sizes = (
        r"mask: the mask \(.*half\.png\) is 6x8 \(height x width\) but image 'image' "
        r"\(.*image5\.png\) is 12x16: "
    )
    with pytest.raises(EncodeError, match=sizes + r".* in example 5 \(row 5 "):
        tfpipe.write_tfrecords(source, tmp_path / "out", progress=False)
    loader = tfpipe.SequenceLoader(source, batch_size=COUNT, x="image", y="mask", shuffle=False)
    with pytest.raises(DecodeError, match=sizes + r".* in row 5 "):
        loader[0]
    pipeline = tfpipe.Pipeline(source).batch(COUNT)  # masks read in the graph
    with pytest.raises(tf.errors.InvalidArgumentError, match=sizes):
        list(pipeline.build().unbatch())  # a derived dataset: TensorFlow's error
    named = pytest.raises(DecodeError, match=r"^.*half\.png, feature 'mask': " + sizes)
    with named, tfpipe.named_errors(pipeline):
        list(pipeline.build().unbatch())
    with pytest.raises(DecodeError, match=r"^.*half\.png, feature 'mask': " + sizes):
        list(pipeline.build())

    # Records another tool wrote: image and mask stored at their own sizes.
    free = tfpipe.Schema({"image": tfpipe.Image(encoding="png"), "mask": tfpipe.Mask()})
    path = tmp_path / "foreign.tfrecord"
    with tf.io.TFRecordWriter(str(path)) as writer:
        for mask in (_masks()[0], half):
            writer.write(_foreign(np.zeros((*SHAPE, 3), np.uint8), mask))
    stored = r"mask: the mask is 6x8 \(height x width\) but image 'image' is 12x16: "
    records = tfpipe.from_tfrecords(path, schema=free)
    loader = tfpipe.SequenceLoader(
        records, batch_size=1, x="image", y="mask", image_size=SHAPE, shuffle=False
    )
    with pytest.raises(DecodeError, match=stored + r".* in record 1 of .*foreign"):
        loader[1]
    with pytest.raises(DecodeError, match=stored + ".* in record$"):
        free.decode(_foreign(np.zeros((*SHAPE, 3), np.uint8), half))
    # Pipeline over them (no declared size, so both are resized): checked before the resize.
    named = pytest.raises(DecodeError, match=r"^record 1 of .*foreign.*'mask': the mask")
    with named:
        list(tfpipe.Pipeline(path, schema=free, image_size=(8, 8)).batch(2).build())
    report = tfpipe.verify(path, schema=free, progress=False)
    assert [(f.record, f.feature) for f in report.faults] == [(1, "mask")]
    arrays = {"image": np.zeros((2, *SHAPE, 3), np.uint8), "mask": np.stack([half, half])}
    with pytest.raises(SourceError, match=r"^arrays: " + stored):
        tfpipe.from_arrays(arrays, _schema(tfpipe.Mask()))


def _foreign(image: np.ndarray, mask: np.ndarray) -> bytes:
    """A tf.train.Example of a PNG image and a PNG mask, as another tool writes them."""
    example = tf.train.Example()
    example.features.feature["image"].bytes_list.value.append(_saved(image, "RGB"))
    example.features.feature["mask"].bytes_list.value.append(_saved(mask, "L"))
    return example.SerializeToString()


def test_a_mask_of_its_upright_image_size_is_accepted(tmp_path: Path) -> None:
    """A JPEG stored sideways with an EXIF orientation is compared once turned upright."""
    exif = PILImage.Exif()
    exif[0x0112] = 6  # stored 16 high and 12 wide; upright 12x16, as the mask
    PILImage.new("RGB", SHAPE).save(tmp_path / "turned.jpg", exif=exif)  # (width, height)
    schema = tfpipe.Schema({"image": tfpipe.Image(), "mask": tfpipe.Mask()})
    example = {"image": str(tmp_path / "turned.jpg"), "mask": _masks()[0]}
    assert schema.decode(schema.encode(example))["mask"].shape == (*SHAPE, 1)


BAD_MASKS = {
    "jpeg": (lambda: _saved(_masks()[1], "L", "JPEG"), "mask.jpg", "JPEG mask is lossy"),
    "rgb": (lambda: _saved(_masks()[1], "RGB"), "mask.png", "got a RGB image: colours are not"),
    "range": (
        lambda: _saved(np.where(_masks()[1] == 7, 10, _masks()[1]).astype(np.uint8), "L"),
        "mask.png",
        "mask value 10 at row",
    ),
}


@pytest.mark.fault(
    "JPEG, RGB or out-of-range mask file",
    reader="write_tfrecords, SequenceLoader, Pipeline (a plain loop or named_errors), Mask.load",
    outcome="EncodeError / DecodeError naming the file and the value or mode",
)
@pytest.mark.parametrize("kind", sorted(BAD_MASKS))
def test_a_lossy_colour_or_out_of_range_mask_is_named(segmentation, tmp_path, kind) -> None:
    make, name, reason = BAD_MASKS[kind]
    source = _with_bad_mask(segmentation, tmp_path, make(), name)
    path = re.escape(str(tmp_path / name))
    with pytest.raises(EncodeError, match=f"{path}: .*{reason}"):
        tfpipe.write_tfrecords(source, tmp_path / "out", shuffle=False, progress=False)
    loader = tfpipe.SequenceLoader(source, batch_size=COUNT, y="mask", image_size=SHAPE)
    with pytest.raises(DecodeError, match=f"{path}: .*{reason}"):
        loader[0]
    pipeline = tfpipe.Pipeline(source).batch(COUNT)
    named = pytest.raises(DecodeError, match=f"{path}, feature 'mask': .*{reason}")
    with named, tfpipe.named_errors(pipeline):
        list(pipeline.build())
    with pytest.raises(DecodeError, match=f"{path}, feature 'mask': .*{reason}"):
        list(pipeline.build())  # a plain loop over the built dataset names it too
    with pytest.raises(ValueError, match=reason):
        MASK.load(make())


@pytest.mark.fault(
    "mask stored as a palette PNG or a JPEG by another tool",
    reader="Schema.decode, read_tfrecords + named_errors, verify",
    outcome="DecodeError / fault naming the record (no palette colours as classes)",
)
@pytest.mark.parametrize("fmt", ["palette", "jpeg"])
def test_records_with_a_mask_tensorflow_would_misread_are_refused(tmp_path, fmt) -> None:
    values = _masks()[1]
    if fmt == "palette":
        buffer = io.BytesIO()
        _palette_png(values).save(buffer, "PNG")
        data = buffer.getvalue()
    else:
        data = _saved(values, "L", "JPEG")
    schema = tfpipe.Schema({"mask": MASK})
    good = schema.encode({"mask": values})
    example = tf.train.Example()
    example.features.feature["mask"].bytes_list.value.append(data)
    path = tmp_path / "foreign.tfrecord"
    with tf.io.TFRecordWriter(str(path)) as writer:
        writer.write(good)
        writer.write(example.SerializeToString())
    with pytest.raises(DecodeError, match="mask: a mask must be stored as a"):
        schema.decode(example.SerializeToString())
    dataset = tfpipe.read_tfrecords(path, schema=schema)
    named = pytest.raises(DecodeError, match=f"record 1 of {re.escape(str(path))}")
    with named, tfpipe.named_errors(tfpipe.Pipeline(path, schema=schema)):
        list(dataset)
    faults = tfpipe.verify(path, schema=schema, progress=False).faults
    assert [(f.record, f.feature) for f in faults] == [(1, "mask")]


@pytest.mark.fault(
    "records read with a Mask of fewer classes (or without the ignore_value) than their "
    "metadata declares",
    reader="read_tfrecords, Pipeline, from_tfrecords",
    outcome="SchemaError naming the feature and both declarations, before reading (was a "
    "TensorFlow assertion without the file, mid-epoch)",
)
@pytest.mark.parametrize(
    "narrow",
    [tfpipe.Mask(shape=(*SHAPE, 1), num_classes=3), tfpipe.Mask(shape=(*SHAPE, 1), num_classes=8)],
    ids=["fewer classes", "no ignore_value"],
)
def test_a_narrower_mask_than_the_metadata_is_refused(records: Path, narrow: tfpipe.Mask) -> None:
    expected = (
        rf"^mask: schema= declares Mask\(num_classes={narrow.num_classes}, ignore_value=None\) "
        r"but the records of .*train.* hold masks of num_classes=8, ignore_value=255"
    )
    for read in (tfpipe.read_tfrecords, tfpipe.Pipeline, tfpipe.from_tfrecords):
        with pytest.raises(SchemaError, match=expected):
            read(records, schema=_schema(narrow))
    wider = tfpipe.Mask(shape=(*SHAPE, 1), num_classes=10, ignore_value=255)
    assert len(list(tfpipe.read_tfrecords(records, schema=_schema(wider)))) == COUNT


@pytest.mark.fault(
    "mask value >= num_classes in records without metadata read with a smaller Mask",
    reader="Pipeline + named_errors, Schema.load",
    outcome="DecodeError naming the record, the value and where it is",
)
@pytest.mark.parametrize("mapped", [False, True], ids=["batch decode", "per-example decode"])
def test_values_beyond_a_narrower_schema_fail_on_both_paths(
    records: Path, mapped: bool, tmp_path: Path
) -> None:
    plain = tmp_path / "plain.tfrecord"  # no metadata declares the records' classes
    plain.write_bytes(DatasetInfo.load(records).files[0].read_bytes())
    narrow = _schema(tfpipe.Mask(shape=(*SHAPE, 1), num_classes=3))
    pipeline = tfpipe.Pipeline(plain, schema=narrow)
    pipeline = (pipeline.map(lambda example: example) if mapped else pipeline).batch(COUNT)
    with pytest.raises(tf.errors.InvalidArgumentError, match="a mask value is not a class"):
        list(pipeline.build().unbatch())  # a derived dataset: TensorFlow's error
    named = pytest.raises(DecodeError, match=r"record 1 of .*'mask': mask value 7 at row")
    with named, tfpipe.named_errors(pipeline):
        list(pipeline.build().unbatch())
    with pytest.raises(DecodeError, match=r"record 1 of .*'mask': mask value 7 at row"):
        list(pipeline.build())  # the built dataset names it itself
    source = tfpipe.from_tfrecords(plain, schema=narrow)
    with pytest.raises(DecodeError, match="mask value 7 at row"):
        narrow.load(source[1])


def test_infer_schema_finds_grayscale_png_masks_by_their_key(tmp_path: Path) -> None:
    """Records of plain TensorFlow (as TFDS writes segmentation masks): 8-bit gray PNGs."""
    path = tmp_path / "plain.tfrecord"
    with tf.io.TFRecordWriter(str(path)) as writer:
        for mask in _masks():
            png = tf.io.encode_png(mask[..., np.newaxis]).numpy()
            example = tf.train.Example()
            example.features.feature["segmentation_mask"].bytes_list.value.append(png)
            example.features.feature["gray"].bytes_list.value.append(png)
            writer.write(example.SerializeToString())
    schema = tfpipe.infer_schema(path)
    assert schema["segmentation_mask"] == tfpipe.Mask(shape=(*SHAPE, 1))
    assert schema["gray"] == tfpipe.Image(shape=(*SHAPE, 1), encoding="png")
    masks = [e["segmentation_mask"] for e in tfpipe.read_tfrecords(path).as_numpy_iterator()]
    _assert_masks(np.stack(masks))


COLORS = [(0, 0, 0), (128, 0, 0), (0, 128, 0), (64, 64, 128)]


def test_colour_masks_map_to_classes_with_colors(tmp_path: Path) -> None:
    """CamVid-style RGB masks: each class drawn in its colour; stored as class indices."""
    classes = np.random.default_rng(2).integers(0, len(COLORS), (6, 8)).astype(np.uint8)
    rgb = np.asarray(COLORS, np.uint8)[classes]
    coloured = tfpipe.Mask(shape=(6, 8, 1), colors=COLORS)
    assert coloured.num_classes == len(COLORS)
    schema = tfpipe.Schema({"mask": coloured})
    assert tfpipe.Schema.from_json(schema.to_json()) == schema
    png = _saved(rgb, "RGB")
    palette = PILImage.open(io.BytesIO(png)).quantize(len(COLORS))  # the colours in a palette
    assert palette.mode == "P"
    for value in (png, palette, rgb, classes):  # (H, W) arrays are class values
        np.testing.assert_array_equal(coloured.load(value)[..., 0], classes)
    source = tfpipe.from_arrays({"mask": rgb[np.newaxis]}, schema=schema)
    tfpipe.write_tfrecords(source, tmp_path / "colours", progress=False)
    stored = next(iter(tfpipe.read_tfrecords(tmp_path / "colours")))["mask"].numpy()
    np.testing.assert_array_equal(stored[..., 0], classes)
    records = tfpipe.from_tfrecords(tmp_path / "colours")  # stored indices stay indices
    np.testing.assert_array_equal(records.schema.load(records[0])["mask"][..., 0], classes)


@pytest.mark.fault(
    "a colour that is no class in an RGB mask read with Mask(colors=...)",
    reader="Mask.load, write_tfrecords",
    outcome="ValueError naming the colour, its row and column",
)
def test_an_unknown_colour_is_named() -> None:
    rgb = np.zeros((3, 4, 3), np.uint8)
    rgb[2, 1] = (1, 2, 3)
    coloured = tfpipe.Mask(colors=COLORS)
    with pytest.raises(ValueError, match=re.escape("mask colour (1, 2, 3) at row 2, column 1")):
        coloured.load(_saved(rgb, "RGB"))
    with pytest.raises(ValueError, match="JPEG mask is lossy"):
        coloured.load(_saved(rgb, "RGB", "JPEG"))


def test_masks_of_undeclared_size_are_resized_one_by_one(segmentation, tmp_path: Path) -> None:
    free = tfpipe.Mask(num_classes=8, ignore_value=255)  # (None, None, 1)
    prefix = tmp_path / "free"
    source = _source(segmentation, free)
    tfpipe.write_tfrecords(source, prefix, num_shards=1, shuffle=False, progress=False)
    batch = next(iter(tfpipe.Pipeline(prefix, image_size=(5, 7)).batch(COUNT).build()))
    _assert_masks(batch["mask"].numpy(), (5, 7))
    _assert_masks(np.stack([e["mask"] for e in tfpipe.read_tfrecords(prefix).as_numpy_iterator()]))
    with pytest.raises(SchemaError, match="mask: masks of variable size cannot be batched"):
        tfpipe.Pipeline(prefix).batch(COUNT).build()


def _gray_png(bits: int, row: list[int]) -> bytes:
    """A one-row grayscale PNG of `bits` bits per pixel holding the packed bytes `row`."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = struct.pack(">I", zlib.crc32(kind + data))
        return struct.pack(">I", len(data)) + kind + data + crc

    header = struct.pack(">IIBBBBB", 8 // bits * len(row), 1, bits, 0, 0, 0, 0)
    body = zlib.compress(b"\0" + bytes(row))
    chunks = chunk(b"IHDR", header) + chunk(b"IDAT", body) + chunk(b"IEND", b"")
    return b"\x89PNG\r\n\x1a\n" + chunks


@pytest.mark.parametrize(
    ("bits", "row", "values"),
    [(1, [0b10100000], [1, 0, 1, 0, 0, 0, 0, 0]), (2, [0b00011011], [0, 1, 2, 3]),
     (4, [0x01, 0x2F], [0, 1, 2, 15])],
)  # fmt: skip
def test_low_bit_grayscale_pngs_give_their_stored_values(bits, row, values) -> None:
    """Pillow scales 2- and 4-bit gray to 0..255 (1 -> 85, 1 -> 17); a mask must not."""
    assert tfpipe.Mask().load(_gray_png(bits, row))[0, :, 0].tolist() == values


@pytest.mark.fault(
    "mask value above num_classes in a DataFrame's mask file",
    reader="Pipeline over from_dataframe (a plain loop, named_errors over a derived dataset)",
    outcome="DecodeError naming the file, feature, value and row, as SequenceLoader's (was: "
    "no row, and TensorFlow's 'ValueError: ...' repeated after it)",
)
def test_an_out_of_range_mask_in_a_dataframe_is_named_by_row(segmentation, tmp_path) -> None:
    make, name, _ = BAD_MASKS["range"]
    source = _with_bad_mask(segmentation, tmp_path, make(), name)
    path = str(tmp_path / name)
    loader = tfpipe.SequenceLoader(source, batch_size=COUNT, y="mask", image_size=SHAPE)
    with pytest.raises(DecodeError) as by_loader:
        loader[0]
    said = str(by_loader.value).removeprefix(f"mask: {path}: ")
    assert said.startswith("mask value 10 at row ") and said.endswith(
        f" in row {COUNT - 1} ({segmentation[0] / f'image{COUNT - 1}.png'})"
    )
    expected = f"{path}, feature 'mask': {said}; fix or remove the file"
    pipeline = tfpipe.Pipeline(source).batch(2)
    with pytest.raises(DecodeError) as plain_loop:
        list(pipeline.build())
    with pytest.raises(DecodeError) as named, tfpipe.named_errors(pipeline):
        list(pipeline.build().unbatch())
    for caught in (plain_loop, named):
        assert str(caught.value) == expected
