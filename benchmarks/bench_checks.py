"""The cost of verifying the data CRC-32C on every random-access read of `from_tfrecords`.

Dataset: 256x256 JPEGs in class folders (4,000 of them; 200 with TFPIPE_BENCH_QUICK=1) written
as uncompressed TFRecords of the original JPEG bytes (4 shards), as in bench_sequence.

The baseline is the read `from_tfrecords` did before it verified checksums: locate the shard,
one `os.pread` of the frame, compare the stored length with the index, slice the data out
(`TFRecordSource.frame`, then the slice). The tfpipe case is today's `TFRecordSource.read`,
which also verifies the masked CRC-32C of the length and of the data (google-crc32c). Both
read every record in one random order, several passes, from a warm page cache; the reported
cost is per record.

The same two sources are then read as `SequenceLoader` batches (64 images decoded and resized
to 128x128 float32), read directly rather than through Keras's adapter so that nothing but the
loader is timed: what the checksum costs next to the JPEG decode it guards.

On a shared machine the fresh-process runs drift by more than the cost measured, so the same
comparison is also made in one process (`*_batch_by_batch`): the two sources take turns, pass
by pass for the reads and a few batches at a time for the loaders (which goes first
alternates), and each turn gives a ratio (speed with CRC / speed without) at the same moment.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.harness import compare, run_isolated, scale

PASSES = 5
BATCH_SIZE = 64
IMAGE_SIZE = (128, 128)


def _unchecked_source(prefix: str) -> Any:
    """`from_tfrecords(prefix)` with the read it had before checksums were verified."""
    from tfpipe import from_tfrecords
    from tfpipe.format.frames import FRAME_HEADER
    from tfpipe.sources.tfrecords import TFRecordSource

    class Unchecked(TFRecordSource):
        def read(self, index: int) -> bytes:
            return self.frame(index)[3][FRAME_HEADER.size : -4]

    checked = from_tfrecords(prefix)
    return Unchecked(checked.files, checked.schema)


def _source(prefix: str, checked: bool) -> Any:
    from tfpipe import from_tfrecords

    return from_tfrecords(prefix) if checked else _unchecked_source(prefix)


def random_reads(prefix: str, checked: bool) -> dict[str, Any]:
    """Reads every record in a random order, PASSES times; examples/s and µs per record."""
    import numpy as np

    source = _source(prefix, checked)
    order = np.random.default_rng(0).permutation(len(source)).tolist()
    for index in order:  # warm the page cache and the file descriptors
        source.read(index)
    started = time.perf_counter()
    for _ in range(PASSES):
        for index in order:
            source.read(index)
    seconds = time.perf_counter() - started
    reads = PASSES * len(order)
    return {"examples_per_s": reads / seconds, "us_per_record": 1e6 * seconds / reads}


def loader_batches(prefix: str, checked: bool) -> dict[str, Any]:
    """SequenceLoader batches (shuffled, decoded, resized) over the source; batches/s."""
    from tfpipe import SequenceLoader

    loader = SequenceLoader(
        _source(prefix, checked), batch_size=BATCH_SIZE, image_size=IMAGE_SIZE, seed=0
    )
    warmup = scale(5, 2)
    for index in range(warmup):
        loader[index]
    count = min(len(loader) - warmup, scale(40, 4))
    started = time.perf_counter()
    for index in range(warmup, warmup + count):
        loader[index]
    seconds = time.perf_counter() - started
    return {
        "examples_per_s": count * BATCH_SIZE / seconds,
        "batches_per_s": count / seconds,
    }


def _turns(count: int, run: Any) -> tuple[list[float], list[list[float]]]:
    """`count` turns of `run(turn, which)` for which in (0: no CRC, 1: CRC), the first one
    alternating; returns the ratio of each turn (seconds without / with) and all seconds."""
    seconds: list[list[float]] = [[], []]
    for turn in range(count):
        for which in (turn % 2, 1 - turn % 2):
            started = time.perf_counter()
            run(turn, which)
            seconds[which].append(time.perf_counter() - started)
    return [a / b for a, b in zip(*seconds, strict=True)], seconds


def interleaved(prefix: str) -> dict[str, Any]:
    """Reads (pass by pass) and loader batches (4 at a time) with and without the CRC, taking
    turns in one process; per-turn ratios of speed with / without, and µs per record read."""
    import statistics

    import numpy as np

    from tfpipe import SequenceLoader

    sources = [_source(prefix, False), _source(prefix, True)]
    order = np.random.default_rng(0).permutation(len(sources[0])).tolist()

    def one_pass(_: int, which: int) -> None:
        read = sources[which].read
        for index in order:
            read(index)

    one_pass(0, 0), one_pass(0, 1)  # warm up
    read_ratios, read_seconds = _turns(scale(20, 4), one_pass)
    loaders = [
        SequenceLoader(s, batch_size=BATCH_SIZE, image_size=IMAGE_SIZE, seed=0) for s in sources
    ]

    def four_batches(turn: int, which: int) -> None:
        for index in range(4 * turn, 4 * turn + 4):
            loaders[which][index % len(loaders[which])]

    four_batches(0, 0), four_batches(0, 1)  # warm up
    batch_ratios, _ = _turns(scale(15, 2), four_batches)
    return {
        "reads": {"ratios": read_ratios, "median": statistics.median(read_ratios)},
        "batches": {"ratios": batch_ratios, "median": statistics.median(batch_ratios)},
        "us_per_record": [1e6 * statistics.median(s) / len(order) for s in read_seconds],
    }


def main() -> None:
    from tfpipe import from_directory, from_tfrecords, write_tfrecords
    from tfpipe.sources.synthetic import make_image_folder

    work = Path(tempfile.mkdtemp(prefix="tfpipe-bench-checks-"))
    try:
        root = make_image_folder(
            work / "images", num_classes=5, per_class=scale(800, 40), size=(256, 256)
        )
        prefix = work / "records" / "train"
        info = write_tfrecords(from_directory(root), prefix, num_shards=4, progress=False)
        from_tfrecords(prefix)  # build the index once, outside the timed cases
        turns = run_isolated(interleaved, str(prefix))
        without, with_crc = turns["us_per_record"]
        print(
            f"in one process, taking turns: {without:.2f} µs per record read without the CRC, "
            f"{with_crc:.2f} µs with it (+{with_crc - without:.2f} µs); speed with / without: "
            f"reads {turns['reads']['median']:.3f}, SequenceLoader batches "
            f"{turns['batches']['median']:.3f}"
        )
        extra = {
            "records": info.num_examples,
            "mean_record_bytes": round(info.num_bytes / info.num_examples),
            "passes": PASSES,
            "crc_over_no_crc_batch_by_batch": {
                "random reads, pass by pass": turns["reads"],
                "SequenceLoader, 4 batches at a time": turns["batches"],
            },
            "us_per_record_read_turn_by_turn": {"without CRC": without, "with CRC": with_crc},
        }
        baseline = "pread of the frame, no CRC (before)"
        reads = compare(
            "checks_random_read",
            {
                baseline: (random_reads, (str(prefix), False)),
                "from_tfrecords read, CRC verified": (random_reads, (str(prefix), True)),
            },
            baseline=baseline,
            extra=extra,
            pairs={"from_tfrecords read, CRC verified": baseline},
            repeats=5,
        )
        for row in reads["rows"]:
            each = sorted(run["us_per_record"] for run in row["runs"])
            print(f"{row['case']}: {each[len(each) // 2]:.2f} µs per record (median)")
        batches = "SequenceLoader, reads without CRC (before)"
        compare(
            "checks_sequence",
            {
                batches: (loader_batches, (str(prefix), False)),
                "SequenceLoader over from_tfrecords, CRC verified": (
                    loader_batches,
                    (str(prefix), True),
                ),
            },
            baseline=batches,
            extra={**extra, "batch_size": BATCH_SIZE, "image_size": IMAGE_SIZE},
            pairs={"SequenceLoader over from_tfrecords, CRC verified": batches},
            repeats=5,
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
