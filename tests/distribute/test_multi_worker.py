"""Training under tf.distribute: each worker its own part, every example once per epoch.

The subprocess tests run examples/multi_worker.py (two MultiWorkerMirroredStrategy workers on
127.0.0.1, or one process with two CPU replicas); it bounds every wait and kills the worker
process groups whatever happens. With 101 examples and a global batch of 8, each epoch is
12 steps on every worker: 96 examples used once, 5 left out and counted in a warning.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tensorflow as tf

import tfpipe
from example_scripts import load
from service_cluster import Cluster, check_lost_worker_named, dispatcher_and_two_workers
from tfpipe.distribute.sharding import Layout, file_split, record_split
from tfpipe.errors import SourceError, TfpipeWarning


def check_one_pass(outcome: dict[str, Any], workers: int) -> None:
    """101 examples, batch 8: per epoch 96 distinct ids over all workers, 5 left out."""
    inputs = ("by_record", "by_file", "loader")
    assert all(name in r for r in outcome["workers"] for name in inputs), outcome["workers"]
    for name in inputs:
        part = outcome["summary"][name]
        assert part["steps"] == [12] * workers, name
        assert part["epochs"] == {e: {"used": 96, "twice": 0, "left_out": 5} for e in ("0", "1")}, (
            name
        )
        for result in outcome["workers"]:
            assert [len(result[name]["ids"][e]) for e in ("0", "1")] == [96 // workers] * 2
            assert any("5 of 101 examples are left out" in w for w in result[name]["warnings"])


@pytest.mark.slow
@pytest.mark.fault(
    "a worker process killed mid-epoch (2 workers, MultiWorkerMirroredStrategy)",
    reader="tfpipe.training.fit",
    outcome="the other worker fails with UnavailableError within 60 s (naming the dead task, "
    "or its closed socket when that comes first); no hang",
)
def test_two_workers_read_disjoint_parts_and_a_killed_one_makes_the_other_fail(
    tmp_path: Path,
) -> None:
    """Two workers train on each input; then, in one more run, worker 1 dies mid-epoch."""
    outcome = load("multi_worker").main(
        ["--workdir", str(tmp_path), "--kill-worker", "1", "--peer-timeout", "20"]
    )
    check_one_pass(outcome, workers=2)
    assert {r["replicas"] for r in outcome["workers"]} == {2}  # 2 workers x 1 CPU replica
    by_file = [r["by_file"]["warnings"][0] for r in outcome["workers"]]
    assert all("split by file" in w for w in by_file)  # 4 files for 2 workers
    assert all("split by record" in r["by_record"]["warnings"][0] for r in outcome["workers"])
    survivor, dead = outcome["workers"]
    assert dead["died"] and "error" not in dead and "died_at" in dead, dead
    error = survivor["error"]
    assert error.startswith("UnavailableError"), survivor
    # Which peer error comes first depends on timing: the health check names the dead task;
    # a collective already under way sees its socket close.
    assert ("task:1" in error and "unhealthy" in error) or "Socket closed" in error, survivor
    # Within a few peer timeouts of the death: not at the launcher's time limit. Timed from the
    # death, not from the start, which a loaded machine can delay by tens of seconds.
    assert 0 < survivor["failed_at"] - dead["died_at"] < 60, (survivor, dead)


SERVED_EXAMPLES, SERVED_BATCH, SERVICE_TIMEOUT_S, SLACK_S = 16_000, 64, 10.0, 10.0


@pytest.mark.slow
@pytest.mark.fault(
    "a tf.data service worker SIGKILLed at batch 20 of epoch 2 and left down while 2 "
    "MultiWorkerMirroredStrategy workers train on a served Pipeline",
    reader="tfpipe.fit over Pipeline.distribute, 2 training workers",
    outcome="both fail with the SourceError naming the dispatcher and the lost worker, timeout "
    "to timeout + 10 s after the kill, and exit; no hang",
)
def test_a_lost_service_worker_stops_both_training_workers(tmp_path: Path) -> None:
    """Two training workers read `Pipeline(16 files).batch(8).distribute(timeout=10)` (each
    its own job) from a dispatcher and two service workers; training worker 0 SIGKILLs service
    worker 0 from a callback at batch 20 of epoch 2 of 3. Both training workers must raise
    the guard's SourceError and leave (exit status 1) on their own: one stalls in its data,
    the other at an all-reduce waiting for it, which its own guard aborts. Before, that one
    waited until its peer's process was gone (or forever, while the peer waited at the
    cluster's shutdown barrier), and a process that read a served Pipeline could hang at exit.
    16,000 examples: the service cannot have served the rest of the run before the kill, as
    it could with 1,600 (seen once in 5 runs). In batches of 64 (250 steps per epoch):
    TensorFlow keeps a thread per collective op until the peer timeout (30 s) has passed, and
    batches of 8 ran ~400 tiny steps a second, ~12,000 threads, until a process aborted."""
    cluster = Cluster(spares=3)
    try:
        dispatcher, worker0 = dispatcher_and_two_workers(cluster)
        args = ["--workdir", str(tmp_path), "--examples", str(SERVED_EXAMPLES), "--epochs", "3"]
        args += ["--batch-size", str(SERVED_BATCH)]
        args += ["--service", dispatcher, "--service-timeout", f"{SERVICE_TIMEOUT_S:g}"]
        args += ["--kill-service-worker", str(cluster.servers["worker0"].pid), "--timeout", "300"]
        outcome = load("multi_worker").main(args)
    finally:
        cluster.stop_all()
    first, second = outcome["workers"]
    killed_at = first.get("service_worker_killed_at")
    assert killed_at is not None, first
    if "error" not in first and "error" not in second:  # every batch served before the kill
        for result in (first, second):
            assert result["served"]["steps"] == SERVED_EXAMPLES // SERVED_BATCH, result
            assert [len(i) for i in result["served"]["ids"].values()] == [SERVED_EXAMPLES // 2] * 3
        return
    for result in (first, second):
        assert result["error"].startswith("SourceError: "), result
        check_lost_worker_named(
            result["error"].removeprefix("SourceError: "), dispatcher, worker0, SERVICE_TIMEOUT_S
        )
        after_kill = result["failed_at"] - killed_at
        assert SERVICE_TIMEOUT_S <= after_kill < SERVICE_TIMEOUT_S + SLACK_S, result
        assert result["exit_code"] == 1, result  # left by itself, not killed at the time limit


@pytest.mark.slow
@pytest.mark.fault(
    "a Pipeline read through the tf.data service (a shared job_name) by 2 "
    "MultiWorkerMirroredStrategy workers",
    reader="tfpipe.fit over Pipeline.distribute, 2 training workers",
    outcome="each training worker serves its own 8 of the 16 files as its own job: every "
    "example once per epoch (before: Keras's auto-shard of each worker's whole job used "
    "about 3 in 10 twice and left as many out)",
)
def test_two_training_workers_each_serve_their_own_files(tmp_path: Path) -> None:
    """1,600 examples in 16 files, 2 epochs: the ids the two models saw in each epoch are
    every id once, 800 on each worker in 200 equal steps. Before, each training worker read
    the whole job and Keras kept every other batch of it (1,111 distinct ids of 1,600 in
    one epoch); the shared `job_name` must not join the two workers' different parts."""
    cluster = Cluster(spares=3)
    try:
        dispatcher, _ = dispatcher_and_two_workers(cluster)
        args = ["--workdir", str(tmp_path), "--examples", "1600", "--service", dispatcher]
        outcome = load("multi_worker").main([*args, "--job-name", "shared", "--timeout", "240"])
    finally:
        cluster.stop_all()
    assert all("error" not in r for r in outcome["workers"]), outcome["workers"]
    served = outcome["summary"]["served"]
    assert served["steps"] == [200, 200], served
    assert served["epochs"] == {e: {"used": 1600, "twice": 0, "left_out": 0} for e in ("0", "1")}
    for result in outcome["workers"]:
        assert [len(ids) for ids in result["served"]["ids"].values()] == [800, 800], result


