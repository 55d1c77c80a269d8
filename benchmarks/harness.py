"""Runs benchmark cases side by side, each in a fresh process, and reports medians and ratios.

A case is a module-level function returning a dict with at least `examples_per_s`; the harness
adds `peak_rss_mb` (the case process's peak resident memory). Runs are interleaved and rotated
(A, B, C, then B, C, A, ...) so that drift on a shared machine hits every case alike; the
table shows the median of the runs and its ratio to the baseline case written by hand in the
same file.

Set TFPIPE_BENCH_QUICK=1 for a small smoke run (fewer images and repeats).
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import platform
import queue as queue_module
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results"
QUICK = os.environ.get("TFPIPE_BENCH_QUICK") == "1"
REPEATS = 1 if QUICK else 3
# Parts of case names, "|"-separated (names hold commas): a run of only the cases named so
# (and the baseline), the others reported as not run; to rerun a few rows of a long benchmark.
CASES = [part for part in os.environ.get("TFPIPE_BENCH_CASES", "").split("|") if part]


def scale(full: int, quick: int) -> int:
    """A size for the full benchmark, or the small one in a quick smoke run."""
    return quick if QUICK else full


def step_timer(batch_size: int, warmup_steps: int) -> Any:
    """A Keras callback timing training steps after the first `warmup_steps` (compilation,
    the input's start-up); `.result()` gives `examples_per_s`, `steps_per_s` and `steps`.
    Imports Keras: call it in the case's process, after choosing the backend."""
    import keras

    class StepTimer(keras.callbacks.Callback):
        def __init__(self) -> None:
            super().__init__()
            self.step, self.start, self.end = 0, 0.0, 0.0

        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            self.step += 1
            if self.step == warmup_steps:
                self.start = time.perf_counter()
            self.end = time.perf_counter()

        def result(self) -> dict[str, Any]:
            timed = self.step - warmup_steps
            steps_per_s = timed / (self.end - self.start)
            return {
                "examples_per_s": steps_per_s * batch_size,
                "steps_per_s": steps_per_s,
                "steps": timed,
            }

    return StepTimer()


@contextlib.contextmanager
def prepared_data(make: Callable[[Path], Any]) -> Iterator[tuple[Any, float]]:
    """`make(folder)`'s data in a temporary folder (removed after), and the seconds it took;
    TensorFlow's C++ log kept to warnings and errors."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        data = make(Path(tmp))
        yield data, time.perf_counter() - start


def small_cnn(input_shape: tuple[int, ...], num_classes: int, filters: tuple[int, ...]) -> Any:
    """A compiled CNN: a 3x3 convolution per entry of `filters` (max pooling between them),
    global average pooling and a dense layer of logits; Keras's global seed set to 0 first.
    Imports Keras: call it in the case's process, after choosing the backend."""
    import keras

    keras.utils.set_random_seed(0)
    layers: list[Any] = [keras.Input(input_shape)]
    for depth, width in enumerate(filters):
        if depth:
            layers.append(keras.layers.MaxPooling2D())
        layers.append(keras.layers.Conv2D(width, 3, activation="relu"))
    model = keras.Sequential(
        [*layers, keras.layers.GlobalAveragePooling2D(), keras.layers.Dense(num_classes)]
    )
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def _child(fn: Callable[..., dict[str, Any]], args: tuple[Any, ...], queue: Any) -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        result = fn(*args)
        result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        queue.put(("ok", result))
    except BaseException as e:  # report any failure of the case to the parent
        queue.put(("error", f"{type(e).__name__}: {e}"))


def run_isolated(fn: Callable[..., dict[str, Any]], *args: Any) -> dict[str, Any]:
    """Runs `fn(*args)` in a fresh spawned process and returns its result dict."""
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    process = context.Process(target=_child, args=(fn, args, queue))
    process.start()
    while True:
        try:
            status, result = queue.get(timeout=1)
            break
        except queue_module.Empty:
            if not process.is_alive() and queue.empty():
                # Died without a word (a crash in native code): fail instead of waiting forever.
                raise RuntimeError(
                    f"benchmark case {fn.__name__} died with exit code {process.exitcode}"
                ) from None
    process.join()
    if status != "ok":
        raise RuntimeError(f"benchmark case {fn.__name__} failed: {result}")
    return result


def compare(
    title: str,
    cases: dict[str, tuple[Callable[..., dict[str, Any]], tuple[Any, ...]]],
    *,
    baseline: str,
    goals: dict[str, float] | None = None,
    metric: str = "examples_per_s",
    extra: dict[str, Any] | None = None,
    pairs: dict[str, str] | None = None,
    repeats: int = REPEATS,
    spreads: tuple[str, ...] = (),
    optional: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """Runs every case `repeats` times interleaved; prints a table; writes results/<title>.json.

    Args:
        title: the benchmark's name (file name of the JSON).
        cases: name -> (function, args); the function returns a dict with `metric`.
        baseline: the name of the hand-written case every ratio is relative to.
        goals: name -> the minimum ratio to the baseline the issue asks for.
        metric: the key compared. Defaults to "examples_per_s".
        extra: more facts to store in the JSON (dataset size, settings).
        pairs: case -> another case it is compared with run by run: the ratio of the two
            runs of the same repeat, which ran minutes apart at most, so the machine's drift
            cancels out. The row gets `paired_ratios` and their median `paired_ratio`.
        repeats: runs of each case. Defaults to 3 (1 with TFPIPE_BENCH_QUICK=1).
        spreads: more keys of the case results whose median, min and max per case are kept
            (`spread`, with the metric's) and printed. Defaults to none.
        optional: cases that may be unable to run here (a peer library not installed, or
            that fails on this machine): the first failure drops the case, and the report's
            `not_run` gives its reason. Defaults to none (any failure stops the benchmark).
    """
    goals = goals or {}
    repeats = 1 if QUICK else repeats
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in cases}
    not_run = {
        name: f"left out of this run (TFPIPE_BENCH_CASES={'|'.join(CASES)})"
        for name in cases
        if CASES and name != baseline and not any(part in name for part in CASES)
    }
    names = list(cases)
    for repeat in range(repeats):
        # Rotated each repeat, so that no case always runs right after the same neighbour.
        for name in names[repeat % len(names) :] + names[: repeat % len(names)]:
            if name in not_run:
                continue
            fn, args = cases[name]
            try:
                runs[name].append(run_isolated(fn, *args))
            except RuntimeError as e:
                if name not in optional:
                    raise
                not_run[name] = str(e)
                print(f"not run: {name}: {e}")
    runs = {name: rs for name, rs in runs.items() if name not in not_run}
    medians = {name: statistics.median(r[metric] for r in rs) for name, rs in runs.items()}
    rows = []
    for name, rs in runs.items():
        ratio = medians[name] / medians[baseline]
        goal = goals.get(name)
        rows.append(
            {
                "case": name,
                metric: medians[name],
                "ratio": ratio,
                "goal": goal,
                "met": None if goal is None else ratio >= goal,
                "peak_rss_mb": statistics.median(r["peak_rss_mb"] for r in rs),
                "runs": rs,
            }
        )
        if spreads:
            rows[-1]["spread"] = {key: _spread([r[key] for r in rs]) for key in (metric, *spreads)}
        if pairs and name in pairs:
            other = runs[pairs[name]]
            paired = [mine[metric] / theirs[metric] for mine, theirs in zip(rs, other, strict=True)]
            rows[-1].update(
                paired_with=pairs[name],
                paired_ratios=paired,
                paired_ratio=statistics.median(paired),
            )
    _print_table(title, rows, metric, baseline, repeats, paired_lines=not spreads)
    if spreads:
        _print_spreads(rows, (metric, *spreads))
    for name, reason in not_run.items():
        print(f"{name}: not run: {reason}")
    report = {
        "title": title,
        "baseline": baseline,
        "metric": metric,
        "repeats": repeats,
        "quick": QUICK,
        "when": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "machine": {
            "cpus": os.cpu_count(),
            "python": sys.version.split()[0],
            "platform": platform.platform(),
        },
        "env": {"MALLOC_ARENA_MAX": os.environ.get("MALLOC_ARENA_MAX")},
        "extra": extra or {},
        "rows": rows,
        "not_run": not_run,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{title}{'-quick' if QUICK else ''}.json").write_text(json.dumps(report, indent=2))
    return report


def _spread(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def _print_spreads(rows: list[dict[str, Any]], keys: tuple[str, ...]) -> None:
    """Median [min-max] of each key per case, and the run-by-run ratios' min and median."""
    header = " ".join(f"{key:>22}" for key in keys)
    print(f"{'case':<44} {header} {'ratio/run min, med':>19}")
    for row in rows:
        cells = " ".join(
            f"{s['median']:>8.2f} [{s['min']:.2f}-{s['max']:.2f}]".rjust(22)
            for s in (row["spread"][key] for key in keys)
        )
        paired = row.get("paired_ratios")
        ratios = "" if paired is None else f"{min(paired):.2f}, {statistics.median(paired):.2f}"
        print(f"{row['case']:<44} {cells} {ratios:>19}")


def _print_table(
    title: str,
    rows: list[dict[str, Any]],
    metric: str,
    baseline: str,
    repeats: int,
    paired_lines: bool = True,
) -> None:
    print(f"\n{title}  (median of {repeats}, ratio to {baseline!r})")
    print(f"{'case':<44} {metric:>16} {'ratio':>7} {'goal':>7} {'peak MB':>8}")
    for row in rows:
        goal = (
            ""
            if row["goal"] is None
            else f">={row['goal']:.2f}" + (" ok" if row["met"] else " MISS")
        )
        print(
            f"{row['case']:<44} {row[metric]:>16.1f} {row['ratio']:>7.2f} {goal:>7} "
            f"{row['peak_rss_mb']:>8.0f}"
        )
    for row in rows:
        if paired_lines and "paired_ratio" in row:
            each = ", ".join(f"{r:.2f}" for r in row["paired_ratios"])
            print(
                f"{row['case']} / {row['paired_with']}, run by run: {each}; "
                f"median {row['paired_ratio']:.2f}"
            )
