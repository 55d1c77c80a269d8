"""tfpipe.beam: Beam writes what write_tfrecords writes (DirectRunner, in this process)."""

from __future__ import annotations

import collections
import dataclasses
import importlib
import itertools
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("apache_beam")

import apache_beam as beam
import google_crc32c as crc32c
import numpy as np
import tensorflow as tf
from apache_beam.metrics.metric import MetricsFilter

import tfpipe
import tfpipe.beam
import tfpipe.cli.parser as cli
from tfpipe.beam import runners, writing
from tfpipe.beam.encode import Encode, is_record
from tfpipe.beam.ptransforms import ReadAndWrite
from tfpipe.beam.writing import ShardCut, finish, write_shard
from tfpipe.errors import EncodeError, SourceError, TfpipeError, TfpipeWarning
from tfpipe.format.metadata import DatasetInfo
from tfpipe.records.writer import ShardWriter, WriteOptions, writer_lock
from tfpipe.sources.synthetic import make_image_folder

# One process: a DirectRunner with worker processes takes ~30 s to start (each imports
# TensorFlow); `tfpipe write --runner direct` uses them, tested in test_pipeline_options.
IN_PROCESS = ["--direct_running_mode=in_memory"]
PROCESSES = ["--direct_running_mode=multi_processing"]  # one worker runs in-process otherwise
_X = tfpipe.Schema({"x": tfpipe.Tensor(shape=(), dtype="int64")})


def _records(prefix: Path) -> list[bytes]:
    return [r for shard in _shards(prefix) for r in shard]


def _shards(prefix: Path) -> list[list[bytes]]:
    """The records of each shard of a dataset, in order."""
    return [_file_records(f) for f in DatasetInfo.load(prefix).files]


def _file_records(path: Path) -> list[bytes]:
    return list(tf.data.TFRecordDataset(str(path)).as_numpy_iterator())


@dataclasses.dataclass
class _OneUnreadable:
    """A source whose example `bad` cannot be read (its file went away), the others as
    `source` gives them."""

    source: Any
    bad: int

    @property
    def schema(self) -> tfpipe.Schema:
        return self.source.schema

    def __len__(self) -> int:
        return len(self.source)

    def __getitem__(self, index: int) -> dict[str, Any]:
        if index == self.bad:
            raise FileNotFoundError(f"{self.origin(index)} is gone")
        return self.source[index]

    def origin(self, index: int) -> str:
        return self.source.origin(index)


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """200 images in 4 class-sorted folders, written by Beam and by write_tfrecords."""
    root = tmp_path_factory.mktemp("beam")
    folder = make_image_folder(root / "images", num_classes=4, per_class=50, size=(32, 32))
    source = tfpipe.from_directory(folder, image_shape=(32, 32, 3))
    tfpipe.beam.write_tfrecords(source, root / "beam" / "train", workers=1, args=IN_PROCESS)
    tfpipe.write_tfrecords(source, root / "local" / "train", progress=False)
    return {"beam": root / "beam" / "train", "local": root / "local" / "train", "images": folder}


@pytest.mark.slow
def test_beam_writes_what_write_tfrecords_writes(written: dict[str, Path]) -> None:
    beam, local = (DatasetInfo.load(written[k]) for k in ("beam", "local"))
    assert beam.num_examples == local.num_examples == 200
    assert beam.schema == local.schema
    assert beam.class_names == local.class_names == {"label": sorted(beam.class_names["label"])}
    assert [s.file for s in beam.shards] == [s.file for s in local.shards]
    assert [f.stat().st_size for f in beam.files] == [s.num_bytes for s in beam.shards]
    assert (beam.shuffled, beam.seed, beam.compression) == (True, 0, None)
    assert _shards(written["beam"]) == _shards(written["local"])  # the same permutation
    assert sorted(p.name for p in written["beam"].parent.iterdir()) == [
        *(s.file for s in beam.shards),
        "train.json",
    ]


