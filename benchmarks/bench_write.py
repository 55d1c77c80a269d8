"""Writing TFRecords: `write_tfrecords` against a hand-written `tf.io.TFRecordWriter` loop.

Issue 2, section 8. On 256x256 JPEGs (6 class folders):

- stored as they are (no re-encode): write_tfrecords (shuffled, 8 shards, default workers)
  against a single-process loop that reads each file and writes its bytes. Since issue 11 the
  writer decodes each copied JPEG once by default (TensorFlow's decoder at 1/8 scale, 32 per
  graph call), so that a corrupt file fails at write time: the loop only reads bytes, so that
  row costs what the decode costs (expected ~0.2x; docs/reliability.md explains). The goal of
  issue 2, >= 0.8x, applies to the copy itself: `check_copies=False`;
- resized to 128x128: write_tfrecords with 2 workers against the same loop doing Pillow's
  draft-mode decode, bilinear resize and JPEG encode (the operations tfpipe does); goal > 1x;
- peak RSS of write_tfrecords at N and 4N examples (the 4N source repeats the N files, so the
  disk holds N images): it should stay flat, since the writer only keeps a bounded window.

Issue 14: the same resize written by `tfpipe.beam.write_tfrecords` on the DirectRunner with 2
worker processes, against `write_tfrecords` with 2 workers (goal >= 0.5x, run by run). The
timed Beam run starts its 2 worker processes again, as every run does: `startup_s` is the time
of a 32-example run (the runner's start-up, mostly the workers' import of Beam and TensorFlow);
docs/guides/beam.md breaks one run down stage by stage.
"""

from __future__ import annotations

import importlib.util
import io
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.harness import compare, scale

IMAGE_SIZE = (256, 256)
STORED_SIZE = (128, 128)
QUALITY = 95
WARMUP = 32  # examples written first, untimed, by every case (imports, first writer)


class _Repeated:
    """A directory source repeated `times` times (more examples, the same files on disk)."""

    def __init__(self, source: Any, times: int) -> None:
        self.source = source
        self.schema = source.schema
        self.times = times

    def __len__(self) -> int:
        return len(self.source) * self.times

    def __getitem__(self, index: int) -> dict[str, Any]:
        return self.source[index % len(self.source)]

    def origin(self, index: int) -> str:
        return self.source.origin(index % len(self.source))


def _result(examples: int, seconds: float, out: Path) -> dict[str, Any]:
    written = sum(f.stat().st_size for f in out.iterdir() if f.is_file())
    return {
        "examples": examples,
        "seconds": seconds,
        "examples_per_s": examples / seconds,
        "mb_per_s": written / seconds / 1e6,
        "bytes_written": written,
    }


def _hand_written_loop(items: list[tuple[str, int]], out: Path, resize: bool) -> None:
    """The loop a user writes: read (or decode, resize, encode) each file, write one record."""
    import tensorflow as tf
    from PIL import Image

    with tf.io.TFRecordWriter(str(out / "train.tfrecord")) as writer:
        for path, label in items:
            if resize:
                image = Image.open(path)
                image.draft("RGB", STORED_SIZE)
                buffer = io.BytesIO()
                image.convert("RGB").resize(STORED_SIZE, Image.Resampling.BILINEAR).save(
                    buffer, format="JPEG", quality=QUALITY
                )
                data = buffer.getvalue()
            else:
                with open(path, "rb") as f:
                    data = f.read()
            feature = {
                "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[data])),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[label])),
            }
            example = tf.train.Example(features=tf.train.Features(feature=feature))
            writer.write(example.SerializeToString())


def _hand_written(root: str, resize: bool) -> dict[str, Any]:
    classes = sorted(p.name for p in Path(root).iterdir() if p.is_dir())
    items = [
        (str(path), label)
        for label, name in enumerate(classes)
        for path in sorted((Path(root) / name).glob("*.jpg"))
    ]
    with tempfile.TemporaryDirectory() as warm, tempfile.TemporaryDirectory() as out:
        _hand_written_loop(items[:WARMUP], Path(warm), resize)
        start = time.perf_counter()
        _hand_written_loop(items, Path(out), resize)
        return _result(len(items), time.perf_counter() - start, Path(out))


def hand_written_copy(root: str) -> dict[str, Any]:
    return _hand_written(root, resize=False)


def hand_written_resize(root: str) -> dict[str, Any]:
    return _hand_written(root, resize=True)


def _tfpipe(
    root: str, times: int, resize: bool, workers: int | None, check_copies: bool = True
) -> dict[str, Any]:
    import tfpipe
    from tfpipe.sources import Subset

    shape = (*STORED_SIZE, 3) if resize else (None, None, 3)
    directory = tfpipe.from_directory(root, image_shape=shape)
    source = _Repeated(directory, times)
    with tempfile.TemporaryDirectory() as warm, tempfile.TemporaryDirectory() as out:
        warmup = Subset(directory, range(WARMUP))
        options = {"workers": workers, "progress": False, "check_copies": check_copies}
        tfpipe.write_tfrecords(warmup, Path(warm) / "train", **options)
        start = time.perf_counter()
        tfpipe.write_tfrecords(source, Path(out) / "train", **options)
        return _result(len(source), time.perf_counter() - start, Path(out))


