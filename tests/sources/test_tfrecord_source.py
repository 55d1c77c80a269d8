"""tfpipe.from_tfrecords: the index of record offsets (creation, reuse, rebuild), reads, errors."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

import tfpipe
from tfpipe.errors import SchemaError, SourceError, TfpipeWarning
from tfpipe.format.metadata import DatasetInfo
from tfpipe.sources.tfrecords import INDEX_FOLDER

SCHEMA = tfpipe.Schema(
    {"id": tfpipe.Tensor(shape=(), dtype="int64"), "label": tfpipe.ClassLabel(num_classes=3)}
)


def write_ids(prefix: Path, count: int, num_shards: int = 2, **kwargs: object) -> DatasetInfo:
    """Writes examples {"id": i, "label": i % 3} in id order."""
    source = tfpipe.from_arrays(
        {"id": np.arange(count), "label": np.arange(count) % 3}, schema=SCHEMA
    )
    return tfpipe.write_tfrecords(
        source, prefix, num_shards=num_shards, shuffle=False, progress=False, **kwargs
    )


def rewrite_shard(path: Path, ids: list[int]) -> None:
    with tf.io.TFRecordWriter(str(path)) as writer:
        for i in ids:
            writer.write(SCHEMA.encode({"id": i, "label": i % 3}))


def index_files(folder: Path) -> list[Path]:
    return sorted((folder / INDEX_FOLDER).glob("*.idx"))


def test_index_is_created_beside_the_shards_and_reads_every_record(tmp_path: Path) -> None:
    info = write_ids(tmp_path / "train", 11)
    src = tfpipe.from_tfrecords(tmp_path / "train")
    assert [p.name for p in index_files(tmp_path)] == sorted(f"{f.name}.idx" for f in info.files)
    assert len(src) == 11
    assert [int(src[i]["id"]) for i in range(11)] == list(range(11))
    assert src[-1]["label"] == 10 % 3
    shard, count = info.files[1], info.shards[0].num_examples
    assert src.origin(count + 2) == f"record 2 of {shard}"
    assert src.schema == SCHEMA


def test_records_are_found_across_shards(tmp_path: Path) -> None:
    shards = [tmp_path / f"part-{k}.tfrecord" for k in range(3)]
    for shard, ids in zip(shards, ([0, 1], [2], [3, 4]), strict=True):
        rewrite_shard(shard, ids)
    src = tfpipe.from_tfrecords(shards, schema=SCHEMA)
    assert [int(src[i]["id"]) for i in range(len(src))] == [0, 1, 2, 3, 4]
    assert src.origin(3) == f"record 0 of {shards[2]}"
    assert src.origin(-4) == f"record 1 of {shards[0]}"


def test_index_is_reused_when_shards_are_unchanged(tmp_path: Path) -> None:
    write_ids(tmp_path / "train", 9)
    tfpipe.from_tfrecords(tmp_path / "train")
    before = {p: (p.stat().st_ino, p.stat().st_mtime_ns) for p in index_files(tmp_path)}
    src = tfpipe.from_tfrecords(tmp_path / "train")
    after = {p: (p.stat().st_ino, p.stat().st_mtime_ns) for p in index_files(tmp_path)}
    assert before == after
    assert int(src[8]["id"]) == 8


def test_index_is_rebuilt_when_a_shard_changes(tmp_path: Path) -> None:
    shards = [tmp_path / "part-0.tfrecord", tmp_path / "part-1.tfrecord"]
    rewrite_shard(shards[0], [0, 1, 2])
    rewrite_shard(shards[1], [3, 4, 5])
    tfpipe.from_tfrecords(shards, schema=SCHEMA)
    rewrite_shard(shards[0], [100, 101, 102, 103])
    src = tfpipe.from_tfrecords(shards, schema=SCHEMA)
    assert len(src) == 4 + 3
    assert [int(src[i]["id"]) for i in range(4)] == [100, 101, 102, 103]

    index = tmp_path / INDEX_FOLDER / f"{shards[0].name}.idx"
    inode = index.stat().st_ino
    stat = shards[0].stat()
    os.utime(shards[0], ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    tfpipe.from_tfrecords(shards, schema=SCHEMA)
    assert index.stat().st_ino != inode


def test_index_goes_to_cache_dir_when_the_folder_is_not_writable(tmp_path: Path) -> None:
    data = tmp_path / "data"
    write_ids(data / "train", 5, num_shards=1)
    (data / INDEX_FOLDER).write_text("a file where the index folder would go")
    cache = tmp_path / "cache"
    src = tfpipe.from_tfrecords(data / "train", cache_dir=cache)
    saved = list(cache.glob("*.idx"))
    assert len(saved) == 1 and saved[0].name.startswith("train-00000-of-00001.tfrecord-")
    inode = saved[0].stat().st_ino
    assert int(tfpipe.from_tfrecords(data / "train", cache_dir=cache)[4]["id"]) == 4
    assert saved[0].stat().st_ino == inode
    assert len(src) == 5


def test_unsaveable_index_warns(tmp_path: Path) -> None:
    write_ids(tmp_path / "train", 3, num_shards=1)
    (tmp_path / INDEX_FOLDER).write_text("not a folder")
    blocked = tmp_path / "blocked"
    blocked.write_text("not a folder either")
    with pytest.warns(TfpipeWarning, match="could not save the index"):
        src = tfpipe.from_tfrecords(tmp_path / "train", cache_dir=blocked / "cache")
    assert int(src[2]["id"]) == 2
    assert int(pickle.loads(pickle.dumps(src))[1]["id"]) == 1


def test_schema_comes_from_metadata_or_must_be_given(tmp_path: Path) -> None:
    info = write_ids(tmp_path / "train", 4)
    by_glob = tfpipe.from_tfrecords(str(tmp_path / "train-*.tfrecord"))
    assert by_glob.schema == SCHEMA
    loose = tmp_path / "loose.tfrecord"
    loose.write_bytes(info.files[0].read_bytes())
    with pytest.raises(SchemaError, match="pass schema="):
        tfpipe.from_tfrecords(loose)
    assert len(tfpipe.from_tfrecords(loose, schema=SCHEMA)) == info.shards[0].num_examples


def test_gzip_shards_are_refused_with_a_fix(tmp_path: Path) -> None:
    write_ids(tmp_path / "train", 4, compression="gzip")
    with pytest.raises(SourceError, match=r"gzip-compressed.*compression=None"):
        tfpipe.from_tfrecords(tmp_path / "train")


def test_truncated_shard_names_the_file_and_offset(tmp_path: Path) -> None:
    shard = tmp_path / "part.tfrecord"
    rewrite_shard(shard, [1, 2, 3])
    data = shard.read_bytes()
    shard.write_bytes(data[:-5])
    record_size = len(data) // 3
    with pytest.raises(
        SourceError, match=rf"part\.tfrecord.*byte offset {2 * record_size} \(record 2\)"
    ):
        tfpipe.from_tfrecords(shard, schema=SCHEMA)


def test_corrupt_length_is_detected(tmp_path: Path) -> None:
    shard = tmp_path / "part.tfrecord"
    rewrite_shard(shard, [1, 2])
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))
    with pytest.raises(SourceError, match="length checksum is wrong"):
        tfpipe.from_tfrecords(shard, schema=SCHEMA)


def test_an_empty_file_without_metadata_is_refused(tmp_path: Path) -> None:
    (tmp_path / "empty.tfrecord").write_bytes(b"")
    with pytest.raises(SourceError, match=r"empty\.tfrecord' is empty \(0 bytes\)"):
        tfpipe.from_tfrecords(tmp_path / "empty.tfrecord", schema=SCHEMA)


def test_source_pickles_without_offsets_or_open_files(tmp_path: Path) -> None:
    write_ids(tmp_path / "train", 2000, num_shards=2)
    src = tfpipe.from_tfrecords(tmp_path / "train")
    assert int(src[1500]["id"]) == 1500
    data = pickle.dumps(src)
    assert len(data) < 4000
    clone = pickle.loads(data)
    assert [int(clone[i]["id"]) for i in (0, 999, 1999)] == [0, 999, 1999]
    clone.close()


def test_reading_a_shard_that_changed_after_indexing_fails_clearly(tmp_path: Path) -> None:
    info = write_ids(tmp_path / "train", 6, num_shards=1)
    src = tfpipe.from_tfrecords(tmp_path / "train")
    rewrite_shard(info.files[0], [50] * 2 + [123456789] * 4)
    with pytest.raises(SourceError, match="changed since"):
        src[5]


def test_sequence_loader_over_tfrecords_matches_the_folder(
    tmp_path: Path, image_folder: Path
) -> None:
    folder = tfpipe.from_directory(image_folder)
    tfpipe.write_tfrecords(folder, tmp_path / "images", num_shards=3, shuffle=False, progress=False)
    records = tfpipe.from_tfrecords(tmp_path / "images")
    options = {"batch_size": 8, "image_size": (20, 24), "shuffle": False}
    from_folder = tfpipe.SequenceLoader(folder, **options)
    from_records = tfpipe.SequenceLoader(records, **options)
    for i in range(len(from_folder)):
        (xa, ya), (xb, yb) = from_folder[i], from_records[i]
        np.testing.assert_array_equal(xa, xb)
        np.testing.assert_array_equal(ya, yb)

    shuffled = tfpipe.SequenceLoader(records, batch_size=8, image_size=(20, 24), seed=3)
    batches = [shuffled[i][1] for i in range(len(shuffled))]
    labels = np.concatenate(batches)
    assert np.array_equal(np.bincount(labels), np.bincount(folder.labels()))
    assert not np.array_equal(labels, folder.labels())


def test_a_source_alive_at_exit_closes_quietly(tmp_path: Path) -> None:
    """A script's module-level source is closed after the interpreter tore down `os` and
    `threading`: its shards close without an "Exception ignored" traceback on stderr."""
    script = textwrap.dedent(
        f"""
        import numpy as np
        import tfpipe

        data = tfpipe.from_arrays({{"x": np.arange(10)}})
        prefixes = [{str(tmp_path / "train")!r}, "ram://{tmp_path.name}/train"]
        for prefix in prefixes:
            tfpipe.write_tfrecords(data, prefix, num_shards=2, shuffle=False, progress=False)
        local, url = [tfpipe.from_tfrecords(prefix) for prefix in prefixes]
        print(int(local[3]["x"]), int(url[7]["x"]))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == ["3", "7"]
    assert "Exception ignored" not in result.stderr, result.stderr[-3000:]