@pytest.mark.slow
def test_two_cpu_replicas_in_one_process(tmp_path: Path) -> None:
    outcome = load("multi_worker").main(
        ["--workdir", str(tmp_path), "--mirrored", "--timeout", "240"]
    )
    assert "error" not in outcome["workers"][0], outcome["workers"][0]
    check_one_pass(outcome, workers=1)
    assert outcome["workers"][0]["replicas"] == 2


def ids_of(dataset: Any, steps: int) -> list[list[int]]:
    """The ids of `steps` batches, per batch."""
    batches = iter(dataset)
    return [sorted(np.asarray(next(batches)[0][0]).tolist()) for _ in range(steps)]


def arrays(count: int) -> Any:
    return tfpipe.from_arrays(
        {
            "id": np.arange(count, dtype=np.int64),
            "x": np.zeros((count, 2), np.float32),
            "label": np.zeros(count, np.int64),
        }
    )


@pytest.mark.parametrize("kind", ["pipeline", "loader"])
def test_one_replica_epochs_are_whole_batches_of_distinct_examples(kind: str) -> None:
    source = arrays(21)
    if kind == "pipeline":
        data = tfpipe.Pipeline(source).shuffle(seed=1).batch(4).as_supervised(["id", "x"], "label")
    else:
        data = tfpipe.SequenceLoader(source, batch_size=4, x=["id", "x"], seed=1)
    with pytest.warns(TfpipeWarning, match="1 of 21 examples are left out"):
        built = data.build_distributed()
    assert (built.steps_per_epoch, built.examples_per_epoch, built.dropped_per_epoch) == (5, 20, 1)
    assert built.per_replica_batch_size == 4
    batches = ids_of(built.dataset, 10)
    epochs = [[i for batch in batches[:5] for i in batch], [i for b in batches[5:] for i in b]]
    assert [len(set(e)) for e in epochs] == [20, 20]
    assert set(range(21)) - set(epochs[0]) != set(range(21)) - set(epochs[1])  # reshuffled


