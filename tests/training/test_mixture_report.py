"""The fit report of a mixture (`Pipeline.sample_from`): each source's share of the examples
and of the input time, and the source to speed up first."""

from __future__ import annotations

from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf

import tfpipe
from tfpipe.training.adapters import adapt
from tfpipe.training.report import FitReport
from tfpipe.training.source_shares import SourceShare, source_shares
from tfpipe.training.throughput import Throughput

pytestmark = pytest.mark.usefixtures("short_probes")  # their length is not under test


def _records(root: Path, name: str, first: int, count: int) -> str:
    ids = np.arange(first, first + count)
    source = tfpipe.from_arrays({"x": np.ones((count, 3), np.float32), "id": ids})
    tfpipe.write_tfrecords(source, root / name, num_shards=2, progress=False)
    return str(root / name)


@pytest.fixture(scope="module")
def fast_and_raw(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """Records of 160 and 40 examples (`x` float32[3], `id`)."""
    root = tmp_path_factory.mktemp("mixture-report")
    return _records(root, "fast", 0, 160), _records(root, "raw", 1000, 40)


def _expensive(example: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
    """A deterministic map of a few ms per example (four 300x300 matrix products), honest
    work that leaves the example as it was."""
    matrix = tf.fill([300, 300], 1e-3) + tf.cast(example["id"], tf.float32) * 0
    for _ in range(4):
        matrix = tf.linalg.matmul(matrix, matrix)
    return {**example, "x": example["x"] + tf.reduce_sum(matrix) * 0}


def _model() -> keras.Model:
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    return model


def _slow_lines(report: FitReport) -> list[str]:
    return [line for line in report.advice if "of the input time (it reads" in line]


@pytest.mark.slow
def test_the_report_names_the_source_that_costs_the_input_time(
    fast_and_raw: tuple[str, str],
) -> None:
    fast, raw = fast_and_raw
    sources = [
        tfpipe.Pipeline(fast).shuffle(seed=0),
        tfpipe.Pipeline(raw).shuffle(seed=1).map(_expensive),
    ]
    mixed = tfpipe.Pipeline.sample_from(sources, [4, 1]).batch(8).as_supervised("x", "id")
    report = tfpipe.fit(_model(), mixed, verbose=0).report
    first, second = report.sources
    assert (first.examples, second.examples) == (160, 40)
    assert (first.examples_share, second.examples_share) == (0.8, 0.2)  # exact: the counts
    assert first.input_time_share + second.input_time_share == pytest.approx(1.0)
    # Each example of the raw source costs ms, one of the fast one µs: it takes most of the time.
    assert second.input_time_share > 0.5 > first.input_time_share
    assert second.examples_per_s < first.examples_per_s
    (line,) = _slow_lines(report)
    assert line.startswith(f"source 1 ({raw}): 20% of the examples, ")
    assert "what makes it slow is what to fix first" in line
    text = str(report)
    assert "mixed sources    examples  input time" in text
    (row,) = [line for line in text.splitlines() if line.endswith(f"examples/s  {raw}")]
    assert row.split()[:4] == ["source", "1", "20%", f"{second.input_time_share:.0%}"]


@pytest.mark.slow
def test_a_balanced_mixture_names_no_source(fast_and_raw: tuple[str, str]) -> None:
    fast, _ = fast_and_raw
    sources = [tfpipe.Pipeline(fast).shuffle(seed=i) for i in range(2)]
    mixed = tfpipe.Pipeline.sample_from(sources).batch(8).as_supervised("x", "id")
    report = tfpipe.fit(_model(), mixed, verbose=0).report
    assert [share.examples_share for share in report.sources] == [0.5, 0.5]
    assert _slow_lines(report) == []


def _built(sources: tuple[SourceShare, ...] = ()) -> FitReport:
    """A report of an input-bound run from given rates (no training)."""
    rates = {"model_examples_per_s": 2000.0, "achieved_examples_per_s": 850.0}
    return FitReport.build(
        input_alone=Throughput(900.0, 28.1, 0.4, 50, 1600),
        **rates,
        input_kind="Pipeline",
        batch_size=32,
        steps_per_execution=1,
        steps_per_execution_chosen=False,
        sources=sources,
    )


def test_a_report_without_a_mixture_has_no_source_table() -> None:
    report = _built()
    assert report.sources == () and "mixed sources" not in str(report)


@pytest.mark.parametrize(
    ("rates", "named"),
    [
        ((4000.0, 200.0), [1]),  # 20% of the examples, 83% of the time
        ((4000.0, 1200.0), []),  # 45% of the time (2.3x its share): under half
        ((1000.0, 4000.0), []),  # source 0: 94% of the time, but 80% of the examples
    ],
)
def test_a_source_is_named_when_it_takes_twice_its_share_and_half_the_time(
    rates: tuple[float, float], named: list[int]
) -> None:
    shares = source_shares(["out/train", "out/raw"], [80, 20], rates)
    report = _built(shares)
    assert [s.index for s in shares if any(s.label in line for line in _slow_lines(report))] == (
        named
    )
    assert str(report).count(" examples/s  out/") == 2


def test_fit_walks_each_source_on_across_epochs() -> None:
    """tfpipe.fit reads a mixture with one iterator built as `repeat().start_at(0)`: a source
    larger than its share goes on where it stopped (300 ids over 6 epochs of 50 draws, each
    once), where the built dataset repeated would start it at a fresh pass every epoch."""
    many = tfpipe.Pipeline(tfpipe.from_arrays({"id": np.arange(300)})).shuffle(seed=0)
    few = tfpipe.Pipeline(tfpipe.from_arrays({"id": np.arange(1000, 1050)})).shuffle(seed=1)
    mixed = tfpipe.Pipeline.sample_from([many, few], [1, 1]).batch(10)
    data, steps, forever = adapt(mixed).one_iterator(None, 1)
    assert (steps, forever) == (10, True)
    ids = [int(i) for batch in data.take(60) for i in batch["id"]]
    assert sorted(i for i in ids if i < 1000) == list(range(300))
    assert sorted(i for i in ids[:100] if i >= 1000) == list(range(1000, 1050))
