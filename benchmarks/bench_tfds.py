"""Opening a split of a prepared TensorFlow Datasets folder, its shard counts checked.

Dataset: a TFDS folder laid out as TFDS 4.9 lays it out (`dataset_info.json`, `features.json`,
shards `big-train.tfrecord-0000k-of-00004`), 4 shards of 1 KB records (80,000 records; 4,000
with TFPIPE_BENCH_QUICK=1). Its `dataset_info.json` lists each shard's length but no
`numBytes`, as older TFDS metadata and other writers leave it, so the shards' sizes cannot vouch
for the counts and every shard's records are counted when the split is opened.

The baseline, written by hand here, is the check a careful user writes: read
`dataset_info.json`, count each shard's records once with `tf.data`
(`TFRecordDataset(shard).reduce(...)`, which reads every record), compare with `shardLengths`,
then make the `TFRecordDataset`. tfpipe's cases open the split as a user does:
`read_tfrecords(folder, split="train")` (a `tf.data.Dataset`, nothing iterated), and
`from_tfrecords(folder, split="train")` with its index built anew (the index is removed before
each open). The time is the open alone; the rate is records checked per second of it.
"""

from __future__ import annotations

import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.harness import compare, scale

SHARDS = 4
RECORD_BYTES = 1000
OPENS = scale(3, 1)


def _make_folder(root: Path, per_shard: int) -> Path:
    import numpy as np
    import tensorflow as tf

    folder = root / "big" / "1.0.0"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for k in range(SHARDS):
        with tf.io.TFRecordWriter(str(folder / f"big-train.tfrecord-{k:05d}-of-{SHARDS:05d}")) as w:
            for _ in range(per_shard):
                value = tf.train.BytesList(value=[rng.bytes(RECORD_BYTES)])
                feature = {"text": tf.train.Feature(bytes_list=value)}
                w.write(
                    tf.train.Example(
                        features=tf.train.Features(feature=feature)
                    ).SerializeToString()
                )
    split = {"name": "train", "shardLengths": [str(per_shard)] * SHARDS}  # no numBytes
    info = {"name": "big", "version": "1.0.0", "fileFormat": "tfrecord", "splits": [split]}
    (folder / "dataset_info.json").write_text(json.dumps(info))
    text = {"pythonClassName": "tensorflow_datasets.core.features.text_feature.Text", "text": {}}
    features = {
        "featuresDict": {"features": {"text": text}},
        "pythonClassName": "tensorflow_datasets.core.features.features_dict.FeaturesDict",
    }
    (folder / "features.json").write_text(json.dumps(features))
    return folder


def _by_hand(folder: Path) -> Any:
    """The baseline: each shard counted once with tf.data against shardLengths."""
    import tensorflow as tf

    split = json.loads((folder / "dataset_info.json").read_text())["splits"][0]
    files = [str(folder / f"big-train.tfrecord-{k:05d}-of-{SHARDS:05d}") for k in range(SHARDS)]
    for file, listed in zip(files, split["shardLengths"], strict=True):
        found = int(
            tf.data.TFRecordDataset(file).reduce(tf.constant(0, tf.int64), lambda n, _: n + 1)
        )
        if found != int(listed):
            raise ValueError(f"{file} holds {found} records, {listed} listed")
    return tf.data.TFRecordDataset(files)


def _open(folder: Path, how: str) -> Any:
    import tfpipe

    if how == "by hand":
        return _by_hand(folder)
    if how == "read_tfrecords":
        return tfpipe.read_tfrecords(folder, split="train")
    shutil.rmtree(folder / ".tfpipe-index", ignore_errors=True)
    return tfpipe.from_tfrecords(folder, split="train")


def open_split(folder: str, how: str, records: int) -> dict[str, Any]:
    """Opens the split OPENS times after one warm-up open; records checked per second."""
    _open(Path(folder), how)  # warm: TensorFlow's start-up, the page cache
    seconds = []
    for _ in range(OPENS):
        started = time.perf_counter()
        _open(Path(folder), how)
        seconds.append(time.perf_counter() - started)
    median = statistics.median(seconds)
    return {"examples_per_s": records / median, "open_s": median, "each_s": seconds}


def main() -> None:
    per_shard = scale(20_000, 1_000)
    work = Path(tempfile.mkdtemp(prefix="tfpipe-bench-tfds-"))
    try:
        folder = str(_make_folder(work, per_shard))
        records = per_shard * SHARDS
        baseline = "by hand: dataset_info.json, each shard counted once with tf.data"
        report = compare(
            "tfds_open",
            {
                baseline: (open_split, (folder, "by hand", records)),
                'read_tfrecords(folder, split="train")': (
                    open_split,
                    (folder, "read_tfrecords", records),
                ),
                'from_tfrecords(folder, split="train"), index built': (
                    open_split,
                    (folder, "from_tfrecords", records),
                ),
            },
            baseline=baseline,
            extra={"records": records, "shards": SHARDS, "record_bytes": RECORD_BYTES},
        )
        for row in report["rows"]:
            seconds = statistics.median(run["open_s"] for run in row["runs"])
            print(f"{row['case']}: {seconds:.3f} s per open (median)")
    finally:
        shutil.rmtree(work, ignore_errors=True)
