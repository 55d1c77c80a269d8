"""tfpipe.beam: Beam writes what write_tfrecords writes (DirectRunner, in this process)."""

from __future__ import annotations

import collections
import importlib
import itertools
import os
import sys
from pathlib import Path

import pytest

pytest.importorskip("apache_beam")

import apache_beam as beam
import numpy as np
import tensorflow as tf
from apache_beam.metrics.metric import MetricsFilter

import tfpipe
import tfpipe.beam
from tfpipe import cli
from tfpipe.synthetic import make_image_folder

# One process: a DirectRunner with worker processes takes ~30 s to start (each imports
# TensorFlow); `tfpipe write --runner direct` uses them, tested in test_pipeline_options.
IN_PROCESS = ["--direct_running_mode=in_memory"]


def _records(prefix: Path) -> list[bytes]:
    info = tfpipe.DatasetInfo.load(prefix)
    return [r.numpy() for r in tf.data.TFRecordDataset([str(f) for f in info.files])]


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
    beam, local = (tfpipe.DatasetInfo.load(written[k]) for k in ("beam", "local"))
    assert beam.num_examples == local.num_examples == 200
    assert beam.schema == local.schema
    assert beam.class_names == local.class_names == {"label": sorted(beam.class_names["label"])}
    assert [s.file for s in beam.shards] == [s.file for s in local.shards]
    assert [f.stat().st_size for f in beam.files] == [s.num_bytes for s in beam.shards]
    assert (beam.shuffled, beam.seed, beam.compression) == (True, 0, None)
    assert collections.Counter(_records(written["beam"])) == collections.Counter(
        _records(written["local"])
    )
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
def test_failed_run_leaves_nothing_complete_and_skips_are_counted(tmp_path: Path) -> None:
    folder = make_image_folder(tmp_path / "images", num_classes=2, per_class=10, size=(32, 32))
    broken = sorted((folder / "circle").iterdir())[4]
    broken.write_bytes(b"not a JPEG")
    source = tfpipe.from_directory(folder)
    prefix = tmp_path / "out" / "train"
    with pytest.raises(tfpipe.EncodeError, match=broken.name):
        tfpipe.beam.write_tfrecords(source, prefix, workers=1, args=IN_PROCESS)
    assert [p.name for p in prefix.parent.iterdir() if not p.name.startswith(".")] == []

    write = tfpipe.beam.WriteTFRecords(prefix, source.schema, num_shards=3, on_error="skip")
    pipeline = beam.Pipeline(options=tfpipe.beam.pipeline_options("direct", IN_PROCESS, 1))
    _ = pipeline | tfpipe.beam.ReadSource(source) | write
    result = pipeline.run()
    result.wait_until_finish()
    counters = {
        c.key.metric.name: c.committed
        for c in result.metrics().query(MetricsFilter().with_namespace("tfpipe"))["counters"]
    }
    assert counters == {"skipped_examples": 1, "encoded_examples": 19}
    info = tfpipe.DatasetInfo.load(prefix)
    assert info.num_examples == 19
    assert [(s.origin, s.index) for s in info.skipped] == [(str(broken), 4)]
    assert sorted(p.name for p in prefix.parent.iterdir()) == [
        *(f"train-0000{k}-of-00003.tfrecord" for k in range(3)),
        "train.json",
    ]
    assert len(next(iter(tfpipe.read_tfrecords(prefix).batch(50)))["label"]) == 19


def test_the_last_step_can_be_retried(tmp_path: Path) -> None:
    """A runner retries a failed step with the same input: shards renamed by the first attempt
    are taken as they are, the metadata is saved again."""
    from tfpipe.beam import _finish, _Plan
    from tfpipe.records.writer import WriteOptions, _ShardWriter

    schema = tfpipe.Schema({"x": tfpipe.Tensor(shape=(), dtype="int64")})
    prefix = tmp_path / "train"
    writer = _ShardWriter(prefix, [0, 1, 2], None, unique=True)
    written = [(k, writer.write_whole(k, [schema.encode({"x": k})] * 3)) for k in range(2)]
    plan, options = _Plan(2, 2**64, 6, 0), WriteOptions(workers=1)
    first = _finish(written, [], plan, prefix, schema, options)
    (tmp_path / "train.json").unlink()  # as if the first attempt failed after the renames
    again = _finish(written, [], plan, prefix, schema, options)
    assert again.shards == first.shards == tfpipe.DatasetInfo.load(prefix).shards
    assert [s.num_examples for s in again.shards] == [3, 3]
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == [*(s.file for s in first.shards), "train.json"]


@pytest.mark.fault(
    "the shards of a Beam write hold fewer records than were encoded (or a shard out of range)",
    reader="tfpipe.beam.WriteTFRecords",
    outcome="TfpipeError naming the prefix and both counts; no metadata",
)
def test_the_last_step_refuses_shards_short_of_the_encoded_count(tmp_path: Path) -> None:
    from tfpipe.beam import _finish, _Plan
    from tfpipe.records.writer import WriteOptions, _ShardWriter

    schema = tfpipe.Schema({"x": tfpipe.Tensor(shape=(), dtype="int64")})
    prefix = tmp_path / "train"
    writer = _ShardWriter(prefix, [0, 1, 2], None, unique=True)
    written = [(k, writer.write_whole(k, [schema.encode({"x": k})] * 3)) for k in range(2)]
    options = WriteOptions(workers=1)
    with pytest.raises(tfpipe.TfpipeError, match=r"hold 6 examples .* but 7 were encoded"):
        _finish(written, [], _Plan(2, 2**64, 7, 0), prefix, schema, options)
    with pytest.raises(tfpipe.TfpipeError, match=r"in shards \[0, 1\]"):
        _finish(written, [], _Plan(1, 2**64, 6, 0), prefix, schema, options)
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
    out = tmp_path / "cli" / "train"
    argv = ["write", str(written["images"]), str(out), "--runner", "direct", *IN_PROCESS]
    assert cli.main([*argv, "--shards", "3", "--image-size", "16x16", "--no-shuffle"]) == 0
    info = tfpipe.DatasetInfo.load(out)
    assert (info.num_examples, info.shuffled) == (200, False)
    assert info.schema["image"].shape == (16, 16, 3)
    assert [s.num_examples for s in info.shards] == [67, 67, 66]  # ranges of indices, in order
    source = tfpipe.from_tfrecords(out)
    assert [int(source[i]["label"]) for i in range(200)] == [i // 50 for i in range(200)]
    assert "200 examples" in capsys.readouterr().out
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
        if name.startswith("tfpipe") and name != "tfpipe.beam"
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