def tfpipe_copy(root: str, times: int, check_copies: bool = True) -> dict[str, Any]:
    return _tfpipe(root, times, resize=False, workers=None, check_copies=check_copies)


def tfpipe_resize_2_workers(root: str) -> dict[str, Any]:
    return _tfpipe(root, 1, resize=True, workers=2)


def beam_resize_2_workers(root: str, mode: str) -> dict[str, Any]:
    """tfpipe.beam on the DirectRunner with 2 workers (`mode`: "multi_processing" or
    "multi_threading"); `startup_s` is the time of a 32-example run (the runner's start-up: it
    starts its worker processes again on every run)."""
    import tfpipe
    import tfpipe.beam
    from tfpipe.sources import Subset

    directory = tfpipe.from_directory(root, image_shape=(*STORED_SIZE, 3))
    options = {"workers": 2, "args": [f"--direct_running_mode={mode}"]}
    with tempfile.TemporaryDirectory() as warm, tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        tfpipe.beam.write_tfrecords(Subset(directory, range(WARMUP)), Path(warm) / "t", **options)
        startup = time.perf_counter() - start
        start = time.perf_counter()
        tfpipe.beam.write_tfrecords(directory, Path(out) / "train", **options)
        result = _result(len(directory), time.perf_counter() - start, Path(out))
    return {**result, "startup_s": startup, "write_s": result["seconds"] - startup}


def _print_mb_per_s(report: dict[str, Any]) -> None:
    for row in report["rows"]:
        mb_per_s = statistics.median(run["mb_per_s"] for run in row["runs"])
        print(f"  {row['case']:<44} {mb_per_s:>8.1f} MB/s written")


def main() -> None:
    from tfpipe.sources.synthetic import make_image_folder

    per_class = scale(400, 40)
    root = tempfile.mkdtemp(prefix="tfpipe-bench-write-")
    try:
        make_image_folder(root, num_classes=6, per_class=per_class, size=IMAGE_SIZE, quality=90)
        n = 6 * per_class
        extra = {"examples": n, "image_size": IMAGE_SIZE, "cpus": os.cpu_count()}
        copy = compare(
            "write_copy",
            {
                "hand-written TFRecordWriter loop": (hand_written_copy, (root,)),
                f"write_tfrecords, N={n}": (tfpipe_copy, (root, 1)),
                f"write_tfrecords, 4N={4 * n} (peak RSS)": (tfpipe_copy, (root, 4)),
                f"write_tfrecords, check_copies=False, N={n}": (tfpipe_copy, (root, 1, False)),
            },
            baseline="hand-written TFRecordWriter loop",
            goals={f"write_tfrecords, check_copies=False, N={n}": 0.8},
            extra=extra,
        )
        _print_mb_per_s(copy)
        resize = compare(
            "write_resize",
            {
                "hand-written loop, PIL draft+resize+encode": (hand_written_resize, (root,)),
                "write_tfrecords, resize, workers=2": (tfpipe_resize_2_workers, (root,)),
            },
            baseline="hand-written loop, PIL draft+resize+encode",
            goals={"write_tfrecords, resize, workers=2": 1.0},
            extra={**extra, "stored_size": STORED_SIZE},
        )
        _print_mb_per_s(resize)
        compare_beam()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def compare_beam() -> None:
    """Beam's DirectRunner (2 processes) against write_tfrecords (2 workers), run by run, on
    4,000 images (5 classes)."""
    if importlib.util.find_spec("apache_beam") is None:
        print("write_beam skipped: Apache Beam is not installed (pip install 'tfpipe[beam]')")
        return
    from tfpipe.sources.synthetic import make_image_folder

    with tempfile.TemporaryDirectory(prefix="tfpipe-bench-beam-") as work:
        root = str(Path(work) / "images")
        per_class = scale(800, 40)
        make_image_folder(root, num_classes=5, per_class=per_class, size=IMAGE_SIZE, quality=90)
        extra = {"examples": 5 * per_class, "image_size": IMAGE_SIZE, "cpus": os.cpu_count()}
        _compare_beam(root, extra)


def _compare_beam(root: str, extra: dict[str, Any]) -> None:
    beam = "tfpipe.beam, DirectRunner, 2 processes"
    threads = "tfpipe.beam, DirectRunner, 2 threads"
    local = "write_tfrecords, resize, workers=2"
    report = compare(
        "write_beam",
        {
            "hand-written loop, PIL draft+resize+encode": (hand_written_resize, (root,)),
            local: (tfpipe_resize_2_workers, (root,)),
            beam: (beam_resize_2_workers, (root, "multi_processing")),
            threads: (beam_resize_2_workers, (root, "multi_threading")),
        },
        baseline="hand-written loop, PIL draft+resize+encode",
        pairs={beam: local, threads: local},
        extra={**extra, "stored_size": STORED_SIZE, "goal_beam_vs_write_tfrecords": 0.5},
    )
    for row in report["rows"][2:]:
        startup = statistics.median(run["startup_s"] for run in row["runs"])
        total = statistics.median(run["seconds"] for run in row["runs"])
        print(f"  {row['case']}: {total:.1f} s, of which ~{startup:.1f} s the runner's start-up")


if __name__ == "__main__":
    main()
