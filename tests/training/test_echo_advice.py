"""The fit report's advice on data echoing: the factor on numbers, the line an input-bound run
gets (and a compute-bound one does not), and what a run with echoing reports."""

from __future__ import annotations

import doctest
import math
import re
import time
from typing import Any

import numpy as np
import pytest
import tensorflow as tf
from test_fit import NUM_CLASSES, wide_mlp

import tfpipe
from tfpipe.training.echoing import MAX_ECHO, echo_factor_for
from tfpipe.training.report import FitReport
from tfpipe.training.throughput import Throughput

pytestmark = pytest.mark.usefixtures("short_probes")  # their length is not under test

ECHO = "data echoing:"


@pytest.mark.parametrize(
    ("input_rate", "model_rate", "factor"),
    [
        (12.0, 31.2, 3),
        (31.2 / 3, 31.2, 3),  # exactly 3x: not 4 because of rounding
        (31.1, 31.2, 2),
        (5.0, 31.2, 4),  # a 6.2x gap: capped
        (31.2, 31.2, None),  # the input keeps up
        (40.0, 31.2, None),
        (250.0, 1000.0, 4),  # examples/s work as steps/s do
    ],
)
def test_the_factor_is_the_smallest_that_closes_the_gap_at_most_4(
    input_rate: float, model_rate: float, factor: int | None
) -> None:
    assert echo_factor_for(input_rate, model_rate) == factor
    if factor is not None and factor < MAX_ECHO:
        assert factor * input_rate >= model_rate > (factor - 1) * input_rate


@pytest.mark.parametrize(
    ("input_rate", "model_rate", "name"),
    [(0.0, 1.0, "input_steps_per_s"), (1.0, math.nan, "model_steps_per_s"), (True, 1.0, "input")],
)
def test_the_factor_refuses_rates_that_are_no_positive_numbers(
    input_rate: Any, model_rate: Any, name: str
) -> None:
    with pytest.raises(ValueError, match=f"{name}.* must be a finite number > 0"):
        echo_factor_for(input_rate, model_rate)


def test_the_factor_example_runs() -> None:
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner()
    for test in finder.find(echo_factor_for, "echo_factor_for", globs={}):
        runner.run(test)
    assert runner.summarize(verbose=False) == (0, 4)  # the import and 3 calls


def report_of(
    input_rate: float,
    achieved: float | None,
    kind: str = "Pipeline",
    model: float | None = 1000.0,
    **kwargs: Any,
) -> FitReport:
    """A report of batches of 32 whose model consumes `model` examples/s alone."""
    return FitReport.build(
        input_alone=Throughput(input_rate, input_rate / 32, 0.1, 10, 320),
        model_examples_per_s=model,
        achieved_examples_per_s=achieved,
        input_kind=kind,
        batch_size=32,
        steps_per_execution=1,
        steps_per_execution_chosen=False,
        **kwargs,
    )


def echo_lines(report: FitReport) -> list[str]:
    return [line for line in report.advice if line.startswith(ECHO)]


def test_an_input_bound_report_names_the_factor_and_the_steps_to_expect() -> None:
    report = report_of(400.0, 380.0)  # the model takes 1,000 examples/s: 3 x 380 >= 1,000
    assert report.verdict == "input-bound"
    (line,) = echo_lines(report)
    assert "call .echo(3) on the Pipeline" in line
    assert "an epoch of 3x the fresh examples" in line
    # min(1,000, 3 x 380) examples/s in batches of 32, against fit's 380 examples/s
    assert f"expect about {1000 / 32:.1f} steps/s against the {380 / 32:.1f} measured" in line
    assert "worth less than fresh ones" in line and "docs/guides/mixing-and-echoing.md" in line
    assert "the gap is" not in line
    # beside today's advice, after it
    assert report.advice.index(line) > 1 and "slower than the model" in report.advice[1]


def test_a_gap_over_4x_is_said_and_the_expected_steps_are_those_of_4() -> None:
    (line,) = echo_lines(report_of(150.0, 140.0))
    assert "the gap is 7.1x: echo at most 4 and cut the input cost too" in line
    assert ".echo(4)" in line and f"expect about {4 * 140 / 32:.1f} steps/s" in line


def test_an_input_competing_for_the_cpu_is_judged_on_what_it_delivered_in_fit() -> None:
    # Alone 3x faster than the model, but fit waited half of each step for it: 500 examples/s.
    report = report_of(3000.0, 500.0, kind="TFRecords")
    assert "competes with the model for the CPU" in report.advice[1]
    (line,) = echo_lines(report)
    assert "delivered 500 fresh examples/s" in line
    assert "train from tfpipe.Pipeline(path, ...).echo(2) instead of the path" in line


@pytest.mark.parametrize(
    ("kind", "how"),
    [
        ("source", "tfpipe.Pipeline(source, ...).echo(4) instead of the source"),
        ("tf.data", "Dataset.from_tensors((x, y)).repeat(4)"),
        ("PyDataset", "a PyDataset cannot echo: train from tfpipe.Pipeline(...).echo(4)"),
    ],
)
def test_each_kind_of_input_is_told_how_it_echoes(kind: str, how: str) -> None:
    (line,) = echo_lines(report_of(300.0, 250.0, kind=kind))
    assert how in line


