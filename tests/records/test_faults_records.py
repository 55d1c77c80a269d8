"""Broken TFRecord datasets through every reader: damaged bytes, short or long shards, lying
or missing metadata, interrupted writes, empty shards. Each ends in a named error or reads
exactly what was written."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tfpipe
from tfpipe.errors import DataNotFoundError, DecodeError, SchemaError, SourceError, TfpipeWarning
from tfpipe.format.frames import scan_offsets
from tfpipe.format.metadata import DatasetInfo
from tfpipe.format.resolution import resolve

SCHEMA = tfpipe.Schema(
    {"id": tfpipe.Tensor(shape=(), dtype="int64"), "label": tfpipe.ClassLabel(num_classes=3)}
)
COUNT, SHARDS = 24, 3  # 8 records a shard
SHARD = "train-00001-of-00003.tfrecord"
Reader = Callable[[Any], list[int]]


def from_tfrecords(path: Any) -> list[int]:
    src = tfpipe.from_tfrecords(path, schema=SCHEMA)
    return [int(src[i]["id"]) for i in range(len(src))]


def read_tfrecords(path: Any) -> list[int]:
    return [int(example["id"]) for example in tfpipe.read_tfrecords(path, schema=SCHEMA)]


def pipeline(path: Any) -> list[int]:
    batches = tfpipe.Pipeline(path, schema=SCHEMA).batch(8).build()
    return [int(i) for batch in batches for i in batch["id"]]


def sequence_loader(path: Any) -> list[int]:
    src = tfpipe.from_tfrecords(path, schema=SCHEMA)
    loader = tfpipe.SequenceLoader(src, batch_size=8, x="id", y="label", shuffle=False)
    return [int(i) for k in range(len(loader)) for i in loader[k][0]]


NAMES = {
    from_tfrecords: "from_tfrecords",
    read_tfrecords: "read_tfrecords",
    pipeline: "Pipeline",
    sequence_loader: "SequenceLoader over from_tfrecords",
}
TF_DATA = (read_tfrecords, pipeline)


def readers(
    fault: str,
    outcome: str,
    tf_data_outcome: str | None = None,
    among: tuple[Reader, ...] = (from_tfrecords, *TF_DATA),
) -> Any:
    """The readers as pytest params, each tagged with the fault and what must happen (for the
    tf.data readers, `tf_data_outcome` when it differs)."""
    return pytest.mark.parametrize(
        "read",
        [
            pytest.param(
                reader,
                id=reader.__name__,
                marks=pytest.mark.fault(
                    fault,
                    reader=NAMES[reader],
                    outcome=tf_data_outcome if tf_data_outcome and reader in TF_DATA else outcome,
                ),
            )
            for reader in among
        ],
    )


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = tfpipe.from_arrays(
        {"id": np.arange(COUNT), "label": np.arange(COUNT) % 3}, schema=SCHEMA
    )
    folder = tmp_path_factory.mktemp("template")
    tfpipe.write_tfrecords(
        source, folder / "train", num_shards=SHARDS, shuffle=False, progress=False
    )
    return folder


@pytest.fixture
def data(template: Path, tmp_path: Path) -> Path:
    """A fresh copy of 24 records {id: i} in 3 shards of 8, in id order, with train.json."""
    shutil.copytree(template, tmp_path / "data")
    return tmp_path / "data"


def offsets(shard: Path) -> list[int]:
    return scan_offsets(shard, shard.stat().st_size).tolist()


def flip(path: Path, position: int) -> None:
    """Flips one byte, keeping the modification time (as bit rot or a bad copy would)."""
    stat = path.stat()
    data = bytearray(path.read_bytes())
    data[position] ^= 0x40
    path.write_bytes(bytes(data))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def edit_metadata(folder: Path, change: Callable[[dict[str, Any]], None]) -> None:
    path = folder / "train.json"
    metadata = json.loads(path.read_text())
    change(metadata)
    path.write_text(json.dumps(metadata))


def size_error(folder: Path, found: int, declared: int) -> str:
    return re.escape(
        f"{folder / SHARD}' has {found} bytes, but the metadata file "
        f"'{folder / 'train.json'}' declares {declared} bytes"
    )


@readers(
    "bit flip in a record's data after indexing",
    "SourceError: corrupt, naming shard, record, byte offset",
    among=(from_tfrecords, sequence_loader),
)
def test_payload_bit_flip_fails_the_data_checksum(data: Path, read: Reader) -> None:
    assert read(data / "train") == list(range(COUNT))  # indexed while intact
    start = offsets(data / SHARD)[3]
    flip(data / SHARD, start + 12 + 2)
    message = rf"{SHARD}' is corrupt: record 3 at byte offset {start} fails the CRC-32C .* data"
    with pytest.raises(SourceError, match=message):
        read(data / "train")


@pytest.mark.fault(
    "bit flip in a length's checksum after indexing",
    reader="from_tfrecords",
    outcome="SourceError: corrupt, naming shard, record, byte offset",
)
def test_length_checksum_flip_after_indexing_fails_on_read(data: Path) -> None:
    src = tfpipe.from_tfrecords(data / "train")
    start = offsets(data / SHARD)[5]
    flip(data / SHARD, start + 9)
    with pytest.raises(SourceError, match=rf"record 5 at byte offset {start} .* length"):
        tfpipe.from_tfrecords(data / "train")[8 + 5]
    assert int(src[8 + 4]["id"]) == 12  # the records around it still read


@pytest.mark.fault(
    "bit flip in a record's length",
    reader="from_tfrecords",
    outcome="SourceError naming shard, record, byte offset when indexing",
)
def test_length_bit_flip_fails_when_indexing(data: Path) -> None:
    start = offsets(data / SHARD)[2]
    flip(data / SHARD, start + 1)
    message = rf"{SHARD}' is truncated or corrupt at byte offset {start} \(record 2\)"
    with pytest.raises(SourceError, match=message):
        tfpipe.from_tfrecords(data / "train")


@readers("shard truncated at a record boundary", "SourceError naming shard, bytes expected/found")
def test_truncated_at_a_record_boundary(data: Path, read: Reader) -> None:
    size = (data / SHARD).stat().st_size
    cut = offsets(data / SHARD)[5]
    os.truncate(data / SHARD, cut)
    for path in (data / "train", data, str(data / "train-*")):
        with pytest.raises(SourceError, match=size_error(data, cut, size)):
            read(path)


@readers("shard truncated inside a record", "SourceError naming shard, bytes expected/found")
def test_truncated_inside_a_record(data: Path, read: Reader) -> None:
    size = (data / SHARD).stat().st_size
    cut = offsets(data / SHARD)[5] + 20
    os.truncate(data / SHARD, cut)
    with pytest.raises(SourceError, match=size_error(data, cut, size)):
        read(data / "train")


@readers("zero-byte shard", "SourceError naming shard, bytes expected/found")
def test_zero_byte_shard(data: Path, read: Reader) -> None:
    size = (data / SHARD).stat().st_size
    (data / SHARD).write_bytes(b"")
    with pytest.raises(SourceError, match=size_error(data, 0, size)):
        read(data)


@readers("zero-byte file without metadata", "SourceError: file is empty")
def test_zero_byte_plain_file(data: Path, read: Reader) -> None:
    (data / "extra.tfrecord").write_bytes(b"")
    with pytest.raises(SourceError, match=r"extra\.tfrecord' is empty \(0 bytes\)"):
        read([data / "train-00000-of-00003.tfrecord", data / "extra.tfrecord"])


@readers("garbage appended to a shard", "SourceError naming shard, bytes expected/found")
def test_garbage_appended(data: Path, read: Reader) -> None:
    size = (data / SHARD).stat().st_size
    with open(data / SHARD, "ab") as f:
        f.write(b"\x00" * 100)
    with pytest.raises(SourceError, match=size_error(data, size + 100, size)):
        read(str(data / "train-*"))


@readers("shard deleted", "DataNotFoundError naming metadata file and shard")
def test_deleted_shard(data: Path, read: Reader) -> None:
    (data / SHARD).unlink()
    message = r"train\.json' lists shards that do not exist: .*" + re.escape(SHARD)
    for path in (data / "train", data):
        with pytest.raises(DataNotFoundError, match=message):
            read(path)


@readers("metadata lying about a shard's bytes", "SourceError naming shard and metadata file")
def test_metadata_lying_about_bytes(data: Path, read: Reader) -> None:
    size = (data / SHARD).stat().st_size
    edit_metadata(data, lambda m: m["shards"][1].update(num_bytes=size + 1))
    with pytest.raises(SourceError, match=size_error(data, size, size + 1)):
        read(data / "train")


@readers("metadata file cut short (not valid JSON)", "SchemaError naming the metadata file")
def test_metadata_cut_short(data: Path, read: Reader) -> None:
    path = data / "train.json"
    path.write_text(path.read_text()[: path.stat().st_size // 2])
    with pytest.raises(SchemaError, match=r"train\.json' is not valid: "):
        read(data / "train")


@readers("metadata total differing from its shards", "SchemaError naming the metadata file")
def test_metadata_lying_about_the_total(data: Path, read: Reader) -> None:
    edit_metadata(data, lambda m: m.update(num_examples=COUNT - 1))
    with pytest.raises(SchemaError, match=r"train\.json' is not valid: .* 23 examples"):
        read(data / "train")


@readers(
    "metadata lying about a shard's record count",
    "SourceError naming shard and metadata file",
    tf_data_outcome="DecodeError naming the shard and both counts, in a plain loop",
)
def test_metadata_lying_about_counts(data: Path, read: Reader) -> None:
    def change(metadata: dict[str, Any]) -> None:
        metadata["shards"][1]["num_examples"] += 1
        metadata["num_examples"] += 1

    edit_metadata(data, change)
    if read is from_tfrecords:
        message = rf"{SHARD}' holds 8 records, but the metadata file .*train\.json' declares 9"
        with pytest.raises(SourceError, match=message):
            read(data / "train")
    else:
        # tf.data only sees a short epoch (Pipeline: a short shard); the dataset's own
        # loop finds the shard behind it.
        expected = "25" if read is read_tfrecords else "9"  # examples, or the shard's records
        named = pytest.raises(DecodeError, match=rf"{SHARD}.* 8 records.* 9")
        with named as error:
            read(data / "train")
        assert f"expected to contain {expected} elements" in str(error.value.__cause__)


@pytest.mark.fault(
    "metadata declaring one example more or fewer in a shard, same batch count",
    reader="Pipeline",
    outcome="DecodeError naming the shard and both counts",
)
@pytest.mark.parametrize("more", [1, -1])
def test_pipeline_fails_on_a_shard_count_off_by_one_the_batches_hide(data: Path, more: int) -> None:
    def change(metadata: dict[str, Any]) -> None:
        metadata["shards"][1]["num_examples"] += more
        metadata["num_examples"] += more

    edit_metadata(data, change)
    # 23, 24 or 25 examples are 3 batches of 10: the epoch's length alone hides it.
    batches = tfpipe.Pipeline(data / "train", schema=SCHEMA).batch(10).build()
    named = pytest.raises(DecodeError, match=rf"{SHARD}: the file holds 8 records, .* {8 + more}")
    with named:
        for _ in batches:
            pass


@readers("interrupted write: shards without metadata, one missing", "DataNotFoundError naming it")
def test_interrupted_write_with_a_missing_shard(data: Path, read: Reader) -> None:
    (data / "train.json").unlink()
    (data / "train-00002-of-00003.tfrecord").unlink()
    message = r"1 of 3 are missing \(\['train-00002-of-00003'\]\) .* interrupted write"
    for path in (data, str(data / "train-*"), [data / "train-00000-of-00003.tfrecord"]):
        with pytest.raises(DataNotFoundError, match=message):
            read(path)


@readers("all shards, no metadata", "all records read; TfpipeWarning: counts unchecked")
def test_complete_shards_without_metadata_warn(data: Path, read: Reader) -> None:
    (data / "train.json").unlink()
    with pytest.warns(TfpipeWarning, match="sizes and checksums cannot be checked") as caught:
        assert sorted(read(data)) == list(range(COUNT))
    assert len([w for w in caught if "checksums cannot" in str(w.message)]) == 1


@readers("temporary file of a write beside the shards", "never read; naming it is an error")
def test_temporary_files_are_never_read(data: Path, read: Reader) -> None:
    temporary = data / f".{SHARD}.tmp-4242"
    temporary.write_bytes((data / SHARD).read_bytes()[:100])
    assert sorted(read(data)) == list(range(COUNT))
    with pytest.raises(SourceError, match="temporary file of a write in progress"):
        read(temporary)


@readers(
    "a CSV or TSV table named where TFRecords are read",
    "SourceError naming it, saying from_dataframe or `tfpipe write` reads a table",
)
@pytest.mark.parametrize("suffix", [".csv", ".tsv"])
def test_a_table_is_not_read_as_records(tmp_path: Path, read: Reader, suffix: str) -> None:
    """It was 'not a readable TFRecord file ... corrupted record at 0': true, and no help."""
    table = tmp_path / f"train{suffix}"
    table.write_text("id,label\n0,1\n1,2\n")
    with pytest.raises(SourceError, match=rf"\w+='.*train\{suffix}' is a table, .*from_dataframe"):
        read(table)


class _FailsOneShard:
    """12 examples {id: i}; examples 4..7 (shard 1 of 3, unshuffled) cannot be read."""

    schema = SCHEMA

    def __len__(self) -> int:
        return 12

    def __getitem__(self, index: int) -> dict[str, int]:
        if 4 <= index < 8:
            raise OSError(f"cannot read example {index}")
        return {"id": index, "label": index % 3}


@readers("every example of a shard skipped (on_error='skip')", "the empty shard is read")
def test_a_shard_emptied_by_skip_mode_is_read(tmp_path: Path, read: Reader) -> None:
    with pytest.warns(TfpipeWarning, match="skipped 4 of 12"):
        info = tfpipe.write_tfrecords(
            _FailsOneShard(), tmp_path / "train", num_shards=3, shuffle=False, on_error="skip",
            progress=False,
        )  # fmt: skip
    assert [s.num_examples for s in info.shards] == [4, 0, 4]
    assert info.files[1].stat().st_size == 0
    kept = [0, 1, 2, 3, 8, 9, 10, 11]
    for path in (tmp_path / "train", tmp_path, info.files):
        assert sorted(read(path)) == kept


@readers("leftover shard of another write beside a dataset", "SourceError naming it")
def test_a_shard_the_metadata_does_not_list_is_refused(data: Path, read: Reader) -> None:
    leftover = data / "train-00001-of-00002.tfrecord"
    shutil.copy(data / SHARD, leftover)
    message = r"train-00001-of-00002\.tfrecord' is named like a shard .* does not list it"
    with pytest.raises(SourceError, match=message):
        read(data)
    assert sorted(read(data / "train")) == list(range(COUNT))


def test_a_glob_of_some_shards_is_checked_and_sized_by_the_metadata(data: Path) -> None:
    some = str(data / "train-0000[01]-of-00003.tfrecord")
    expected = list(range(16))
    resolved = resolve(some)
    assert (resolved.info, resolved.num_examples) == (DatasetInfo.load(data / "train"), 16)
    assert from_tfrecords(some) == expected
    dataset = tfpipe.read_tfrecords(some, schema=SCHEMA)
    assert len(dataset) == 16 and [int(e["id"]) for e in dataset] == expected
    assert tfpipe.Pipeline(some).batch(8).batches_per_epoch() == 2
    (data / "train-00002-of-00003.tfrecord").write_bytes(b"")  # not read: not checked
    assert sorted(pipeline(some)) == expected


def plain_tf_files(data: Path, replace: Callable[[int, bytes], bytes]) -> None:
    """Rewrites the shard SHARD without metadata (as a plain TensorFlow script would leave
    it), each record through `replace(index, record)`; the frames' CRCs stay valid."""
    import tensorflow as tf

    (data / "train.json").unlink()
    records = list(tf.data.TFRecordDataset(str(data / SHARD)).as_numpy_iterator())
    with tf.io.TFRecordWriter(str(data / SHARD)) as writer:
        for index, record in enumerate(records):
            writer.write(replace(index, record))


