"""read_tfrecords: tfpipe's shards, plain-TF files both ways, gzip, paths, mismatched schemas."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

import tfpipe
from tfpipe import fs
from tfpipe.errors import DataNotFoundError, DecodeError, SchemaError, SourceError
from tfpipe.format.frames import first_record
from tfpipe.format.metadata import DatasetInfo


@pytest.fixture(scope="module")
def written(image_folder: Path, tmp_path_factory: pytest.TempPathFactory) -> DatasetInfo:
    src = tfpipe.from_directory(image_folder)
    out = tmp_path_factory.mktemp("written") / "train"
    return tfpipe.write_tfrecords(src, out, num_shards=3, shuffle=False, progress=False)


def _plain_tf_files(folder: Path, image_folder: Path, compression: str = "") -> list[Path]:
    """A plain TensorFlow script's output: TFDS-style keys, 2 files, JPEG bytes as stored."""
    paths = sorted(image_folder.glob("*/*.jpg"))[:6]
    files = [folder / "data-0.tfrecord", folder / "data-1.tfrecord"]
    for k, file in enumerate(files):
        with tf.io.TFRecordWriter(str(file), options=compression) as writer:
            for i, path in enumerate(paths[k::2]):
                feature = {
                    "image/encoded": tf.train.Feature(
                        bytes_list=tf.train.BytesList(value=[path.read_bytes()])
                    ),
                    "image/class/label": tf.train.Feature(
                        int64_list=tf.train.Int64List(value=[2 * i + k])
                    ),
                    "image/filename": tf.train.Feature(
                        bytes_list=tf.train.BytesList(value=[path.name.encode()])
                    ),
                }
                example = tf.train.Example(features=tf.train.Features(feature=feature))
                writer.write(example.SerializeToString())
    return files


def test_reads_a_prefix_in_the_order_written(written: DatasetInfo) -> None:
    examples = list(tfpipe.read_tfrecords(written.directory / written.name))
    assert len(examples) == written.num_examples == 36
    assert examples[0]["image"].dtype == tf.uint8 and examples[0]["image"].shape == (40, 48, 3)
    assert [int(e["label"]) for e in examples] == [0] * 12 + [1] * 12 + [2] * 12
    assert len(list(tfpipe.read_tfrecords(written.metadata_path))) == 36


def test_plain_tensorflow_reads_tfpipe_files(written: DatasetInfo) -> None:
    spec = {
        "image": tf.io.FixedLenFeature([], tf.string),
        "label": tf.io.FixedLenFeature([], tf.int64),
    }
    dataset = tf.data.TFRecordDataset([str(f) for f in written.files]).map(
        lambda record: tf.io.parse_single_example(record, spec)
    )
    examples = list(dataset)
    assert [int(e["label"]) for e in examples] == [0] * 12 + [1] * 12 + [2] * 12
    # tfpipe decodes with libjpeg's accurate IDCT, as Pillow does (TensorFlow's default differs)
    image = tf.io.decode_jpeg(examples[0]["image"], dct_method="INTEGER_ACCURATE")
    expected = next(iter(tfpipe.read_tfrecords(written.directory / written.name)))["image"]
    np.testing.assert_array_equal(image.numpy(), expected.numpy())


@pytest.mark.parametrize("compression", ["", "GZIP"])
def test_reads_files_written_by_plain_tensorflow(
    image_folder: Path, tmp_path: Path, compression: str
) -> None:
    files = _plain_tf_files(tmp_path, image_folder, compression)
    examples = list(tfpipe.read_tfrecords(tmp_path))
    assert len(examples) == 6
    assert sorted(int(e["image/class/label"]) for e in examples) == list(range(6))
    assert {e["image/encoded"].shape for e in examples} == {(40, 48, 3)}
    assert examples[0]["image/filename"].dtype == tf.string
    assert len(list(tfpipe.read_tfrecords(str(tmp_path / "data-*.tfrecord")))) == 6
    assert len(list(tfpipe.read_tfrecords([files[1]]))) == 3


