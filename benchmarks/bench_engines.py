"""The cost of a write on each engine, once started: issue 27, item 3.

Raw-pixel records (32x32x3 uint8 arrays, stored raw: no codec, so the engines' own costs
show) are written at two sizes, 10^4 and 10^5 examples (TFPIPE_BENCH_SIZES=10000,100000,
1000000 for more), 8 shards, `shuffle=False` (`TFPIPE_BENCH_SHUFFLE=1`: `shuffle=True`, the
default, in `engines-shuffled.json`; the hand-written loop stays in order), by:

- a hand-written loop (`tf.train.Example`, `tf.io.TFRecordWriter`, one process): the
  baseline written by hand;
- `write_tfrecords` (1 and 2 worker threads);
- `tfpipe.beam` on the DirectRunner (1 worker: in the process; 2 worker processes) and on
  Dask (a `LocalCluster` of 1 and 2 worker processes, one thread each);
- `tfpipe.spark` on `local[1]` and `local[2]`.

The source makes each example's pixels from its index on the worker that reads it (a seeded
generator: ~10 us), as a folder of files would be read there: it pickles to a few bytes.
Each run is a fresh process; the runs are rotated (every case once, then again) and the
table gives, per case, the median time of REPEATS runs at each size, then a straight line
through the two smallest sizes' medians of the write's own time (from the moment the engine
is up: a Dask `LocalCluster`, a Spark session; the other engines start inside the write):

- `slope_us`: microseconds per example once started (what a cluster multiplies by N); the
  engine's start-up (seconds of noise on 2 cores) stays out of it;
- `intercept_s`: the fixed start-up cost (the engine's start, `engine_start_s`, and the
  write's: runner plans, TensorFlow imported in every worker);
- `speedup`: a case's 1-worker slope over its 2-worker slope;
- `peak_rss_mb`: the largest peak resident memory of any one process of the run (the driver,
  a Beam or Dask worker, Spark's JVM or a Python worker), sampled every 0.2 s;
- `load`: the 1-minute load average before each run (`os.getloadavg`).

Goals of the issue: each engine's slope <= 1.5x `write_tfrecords`' with as many workers, and
2 workers >= 1.6x one. The machine these ran on has 2 cores shared with other work: the
2-worker rows show what contention leaves, no more (docs/performance.md says what they can
and cannot show). TFPIPE_BENCH_QUICK=1 runs 200 and 1000 examples once, as a smoke test.
Run `python -m benchmarks engines` from the repository root with PYTHONPATH=src:. (the
workers import this module).
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from benchmarks.harness import QUICK, REPEATS, RESULTS, scale

SIZES = tuple(
    int(n)
    for n in os.environ.get(
        "TFPIPE_BENCH_SIZES", f"{scale(10_000, 200)},{scale(100_000, 1_000)}"
    ).split(",")
)
# Runs of each case at each size: TFPIPE_BENCH_REPEATS=1 when time is short (say so).
RUNS = 1 if QUICK else int(os.environ.get("TFPIPE_BENCH_REPEATS", REPEATS))
SHAPE = (32, 32, 3)
SHUFFLE = os.environ.get("TFPIPE_BENCH_SHUFFLE") == "1"
SHARDS = 8
GOAL_SLOPE_RATIO = 1.5
GOAL_SPEEDUP = 1.6
# TFPIPE_BENCH_ENGINES=spark,beam-dask runs some engines only (the baselines always run).
BASELINES = ("hand-written", "write_tfrecords")
ENGINES = tuple(
    dict.fromkeys(
        [*BASELINES, *os.environ.get("TFPIPE_BENCH_ENGINES", "").split(",")]
        if os.environ.get("TFPIPE_BENCH_ENGINES")
        else [*BASELINES, "beam-direct", "beam-dask", "spark"]
    )
)


class Generated:
    """`n` examples {"image": 32x32x3 uint8}, each made from its index where it is read."""

    def __init__(self, n: int) -> None:
        import tfpipe

        self.n = n
        self.schema = tfpipe.Schema({"image": tfpipe.Image(shape=SHAPE, encoding="raw")})

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> dict[str, Any]:
        import numpy as np

        pixels = np.random.default_rng(index).integers(0, 256, SHAPE, dtype=np.uint8)
        return {"image": pixels}


def _hand_written(n: int, prefix: Path, workers: int, ready: Callable[[], None]) -> None:
    import tensorflow as tf

    source = Generated(n)
    for shard in range(SHARDS):
        with tf.io.TFRecordWriter(f"{prefix}-{shard:05d}-of-{SHARDS:05d}.tfrecord") as writer:
            for index in range(round(shard * n / SHARDS), round((shard + 1) * n / SHARDS)):
                pixels = source[index]["image"].tobytes()
                feature = tf.train.Feature(bytes_list=tf.train.BytesList(value=[pixels]))
                example = tf.train.Example(features=tf.train.Features(feature={"image": feature}))
                writer.write(example.SerializeToString())


def _local(n: int, prefix: Path, workers: int, ready: Callable[[], None]) -> None:
    import tfpipe

    tfpipe.write_tfrecords(
        Generated(n), prefix, num_shards=SHARDS, shuffle=SHUFFLE, workers=workers, progress=False
    )


def _beam_direct(n: int, prefix: Path, workers: int, ready: Callable[[], None]) -> None:
    import tfpipe.beam

    tfpipe.beam.write_tfrecords(
        Generated(n), prefix, num_shards=SHARDS, shuffle=SHUFFLE, workers=workers
    )


def _beam_dask(n: int, prefix: Path, workers: int, ready: Callable[[], None]) -> None:
    import distributed

    import tfpipe.beam

    with distributed.LocalCluster(
        n_workers=workers, threads_per_worker=1, host="127.0.0.1", dashboard_address=None
    ) as cluster:
        ready()
        args = [f"--dask_client_address={cluster.scheduler_address}"]
        tfpipe.beam.write_tfrecords(
            Generated(n), prefix, num_shards=SHARDS, shuffle=SHUFFLE, runner="dask", args=args
        )


def _spark(n: int, prefix: Path, workers: int, ready: Callable[[], None]) -> None:
    import tfpipe.spark

    session = tfpipe.spark.session(f"local[{workers}]")
    ready()
    try:
        tfpipe.spark.write_tfrecords(
            Generated(n), prefix, num_shards=SHARDS, shuffle=SHUFFLE, spark=session
        )
    finally:
        session.stop()


WRITERS: dict[str, Callable[[int, Path, int, Callable[[], None]], None]] = {
    "hand-written": _hand_written,
    "write_tfrecords": _local,
    "beam-direct": _beam_direct,
    "beam-dask": _beam_dask,
    "spark": _spark,
}


@contextlib.contextmanager
def _peak_rss() -> Iterator[dict[str, float]]:
    """The largest resident memory (MB) any process of this tree reached, sampled."""
    import psutil

    peak = {"mb": 0.0}
    done = threading.Event()

    def sample() -> None:
        me = psutil.Process()
        while not done.wait(0.2):
            for process in [me, *me.children(recursive=True)]:
                with contextlib.suppress(psutil.Error):  # ended meanwhile
                    peak["mb"] = max(peak["mb"], process.memory_info().rss / 2**20)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield peak
    finally:
        done.set()
        thread.join()


def _case(engine: str, n: int, workers: int) -> dict[str, Any]:
    """One write of n examples, timed from before the engine starts to the metadata, and from
    the moment it is up (a Dask cluster, a Spark session: what a user's write finds running)."""
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as folder, _peak_rss() as peak:
        started = time.perf_counter()
        up = [started]
        WRITERS[engine](n, Path(folder) / "train", workers, lambda: up.append(time.perf_counter()))
        ended = time.perf_counter()
    return {
        "seconds": ended - started,
        "write_seconds": ended - up[-1],
        "load": load,
        "process_peak_mb": peak["mb"],
    }


def _cases() -> list[tuple[str, int]]:
    return [
        (engine, workers)
        for engine in ENGINES
        for workers in ((1,) if engine == "hand-written" else (1, 2))
    ]


def _line(medians: dict[int, float]) -> tuple[float, float]:
    """The slope (seconds per example) and intercept (seconds) through the two smallest sizes."""
    (n1, t1), (n2, t2) = sorted(medians.items())[:2]
    slope = (t2 - t1) / (n2 - n1)
    return slope, t1 - slope * n1


def _row(engine: str, workers: int, runs: dict[int, list[dict[str, Any]]]) -> dict[str, Any]:
    medians = {n: statistics.median(r["seconds"] for r in rs) for n, rs in runs.items()}
    writes = {n: statistics.median(r["write_seconds"] for r in rs) for n, rs in runs.items()}
    engine_up = statistics.median(
        r["seconds"] - r["write_seconds"] for rs in runs.values() for r in rs
    )
    slope, intercept = _line(writes)
    return {
        "engine": engine,
        "workers": workers,
        "slope_us": round(slope * 1e6, 1),
        "intercept_s": round(engine_up + intercept, 2),
        "engine_start_s": round(engine_up, 2),
        "seconds": {n: round(t, 2) for n, t in medians.items()},
        "each_run_s": {n: [round(r["seconds"], 2) for r in rs] for n, rs in runs.items()},
        "load": {n: [round(r["load"], 2) for r in rs] for n, rs in runs.items()},
        "peak_rss_mb": round(max(r["process_peak_mb"] for rs in runs.values() for r in rs)),
    }


def _compare(rows: list[dict[str, Any]]) -> None:
    """Ratios to the baselines of the same run; the speed-ups and the goals."""
    hand = next(r["slope_us"] for r in rows if r["engine"] == "hand-written")
    local = {r["workers"]: r["slope_us"] for r in rows if r["engine"] == "write_tfrecords"}
    slopes = {(r["engine"], r["workers"]): r["slope_us"] for r in rows}
    for row in rows:
        row["vs_hand_written"] = round(row["slope_us"] / hand, 2)
        row["vs_write_tfrecords"] = round(row["slope_us"] / local[row["workers"]], 2)
        if row["engine"] not in BASELINES:
            row["slope_goal_met"] = row["vs_write_tfrecords"] <= GOAL_SLOPE_RATIO
        if row["workers"] == 2:
            one = slopes[(row["engine"], 1)]
            # None: the 2-worker slope was not above 0 (noise larger than the work).
            row["speedup"] = round(one / row["slope_us"], 2) if row["slope_us"] > 0 else None
            row["speedup_goal_met"] = row["speedup"] is not None and row["speedup"] >= GOAL_SPEEDUP


def _print(rows: list[dict[str, Any]]) -> None:
    sizes = " ".join(f"{f't(N={n})':>11}" for n in SIZES)
    print(
        f"\nengines, raw 32x32x3, {SHARDS} shards (median of {RUNS}; "
        f"ratios to the hand-written loop and write_tfrecords of this run)"
    )
    print(
        f"{'engine':<16} {'w':>2} {sizes} {'slope us':>9} {'start s':>8} {'/hand':>6} "
        f"{'/w_tfr':>7} {'speedup':>8} {'peak MB':>8} {'load':>10}"
    )
    for r in rows:
        times = " ".join(f"{r['seconds'][n]:>11.2f}" for n in SIZES)
        loads = [x for xs in r["load"].values() for x in xs]
        speedup = "" if r.get("speedup") is None else f"{r['speedup']:.2f}"
        print(
            f"{r['engine']:<16} {r['workers']:>2} {times} {r['slope_us']:>9.1f} "
            f"{r['intercept_s']:>8.2f} {r['vs_hand_written']:>6.2f} "
            f"{r['vs_write_tfrecords']:>7.2f} {speedup:>8} {r['peak_rss_mb']:>8} "
            f"{min(loads):>4.1f}-{max(loads):<4.1f}"
        )


def main() -> None:
    from benchmarks.harness import run_isolated

    repeats = RUNS
    cases = _cases()
    runs: dict[tuple[str, int], dict[int, list[dict[str, Any]]]] = {
        case: {n: [] for n in SIZES} for case in cases
    }
    for repeat in range(repeats):
        for n in SIZES:
            for engine, workers in cases[repeat % len(cases) :] + cases[: repeat % len(cases)]:
                result = run_isolated(_case, engine, n, workers)
                runs[(engine, workers)][n].append(result)
                seconds, load = result["seconds"], result["load"]
                print(f"{engine} w={workers} N={n}: {seconds:.2f} s, load {load:.2f}", flush=True)
    rows = [_row(engine, workers, runs[(engine, workers)]) for engine, workers in cases]
    _compare(rows)
    report = {
        "title": "engines",
        "when": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "cpus": os.cpu_count(),
        "sizes": SIZES,
        "repeats": repeats,
        "quick": QUICK,
        "shuffle": SHUFFLE,
        "goals": {"slope_vs_write_tfrecords_max": GOAL_SLOPE_RATIO, "speedup_min": GOAL_SPEEDUP},
        "rows": rows,
    }
    RESULTS.mkdir(exist_ok=True)
    name = f"engines{'-shuffled' if SHUFFLE else ''}{'-quick' if QUICK else ''}"
    (RESULTS / f"{name}.json").write_text(json.dumps(report, indent=1) + "\n")
    _print(rows)


if __name__ == "__main__":
    main()
