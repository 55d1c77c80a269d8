"""`tfpipe.verify`, `tfpipe verify`, and raw TensorFlow errors turned into named DecodeErrors."""

from __future__ import annotations

import gzip
import json
import re
import shutil
import struct
from collections.abc import Callable
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf

import tfpipe
from tfpipe.cli.parser import main
from tfpipe.errors import DecodeError, TfpipeError, TfpipeWarning
from tfpipe.format.metadata import DatasetInfo, ShardInfo
from tfpipe.records import VerifyReport
from tfpipe.sources.synthetic import make_image_folder

SHAPE = (40, 48, 3)  # the conftest image_folder: 36 JPEGs of 40x48, 3 classes


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory, image_folder: Path) -> Path:
    """36 examples in 2 uncompressed shards of 18, in source order; copy before damaging."""
    prefix = tmp_path_factory.mktemp("written") / "train"
    src = tfpipe.from_directory(image_folder, image_shape=SHAPE)
    tfpipe.write_tfrecords(src, prefix, num_shards=2, shuffle=False, progress=False)
    return prefix


def _copy(prefix: Path, folder: Path) -> Path:
    shutil.copytree(prefix.parent, folder)
    return folder / prefix.name


def _shard(prefix: Path, index: int) -> Path:
    return DatasetInfo.load(prefix).files[index]


def _offset(file: Path, record: int) -> int:
    """The byte offset of a record's frame in an uncompressed TFRecord file."""
    data, position = file.read_bytes(), 0
    for _ in range(record):
        position += 16 + struct.unpack_from("<Q", data, position)[0]
    return position


def _flip_payload(file: Path, record: int, at: int = 30) -> None:
    data = bytearray(file.read_bytes())
    data[_offset(file, record) + 12 + at] ^= 0xFF
    file.write_bytes(bytes(data))


def _write_records(path: Path, records: list[bytes]) -> Path:
    with tf.io.TFRecordWriter(str(path)) as writer:
        for record in records:
            writer.write(record)
    return path


def _schema() -> tfpipe.Schema:
    return tfpipe.Schema(
        {
            "image": tfpipe.Image(shape=(8, 8, 3), encoding="png"),
            "label": tfpipe.ClassLabel(num_classes=2),
        }
    )


def _example(schema: tfpipe.Schema, image: np.ndarray | bytes, label: int = 0) -> bytes:
    if isinstance(image, bytes):  # stored as given, whatever it holds
        feature = tf.train.Feature(bytes_list=tf.train.BytesList(value=[image]))
        label_feature = tf.train.Feature(int64_list=tf.train.Int64List(value=[label]))
        example = tf.train.Example(
            features=tf.train.Features(feature={"image": feature, "label": label_feature})
        )
        return example.SerializeToString()
    return schema.encode({"image": image, "label": label})


def _pixels(seed: int, size: tuple[int, int] = (8, 8)) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (*size, 3), dtype=np.uint8)


def _faults(report: VerifyReport) -> list[tuple[str, int | None, str | None]]:
    return [(Path(f.file).name, f.record, f.feature) for f in report.faults]


def test_a_sound_dataset_verifies_clean(written: Path) -> None:
    report = tfpipe.verify(written, progress=False)
    assert report.ok and report.faults == () and report.notes == ()
    assert (report.num_records, report.num_images, report.expected_records) == (36, 36, 36)
    assert report.summary().endswith(
        "36 records (metadata: 36) in 2 file(s), 36 images decoded: OK"
    )


def test_raw_records_say_their_sizes_were_checked(tmp_path: Path) -> None:
    schema = tfpipe.Schema(
        {
            "image": tfpipe.Image(shape=(8, 8, 3), encoding="raw"),
            "label": tfpipe.ClassLabel(num_classes=2),
        }
    )
    examples = [{"image": _pixels(seed), "label": seed % 2} for seed in range(4)]
    tfpipe.write_tfrecords(examples, tmp_path / "raw", schema, progress=False)
    report = tfpipe.verify(tmp_path / "raw", progress=False)
    assert (report.num_images, report.num_raw_images) == (0, 4)
    assert report.summary().endswith(
        "4 raw images' pixel counts checked against the schema's shape "
        "(raw pixels need no decoding): OK"
    )
    assert "images decoded" not in report.summary()


