"""Fuzzing every decode path with random and mutated records (seeded, a few seconds).

The rule: a record either decodes to values of the schema's dtypes and shapes, or fails with a
tfpipe error; never a crash, a raw TensorFlow error, a hang, or (where a checksum exists, in the
TFRecord frames) damaged bytes silently accepted.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

import tfpipe
from tfpipe.errors import DecodeError, TfpipeError

SEED = 11
SCHEMA = tfpipe.Schema(
    {
        "image": tfpipe.Image(shape=(8, 8, 3), encoding="png"),
        "label": tfpipe.ClassLabel(names=["a", "b", "c"]),
        "vec": tfpipe.Tensor(shape=(2,), dtype="float32"),
        "name": tfpipe.Text(),
    }
)
NAMES = [*SCHEMA, "other", ""]


def _base(rng: np.random.Generator) -> bytes:
    return SCHEMA.encode(
        {
            "image": rng.integers(0, 256, (8, 8, 3), dtype=np.uint8),
            "label": int(rng.integers(3)),
            "vec": rng.normal(size=2).astype(np.float32),
            "name": "x" * int(rng.integers(5)),
        }
    )


def _random_feature(rng: np.random.Generator) -> tf.train.Feature:
    count = int(rng.integers(4))
    kind = int(rng.integers(4))
    if kind == 0:
        values = [rng.bytes(int(rng.integers(40))) for _ in range(count)]
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=values))
    if kind == 1:
        values = [int(v) for v in rng.integers(-(2**62), 2**62, count)]
        return tf.train.Feature(int64_list=tf.train.Int64List(value=values))
    if kind == 2:
        pool = np.array([0.0, -1.5, np.nan, np.inf, 3e38, 1e-45])
        return tf.train.Feature(float_list=tf.train.FloatList(value=rng.choice(pool, count)))
    return tf.train.Feature()  # empty: no kind at all


def _replace_feature(record: bytes, rng: np.random.Generator) -> bytes:
    example = tf.train.Example.FromString(record)
    name = str(rng.choice(list(SCHEMA)))
    example.features.feature[name].CopyFrom(_random_feature(rng))
    return example.SerializeToString()


def _random_proto(rng: np.random.Generator) -> bytes:
    example = tf.train.Example()
    for _ in range(int(rng.integers(6))):
        example.features.feature[str(rng.choice(NAMES))].CopyFrom(_random_feature(rng))
    return example.SerializeToString()


def _flip_bits(record: bytes, rng: np.random.Generator) -> bytes:
    data = bytearray(record)
    for _ in range(int(rng.integers(1, 5))):
        data[int(rng.integers(len(data)))] ^= 1 << int(rng.integers(8))
    return bytes(data)


def _huge_length(record: bytes, rng: np.random.Generator) -> bytes:
    """A length-delimited field declaring far more bytes than follow."""
    huge = int(rng.integers(2**20, 2**62))
    varint = bytearray()
    while huge > 0x7F:
        varint.append((huge & 0x7F) | 0x80)
        huge >>= 7
    varint.append(huge)
    return b"\x0a" + bytes(varint) + record[: int(rng.integers(len(record)))]


MUTATIONS: dict[str, Callable[[bytes, np.random.Generator], bytes]] = {
    "valid": lambda record, rng: record,
    "random bytes": lambda record, rng: rng.bytes(int(rng.integers(120))),
    "bit flips": _flip_bits,
    "truncated": lambda record, rng: record[: int(rng.integers(len(record)))],
    "random protobuf": lambda record, rng: _random_proto(rng),
    "wrong type or empty feature": _replace_feature,
    "huge length": _huge_length,
}


def _records(count: int, seed: int = SEED) -> list[tuple[str, bytes]]:
    rng = np.random.default_rng(seed)
    kinds = list(MUTATIONS)
    out = []
    for i in range(count):
        kind = kinds[i % len(kinds)]
        out.append((kind, MUTATIONS[kind](_base(rng), rng)))
    return out


def _check_values(values: dict[str, object]) -> None:
    for name, feature in SCHEMA.items():
        array = np.asarray(values[name])
        if feature.dtype != "str":
            assert array.dtype == np.dtype(feature.dtype), (name, array.dtype)
        assert array.shape == feature.decoded_shape, (name, array.shape)


def test_schema_decode_and_stored_raise_only_decode_errors() -> None:
    outcomes: dict[str, list[int]] = {kind: [0, 0] for kind in MUTATIONS}
    for kind, record in _records(3500):
        try:
            SCHEMA.stored(record, where="fuzz record")
            _check_values(SCHEMA.decode(record, where="fuzz record"))
            outcomes[kind][0] += 1
        except DecodeError as e:
            assert "fuzz record" in str(e)
            outcomes[kind][1] += 1
    assert outcomes["valid"] == [500, 0]
    assert outcomes["random protobuf"][0] == 0 and outcomes["huge length"][0] == 0
    assert all(failed > 0 for kind, (_, failed) in outcomes.items() if kind != "valid")


def _write(path: Path, records: list[bytes]) -> Path:
    with tf.io.TFRecordWriter(str(path)) as writer:
        for record in records:
            writer.write(record)
    return path


def _reference(record: bytes, names: tuple[str, ...] = tuple(SCHEMA)) -> dict[str, object] | None:
    """What Schema.decode makes of a record's `names` features, or None when it refuses it."""
    try:
        stored = SCHEMA.stored(record)
        return {name: SCHEMA[name].load(stored[name]) for name in names}
    except (DecodeError, TypeError, ValueError, OSError):
        return None


