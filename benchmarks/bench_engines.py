"""The cost of a write on each engine, once started: issue 27, item 3.

Raw-pixel records (32x32x3 uint8 arrays, stored raw: no codec, so the engines' own costs
show) are written at two sizes, 10^4 and 10^5 examples, by `write_tfrecords`, `tfpipe.beam`
on the DirectRunner and on Dask (a `LocalCluster`), and `tfpipe.spark` (`local[n]`), each with
1 and 2 workers, each run in a fresh process. A straight line through the two times gives:

- `slope_us`: microseconds per example once started (what a cluster multiplies by N);
- `intercept_s`: the fixed start-up cost (a JVM, runner plans, TensorFlow imported in every
  worker);
- `speedup`: the slope with 1 worker over the slope with 2 (of the same engine);
- `peak_rss_mb`: the peak resident memory of the driver process (and of the busiest Dask
  worker, `worker_rss_mb`).

Goals of the issue: each engine's slope <= 1.5x `write_tfrecords`' per worker, and 2 workers
>= 1.6x one. On a machine with 2 cores shared with other work, the 2-worker rows are an upper
bound of what contention leaves: run it on a quiet machine with >= 4 cores for the table.
TFPIPE_BENCH_QUICK=1 runs 200 and 1000 examples, one engine size each, as a smoke test.
"""

from __future__ import annotations

import json
import os
import resource
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.harness import QUICK, RESULTS, run_isolated, scale

SIZES = (scale(10_000, 200), scale(100_000, 1_000))
SHAPE = (32, 32, 3)
SHARDS = 8
# TFPIPE_BENCH_ENGINES=write_tfrecords,spark runs some engines only (write_tfrecords, the
# baseline of the ratios, always runs).
ENGINES = tuple(
    dict.fromkeys(
        ["write_tfrecords", *os.environ.get("TFPIPE_BENCH_ENGINES", "").split(",")]
        if os.environ.get("TFPIPE_BENCH_ENGINES")
        else ["write_tfrecords", "beam-direct", "beam-dask", "spark"]
    )
)


def _source(n: int) -> Any:
    import numpy as np

    import tfpipe

    pixels = np.random.default_rng(0).integers(0, 256, (n, *SHAPE), dtype=np.uint8)
    schema = tfpipe.Schema({"image": tfpipe.Image(shape=SHAPE, encoding="raw")})
    return tfpipe.from_arrays({"image": pixels}, schema)


def _local(source: Any, prefix: Path, workers: int) -> dict[str, Any]:
    import tfpipe

    tfpipe.write_tfrecords(source, prefix, num_shards=SHARDS, workers=workers, progress=False)
    return {}


def _beam_direct(source: Any, prefix: Path, workers: int) -> dict[str, Any]:
    import tfpipe.beam

    tfpipe.beam.write_tfrecords(source, prefix, num_shards=SHARDS, workers=workers)
    return {}


def _beam_dask(source: Any, prefix: Path, workers: int) -> dict[str, Any]:
    import distributed

    import tfpipe.beam

    with (
        distributed.LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            host="127.0.0.1",
            dashboard_address=None,
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        args = [f"--dask_client_address={cluster.scheduler_address}"]
        tfpipe.beam.write_tfrecords(source, prefix, num_shards=SHARDS, runner="dask", args=args)
        usage = client.run(lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    return {"worker_rss_mb": max(usage.values())}


def _spark(source: Any, prefix: Path, workers: int) -> dict[str, Any]:
    import tfpipe.spark

    session = tfpipe.spark.session(f"local[{workers}]")
    try:
        tfpipe.spark.write_tfrecords(source, prefix, num_shards=SHARDS, spark=session)
    finally:
        session.stop()
    return {}


WRITERS: dict[str, Callable[[Any, Path, int], dict[str, Any]]] = {
    "write_tfrecords": _local,
    "beam-direct": _beam_direct,
    "beam-dask": _beam_dask,
    "spark": _spark,
}


def _case(engine: str, n: int, workers: int) -> dict[str, Any]:
    """One write of n examples, timed from before the engine starts to the metadata."""
    source = _source(n)
    with tempfile.TemporaryDirectory() as folder:
        started = time.perf_counter()
        result = WRITERS[engine](source, Path(folder) / "train", workers)
        result["seconds"] = time.perf_counter() - started
    return result


def _line(times: dict[int, float]) -> tuple[float, float]:
    """The slope (seconds per example) and intercept (seconds) through the two sizes."""
    (n1, t1), (n2, t2) = sorted(times.items())
    slope = (t2 - t1) / (n2 - n1)
    return slope, t1 - slope * n1


def main() -> None:
    rows = []
    for engine in ENGINES:
        slopes = {}
        for workers in (1, 2):
            runs = {n: run_isolated(_case, engine, n, workers) for n in SIZES}
            slope, intercept = _line({n: run["seconds"] for n, run in runs.items()})
            slopes[workers] = slope
            rows.append(
                {
                    "engine": engine,
                    "workers": workers,
                    "slope_us": round(slope * 1e6, 1),
                    "intercept_s": round(intercept, 2),
                    "peak_rss_mb": round(max(r["peak_rss_mb"] for r in runs.values())),
                    "worker_rss_mb": round(max(r.get("worker_rss_mb", 0) for r in runs.values())),
                    "seconds": {n: round(r["seconds"], 2) for n, r in runs.items()},
                }
            )
        rows[-1]["speedup"] = round(slopes[1] / slopes[2], 2) if slopes[2] > 0 else None
    baseline = {r["workers"]: r["slope_us"] for r in rows if r["engine"] == "write_tfrecords"}
    for row in rows:
        row["slope_vs_write_tfrecords"] = round(row["slope_us"] / baseline[row["workers"]], 2)
        print(json.dumps(row))
    if not QUICK:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "engines.json").write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