def test_gzip_shards_verify_and_files_without_metadata_say_so(
    image_folder: Path, tmp_path: Path
) -> None:
    src = tfpipe.from_directory(image_folder, image_shape=SHAPE)
    info = tfpipe.write_tfrecords(
        src, tmp_path / "gz", num_shards=2, compression="gzip", progress=False
    )
    assert tfpipe.verify(tmp_path / "gz", progress=False).ok
    report = tfpipe.verify(info.files[1], progress=False)  # one shard: its metadata is found
    assert report.ok and report.num_records == 18 and report.expected_records == 18
    plain = tmp_path / "plain.tfrecord.gz"
    shutil.copy(info.files[1], plain)
    report = tfpipe.verify(plain, progress=False)
    assert report.ok and report.num_records == 18 and report.expected_records is None
    assert not report.checked and "UNCHECKED" in report.summary()
    assert report.notes == (
        "note: no tfpipe metadata, so record counts, sizes and checksums were not checked: a "
        "shard cut short at a record boundary reads as sound; keep <prefix>.json beside the "
        "shards",
    )


@pytest.mark.fault(
    "flipped payload byte in a shard",
    reader="verify",
    outcome="fault naming shard and record; counts left unchecked",
)
def test_a_flipped_byte_is_found_at_its_record(written: Path, tmp_path: Path) -> None:
    prefix = _copy(written, tmp_path / "copy")
    _flip_payload(_shard(prefix, 1), 5)
    report = tfpipe.verify(prefix, progress=False)
    assert _faults(report) == [("train-00001-of-00002.tfrecord", 5, None)]
    assert "corrupted record" in report.faults[0].message
    assert report.num_records == 18 + 5
    assert tfpipe.locate_fault(prefix) == report.faults[0]