@pytest.mark.slow
def test_beam_output_is_globally_shuffled_and_read_unchanged(written: dict[str, Path]) -> None:
    prefix = written["beam"]
    labels = next(iter(tfpipe.read_tfrecords(prefix).batch(500)))["label"].numpy().tolist()
    # A class-sorted folder would come out in 4 runs; 200 examples shuffled have ~150.
    runs = 1 + sum(a != b for a, b in itertools.pairwise(labels))
    assert runs > 100
    assert collections.Counter(labels) == {0: 50, 1: 50, 2: 50, 3: 50}
    source = tfpipe.from_tfrecords(prefix)
    assert [int(source[i]["label"]) for i in range(len(source))] == labels
    batches = list(tfpipe.Pipeline(prefix).batch(50).build())
    assert [b["image"].shape for b in batches] == [(50, 32, 32, 3)] * 4
    read = np.concatenate([b["label"].numpy() for b in batches]).tolist()
    assert collections.Counter(read) == collections.Counter(labels)  # shards are interleaved


@pytest.mark.slow
@pytest.mark.fault(
    "a corrupt JPEG among the images of a Beam write",
    reader="tfpipe.beam.write_tfrecords, WriteTFRecords",
    outcome="EncodeError naming the file, no metadata, no shard; re-run with on_error='skip': "
    "counted in the Beam counter and the metadata",
)
@pytest.mark.fault(
    "an example a Beam write's source cannot give (source[i] raises FileNotFoundError), "
    "with on_error='skip'",
    reader="tfpipe.beam.ReadSource, WriteTFRecords",
    outcome="skipped: counted in the Beam counter, listed in the metadata as write_tfrecords "
    "lists it",
)
def test_failed_run_leaves_nothing_complete_and_skips_are_counted(tmp_path: Path) -> None:
    folder = make_image_folder(tmp_path / "images", num_classes=2, per_class=10, size=(32, 32))
    broken = sorted((folder / "circle").iterdir())[4]
    broken.write_bytes(b"not a JPEG")
    source = tfpipe.from_directory(folder)
    prefix = tmp_path / "out" / "train"
    with pytest.raises(EncodeError, match=broken.name):
        tfpipe.beam.write_tfrecords(source, prefix, workers=1, args=IN_PROCESS)
    assert [p.name for p in prefix.parent.iterdir() if not p.name.startswith(".")] == []

    # Example 16 cannot be read either; without shuffle the shards are write_tfrecords's.
    unreadable = _OneUnreadable(source, 16)
    write = tfpipe.beam.WriteTFRecords(
        prefix, source.schema, num_shards=3, shuffle=False, on_error="skip"
    )
    pipeline = beam.Pipeline(options=tfpipe.beam.pipeline_options("direct", IN_PROCESS, 1))
    _ = pipeline | tfpipe.beam.ReadSource(unreadable) | write
    result = pipeline.run()
    result.wait_until_finish()
    counters = {
        c.key.metric.name: c.committed
        for c in result.metrics().query(MetricsFilter().with_namespace("tfpipe"))["counters"]
    }
    assert counters == {"skipped_examples": 2, "encoded_examples": 18}
    info = DatasetInfo.load(prefix)
    assert info.num_examples == 18
    gone = unreadable.origin(16)
    assert [(s.index, s.origin) for s in info.skipped] == [(4, str(broken)), (16, gone)]
    assert "is gone" in info.skipped[1].error
    with pytest.warns(TfpipeWarning, match="skipped 2 of 20"):
        local = tfpipe.write_tfrecords(
            unreadable,
            tmp_path / "local" / "train",
            num_shards=3,
            shuffle=False,
            on_error="skip",
            progress=False,
        )
    assert [(s.index, s.origin) for s in local.skipped] == [(4, str(broken)), (16, gone)]
    assert info.skipped[1] == local.skipped[1]  # (PIL names a BytesIO object in the first)
    # Indices 0-6, 7-12 and 13-19: as write_tfrecords cuts 20 positions, skipped ones too.
    assert _shards(prefix) == _shards(tmp_path / "local" / "train")
    assert sorted(p.name for p in prefix.parent.iterdir()) == [
        *(f"train-0000{k}-of-00003.tfrecord" for k in range(3)),
        "train.json",
    ]
    assert len(next(iter(tfpipe.read_tfrecords(prefix).batch(50)))["label"]) == 18