@pytest.fixture(scope="module")
def fuzz_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[bytes]]:
    """2,000 fuzzed records (all kinds, valid ones included) in one TFRecord file."""
    records = [record for _, record in _records(2000, seed=SEED + 1)]
    return _write(tmp_path_factory.mktemp("fuzz") / "all.tfrecord", records), records


@pytest.fixture(scope="module")
def fuzz_files(fuzz_file: tuple[Path, list[bytes]]) -> list[tuple[Path, list[bytes]]]:
    """Files of a valid record then 1 to 3 refused ones (readers that check the first record
    at construction go on to iterate; an iterator stops at the first bad record)."""
    rng = np.random.default_rng(SEED)
    refused = [record for record in fuzz_file[1] if _reference(record) is None]
    files = []
    for i in range(4):
        picked = [refused[int(j)] for j in rng.integers(len(refused), size=int(rng.integers(1, 4)))]
        records = [_base(rng), *picked]
        files.append((_write(fuzz_file[0].parent / f"f{i}.tfrecord", records), records))
    return files


def test_verify_flags_every_record_schema_decode_refuses(fuzz_file) -> None:
    file, records = fuzz_file
    report = tfpipe.verify(file, schema=SCHEMA, progress=False)
    flagged = {f.record for f in report.faults}
    refused = {i for i, record in enumerate(records) if _reference(record) is None}
    assert refused <= flagged and len(refused) > 1000
    assert report.num_records == len(records)


@pytest.mark.slow
def test_pipeline_and_read_tfrecords_raise_only_named_errors(fuzz_files) -> None:
    for file, _ in fuzz_files:  # each costs a traced pipeline and a search
        pipeline = tfpipe.Pipeline(file, schema=SCHEMA).batch(2)
        for dataset in (pipeline.build(), tfpipe.read_tfrecords(file, schema=SCHEMA)):
            named = pytest.raises(DecodeError, match=rf"^record \d of {file}")
            with named, tfpipe.named_errors(pipeline):
                for batch in dataset:
                    _ = batch["image"]


