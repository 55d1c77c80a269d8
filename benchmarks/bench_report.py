"""The report's own cost: `tfpipe.fit(report=True)` against `report=False` on the same run.

With `report=True`, fit times every callback hook (a clock first in the callback list, each
user callback wrapped and timed by class name, a mark last; see `tfpipe.training.timing`) and, after
training, probes the input alone. Goal (issue 17): training at most 2% slower than with
`report=False`, beyond those probes. The worst case for a per-step cost is a short step, so
the model is tiny (a few ms per step), `steps_per_execution` stays 1 (the dataset's length is
unknown, so tfpipe.fit cannot raise it) and three user callbacks are timed at every step.

Metric: training images/s over the steps after the first few, measured by the same callback
in both cases (the probes are outside it). Fresh processes differ in speed by more than 2%,
so besides the interleaved fresh-process runs (paired run by run), the two settings also take
turns in one process on the same data (`report_over_no_report_turn_by_turn`). The seconds
`tfpipe.fit` spends outside training (the probes) are kept in the JSON as `outside_fit_s`.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from typing import Any

from benchmarks.harness import compare, run_isolated, scale, small_cnn, step_timer

SIZE = (32, 32)
BATCH = 32
EXAMPLES = 2048
REPEATS = 4  # the examples of one epoch: 8192, 256 steps
WARMUP_STEPS = 5
TURNS = 10


def _data() -> Any:
    """Random images and labels in memory, of unknown length (so steps_per_execution is 1)."""
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(0)
    x = rng.random((EXAMPLES, *SIZE, 3), dtype=np.float32)
    y = rng.integers(0, 10, EXAMPLES)
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).repeat(REPEATS)
    dataset = dataset.filter(lambda image, label: True)  # of unknown length
    return dataset.batch(BATCH).prefetch(tf.data.AUTOTUNE)


def _model() -> Any:
    return small_cnn((*SIZE, 3), 10, (8,))


def _callbacks(folder: str) -> list[Any]:
    """A timer (the metric), and three callbacks with per-step hooks, as users add them."""
    import keras

    class Counter(keras.callbacks.Callback):
        def __init__(self) -> None:
            super().__init__()
            self.batches = 0

        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            self.batches += 1

    return [
        step_timer(BATCH, WARMUP_STEPS),
        Counter(),
        keras.callbacks.EarlyStopping("loss", patience=100),
        keras.callbacks.CSVLogger(os.path.join(folder, "log.csv")),
    ]


def _fit(dataset: Any, report: bool, epochs: int) -> dict[str, Any]:
    import tfpipe

    with tempfile.TemporaryDirectory() as folder:
        callbacks = _callbacks(folder)
        started = time.perf_counter()
        history = tfpipe.fit(
            _model(), dataset, epochs=epochs, callbacks=callbacks, report=report, verbose=0
        )
        call_s = time.perf_counter() - started
    result: dict[str, Any] = {**callbacks[0].result(), "call_s": call_s}
    if report:
        breakdown = history.report.breakdown
        result.update(
            outside_fit_s=call_s - breakdown.wall_s,
            breakdown_s=breakdown.seconds(),
            steps_per_execution=history.report.steps_per_execution,
        )
    return result


def _epochs() -> int:
    return scale(3, 1)


def no_report() -> dict[str, Any]:
    return _fit(_data(), report=False, epochs=_epochs())


def with_report() -> dict[str, Any]:
    return _fit(_data(), report=True, epochs=_epochs())


def hook_cost(steps: int) -> dict[str, float]:
    """CPU microseconds per train step of the callback hooks, with and without the report's
    clock: the callback list of a run driven through `steps` steps without a model. Timed in
    this thread's CPU time, which the load of the machine does not change."""
    import keras

    from tfpipe.training.timing import Clock

    model = _model()
    per_step: dict[bool, list[float]] = {False: [], True: []}
    with tempfile.TemporaryDirectory() as folder:
        for report in (False, True) * 3:
            callbacks = _callbacks(folder)
            if report:
                clock = Clock(0.001)
                callbacks = clock.around(callbacks, verbose=0)
                clock.start()
            hooks = keras.callbacks.CallbackList(
                callbacks, add_history=True, model=model, verbose=0, epochs=1, steps=steps
            )
            start = time.thread_time()
            hooks.on_train_begin()
            hooks.on_epoch_begin(0)
            for step in range(steps):
                hooks.on_train_batch_begin(step)
                hooks.on_train_batch_end(step, {"loss": 0.5})
            hooks.on_epoch_end(0, {"loss": 0.5})
            hooks.on_train_end()
            per_step[report].append(1e6 * (time.thread_time() - start) / steps)
    without, with_clock = min(per_step[False]), min(per_step[True])
    return {"without_us": without, "with_us": with_clock, "added_us": with_clock - without}


def taking_turns(turns: int) -> dict[str, Any]:
    """Both settings on the same data in one process, alternating which goes first; then the
    hooks' own cost per step, against the step time measured here."""
    dataset = _data()
    _fit(dataset, report=True, epochs=1)  # warm up: first traces, thread pools
    ratios, outside, step_s = [], [], []
    for turn in range(turns):
        rates = {}
        for report in (bool(turn % 2), not turn % 2):
            result = _fit(dataset, report=report, epochs=_epochs())
            rates[report] = result["examples_per_s"]
            step_s.append(BATCH / result["examples_per_s"])
            if report:
                outside.append(result["outside_fit_s"])
        ratios.append(rates[True] / rates[False])
    hooks = hook_cost(scale(20_000, 2_000))
    step_us = 1e6 * statistics.median(step_s)
    return {
        "with report": {"ratios": ratios, "median": statistics.median(ratios)},
        "outside_fit_s": outside,
        "hooks_per_step": {**hooks, "step_us": step_us, "added_share": hooks["added_us"] / step_us},
    }


def main() -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    turns = run_isolated(taking_turns, scale(TURNS, 2))
    turns.pop("peak_rss_mb")
    ratio, hooks = turns["with report"]["median"], turns["hooks_per_step"]
    print(f"in one process, taking turns: report=True / report=False = {ratio:.3f} (median)")
    print(
        f"callback hooks per step: {hooks['without_us']:.1f} us without the report, "
        f"{hooks['with_us']:.1f} us with it: +{hooks['added_us']:.1f} us, "
        f"{hooks['added_share']:.2%} of a {hooks['step_us'] / 1000:.2f} ms step"
    )
    compare(
        "report",
        {"tfpipe.fit(report=False)": (no_report, ()), "tfpipe.fit(report=True)": (with_report, ())},
        baseline="tfpipe.fit(report=False)",
        extra={
            "batch_size": BATCH,
            "image_size": SIZE,
            "examples_per_epoch": EXAMPLES * REPEATS,
            "epochs": _epochs(),
            "report_over_no_report_turn_by_turn": {"with report": turns["with report"]},
            "outside_fit_s": turns["outside_fit_s"],
            "hooks_per_step": hooks,
        },
        pairs={"tfpipe.fit(report=True)": "tfpipe.fit(report=False)"},
        repeats=5,
    )
