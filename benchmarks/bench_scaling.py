"""Cost as the data grows: 10^4 -> 10^6 small examples (28x28 uint8 image + label).

Issue 13, section 4. For each N, in fresh processes (so that each peak RSS is its own):

- write: `write_tfrecords` from a source that draws each example from its index (the source
  holds nothing, so the peak RSS is the writer's), its time and peak RSS; goal: flat memory;
- index: `from_tfrecords` on the new records (scans every shard once and saves the offsets),
  its time, the bytes per record of the saved index files (goal <= 16), and the memory of the
  loaded offsets; then 2,000 random reads (`src[i]`, CRC checked), microseconds per read;
- Pipeline: `Pipeline(prefix).shuffle(seed=0).batch(256)`: time from building it to the first
  batch (goal: does not grow with N), in a fresh process ("cold", TensorFlow's one-time start
  included) and built again in the same process ("warm"), and examples/s over the next batches.

There is no hand-written baseline: the comparison is N against N, and the table shows each
row next to the smaller N. Median of 3 runs per N (1 with TFPIPE_BENCH_QUICK=1).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.harness import QUICK, REPEATS, RESULTS, run_isolated

SIZES = (1_000, 10_000) if QUICK else (10_000, 100_000, 1_000_000)
SHAPE = (28, 28)
READS = 2_000
BATCH = 256


class _Drawn:
    """N examples drawn from their index: `src[i]` is the same every time, nothing is held."""

    def __init__(self, count: int) -> None:
        import tfpipe

        self.count = count
        self.schema = tfpipe.Schema(
            {
                "image": tfpipe.Image(shape=(*SHAPE, 1), encoding="raw"),
                "label": tfpipe.ClassLabel(num_classes=10),
            }
        )

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, index: int) -> dict[str, Any]:
        rng = np.random.default_rng(index)
        return {
            "image": rng.integers(0, 256, (*SHAPE, 1), dtype=np.uint8),
            "label": index % 10,
        }


def write(count: int, prefix: str) -> dict[str, Any]:
    import tfpipe

    start = time.perf_counter()
    info = tfpipe.write_tfrecords(_Drawn(count), prefix, progress=False)
    seconds = time.perf_counter() - start
    return {"write_s": seconds, "shards": len(info.shards), "examples_per_s": count / seconds}


def index_and_read(count: int, prefix: str) -> dict[str, Any]:
    import tfpipe

    start = time.perf_counter()
    source = tfpipe.from_tfrecords(prefix)
    index_s = time.perf_counter() - start
    folder = Path(prefix).parent
    index_bytes = sum(p.stat().st_size for p in folder.rglob("*.idx"))
    rng = np.random.default_rng(0)
    picks = rng.integers(0, count, READS)
    source[int(picks[0])]  # opens the shards
    start = time.perf_counter()
    for i in picks:
        source[int(i)]
    read_us = (time.perf_counter() - start) / READS * 1e6
    loaded = sum(o.nbytes for o in source._offsets or ())
    return {
        "index_s": index_s,
        "index_bytes_per_record": index_bytes / count,
        "index_loaded_mb": loaded / 1e6,
        "random_read_us": read_us,
    }


def pipeline(count: int, prefix: str) -> dict[str, Any]:
    import tfpipe
    from tfpipe.training.throughput import measure

    def first_batch() -> tuple[float, Any]:
        """Seconds to build the pipeline, start its iterator and get the first batch."""
        start = time.perf_counter()
        dataset = tfpipe.Pipeline(prefix).shuffle(seed=0).repeat().batch(BATCH).build()
        batches = iter(dataset)
        next(batches)
        return time.perf_counter() - start, batches

    cold, _ = first_batch()  # TensorFlow's one-time start in a fresh process is in here
    warm, batches = first_batch()
    result = measure(batches, num_batches=min(100, count // BATCH), warmup=1)
    return {
        "first_batch_s": cold,
        "first_batch_warm_s": warm,
        "pipeline_examples_per_s": result.examples_per_s,
    }


def _one_size(count: int) -> dict[str, Any]:
    runs = []
    for _ in range(REPEATS):
        work = tempfile.mkdtemp(prefix=f"tfpipe-bench-scaling-{count}-")
        try:
            prefix = str(Path(work) / "train")
            written = run_isolated(write, count, prefix)
            indexed = run_isolated(index_and_read, count, prefix)
            piped = run_isolated(pipeline, count, prefix)
            runs.append(
                {
                    **written,
                    "write_peak_rss_mb": written["peak_rss_mb"],
                    **indexed,
                    "index_peak_rss_mb": indexed["peak_rss_mb"],
                    **piped,
                }
            )
        finally:
            shutil.rmtree(work, ignore_errors=True)
    keys = [k for k in runs[0] if k != "peak_rss_mb"]
    return {"examples": count, **{k: statistics.median(r[k] for r in runs) for k in keys}}


COLUMNS = (
    ("write_s", "write s", "{:.1f}"),
    ("write_peak_rss_mb", "write peak MB", "{:.0f}"),
    ("index_s", "index s", "{:.2f}"),
    ("index_bytes_per_record", "index B/rec", "{:.2f}"),
    ("index_loaded_mb", "index MB", "{:.2f}"),
    ("random_read_us", "read µs", "{:.1f}"),
    ("pipeline_examples_per_s", "Pipeline ex/s", "{:,.0f}"),
    ("first_batch_s", "1st batch s", "{:.2f}"),
    ("first_batch_warm_s", "warm 1st s", "{:.2f}"),
)


def main() -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    rows = [_one_size(count) for count in SIZES]
    print(f"\nscaling  (median of {REPEATS}, 28x28 uint8 + label, raw pixels)")
    print(f"{'N':>10} " + " ".join(f"{title:>14}" for _, title, _ in COLUMNS))
    for row in rows:
        cells = " ".join(f"{fmt.format(row[key]):>14}" for key, _, fmt in COLUMNS)
        print(f"{row['examples']:>10,} {cells}")
    RESULTS.mkdir(exist_ok=True)
    report = {
        "title": "scaling",
        "quick": QUICK,
        "repeats": REPEATS,
        "when": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "columns": [[key, title, fmt] for key, title, fmt in COLUMNS],
        "goals": {
            "write_peak_rss_mb": "flat in N",
            "index_bytes_per_record": "<= 16",
            "first_batch_s": "does not grow with N",
        },
        "rows": rows,
    }
    name = f"scaling{'-quick' if QUICK else ''}.json"
    (RESULTS / name).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