@pytest.mark.parametrize(
    ("input_rate", "achieved", "model", "verdict"),
    [
        (3000.0, 950.0, 1000.0, "compute-bound"),
        (1200.0, 990.0, 1000.0, "compute-bound"),  # little headroom, but no wait
        (300.0, 250.0, None, "unknown"),  # the model alone not timed: the wait is unknown
        (300.0, None, 1000.0, "unknown"),  # no train step timed
    ],
)
def test_no_echoing_is_advised_unless_input_bound(
    input_rate: float, achieved: float | None, model: float | None, verdict: str
) -> None:
    report = report_of(input_rate, achieved, model=model)
    assert report.verdict == verdict
    assert echo_lines(report) == []
    assert ".echo(" not in " ".join(report.advice)


def test_a_run_with_echoing_reports_the_factor_and_the_fresh_examples() -> None:
    report = report_of(2000.0, 950.0, echo_factor=2)  # compute-bound, echoed twice
    assert report.echo_factor == 2 and report.verdict == "compute-bound"
    assert report.fresh_examples_per_s == pytest.approx(475.0)
    text = str(report)
    assert re.search(r"echoed +2x: +475\.0 examples/s fresh, an epoch 2x the fresh examples", text)
    assert "echoed" not in str(report_of(2000.0, 950.0))
    assert report_of(300.0, None, echo_factor=2).fresh_examples_per_s is None


def test_an_echoed_input_still_behind_is_raised_to_at_most_4_in_all() -> None:
    # Echoed twice, 600 examples/s are 300 fresh: 4 in all closes the 3.3x gap.
    (line,) = echo_lines(report_of(600.0, 590.0, echo_factor=2))
    assert "delivered 295 fresh examples/s" in line
    assert "raise the Pipeline's .echo(2) to .echo(4)" in line
    # 3 x 330 fresh < 1,000 and capped: the gap is said, 4 in all
    (line,) = echo_lines(report_of(990.0, 660.0, echo_factor=3))
    assert "the gap is 4.5x" in line and ".echo(3) to .echo(4)" in line


def test_an_input_echoed_4x_is_not_told_to_echo_more() -> None:
    report = report_of(900.0, 600.0, echo_factor=4)
    assert report.verdict == "input-bound"
    assert ".echo(" not in " ".join(report.advice)
    assert any(line.startswith("the input is echoed 4x already") for line in report.advice)


@pytest.mark.parametrize("echo_factor", [1, 2])
def test_an_input_that_delivered_what_the_model_takes_is_not_told_to_echo(
    echo_factor: int,
) -> None:
    # Input-bound by the measured wait, but fit achieved the model's own rate: the factor that
    # closes the gap is the one used already.
    report = report_of(2400.0, 1000.0, echo_factor=echo_factor, measured_wait=0.25)
    assert report.verdict == "input-bound"
    assert echo_factor_for(1000.0 / echo_factor, 1000.0) == (None if echo_factor == 1 else 2)
    assert echo_lines(report) == []


SLEEP_PER_EXAMPLE_S = 0.025  # 8 of them a batch: 100-200 ms on 2 cores, the model ~20 ms a step


def pipeline_of(speed: str) -> tfpipe.Pipeline:
    """48 examples of 256 floats in batches of 8, each example made slow by a sleep in its map
    for `speed="slow"`."""
    rng = np.random.default_rng(0)
    source = tfpipe.from_arrays(
        {
            "x": rng.random((48, 256), dtype=np.float32),
            "label": np.arange(48, dtype=np.int64) % NUM_CLASSES,
        }
    )
    pipeline = tfpipe.Pipeline(source)
    if speed == "slow":
        sleep = lambda x: time.sleep(SLEEP_PER_EXAMPLE_S) or 0  # noqa: E731
        pipeline = pipeline.map(
            lambda ex: (tf.py_function(sleep, [ex["x"]], tf.int32), ex)[1], random=False
        )
    return pipeline.batch(8).as_supervised("x", "label")


@pytest.mark.slow
@pytest.mark.parametrize("speed", ["slow", "fast"])
def test_fit_advises_echoing_on_an_input_bound_run_only(speed: str) -> None:
    report = tfpipe.fit(wide_mlp(), pipeline_of(speed), epochs=2, verbose=0).report
    assert report.echo_factor == 1 and "echoed" not in str(report)
    lines = echo_lines(report)
    if speed == "fast":
        assert report.verdict == "compute-bound", report
        assert lines == [], report
        return
    assert report.verdict == "input-bound", report
    (line,) = lines
    assert line in str(report)
    delivered = min(report.input_examples_per_s, report.achieved_examples_per_s)
    factor = echo_factor_for(delivered, report.model_examples_per_s)
    assert factor is not None and f"call .echo({factor}) on the Pipeline" in line, report
    expected = min(report.model_examples_per_s, factor * delivered) / 8
    measured = report.achieved_examples_per_s / 8
    assert f"expect about {expected:,.1f} steps/s against the {measured:,.1f} measured" in line


@pytest.mark.parametrize("factor", [0, 1.5, True])
def test_a_report_refuses_an_echo_factor_that_is_no_positive_int(factor: Any) -> None:
    with pytest.raises(ValueError, match="echo_factor must be a positive int"):
        report_of(2000.0, 950.0, echo_factor=factor)