@pytest.mark.slow
@pytest.mark.fault(
    "a class index out of range of the source's classes, in a Beam worker process",
    reader="tfpipe.beam.write_tfrecords",
    outcome="EncodeError naming the example (read from the worker's traceback); no metadata",
)
def test_an_example_the_source_cannot_give_fails_the_run_naming_it(tmp_path: Path) -> None:
    def schema(names: list[str]) -> tfpipe.Schema:
        x = tfpipe.Tensor(shape=(), dtype="int64")
        return tfpipe.Schema({"x": x, "label": tfpipe.ClassLabel(names=names)})

    labels = np.array([0, 1] * 5)
    labels[6] = 7
    source = tfpipe.from_arrays({"x": np.arange(10), "label": labels}, schema(["cat", "dog"]))
    # Written with the classes in another order, labels are matched by name as they are read.
    with pytest.raises(
        EncodeError,
        match=r"^label: class index 7 is out of range \[0, 2\) of the source's classes in "
        r"example 6 .*\(writing '.*train' with Beam\)$",
    ):
        tfpipe.beam.write_tfrecords(
            source, tmp_path / "train", schema(["dog", "cat"]), workers=1, args=PROCESSES
        )
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == []


@pytest.mark.slow
@pytest.mark.fault(
    "a source that raises an unexpected error (RuntimeError) in a Beam worker process, or in "
    "this process (workers=1)",
    reader="tfpipe.beam.write_tfrecords",
    outcome="TfpipeError naming the prefix and the error (the worker's last exception line)",
)
@pytest.mark.parametrize("args", [PROCESSES, []], ids=["worker process", "in this process"])
def test_any_other_failure_in_a_worker_names_the_prefix_and_the_error(
    tmp_path: Path, args: list[str]
) -> None:
    class Failing:  # defined here, so that it is pickled by value to the worker process
        schema = tfpipe.Schema({"x": tfpipe.Tensor(shape=(), dtype="int64")})

        def __len__(self) -> int:
            return 4

        def __getitem__(self, index: int) -> dict[str, int]:
            if index == 2:
                raise RuntimeError("the disk went away")
            return {"x": index}

    with pytest.raises(TfpipeError) as raised:
        tfpipe.beam.write_tfrecords(Failing(), tmp_path / "train", workers=1, args=args)
    assert type(raised.value) is TfpipeError
    assert str(raised.value).startswith(
        f"the Beam pipeline writing {str(tmp_path / 'train')!r} failed: RuntimeError: the disk "
        "went away"
    )


def _worker_error(last_line: str) -> RuntimeError:
    """A runner's error carrying a worker's traceback text, as the DirectRunner's processes
    pass it on."""
    return RuntimeError(
        "Pipeline failed: Traceback (most recent call last):\n"
        '  File "worker.py", line 1, in process\n    raise error\n'
        f"{last_line}\n"
    )


@pytest.mark.fault(
    "another library's exception class named EncodeError or SourceError, raised in a Beam "
    "worker process",
    reader="tfpipe.beam.write_tfrecords",
    outcome="TfpipeError naming the prefix and the other class by its module, never tfpipe's "
    "EncodeError",
)
def test_only_tfpipes_own_errors_from_a_worker_keep_their_type() -> None:
    path = Path("out/train")
    ours = runners._failure(_worker_error("tfpipe.errors.EncodeError: x: bad in 4"), path)
    assert type(ours) is EncodeError
    assert str(ours) == "x: bad in 4 (writing 'out/train' with Beam)"
    source = runners._failure(_worker_error("tfpipe.errors.SourceError: empty"), path)
    assert type(source) is SourceError
    for name in ("otherlib.errors.EncodeError", "SourceError", "otherlib.SourceError"):
        other = runners._failure(_worker_error(f"{name}: not ours"), path)
        assert type(other) is TfpipeError
        assert str(other).endswith(f"'out/train' failed: {name}: not ours")


@pytest.mark.fault(
    "WriteTFRecords in a user's own pipeline into a folder that does not exist",
    reader="tfpipe.beam.WriteTFRecords",
    outcome="the folder is made, as write_tfrecords makes it (was a bare NotFoundError on a "
    "temporary file)",
)
def test_write_tfrecords_in_a_pipeline_makes_a_missing_folder(tmp_path: Path) -> None:
    source = tfpipe.from_arrays({"x": np.arange(10)}, _X)
    prefix = tmp_path / "out" / "new" / "train"
    with beam.Pipeline(options=tfpipe.beam.pipeline_options("direct", IN_PROCESS, 1)) as p:
        _ = p | tfpipe.beam.ReadSource(source) | tfpipe.beam.WriteTFRecords(prefix, _X)
    assert sorted(int(r["x"]) for r in tfpipe.read_tfrecords(prefix)) == list(range(10))