@readers(
    "record with valid CRCs that is not a tf.train.Example",
    "DecodeError naming shard and record",
    tf_data_outcome="DecodeError naming shard and record in a plain loop over the dataset",
)
def test_a_record_that_is_not_an_example_is_named(data: Path, read: Reader) -> None:
    garbage = b"\xff\xfe not an Example \x80\x81"
    plain_tf_files(data, lambda i, record: garbage if i == 3 else record)
    named = pytest.raises(DecodeError, match=rf"record 3 of .*{SHARD}.*not a serialized")
    with named, pytest.warns(TfpipeWarning, match="sizes and checksums cannot be checked"):
        read(data)


@readers(
    "schema feature missing from some records of plain TensorFlow files",
    "DecodeError naming feature, shard and record",
    tf_data_outcome="DecodeError naming feature, shard and record in a plain loop",
)
def test_a_feature_missing_from_some_records_is_named(data: Path, read: Reader) -> None:
    import tensorflow as tf

    def without_label(index: int, record: bytes) -> bytes:
        if index != 5:
            return record
        example = tf.train.Example.FromString(record)
        del example.features.feature["label"]
        return example.SerializeToString()

    plain_tf_files(data, without_label)
    named = pytest.raises(DecodeError, match=rf"record 5 of .*{SHARD}")
    with named as error, pytest.warns(TfpipeWarning, match="sizes and checksums cannot be checked"):
        read(data)
    assert re.search(r"label.*missing|missing.*label", str(error.value))


