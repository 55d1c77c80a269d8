"""What the writer vouches for of the images it stored ("stored_images" in the metadata): the
formats and that every JPEG is upright, so that readers decode with a graph of those formats
only and no EXIF read; older metadata, foreign records and a schema given by hand keep the
full decode."""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image as PILImage

import tfpipe
from tfpipe.errors import SchemaError
from tfpipe.features.decoding import StoredImages
from tfpipe.format.metadata import DatasetInfo

SIZE = (12, 8)  # height, width as stored; EXIF orientations 5-8 turn it to (8, 12)
SQUARE = (8, 8)  # turned or not, one size: a batch of them needs no resize (exact pixels)


def _jpeg(orientation: int, seed: int, size: tuple[int, int] = SIZE) -> bytes:
    """A JPEG of random pixels with an EXIF orientation tag (1: upright)."""
    pixels = np.random.default_rng(seed).integers(0, 256, (*size, 3), dtype=np.uint8)
    exif = PILImage.Exif()
    exif[0x0112] = orientation
    buffer = io.BytesIO()
    PILImage.fromarray(pixels).save(buffer, "JPEG", quality=90, exif=exif)
    return buffer.getvalue()


@pytest.fixture(scope="module")
def turned_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One class folder of 8 JPEGs, one per EXIF orientation 1-8."""
    root = tmp_path_factory.mktemp("turned")
    (root / "all").mkdir()
    for orientation in range(1, 9):
        (root / "all" / f"{orientation}.jpg").write_bytes(_jpeg(orientation, orientation))
    return root


def _metadata(prefix: Path) -> dict:
    return json.loads(prefix.with_suffix(".json").read_text())


def _without_stored_images(prefix: Path) -> None:
    """The metadata as tfpipe wrote it before it recorded what it stored."""
    data = _metadata(prefix)
    del data["stored_images"]
    prefix.with_suffix(".json").write_text(json.dumps(data))


def _images(source: object, **options: object) -> tuple[np.ndarray, str]:
    pipeline = tfpipe.Pipeline(source, **options).options(deterministic=True).batch(64)
    return next(iter(pipeline.build()))["image"].numpy(), pipeline.explain()


def test_the_writer_records_the_formats_it_stored_and_that_jpegs_are_upright(
    tmp_path: Path, turned_folder: Path
) -> None:
    (tmp_path / "mixed" / "all").mkdir(parents=True)
    (tmp_path / "mixed" / "all" / "a.jpg").write_bytes(_jpeg(6, 0))
    PILImage.new("RGB", (8, 8)).save(tmp_path / "mixed" / "all" / "b.bmp")  # stored as PNG
    written = {
        "jpegs": tfpipe.from_directory(turned_folder, class_names=["all"]),
        "mixed": tfpipe.from_directory(tmp_path / "mixed", class_names=["all"]),
    }
    for name, source in written.items():
        tfpipe.write_tfrecords(source, tmp_path / "out" / name, progress=False)
    assert _metadata(tmp_path / "out" / "jpegs")["stored_images"] == {
        "image": {"formats": ["jpeg"], "upright": True}
    }
    assert _metadata(tmp_path / "out" / "mixed")["stored_images"] == {
        "image": {"formats": ["jpeg", "png"], "upright": True}
    }
    raw = tfpipe.Schema({"image": tfpipe.Image(shape=(4, 4, 3), encoding="raw")})
    arrays = tfpipe.from_arrays({"image": np.zeros((2, 4, 4, 3), np.uint8)}, raw)
    tfpipe.write_tfrecords(arrays, tmp_path / "out" / "raw", progress=False)
    assert _metadata(tmp_path / "out" / "raw")["stored_images"] == {}
    info = DatasetInfo.load(tmp_path / "out" / "jpegs")
    assert info.schema["image"].storage == StoredImages(("jpeg",), upright=True)
    assert "kind" in _metadata(tmp_path / "out" / "jpegs")["schema"]["image"]
    assert "storage" not in _metadata(tmp_path / "out" / "jpegs")["schema"]["image"]


def test_records_vouched_upright_decode_the_pixels_of_the_full_decode(
    tmp_path: Path, turned_folder: Path
) -> None:
    """Written by tfpipe (the turned JPEGs stored upright): the same pixels with the metadata's
    facts (no EXIF read, the JPEG branch only) as with the full decode of older metadata, and
    Pillow's decode of the stored JPEGs within the resize's 1/255; at a DCT scale too."""
    prefix = tmp_path / "out" / "train"
    info = tfpipe.write_tfrecords(
        tfpipe.from_directory(turned_folder, class_names=["all"]),
        prefix,
        shuffle=False,
        progress=False,
    )
    records = tf.data.TFRecordDataset([str(f) for f in info.files])
    stored = [info.schema.stored(record.numpy())["image"] for record in records]
    expected = np.stack([tfpipe.Image().load(data, (6, 6)) for data in stored])
    vouched, stages = _images(prefix, image_size=(6, 6))
    assert "no EXIF orientations to read" in stages
    reduced, _ = _images(prefix, image_size=(3, 3))
    _without_stored_images(prefix)
    full, stages = _images(prefix, image_size=(6, 6))
    assert "read the EXIF orientation of every JPEG" in stages
    np.testing.assert_array_equal(vouched, full)
    assert np.abs(vouched.astype(int) - expected).max() <= 1  # the resize: within 1/255
    np.testing.assert_array_equal(reduced, _images(prefix, image_size=(3, 3))[0])


def _foreign_records(path: Path, jpegs: list[bytes]) -> None:
    with tf.io.TFRecordWriter(str(path)) as writer:
        for data in jpegs:
            feature = tf.train.Feature(bytes_list=tf.train.BytesList(value=[data]))
            example = tf.train.Example(features=tf.train.Features(feature={"image": feature}))
            writer.write(example.SerializeToString())


@pytest.mark.fault(
    "JPEGs with EXIF orientation 2-8 under metadata that predates stored_images",
    reader="Pipeline over records",
    outcome="turned upright, as Image.load (the full decode)",
)
def test_older_metadata_still_turns_exif_rotated_jpegs_upright(tmp_path: Path) -> None:
    """Metadata without "stored_images" (older tfpipe, or shards replaced since) vouches for
    nothing: the EXIF orientation is read and applied."""
    schema = tfpipe.Schema({"image": tfpipe.Image(shape=(8, 8, 3))})
    source = tfpipe.from_arrays({"image": np.zeros((8, 8, 8, 3), np.uint8)}, schema)
    prefix = tmp_path / "old"
    info = tfpipe.write_tfrecords(source, prefix, num_shards=1, shuffle=False, progress=False)
    jpegs = [_jpeg(orientation, orientation, SQUARE) for orientation in range(1, 9)]
    _foreign_records(info.files[0], jpegs)  # turned JPEGs, as a foreign writer stores them
    data = _metadata(prefix)
    data["shards"][0]["num_bytes"] = info.files[0].stat().st_size
    data["shards"][0]["crc32c"] = None
    prefix.with_suffix(".json").write_text(json.dumps(data))
    _without_stored_images(prefix)
    images, stages = _images(prefix)
    assert "read the EXIF orientation of every JPEG" in stages
    for orientation, (data_, got) in enumerate(zip(jpegs, images, strict=True), start=1):
        np.testing.assert_array_equal(got, tfpipe.Image().load(data_), err_msg=orientation)


def test_a_schema_given_by_hand_never_carries_another_datasets_facts(
    tmp_path: Path, turned_folder: Path
) -> None:
    """`schema=` from the metadata of other records (which vouches for upright JPEGs) read
    with foreign records of turned JPEGs: the facts come from the records' own metadata
    (none here), so the JPEGs are still turned upright."""
    prefix = tmp_path / "tfpipe"
    tfpipe.write_tfrecords(
        tfpipe.from_directory(turned_folder, class_names=["all"]), prefix, progress=False
    )
    vouched = DatasetInfo.load(prefix).schema
    assert vouched["image"].storage is not None
    jpegs = [_jpeg(orientation, orientation, SQUARE) for orientation in range(1, 9)]
    _foreign_records(tmp_path / "foreign.tfrecord", jpegs)
    image = dataclasses.replace(vouched["image"], shape=(*SQUARE, 3))
    assert image.storage is not None
    schema = tfpipe.Schema({"image": image})
    images, stages = _images(str(tmp_path / "foreign.tfrecord"), schema=schema)
    assert "read the EXIF orientation of every JPEG" in stages
    for orientation, (data, got) in enumerate(zip(jpegs, images, strict=True), start=1):
        np.testing.assert_array_equal(got, tfpipe.Image().load(data), err_msg=orientation)


@pytest.mark.parametrize(
    "entry",
    [
        {"formats": ["gif"], "upright": True},
        {"formats": [], "upright": True},
        {"formats": ["jpeg"], "upright": "yes"},
        {"formats": ["jpeg"]},
    ],
)
def test_a_stored_images_entry_that_is_not_valid_is_named(tmp_path: Path, entry: dict) -> None:
    schema = tfpipe.Schema({"image": tfpipe.Image(shape=(4, 4, 3))})
    source = tfpipe.from_arrays({"image": np.zeros((2, 4, 4, 3), np.uint8)}, schema)
    tfpipe.write_tfrecords(source, tmp_path / "t", progress=False)
    data = _metadata(tmp_path / "t")
    data["stored_images"] = {"image": entry}
    (tmp_path / "t.json").write_text(json.dumps(data))
    with pytest.raises(SchemaError, match=r"t\.json.*stored images"):
        DatasetInfo.load(tmp_path / "t")