@pytest.mark.fault(
    "two elements of a WriteTFRecords input share an index, in different bundles",
    reader="tfpipe.beam.WriteTFRecords",
    outcome="EncodeError naming the index and both origins; no metadata",
)
def test_an_index_two_examples_share_fails_the_run(tmp_path: Path) -> None:
    schema = tfpipe.Schema({"x": tfpipe.Tensor(shape=(), dtype="int64")})
    first = [tfpipe.beam.SourceExample(i, f"a{i}", {"x": i}) for i in range(5)]
    second = [tfpipe.beam.SourceExample(i, f"b{i}", {"x": i}) for i in (3, 7)]
    options = tfpipe.beam.pipeline_options("direct", IN_PROCESS, 1)
    with (
        pytest.raises(
            EncodeError,
            match=r"examples share an index: index 3 \(2 examples: '[ab]3', '[ab]3'\)\. ",
        ),
        beam.Pipeline(options=options) as pipeline,
    ):
        _ = (
            (pipeline | "A" >> beam.Create(first), pipeline | "B" >> beam.Create(second))
            | beam.Flatten()
            | tfpipe.beam.WriteTFRecords(tmp_path / "train", schema)
        )
    assert not (tmp_path / "train.json").exists()


@pytest.mark.fault(
    'a SourceExample whose index is negative, not an int (1.5, "3") or a bool, fed to '
    "WriteTFRecords by a user's pipeline",
    reader="tfpipe.beam.WriteTFRecords",
    outcome="EncodeError naming the index and the example's origin; no shard -1",
)
@pytest.mark.parametrize("index", [-1, 1.5, "3", True, np.float64(2)])
def test_an_index_that_is_not_an_int_from_0_fails_naming_the_example(index: Any) -> None:
    example = tfpipe.beam.SourceExample(index, "cats/017.jpg", {"x": 1})
    encode = Encode(_X, WriteOptions(shuffle=False, workers=1))
    expected = rf"int >= 0 .* Received: index={re.escape(repr(index))} .* in 'cats/017\.jpg'$"
    with pytest.raises(EncodeError, match=expected):
        list(encode.process([example]))


def test_numpy_indices_are_taken_as_ints() -> None:
    examples = [tfpipe.beam.SourceExample(np.int64(k), f"a{k}", {"x": k}) for k in (1, 0)]
    encode = Encode(_X, WriteOptions(shuffle=False, workers=1))
    (batch,) = filter(is_record, encode.process(examples))
    assert batch.pairs == [(1, _X.encode({"x": 1})), (0, _X.encode({"x": 0}))]
    assert all(type(key) is int for key, _ in batch.pairs)  # sorted with the int 1 of others


def _temporary_shards(prefix: Path, first: int = 0, count: int = 2) -> list[Any]:
    """Every shard of `count` (2), 3 records each ({"x": first + k} in shard k), under their
    temporary names: what the shard writing step gives the last step."""
    return [_temporary_shard(prefix, k, count, first + k) for k in range(count)]


def _temporary_shard(prefix: Path, shard: int, count: int, x: int) -> Any:
    """Shard `shard` of `count`, 3 records {"x": x}, under its temporary name."""
    writer = ShardWriter(prefix, list(range(count + 1)), None, unique=True)
    return write_shard(writer, shard, [_X.encode({"x": x})] * 3)


def _last_step(
    written: list[Any], cut: ShardCut, prefix: Path, options: WriteOptions | None = None
) -> DatasetInfo:
    """`finish` of the shards `written`, no example skipped or repeated; `options` default
    to one worker's."""
    return finish(
        written,
        skipped=[],
        repeated=[],
        cut=cut,
        path=prefix,
        schema=_X,
        options=options or WriteOptions(workers=1),
    )


def _in_the_way(prefix: Path, shard: int, count: int) -> Path:
    """A directory where shard `shard`'s final file goes: renaming that shard fails."""
    final = ShardWriter(prefix, list(range(count + 1)), None).final_path(shard)
    final.unlink(missing_ok=True)
    final.mkdir()
    return final


