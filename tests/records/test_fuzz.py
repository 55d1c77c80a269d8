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


def _frame(data: bytes, rng: np.random.Generator) -> tuple[int, int]:
    """A random frame of a shard: its offset and its payload's length. A frame is the length
    (8 bytes), the length's checksum (4), the payload, and the payload's checksum (4)."""
    offset = int(rng.choice(_frame_offsets(data)))
    return offset, struct.unpack_from("<Q", data, offset)[0]


Damage = Callable[[bytes, np.random.Generator], bytes]
Part = Callable[[int], tuple[int, int]]  # a payload's length -> bytes [start, end) of a frame


def _flip_in(part: Part) -> Damage:
    """A damage flipping one bit in `part` of a random frame."""

    def flip(data: bytes, rng: np.random.Generator) -> bytes:
        frame, length = _frame(data, rng)
        damaged = bytearray(data)
        damaged[frame + int(rng.integers(*part(length)))] ^= 1 << int(rng.integers(8))
        return bytes(damaged)

    return flip


def _cut_in(part: Part) -> Damage:
    """A damage cutting the file in `part` of a random frame."""

    def cut(data: bytes, rng: np.random.Generator) -> bytes:
        frame, length = _frame(data, rng)
        return data[: frame + int(rng.integers(*part(length)))]

    return cut


def _zero_a_length_checksum(data: bytes, rng: np.random.Generator) -> bytes:
    frame, _ = _frame(data, rng)
    return data[: frame + 8] + bytes(4) + data[frame + 12 :]


def _append(low: int, high: int) -> Damage:
    """A damage appending `low` to `high - 1` random bytes."""
    return lambda data, rng: data + rng.bytes(int(rng.integers(low, high)))


# Each damage, and whether a frame checksum covers it (else only the size and count in the
# metadata do: TensorFlow's reader takes a cut at a record boundary, or up to 11 trailing
# bytes, for the end of the file).
DAMAGES: dict[str, tuple[Damage, bool]] = {
    "a bit of a length flipped": (_flip_in(lambda n: (0, 8)), True),
    "a bit of a length's checksum flipped": (_flip_in(lambda n: (8, 12)), True),
    "a bit of a payload flipped": (_flip_in(lambda n: (12, 12 + n)), True),
    "a bit of a payload's checksum flipped": (_flip_in(lambda n: (12 + n, 16 + n)), True),
    "a length's checksum zeroed": (_zero_a_length_checksum, True),
    "cut in a frame's length or its checksum": (_cut_in(lambda n: (1, 12)), False),
    "cut in a frame's payload or its checksum": (_cut_in(lambda n: (12, 16 + n)), False),
    "cut at a record boundary": (
        lambda data, rng: data[: int(rng.choice(_frame_offsets(data)[1:]))],
        False,
    ),
    "cut to nothing": (lambda data, rng: b"", False),
    "up to 11 bytes appended": (_append(1, 12), False),
    "12 to 39 bytes appended": (_append(12, 40), False),
}


@pytest.mark.slow
def test_damaged_frames_are_never_accepted_where_checksums_exist(tmp_path: Path) -> None:
    """Every byte of a TFRecord file is under a checksum or counted by the metadata. A shard
    per kind of damage, all damaged at once: one verify names every shard (twice, each damage
    in another shard and place the second time); and tf.data, reading a dataset with one
    damage a checksum covers, stops at it."""
    rng = np.random.default_rng(SEED)
    examples = 3 * len(DAMAGES)  # 3 records a shard
    src = tfpipe.from_arrays(
        {
            "x": rng.integers(0, 100, examples),
            "v": rng.normal(size=(examples, 3)).astype(np.float32),
        }
    )
    info = tfpipe.write_tfrecords(src, tmp_path / "clean", num_shards=len(DAMAGES), progress=False)
    originals = [f.read_bytes() for f in info.files]
    for trial in range(2):
        for k, (kind, (damage, _)) in enumerate(DAMAGES.items()):
            shard = (k + trial) % len(DAMAGES)
            damaged = damage(originals[shard], rng)
            assert damaged != originals[shard], kind
            info.files[shard].write_bytes(damaged)
        report = tfpipe.verify(tmp_path / "clean", progress=False)
        assert not report.ok
        assert {f.file for f in report.faults} == {str(f) for f in info.files}, report.faults
    for file, original in zip(info.files, originals, strict=True):
        file.write_bytes(original)
    for damage, checksummed in DAMAGES.values():  # tf.data reads the files: only a checksum
        if checksummed:  # stops it (in the first shard: named_errors finds it at once)
            info.files[0].write_bytes(damage(originals[0], rng))
            with pytest.raises(DecodeError), tfpipe.named_errors(tmp_path / "clean"):
                list(tfpipe.Pipeline(tmp_path / "clean").batch(5).build())
    info.files[0].write_bytes(originals[0])


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