@pytest.mark.fault(
    "bit flip in a record's data, iterated by your own loop",
    reader="for batch in Pipeline(...).build()",
    outcome="DecodeError naming shard and record, no named_errors needed",
)
def test_a_plain_loop_over_a_built_pipeline_names_a_damaged_shard(data: Path) -> None:
    start = offsets(data / SHARD)[3]
    flip(data / SHARD, start + 12 + 2)
    batches = tfpipe.Pipeline(data / "train", schema=SCHEMA).batch(4).build()
    named = pytest.raises(DecodeError, match=rf"record 3 of .*{SHARD}: damaged")
    with named as error:
        for _ in batches:
            pass
    assert error.value.__cause__ is not None  # TensorFlow's error, kept


@pytest.mark.fault(
    "compression forced against the files (None on gzip shards, gzip on plain ones)",
    reader="Pipeline(compression=...)",
    outcome="ValueError naming compression=, the shard and what the metadata says, before "
    "reading (was: TensorFlow's DataLossError 'corrupted record at 0')",
)
def test_a_compression_forced_against_the_files_is_named(tmp_path: Path) -> None:
    source = tfpipe.from_arrays({"id": np.arange(8), "label": np.arange(8) % 3}, schema=SCHEMA)
    for name, compression in (("gz", "gzip"), ("plain", None)):
        tfpipe.write_tfrecords(source, tmp_path / name / "train", num_shards=2, shuffle=False,
                               compression=compression, progress=False)  # fmt: skip
    gz, plain = "train-00000-of-00002.tfrecord.gz", "train-00000-of-00002.tfrecord"
    cases = [
        (tmp_path / "gz" / "train", None, rf"compression=None, but {gz} is gzip \(train\.json"
         r" says compression: gzip\): pass compression='gzip' or leave it out"),
        (tmp_path / "plain" / "train", "GZIP", rf"compression='GZIP', but {plain} is not "
         r"compressed \(train\.json says compression: None\): pass compression=None or leave"),
        (tmp_path / "plain" / "train", "zlib", rf"compression='zlib', but {plain} is not"),
    ]  # fmt: skip
    for path, compression, message in cases:
        with pytest.raises(ValueError, match=message):
            tfpipe.Pipeline(path, schema=SCHEMA, compression=compression)
    (tmp_path / "gz" / "train.json").unlink()  # the files' own bytes say it, then
    renamed = tmp_path / "gz" / "renamed.tfrecord"
    (tmp_path / "gz" / gz).rename(renamed)
    message = r"compression=None, but renamed\.tfrecord is gzip \(its first bytes say so\)"
    with pytest.raises(ValueError, match=message):
        tfpipe.Pipeline(renamed, schema=SCHEMA, compression=None)
    assert pipeline_ids(renamed, "gzip") == [0, 1, 2, 3]  # right ones still read
    assert pipeline_ids(tmp_path / "plain" / "train", None) == list(range(8))


def pipeline_ids(path: Path, compression: str | None) -> list[int]:
    batches = tfpipe.Pipeline(path, schema=SCHEMA, compression=compression).batch(8).build()
    return sorted(int(i) for batch in batches for i in batch["id"])


@readers(
    "shard truncated at a record boundary, its metadata file lost too",
    "records up to the cut read (nothing can tell); TfpipeWarning says counts, sizes and "
    "checksums are unchecked and a shard cut short reads without error",
)
def test_truncated_without_metadata_warns_what_is_unchecked(data: Path, read: Reader) -> None:
    (data / "train.json").unlink()
    os.truncate(data / SHARD, offsets(data / SHARD)[7])
    unchecked = "record counts, sizes and checksums cannot be checked"
    with pytest.warns(TfpipeWarning, match=unchecked) as caught:
        assert len(read(str(data / "train-*"))) == COUNT - 1
    warning = next(str(w.message) for w in caught if unchecked in str(w.message))
    assert "a shard cut short at a record boundary (an interrupted copy) reads as fewer" in warning
