"""tfpipe.benchmark and bench.measure: structure of the results, every input kind, bad input."""

from __future__ import annotations

import itertools
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf

import tfpipe
from tfpipe.errors import DataNotFoundError
from tfpipe.training.adapters import adapt
from tfpipe.training.throughput import measure


class Batches(keras.utils.PyDataset):
    """Three batches of 4 examples."""

    def __len__(self) -> int:
        return 3

    def __getitem__(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        return np.full((4, 2), index, np.float32), np.zeros(4, np.float32)


def test_benchmark_tf_data_repeats_a_short_input() -> None:
    result = tfpipe.benchmark(tf.data.Dataset.range(20).batch(8), batches=7, warmup=1)
    assert result.batches == 7
    assert 8 * 5 <= result.examples <= 8 * 7  # partial batches of 4 at each epoch's end
    assert result.examples_per_s > 0 and result.batches_per_s > 0
    assert result.first_batch_s >= 0


def test_benchmark_pydataset_counts_its_batches() -> None:
    result = tfpipe.benchmark(Batches(), batches=5, warmup=0)
    assert (result.batches, result.examples) == (5, 20)


def test_benchmark_path_reads_the_records(image_folder: Path, tmp_path: Path) -> None:
    prefix = str(tmp_path / "train")
    tfpipe.write_tfrecords(tfpipe.from_directory(image_folder), prefix, num_shards=2)
    result = tfpipe.benchmark(prefix, batches=4, batch_size=6, image_size=(8, 8), warmup=1)
    assert (result.batches, result.examples) == (4, 24)


def test_benchmark_pipeline(image_folder: Path) -> None:
    pipeline = tfpipe.Pipeline(tfpipe.from_directory(image_folder), image_size=(8, 8)).batch(5)
    result = tfpipe.benchmark(pipeline, batches=3, warmup=1)
    assert result.batches == 3


def test_measure_stops_after_max_seconds() -> None:
    endless = itertools.repeat(np.zeros((2, 1)))
    result = measure(endless, num_batches=10**9, warmup=0, max_seconds=0.05)
    assert 1 <= result.batches < 10**9


def test_adapt_prefetches_and_sizes_datasets() -> None:
    source = adapt(tf.data.Dataset.range(10).batch(4))
    assert (source.label, source.steps, source.infinite) == ("tf.data", 3, False)
    assert type(source.data).__name__ == "_PrefetchDataset"
    endless = adapt(tf.data.Dataset.range(10).repeat().batch(4))
    assert endless.infinite and endless.steps is None


def test_adapt_keeps_a_pipelines_single_prefetch() -> None:
    pipeline = tfpipe.Pipeline(tfpipe.from_arrays({"x": np.arange(10.0)})).batch(4)
    graph = tf.compat.v1.GraphDef.FromString(adapt(pipeline).data._as_serialized_graph().numpy())
    assert [node.op for node in graph.node].count("PrefetchDataset") == 1


@pytest.mark.parametrize("batches", [0, -1, 2.5, True])
def test_benchmark_rejects_bad_batches(batches: object) -> None:
    with pytest.raises(ValueError, match="batches must be a positive int"):
        tfpipe.benchmark(tf.data.Dataset.range(4).batch(2), batches=batches)  # type: ignore[arg-type]


def test_benchmark_rejects_unknown_inputs_and_missing_paths(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match=r"Received: data of type dict"):
        tfpipe.benchmark({"x": [1, 2]})
    with pytest.raises(DataNotFoundError, match=r"names no data.*metadata file .*missing\.json"):
        tfpipe.benchmark(str(tmp_path / "missing"))


def test_benchmark_of_an_empty_input_is_an_error() -> None:
    with pytest.raises(ValueError, match="ended during the 2 warm-up batches"):
        tfpipe.benchmark(tf.data.Dataset.range(0).batch(2), batches=3, warmup=2)


def test_cli_bench_times_a_dataset_or_each_dataset_of_a_folder(
    image_folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tfpipe.cli.parser import main

    out = tmp_path / "out"
    for split in ("train", "test"):
        tfpipe.write_tfrecords(tfpipe.from_directory(image_folder), out / split, progress=False)
    timing = ["--batches", "3", "--batch-size", "4", "--image-size", "8x8"]
    assert main(["bench", str(out / "train"), *timing]) == 0
    output = capsys.readouterr().out
    assert "examples/s" in output and "batches/s of 4" in output and "3 batches timed" in output
    assert main(["bench", str(out), *timing]) == 0  # a folder, as inspect takes it
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(": ")[0] for line in lines] == [str(out / "test"), str(out / "train")]
    assert main(["bench", str(image_folder), *timing]) == 0  # what fit reads, bench times
    assert capsys.readouterr().out.startswith(f"{image_folder}: ")
    # the library's advice names the command's flag: images of variable size, no --image-size
    assert main(["bench", str(out / "train"), "--batches", "2"]) == 2
    error = capsys.readouterr().err
    assert "pass --image-size HEIGHTxWIDTH" in error and "image_size" not in error