@pytest.mark.fault(
    "gzip shard with a flipped byte", reader="verify", outcome="fault naming the shard and record"
)
def test_a_damaged_gzip_shard_is_a_fault(written: Path, tmp_path: Path) -> None:
    data = bytearray(gzip.compress(_shard(written, 0).read_bytes()))
    data[len(data) // 2] ^= 0xFF
    damaged = tmp_path / "part.tfrecord.gz"
    damaged.write_bytes(bytes(data))
    report = tfpipe.verify(damaged, schema=DatasetInfo.load(written).schema, progress=False)
    assert not report.ok
    assert [(f.file, f.feature) for f in report.faults] == [(str(damaged), None)]
    assert report.faults[0].record is not None and report.faults[0].record < 18


def _verify_cut(written: Path, tmp_path: Path, shard: int, end: int) -> VerifyReport:
    """Verifies a copy of `written` whose shard `shard` is cut at byte `end`."""
    prefix = _copy(written, tmp_path / "copy")
    file = _shard(prefix, shard)
    file.write_bytes(file.read_bytes()[:end])
    return tfpipe.verify(prefix, progress=False)


@pytest.mark.fault(
    "shard truncated inside a record",
    reader="verify",
    outcome="faults: the record cut, the size against the metadata",
)
def test_a_truncated_shard_names_the_record_and_the_size(written: Path, tmp_path: Path) -> None:
    data = _shard(written, 0).read_bytes()
    cut = _offset(_shard(written, 0), 7) + 40
    report = _verify_cut(written, tmp_path, 0, cut)
    assert _faults(report) == [
        ("train-00000-of-00002.tfrecord", 7, None),
        ("train-00000-of-00002.tfrecord", None, None),
    ]
    assert report.faults[1].message == f"the file has {cut} bytes, the metadata says {len(data)}"


@pytest.mark.fault(
    "shard truncated at a record boundary",
    reader="verify",
    outcome="faults: shard and total counts against the metadata",
)
def test_a_shard_cut_at_a_record_boundary_fails_the_counts(written: Path, tmp_path: Path) -> None:
    report = _verify_cut(written, tmp_path, 1, _offset(_shard(written, 1), 10))
    messages = [f.message for f in report.faults]
    assert messages[1:] == [
        "the file holds 10 records, the metadata says 18",
        "the shards hold 28 records, the metadata says 36",
    ]
    assert [Path(f.file).name for f in report.faults] == [
        "train-00001-of-00002.tfrecord",
        "train-00001-of-00002.tfrecord",
        "train.json",
    ]


@pytest.mark.fault(
    "shard truncated at a record boundary, its metadata file lost too",
    reader="verify, tfpipe verify",
    outcome="no fault can be found: report.checked False, summary UNCHECKED, exit status 3 "
    "(was: OK, exit 0)",
)
def test_a_cut_shard_without_metadata_is_unchecked_not_ok(
    written: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prefix = _copy(written, tmp_path / "copy")
    shard = _shard(prefix, 1)
    (prefix.parent / "train.json").unlink()
    shard.write_bytes(shard.read_bytes()[: _offset(shard, 10)])
    shards = str(prefix.parent / "train-*")
    with pytest.warns(TfpipeWarning, match="sizes and checksums cannot be checked"):
        report = tfpipe.verify(shards, progress=False)
    assert report.ok and not report.checked and report.num_records == 18 + 10
    assert report.summary().endswith(
        "28 records in 2 file(s), 28 images decoded: UNCHECKED, no fault in the records read "
        "but no tfpipe metadata, so record counts, sizes and checksums were not checked"
    )
    assert main(["verify", shards]) == 3
    out = capsys.readouterr().out
    assert "UNCHECKED" in out and "a shard cut short at a record boundary reads as sound" in out
    assert main(["verify", str(written)]) == 0  # with its metadata: checked, OK
    _flip_payload(shard, 3)
    assert main(["verify", shards]) == 1  # a fault found outranks "unchecked"


@pytest.mark.fault(
    "zero-byte and deleted shards", reader="verify", outcome="one fault per shard, named"
)
def test_empty_and_missing_shards_are_faults(written: Path, tmp_path: Path) -> None:
    prefix = _copy(written, tmp_path / "copy")
    _shard(prefix, 0).write_bytes(b"")
    _shard(prefix, 1).unlink()
    report = tfpipe.verify(prefix, progress=False)
    assert [f.message.split(":")[0] for f in report.faults] == [
        "the file is empty (0 bytes)",
        "the file has 0 bytes, the metadata says " + str(_shard(written, 0).stat().st_size),
        "the file holds 0 records, the metadata says 18",
        "listed in the metadata but missing",
    ]


@pytest.mark.fault(
    "non-Example record, undecodable and wrong-size images, missing feature",
    reader="verify",
    outcome="one fault per record, naming the feature",
)
def test_record_level_faults_name_record_and_feature(tmp_path: Path) -> None:
    schema = _schema()
    tensor_only = tf.train.Example(
        features=tf.train.Features(
            feature={"label": tf.train.Feature(int64_list=tf.train.Int64List(value=[1]))}
        )
    ).SerializeToString()
    file = _write_records(
        tmp_path / "mixed.tfrecord",
        [
            _example(schema, _pixels(0)),
            b"\xff\xfe not a protobuf \x80",
            _example(schema, b"\x89PNG\r\n\x1a\n garbage"),
            _example(
                schema,
                tfpipe.Image(shape=(6, 8, 3), encoding="png").encode_bytes(_pixels(1, (6, 8))),
            ),
            tensor_only,
            _example(schema, _pixels(2)),
        ],
    )
    report = tfpipe.verify(file, schema=schema, progress=False)
    assert [(f.record, f.feature) for f in report.faults] == [
        (1, None),
        (2, "image"),
        (3, "image"),
        (4, "image"),
    ]
    messages = [f.message for f in report.faults]
    assert messages[0].startswith("not a serialized tf.train.Example")
    assert messages[1].startswith("cannot be decoded: ")
    assert messages[2] == "image is 6x8, the schema declares 8x8"
    assert messages[3] == "missing; the record has ['label']"
    assert report.num_records == 6 and report.num_images == 4


def test_verify_command_prints_faults_capped_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    schema = _schema()
    file = _write_records(
        tmp_path / "bad.tfrecord", [_example(schema, b"not an image") for _ in range(25)]
    )
    DatasetInfo(
        name="bad",
        directory=tmp_path,
        schema=schema,
        num_examples=25,
        shards=(ShardInfo(file.name, 25, file.stat().st_size),),
    ).save()
    assert main(["verify", str(tmp_path / "bad"), "--max-faults", "3"]) == 1
    lines = capsys.readouterr().out.splitlines()
    summary = "25 records (metadata: 25) in 1 file(s), 25 images decoded: 25 fault(s)"
    assert lines[0] == f"{tmp_path / 'bad'}: {summary}"
    assert lines[1].startswith(f"  record 0 of {file}, feature 'image': cannot be decoded: ")
    assert lines[4:] == ["  ... and 22 more fault(s)"]


def test_verify_command_exits_0_when_clean_and_2_on_usage_errors(
    written: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["verify", str(written)]) == 0
    assert capsys.readouterr().out.endswith("36 images decoded: OK\n")
    assert main(["verify", str(tmp_path / "nothing")]) == 2
    assert "nothing.json' does not exist" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit:
        main(["verify", str(written), "--max-faults", "0"])
    assert exit.value.code == 2


def _assert_named(error: pytest.ExceptionInfo[DecodeError], where: str) -> None:
    assert re.search(where, str(error.value)), str(error.value)
    assert isinstance(error.value.__cause__, tf.errors.OpError | UnicodeDecodeError)


def _model() -> keras.Model:
    model = keras.Sequential(
        [keras.Input(SHAPE), keras.layers.GlobalAveragePooling2D(), keras.layers.Dense(3)]
    )
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def _fit(prefix: Path) -> None:
    tfpipe.fit(_model(), prefix, batch_size=4, report=False, verbose=0)


def _benchmark(prefix: Path) -> None:
    tfpipe.benchmark(prefix, batches=20, batch_size=4)


def _fault(reader: str) -> pytest.MarkDecorator:
    return pytest.mark.fault(
        "flipped payload byte in a shard",
        reader=reader,
        outcome="DecodeError naming shard and record; DataLossError as cause",
    )


@pytest.mark.parametrize(
    "run",
    [
        pytest.param(_fit, marks=_fault("tfpipe.training.fit"), id="fit"),
        pytest.param(_benchmark, marks=_fault("benchmark"), id="benchmark"),
    ],
)
def test_fit_and_benchmark_name_the_damaged_record(
    run: Callable[[Path], None], written: Path, tmp_path: Path
) -> None:
    prefix = _copy(written, tmp_path / "copy")
    _flip_payload(_shard(prefix, 1), 4)
    with pytest.raises(DecodeError) as error:
        run(prefix)
    _assert_named(error, r"^record 4 of .+train-00001-of-00002\.tfrecord: damaged .*corrupted")
    assert isinstance(error.value.__cause__, tf.errors.DataLossError)


@pytest.mark.fault(
    "non-Example record (UnicodeDecodeError from TF)",
    reader="Pipeline, read_tfrecords + named_errors",
    outcome="DecodeError naming file and record",
)
def test_a_non_example_record_is_named_in_pipeline_and_read_tfrecords(tmp_path: Path) -> None:
    schema = _schema()
    records = [_example(schema, _pixels(i)) for i in range(4)]
    records.insert(2, b"\xff\xfe not a protobuf \x80")
    file = _write_records(tmp_path / "mixed.tfrecord", records)
    pipeline = tfpipe.Pipeline(file, schema=schema).batch(2)
    with pytest.raises(UnicodeDecodeError):  # TensorFlow's, from a derived dataset
        list(pipeline.build().unbatch())
    with pytest.raises(DecodeError) as error, tfpipe.named_errors(pipeline):
        list(pipeline.build().unbatch())
    _assert_named(error, rf"^record 2 of {re.escape(str(file))}: not a serialized")
    with pytest.raises(DecodeError) as error:  # the built dataset names it itself
        list(pipeline.build())
    _assert_named(error, rf"^record 2 of {re.escape(str(file))}: not a serialized")
    with pytest.raises(DecodeError) as error, tfpipe.named_errors(file):
        list(tfpipe.read_tfrecords(file, schema=schema))
    _assert_named(error, r"^record 2 of \S*mixed\.tfrecord:? (is )?not a serialized")


@pytest.mark.fault(
    "corrupt JPEG in an image folder",
    reader="Pipeline + named_errors, tfpipe.fit",
    outcome="DecodeError naming the image file",
)
def test_a_bad_image_file_is_named(tmp_path: Path) -> None:
    folder = make_image_folder(tmp_path / "images", num_classes=3, per_class=4, size=SHAPE[:2])
    bad = folder / "square" / "square_00002.jpg"
    data = bad.read_bytes()
    bad.write_bytes(data[:200] + bytes(len(data) - 202) + data[-2:])  # header and end kept
    pipeline = (
        tfpipe.Pipeline(tfpipe.from_directory(folder, image_shape=SHAPE))
        .batch(4)
        .as_supervised("image", "label")
    )
    fault = pipeline.locate_fault()
    assert fault is not None and (fault.file, fault.record, fault.feature) == (
        str(bad),
        None,
        "image",
    )
    with pytest.raises(DecodeError) as error, tfpipe.named_errors(pipeline):
        list(pipeline.build())
    _assert_named(error, rf"^{re.escape(str(bad))}, feature 'image': cannot be decoded")
    with pytest.raises(DecodeError) as error:
        tfpipe.fit(_model(), pipeline, report=False, verbose=0)
    _assert_named(error, re.escape(str(bad)))


@pytest.mark.fault(
    "flipped payload byte in a shard",
    reader="tfpipe inspect",
    outcome="exit 2, one line naming shard and record",
)
def test_inspect_names_the_damaged_record(
    written: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prefix = _copy(written, tmp_path / "copy")
    shard = _shard(prefix, 0)
    _flip_payload(shard, 3)
    assert main(["inspect", str(shard)]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith(f"tfpipe inspect: error: {str(shard)!r} is not a readable"), error
    assert error.endswith(f"at record 3: corrupted record at {_offset(shard, 3) + 12}"), error


def test_errors_no_source_explains_pass_unchanged(written: Path) -> None:
    with pytest.raises(tf.errors.InvalidArgumentError), tfpipe.named_errors(written):
        tf.debugging.assert_equal(1, 2)  # not from an iterator: the data is not even read
    with pytest.raises(tf.errors.DataLossError), tfpipe.named_errors(written):
        raise tf.errors.DataLossError(None, None, "corrupted record at 5")  # the data is sound
    with pytest.raises(TypeError, match="named_errors takes"), tfpipe.named_errors(3):
        pass


def _png(pixels: np.ndarray) -> bytes:
    return tfpipe.Image(shape=(None, None, 3), encoding="png").encode_bytes(pixels)


def _broken_png(pixels: np.ndarray) -> bytes:
    """A PNG whose image data stops half way into a chunk of an unknown type: Pillow opens it
    and raises SyntaxError (not OSError) when it loads the pixels."""
    encoded = _png(pixels)
    at = encoded.index(b"IDAT")
    half = int.from_bytes(encoded[at - 4 : at], "big") // 2
    return (
        encoded[: at - 4]
        + half.to_bytes(4, "big")
        + encoded[at : at + 4 + half]
        + bytes(4)
        + b"\x07b0W"
        + encoded[at + 4 + half :]
    )


@pytest.mark.fault(
    "PNG with a broken chunk (Pillow's SyntaxError)",
    reader="SequenceLoader",
    outcome="DecodeError naming the file",
)
def test_a_broken_png_chunk_is_a_decode_error(tmp_path: Path) -> None:
    for label in ("a", "b"):
        (tmp_path / "images" / label).mkdir(parents=True)
        for i in range(2):
            (tmp_path / "images" / label / f"{i}.png").write_bytes(_png(_pixels(i, (64, 64))))
    bad = tmp_path / "images" / "b" / "1.png"
    bad.write_bytes(_broken_png(_pixels(1, (64, 64))))
    src = tfpipe.from_directory(tmp_path / "images", image_shape=(64, 64, 3))
    loader = tfpipe.SequenceLoader(src, batch_size=1, shuffle=False)
    with pytest.raises(DecodeError, match=re.escape(str(bad))) as error:
        for index in range(len(loader)):
            loader[index]
    assert isinstance(error.value.__cause__.__cause__, SyntaxError)


@pytest.mark.fault(
    "5 bytes appended to a shard (TF's reader ignores them)",
    reader="verify",
    outcome="fault naming the file, with or without metadata",
)
def test_a_partial_frame_at_the_end_is_a_fault(written: Path, tmp_path: Path) -> None:
    prefix = _copy(written, tmp_path / "copy")
    shard = _shard(prefix, 1)
    shard.write_bytes(shard.read_bytes() + b"\x07" * 5)
    assert len(list(tf.data.TFRecordDataset(str(shard)))) == 18  # TensorFlow sees nothing wrong
    alone = tfpipe.verify(shutil.copy(shard, tmp_path / "alone.tfrecord"), progress=False)
    assert _faults(alone) == [("alone.tfrecord", 18, None)]
    assert alone.faults[0].message.startswith("5 byte(s) after the last record: a partial frame")
    assert len(tfpipe.verify(prefix, progress=False).faults) == 2  # and the size


@pytest.mark.fault(
    "shard truncated at a record boundary",
    reader="Pipeline + named_errors",
    outcome="tfpipe error naming the shard; never fewer examples",
)
def test_a_short_shard_is_named_not_read_short(written: Path, tmp_path: Path) -> None:
    prefix = _copy(written, tmp_path / "copy")
    shard = _shard(prefix, 1)
    shard.write_bytes(shard.read_bytes()[: _offset(shard, 10)])
    with pytest.raises(TfpipeError, match=re.escape(str(shard))) as error:
        pipeline = tfpipe.Pipeline(prefix).batch(4)
        with tfpipe.named_errors(pipeline):
            list(pipeline.build())
    assert "metadata" in str(error.value)


def _fixed_size(prefix: Path, seed: int, labels: np.ndarray | None = None) -> DatasetInfo:
    """20 records of one size each (ids and labels as int64), in 2 shards, shuffled by `seed`."""
    ids = np.arange(20)
    columns = {"id": ids, "label": ids % 2 if labels is None else labels}
    schema = tfpipe.Schema({"id": tfpipe.Tensor(()), "label": tfpipe.ClassLabel(num_classes=2)})
    return tfpipe.write_tfrecords(
        tfpipe.from_arrays(columns, schema),
        prefix,
        num_shards=2,
        seed=seed,
        shuffle=labels is None,
        on_error="raise" if labels is None else "skip",
        progress=False,
    )


@pytest.mark.fault(
    "shard swapped for one of another write (same size and count)",
    reader="verify",
    outcome="fault naming the shard: its CRC-32C differs from the metadata's",
)
def test_a_swapped_shard_fails_its_digest(tmp_path: Path) -> None:
    ours = _fixed_size(tmp_path / "ours" / "train", seed=0)
    other = _fixed_size(tmp_path / "other" / "train", seed=1)
    assert [s.num_bytes for s in ours.shards] == [s.num_bytes for s in other.shards]
    shutil.copy(other.files[0], ours.files[0])
    report = tfpipe.verify(ours.files[0].parent / "train", progress=False)
    assert _faults(report) == [("train-00000-of-00002.tfrecord", None, None)]
    assert report.faults[0].message.startswith(
        f"its CRC-32C is {other.shards[0].crc32c}, the metadata says {ours.shards[0].crc32c}"
    )


def test_metadata_without_digests_still_loads_and_verifies(tmp_path: Path) -> None:
    info = _fixed_size(tmp_path / "train", seed=0)
    data = json.loads(info.metadata_path.read_text())
    for shard in data["shards"]:
        del shard["crc32c"]  # as tfpipe wrote metadata before it kept digests
    info.metadata_path.write_text(json.dumps(data))
    assert [s.crc32c for s in DatasetInfo.load(tmp_path / "train").shards] == [None, None]
    assert tfpipe.verify(tmp_path / "train", progress=False).ok


@pytest.mark.fault(
    "shard left empty by on_error='skip'",
    reader="verify",
    outcome="OK: the metadata lists it empty",
)
def test_a_shard_emptied_by_skips_verifies(tmp_path: Path) -> None:
    labels = np.array([5] * 10 + [0, 1] * 5)  # the first shard's 10 examples are skipped
    with pytest.warns(TfpipeWarning, match="skipped 10 of 20"):
        info = _fixed_size(tmp_path / "train", seed=0, labels=labels)
    assert [(s.num_examples, s.num_bytes) for s in info.shards] == [(0, 0), (10, 500)]
    report = tfpipe.verify(tmp_path / "train", progress=False)
    assert report.ok, str(report)
    info.files[1].write_bytes(b"")  # a shard the metadata says holds records is still a fault
    assert "the file is empty" in str(tfpipe.verify(tmp_path / "train", progress=False))


@pytest.mark.fault(
    "metadata edited: its total differs from its shards' counts",
    reader="verify, tfpipe verify",
    outcome="fault naming the metadata file, shards still checked; exit 1 (was 2, usage)",
)
def test_invalid_metadata_is_a_fault_of_the_dataset(
    written: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prefix = _copy(written, tmp_path / "copy")
    metadata = Path(f"{prefix}.json")
    metadata.write_text(metadata.read_text().replace('"num_examples": 36', '"num_examples": 37'))
    report = tfpipe.verify(prefix, progress=False)
    assert _faults(report) == [("train.json", None, None)]
    assert "declares 37 examples, but its shards add up to 36" in report.faults[0].message
    assert (report.num_records, report.num_images) == (36, 36)
    assert main(["verify", str(prefix)]) == 1
    assert f"  {metadata}: metadata file" in capsys.readouterr().out