def test_the_last_step_can_be_retried(tmp_path: Path) -> None:
    """A runner retries a failed step with the same input: shards renamed by the first attempt
    are taken as they are, the metadata is saved again."""
    prefix = tmp_path / "train"
    written = _temporary_shards(prefix)
    plan, options = ShardCut(2, 6, 0), WriteOptions(workers=1)
    first = _last_step(written, plan, prefix, options)
    (tmp_path / "train.json").unlink()  # as if the first attempt failed after the renames
    again = _last_step(written, plan, prefix, options)
    assert again.shards == first.shards == DatasetInfo.load(prefix).shards
    assert [s.num_examples for s in again.shards] == [3, 3]
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == [*(s.file for s in first.shards), "train.json"]


def test_a_retry_of_the_last_step_renames_what_the_first_attempt_left(tmp_path: Path) -> None:
    """The first attempt renamed shard 0 and failed at shard 1: the retry takes shard 0 as
    renamed (its records), renames shards 1 and 2 and saves the metadata."""
    prefix = tmp_path / "train"
    written = _temporary_shards(prefix, count=3)
    plan, options = ShardCut(3, 9, 0), WriteOptions(workers=1)
    blocked = _in_the_way(prefix, 1, 3)
    with pytest.raises(IsADirectoryError):
        _last_step(written, plan, prefix, options)
    assert not (tmp_path / written[0].entry.file).exists()  # renamed
    assert (tmp_path / written[1].entry.file).exists()  # not yet
    blocked.rmdir()
    info = _last_step(written, plan, prefix, options)
    assert info == DatasetInfo.load(prefix)
    assert [s.num_examples for s in info.shards] == [3, 3, 3]
    assert _shards(prefix) == [[_X.encode({"x": k})] * 3 for k in range(3)]
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == [*(s.file for s in info.shards), "train.json"]


@pytest.mark.fault(
    "a write to the prefix finishes while a Beam write writes its shards (its clean-up removes "
    "the Beam write's temporary shard 0, whose records its own shard 0 holds), then the Beam "
    "write's last step stops after renaming some shards",
    reader="tfpipe.beam.WriteTFRecords",
    outcome="the other write's metadata is removed before the first rename: no metadata "
    "describes the mixed shards",
)
def test_the_last_step_removes_old_metadata_even_with_shard_0_renamed(tmp_path: Path) -> None:
    prefix = tmp_path / "train"
    first = _temporary_shard(prefix, 0, 3, 0)
    source = tfpipe.from_arrays({"x": np.array([0, 0, 0, 5, 5, 5, 6, 6, 6])}, _X)
    tfpipe.write_tfrecords(source, prefix, num_shards=3, shuffle=False, progress=False)
    assert not (tmp_path / first.entry.file).exists()  # removed by that write's clean-up
    written = [first, *(_temporary_shard(prefix, k, 3, k) for k in (1, 2))]
    _in_the_way(prefix, 2, 3)  # the step stops after renaming shard 1 (as if killed)
    with pytest.raises(IsADirectoryError):
        _last_step(written, ShardCut(3, 9, 0), prefix)
    final = ShardWriter(prefix, [0, 1, 2, 3], None).final_path(1)
    assert _file_records(final) == [_X.encode({"x": 1})] * 3  # the Beam write's, over the other's
    assert not (tmp_path / "train.json").exists()


@pytest.mark.fault(
    "a shard whose temporary file is gone at a Beam write's last step, and a final file of the "
    "same size with other records (a stale shard)",
    reader="tfpipe.beam.WriteTFRecords",
    outcome="TfpipeError naming the prefix and the shard; nothing renamed, no metadata",
)
def test_the_last_step_takes_a_renamed_shard_only_with_its_own_records(tmp_path: Path) -> None:
    prefix = tmp_path / "train"
    written = _temporary_shards(prefix)
    stale = _temporary_shards(prefix, first=5)[0].entry  # {"x": 5}: as many bytes as {"x": 0}
    ShardWriter(prefix, [0, 1, 2], None).commit(0, stale)
    (tmp_path / written[0].entry.file).unlink()
    assert (tmp_path / "train-00000-of-00002.tfrecord").stat().st_size == stale.num_bytes
    assert stale.num_bytes == written[0].entry.num_bytes
    with pytest.raises(
        TfpipeError,
        match=r"'.*train'\): the temporary file of shard 0 \(.*\) is gone and "
        r"train-00000-of-00002\.tfrecord does not hold its records",
    ):
        _last_step(written, ShardCut(2, 6, 0), prefix)
    assert (tmp_path / written[1].entry.file).exists()  # not renamed
    assert not (tmp_path / "train.json").exists()