def test_reads_gzip_written_by_tfpipe(tmp_path: Path) -> None:
    src = tfpipe.from_arrays({"x": np.arange(10.0), "label": np.arange(10) % 2})
    info = tfpipe.write_tfrecords(src, tmp_path / "z", compression="gzip", progress=False)
    assert all(f.name.endswith(".tfrecord.gz") for f in info.files)
    with gzip.open(info.files[0]) as f:
        assert f.read()  # really gzip
    assert sorted(float(e["x"]) for e in tfpipe.read_tfrecords(tmp_path / "z")) == list(
        np.arange(10.0)
    )
    renamed = tmp_path / "renamed.tfrecord"  # gzip detected by content, not by the suffix
    shutil.copy(info.files[0], renamed)
    assert len(list(tfpipe.read_tfrecords(renamed, schema=info.schema))) == 1


def test_explicit_schema_mismatch_names_the_feature_and_file(
    written: DatasetInfo,
) -> None:
    wrong = tfpipe.Schema({"image": tfpipe.Image(), "species": tfpipe.ClassLabel(num_classes=3)})
    with pytest.raises(DecodeError, match=r"species: missing from record 0 of train-0000"):
        tfpipe.read_tfrecords(written.files, schema=wrong)
    as_text = tfpipe.Schema({"label": tfpipe.Text()})
    with pytest.raises(DecodeError, match=r"label: expected one bytes value"):
        tfpipe.read_tfrecords(written.directory / written.name, schema=as_text)
    subset = tfpipe.Schema({"label": tfpipe.ClassLabel(num_classes=3)})
    assert {tuple(e) for e in tfpipe.read_tfrecords(written.files, schema=subset)} == {("label",)}


def test_missing_and_broken_paths_fail_clearly(tmp_path: Path) -> None:
    with pytest.raises(DataNotFoundError, match=r"metadata file .*nothing\.json"):
        tfpipe.read_tfrecords(tmp_path / "nothing")
    with pytest.raises(DataNotFoundError, match="no TFRecord files"):
        tfpipe.read_tfrecords(str(tmp_path / "*.tfrecord"))
    (tmp_path / "bad.tfrecord").write_bytes(b"definitely not a record file")
    with pytest.raises(DecodeError, match=r"bad\.tfrecord.* is not a readable TFRecord"):
        tfpipe.read_tfrecords(tmp_path / "bad.tfrecord")
    not_a_schema: object = {"x": "int"}
    with pytest.raises(SchemaError, match=r"schema must be a tfpipe\.Schema"):
        tfpipe.read_tfrecords(tmp_path / "bad.tfrecord", schema=not_a_schema)  # type: ignore


def test_mixed_compressions_are_refused(image_folder: Path, tmp_path: Path) -> None:
    plain = _plain_tf_files(tmp_path, image_folder)[0]
    zipped = tmp_path / "zipped.tfrecord.gz"
    with tf.io.TFRecordWriter(str(zipped), options="GZIP") as writer:
        for record in tf.data.TFRecordDataset(str(plain)):
            writer.write(record.numpy())
    with pytest.raises(ValueError, match="the files mix compressions"):
        tfpipe.read_tfrecords([plain, zipped])
    assert len(list(tfpipe.read_tfrecords([zipped]))) == 3


@pytest.mark.parametrize("compression", [None, "GZIP", "ZLIB"])
def test_the_first_record_read_in_python_is_tensorflows(
    tmp_path: Path, compression: str | None
) -> None:
    """`first_record` (the Pipeline's check of the first record, without tf.data) gives the
    record TensorFlow's reader gives, and refuses what it cannot vouch for."""
    path = tmp_path / "a.tfrecord"
    big = bytes(range(256)) * 1000  # over one read chunk: read in several
    with tf.io.TFRecordWriter(str(path), compression) as writer:
        writer.write(big)
        writer.write(b"second")
    kind = None if compression is None else compression.lower()
    assert first_record(fs.path(path), kind) == big
    (tmp_path / "empty.tfrecord").write_bytes(b"")
    assert first_record(fs.path(tmp_path / "empty.tfrecord"), kind) is None
    damaged = bytearray(path.read_bytes())
    damaged[len(damaged) // 2] ^= 0xFF
    (tmp_path / "damaged.tfrecord").write_bytes(bytes(damaged))
    with pytest.raises(SourceError, match=r"damaged\.tfrecord"):
        first_record(fs.path(tmp_path / "damaged.tfrecord"), kind)
    (tmp_path / "cut.tfrecord").write_bytes(path.read_bytes()[:100])
    with pytest.raises(SourceError, match=r"cut\.tfrecord"):
        first_record(fs.path(tmp_path / "cut.tfrecord"), kind)