def test_tfrecord_source_and_sequence_loader_raise_only_tfpipe_errors(fuzz_file) -> None:
    file, records = fuzz_file
    src = tfpipe.from_tfrecords(file, schema=SCHEMA, cache_dir=file.parent / "index")
    loader = tfpipe.SequenceLoader(
        src, batch_size=1, x=["image", "vec"], y="label", shuffle=False, rescale=None
    )
    for i, record in enumerate(records):
        expected = _reference(record, ("image", "vec", "label"))  # the loader leaves "name" be
        try:
            x, y = loader[i]
        except TfpipeError as e:
            assert f"record {i} of {file}" in str(e)
            assert expected is None, f"record {i}: the loader refused what Schema.decode takes"
            continue
        assert expected is not None, f"record {i} of {file} accepted by the loader"
        np.testing.assert_array_equal(x[0][0], expected["image"])
        np.testing.assert_array_equal(x[1][0], expected["vec"])
        assert y[0] == expected["label"]


def _frame_offsets(data: bytes) -> list[int]:
    offsets, position = [], 0
    while position < len(data):
        offsets.append(position)
        position += 16 + struct.unpack_from("<Q", data, position)[0]
    return offsets


def _damage(data: bytes, rng: np.random.Generator) -> tuple[bytes, bool]:
    """Damaged bytes, and whether a frame checksum covers the damage (else only the size and
    count in the metadata do: TensorFlow's reader takes a cut at a record boundary, or up to
    11 trailing bytes, for the end of the file)."""
    kind = int(rng.integers(5))
    if kind == 0:  # one flipped bit anywhere: lengths, checksums or payload
        damaged = bytearray(data)
        damaged[int(rng.integers(len(data)))] ^= 1 << int(rng.integers(8))
        return bytes(damaged), True
    if kind == 1:  # cut anywhere
        return data[: int(rng.integers(len(data)))], False
    if kind == 2:  # cut at a record boundary
        return data[: int(rng.choice(_frame_offsets(data)))], False
    if kind == 3:  # garbage appended
        return data + rng.bytes(int(rng.integers(1, 40))), False
    return data[:12] + struct.pack("<I", 0) + data[16:], True  # length checksum zeroed


@pytest.mark.slow
def test_damaged_frames_are_never_accepted_where_checksums_exist(tmp_path: Path) -> None:
    """Every byte of a TFRecord file is under a checksum or counted by the metadata."""
    rng = np.random.default_rng(SEED)
    src = tfpipe.from_arrays(
        {"x": rng.integers(0, 100, 24), "v": rng.normal(size=(24, 3)).astype(np.float32)}
    )
    info = tfpipe.write_tfrecords(src, tmp_path / "clean", num_shards=2, progress=False)
    originals = [f.read_bytes() for f in info.files]
    pipelines = 0
    for trial in range(50):
        target = int(rng.integers(2))
        damaged, checksummed = _damage(originals[target], rng)
        if damaged == originals[target]:
            continue
        info.files[target].write_bytes(damaged)
        report = tfpipe.verify(tmp_path / "clean", progress=False)
        assert not report.ok, (trial, len(damaged), len(originals[target]))
        assert any(f.file == str(info.files[target]) for f in report.faults), report.faults
        if checksummed and pipelines < 6:  # tf.data reads the files: only a checksum stops it
            pipelines += 1
            with pytest.raises(DecodeError), tfpipe.named_errors(tmp_path / "clean"):
                list(tfpipe.Pipeline(tmp_path / "clean").batch(5).build())
        info.files[target].write_bytes(originals[target])


def test_tfrecord_source_never_returns_damaged_payloads(tmp_path: Path) -> None:
    rng = np.random.default_rng(SEED)
    records = [_base(rng) for _ in range(12)]
    file = _write(tmp_path / "clean.tfrecord", records)
    original = file.read_bytes()
    offsets = _frame_offsets(original)
    for trial in range(12):
        record = int(rng.integers(len(records)))
        length = len(records[record])
        damaged = bytearray(original)
        damaged[offsets[record] + 12 + int(rng.integers(length))] ^= 1 << int(rng.integers(8))
        file.write_bytes(bytes(damaged))
        src = tfpipe.from_tfrecords(file, schema=SCHEMA, cache_dir=tmp_path / f"index{trial}")
        with pytest.raises(
            TfpipeError, match=rf"{re.escape(str(file))}' is corrupt: record {record} at"
        ):
            src[record]