@pytest.mark.fault(
    "another write to the prefix finishes while a Beam write runs (its clean-up removes the "
    "Beam write's temporary shards)",
    reader="tfpipe.beam.WriteTFRecords",
    outcome="TfpipeError naming the prefix at the last step; the other write's dataset is "
    "left whole",
)
def test_a_write_that_finished_meanwhile_fails_the_last_step(tmp_path: Path) -> None:
    prefix = tmp_path / "train"
    written = _temporary_shards(prefix)
    source = tfpipe.from_arrays({"x": np.arange(10, 16)}, _X)
    other = tfpipe.write_tfrecords(source, prefix, num_shards=2, shuffle=False, progress=False)
    with pytest.raises(TfpipeError, match="another write to this prefix ran meanwhile"):
        _last_step(written, ShardCut(2, 6, 0), prefix)
    assert DatasetInfo.load(prefix).shards == other.shards
    assert _records(prefix) == [_X.encode({"x": x}) for x in range(10, 16)]


@pytest.mark.fault(
    "a write_tfrecords holds the local prefix when a WriteTFRecords in a user's pipeline "
    "reaches its last step",
    reader="tfpipe.beam.WriteTFRecords",
    outcome="TfpipeError naming the prefix and the lock holder's pid; nothing renamed",
)
def test_the_last_step_holds_the_prefix_lock(tmp_path: Path) -> None:
    prefix = tmp_path / "train"
    written = _temporary_shards(prefix)
    plan, options = ShardCut(2, 6, 0), WriteOptions(workers=1)
    with (
        writer_lock(prefix),
        pytest.raises(TfpipeError, match=r"prefix '.*train' is being written by another"),
    ):
        _last_step(written, plan, prefix, options)
    assert list(tmp_path.glob("train*")) == []
    assert _last_step(written, plan, prefix, options).num_examples == 6


@pytest.mark.fault(
    "the shards of a Beam write hold fewer records than were encoded (or a shard out of range)",
    reader="tfpipe.beam.WriteTFRecords",
    outcome="TfpipeError naming the prefix and both counts; no metadata",
)
def test_the_last_step_refuses_shards_short_of_the_encoded_count(tmp_path: Path) -> None:
    prefix = tmp_path / "train"
    written = _temporary_shards(prefix)
    options = WriteOptions(workers=1)
    with pytest.raises(TfpipeError, match=r"hold 6 examples .* but 7 were encoded"):
        _last_step(written, ShardCut(2, 7, 0), prefix, options)
    with pytest.raises(TfpipeError, match=r"in shards \[0, 1\]"):
        _last_step(written, ShardCut(1, 6, 0), prefix, options)
    assert not (tmp_path / "train.json").exists()


def test_seed_and_num_shards_are_checked_as_write_tfrecords_checks_them(tmp_path: Path) -> None:
    src = tfpipe.from_arrays({"x": np.arange(4)})
    key = tfpipe.beam.shuffle_key(np.int64(3), 0, "a")
    assert key == tfpipe.beam.shuffle_key(3, 0, "a")
    with pytest.raises(ValueError, match="seed must be below 2"):
        tfpipe.beam.WriteTFRecords(tmp_path / "t", src.schema, seed=2**64)
    with pytest.raises(ValueError, match="num_shards=5 is more than the 4 examples"):
        tfpipe.beam.write_tfrecords(src, tmp_path / "t", num_shards=5, args=IN_PROCESS)