def test_an_even_split_drops_nothing() -> None:
    source = arrays(24)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        built = tfpipe.Pipeline(source).batch(8).as_supervised(["id", "x"], "label")
        built = built.build_distributed()
    assert (built.steps_per_epoch, built.dropped_per_epoch, built.shard_by) == (3, 0, "record")


def test_splits_and_layout() -> None:
    assert record_split(101, 2) == [51, 50]
    assert file_split([30, 30, 21, 20], 2) == [51, 50]
    assert file_split([30, 30, 21], 2) == [51, 30]
    layout = Layout(2, 2)
    assert layout.per_replica(8) == 2
    with pytest.raises(ValueError, match=r"multiple of 4. Received: batch_size=6; use e.g. 4"):
        layout.per_replica(6)
    assert Layout.of(tf.distribute.get_strategy()) == Layout(1, 1)


@pytest.mark.fault(
    "fewer examples than one global batch",
    reader="Pipeline.build_distributed",
    outcome="SourceError naming the worker, its examples and the batch size",
)
def test_too_few_examples_for_one_step_are_named() -> None:
    pipeline = tfpipe.Pipeline(arrays(5)).batch(8)
    with pytest.raises(SourceError, match=r"worker 0 gets 5 example\(s\) by record"):
        pipeline.build_distributed()


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (lambda p: p.filter(lambda ex: ex["id"] > 2), "filter()"),
        (lambda p: p.take(10), "take()"),
        (lambda p: p.shard(2, 0), "shard()"),
        (lambda p: p.repeat(3), "repeat(3)"),
    ],
)
def test_unequal_epochs_are_refused(change: Any, named: str) -> None:
    pipeline = change(tfpipe.Pipeline(arrays(16)).batch(4))
    with pytest.raises(ValueError, match="build_distributed: " + re.escape(named)):
        pipeline.build_distributed()


def test_no_batch_is_refused() -> None:
    with pytest.raises(ValueError, match=r"call batch\(global_batch_size\) first"):
        tfpipe.Pipeline(arrays(16)).build_distributed()