def test_shuffle_keys_are_seeded_and_uniform() -> None:
    keys = [tfpipe.beam.shuffle_key(0, i, f"f{i}.jpg") for i in range(4000)]
    assert keys == [tfpipe.beam.shuffle_key(0, i, f"f{i}.jpg") for i in range(4000)]
    assert keys != [tfpipe.beam.shuffle_key(1, i, f"f{i}.jpg") for i in range(4000)]
    counts = np.bincount([k * 8 // 2**64 for k in keys], minlength=8)
    assert counts.min() > 400  # 500 expected per eighth


def test_pipeline_options() -> None:
    direct = tfpipe.beam.pipeline_options("direct", workers=3).get_all_options()
    assert direct["runner"] == "DirectRunner"
    assert (direct["direct_num_workers"], direct["direct_running_mode"]) == (3, "multi_processing")
    one = tfpipe.beam.pipeline_options("direct", workers=1).get_all_options()
    assert (one["direct_num_workers"], one["direct_running_mode"]) == (1, "in_memory")
    one_process = tfpipe.beam.pipeline_options("direct", PROCESSES, workers=1).get_all_options()
    assert one_process["direct_running_mode"] == "multi_processing"
    given = tfpipe.beam.pipeline_options("direct", IN_PROCESS).get_all_options()
    assert given["direct_running_mode"] == "in_memory"
    assert given["direct_num_workers"] == os.cpu_count()
    flink = tfpipe.beam.pipeline_options("FlinkRunner", ["--flink_master=localhost:8081"])
    assert flink.get_all_options()["flink_master"] == "localhost:8081"
    with pytest.raises(ValueError, match="runner must be one of"):
        tfpipe.beam.pipeline_options("samza")


@pytest.mark.slow
def test_cli_writes_with_beam_and_passes_beam_options(
    written: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`tfpipe write --runner direct` in a process of its own, as a user runs it: its first
    `from tfpipe import beam` is the one that counts (it gave Apache Beam itself)."""
    out = tmp_path / "cli" / "train"
    command = [str(Path(sys.executable).parent / "tfpipe"), "write", str(written["images"])]
    argv = [*command, str(out), "--runner", "direct", *IN_PROCESS, "--shards", "3"]
    result = subprocess.run(
        [*argv, "--image-size", "16x16", "--no-shuffle"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "200 examples" in result.stdout
    info = DatasetInfo.load(out)
    assert (info.num_examples, info.shuffled) == (200, False)
    assert info.schema["image"].shape == (16, 16, 3)
    local = tfpipe.write_tfrecords(
        tfpipe.from_directory(written["images"], image_shape=(16, 16, 3)),
        tmp_path / "local" / "train",
        info.schema,  # raw images, as --image-size stores them
        num_shards=3,
        shuffle=False,
        progress=False,
    )
    assert [s.num_examples for s in local.shards] == [67, 66, 67]
    assert _shards(out) == _shards(tmp_path / "local" / "train")  # the same shards, in order
    source = tfpipe.from_tfrecords(out)
    assert [int(source[i]["label"]) for i in range(200)] == [i // 50 for i in range(200)]
    with pytest.raises(SystemExit):
        cli.main(["write", str(written["images"]), str(out), "--direct_num_workers=2"])
    assert "--runner" in capsys.readouterr().err


def test_only_tfpipe_beam_uses_beam_and_its_hint_names_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A module importing apache_beam at its top holds it (or a name from it) as a global.
    users = [
        name
        for name, module in list(sys.modules.items())
        if name.startswith("tfpipe") and not f"{name}.".startswith("tfpipe.beam.")
        for value in vars(module).values()
        if str(getattr(value, "__module__", None) or getattr(value, "__name__", "")).startswith(
            "apache_beam"
        )
    ]
    assert users == []
    monkeypatch.setitem(sys.modules, "apache_beam", None)  # as if it were not installed
    monkeypatch.delitem(sys.modules, "tfpipe.beam")
    with pytest.raises(ImportError, match=r"pip install 'tfpipe\[beam\]'"):
        importlib.import_module("tfpipe.beam")


@pytest.mark.parametrize(
    ("shuffle", "planned_limit"), [(False, 0), (True, writing.PLANNED_ORDER_LIMIT), (True, 299)]
)
def test_write_tfrecords_skips_what_write_tfrecords_skips(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shuffle: bool, planned_limit: int
) -> None:
    """`tfpipe.beam.write_tfrecords` writes each planned shard in one step, or (shuffled above
    the limit) reads and encodes each range in one step: an example its source cannot give
    is skipped, counted and listed as `tfpipe.write_tfrecords` does."""
    monkeypatch.setattr(writing, "PLANNED_ORDER_LIMIT", planned_limit)
    source = _OneUnreadable(tfpipe.from_arrays({"x": np.arange(300)}, _X), 270)
    options = {"num_shards": 3, "shuffle": shuffle, "seed": 3, "on_error": "skip"}
    with pytest.warns(TfpipeWarning, match="skipped 1 of 300"):
        info = tfpipe.beam.write_tfrecords(
            source, tmp_path / "beam" / "train", workers=1, args=IN_PROCESS, **options
        )
    with pytest.warns(TfpipeWarning, match="skipped 1 of 300"):
        local = tfpipe.write_tfrecords(
            source, tmp_path / "local" / "train", progress=False, **options
        )
    assert info.skipped == local.skipped and info.num_examples == 299
    if len(source) > planned_limit:  # another random order (a hash): the same records
        assert collections.Counter(_records(tmp_path / "beam" / "train")) == collections.Counter(
            _records(tmp_path / "local" / "train")
        )
    else:
        assert _shards(tmp_path / "beam" / "train") == _shards(tmp_path / "local" / "train")


@pytest.mark.parametrize(
    ("shuffle", "planned_limit"), [(False, 0), (True, writing.PLANNED_ORDER_LIMIT), (True, 39)]
)
def test_a_planned_write_sends_no_record_through_a_shuffle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shuffle: bool, planned_limit: int
) -> None:
    """With the shards planned, each shard is read, encoded and written in one step; shuffled
    above the limit, the records of each batch cross the shard shuffle to their shard's step."""
    monkeypatch.setattr(writing, "PLANNED_ORDER_LIMIT", planned_limit)
    source = tfpipe.from_arrays({"x": np.arange(40)}, _X)
    write = tfpipe.beam.WriteTFRecords(tmp_path / "train", _X, num_shards=3, shuffle=shuffle)
    pipeline = beam.Pipeline()
    _ = pipeline | "Write" >> ReadAndWrite(tfpipe.beam.ReadSource(source), write)
    steps = {
        name.split("/")[1]
        for name in (t.unique_name for t in pipeline.to_runner_api().components.transforms.values())
        if name.count("/") >= 1
    }
    shuffled_steps = {"ReadAndEncode", "ToShards", "GroupShards"}
    through_shuffle = shuffle and len(source) > planned_limit
    assert shuffled_steps <= steps if through_shuffle else not shuffled_steps & steps
    assert "WriteShards" in steps


@pytest.mark.fault(
    "an example the source cannot give in a Beam write in order (each shard read, encoded "
    "and written by one step), with on_error='raise'",
    reader="tfpipe.beam.write_tfrecords",
    outcome="EncodeError naming the example; no metadata, no shard under its final name",
)
def test_a_shard_written_in_one_step_fails_naming_the_example(tmp_path: Path) -> None:
    source = _OneUnreadable(tfpipe.from_arrays({"x": np.arange(300)}, _X), 170)
    with pytest.raises(EncodeError, match=r"cannot read example 170 .* is gone"):
        tfpipe.beam.write_tfrecords(
            source, tmp_path / "train", num_shards=3, shuffle=False, workers=1, args=IN_PROCESS
        )
    assert [p.name for p in tmp_path.iterdir() if not p.name.startswith(".")] == []


@pytest.mark.parametrize("compression", [None, "gzip"])
def test_beam_records_the_digests_write_tfrecords_records(
    tmp_path: Path, compression: str | None
) -> None:
    source = tfpipe.from_arrays({"x": np.arange(30)}, _X)
    options = {"num_shards": 3, "shuffle": False, "compression": compression}
    beam_info = tfpipe.beam.write_tfrecords(
        source, tmp_path / "beam" / "train", workers=1, args=IN_PROCESS, **options
    )
    local = tfpipe.write_tfrecords(source, tmp_path / "local" / "train", progress=False, **options)
    assert [f.read_bytes() for f in beam_info.files] == [f.read_bytes() for f in local.files]
    digests = [shard.crc32c for shard in local.shards]
    assert [shard.crc32c for shard in beam_info.shards] == digests
    assert digests == [f"{crc32c.value(f.read_bytes()):08x}" for f in local.files]
    assert tfpipe.verify(tmp_path / "beam" / "train", progress=False).ok
