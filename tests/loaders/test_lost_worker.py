"""A tf.data service worker lost for good while a served Pipeline is read (issue 43).

TensorFlow never gives up on a lost worker: the dispatcher gives it a task in every job and
the client retries it until the job's last task ends, so the read waits forever. The stall
guard of `Pipeline.distribute(timeout=)` turns that wait into a `SourceError` naming the
worker; these tests kill a worker mid-read, leave it down, and time the error from the kill.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import keras
import numpy as np
import pytest

import tfpipe
from collection import collect_now
from service_cluster import (
    Cluster,
    bounded,
    check_lost_worker_named,
    dispatcher_and_two_workers,
    names_a_stopped_worker,
)
from tfpipe.errors import SourceError
from tfpipe.loaders.service import registered_workers

pytestmark = pytest.mark.usefixtures("short_probes")  # their length is not under test

EXAMPLES, SHARDS, BATCH = 1600, 16, 8
KILL_EPOCH, KILL_BATCH = 1, 20  # "batch 20 of epoch 2"
TIMEOUT_S = 10.0
SLACK_S = 10.0  # a look at the servers (every timeout / 4 s) and a busy host


@pytest.fixture(scope="module")
def labelled(tmp_path_factory: pytest.TempPathFactory) -> str:
    """1,600 examples (`x` float32[3], `label` 0/1) in 16 shards."""
    rng = np.random.default_rng(0)
    source = tfpipe.from_arrays(
        {"x": rng.random((EXAMPLES, 3), dtype=np.float32), "label": rng.integers(0, 2, EXAMPLES)}
    )
    prefix = str(tmp_path_factory.mktemp("lost-worker") / "train")
    tfpipe.write_tfrecords(source, prefix, num_shards=SHARDS, progress=False)
    return prefix


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    """`tfpipe service` servers in subprocesses: a dispatcher and two workers to start."""
    servers = Cluster(spares=3)
    try:
        yield servers
    finally:
        servers.stop_all()


class KillWorker0(keras.callbacks.Callback):
    """SIGKILLs worker 0 after batch 20 of epoch 2 and leaves it down; `killed_at` is when,
    `batches` the batches trained in each epoch."""

    def __init__(self, cluster: Cluster) -> None:
        super().__init__()
        self.cluster = cluster
        self.epoch = 0
        self.killed_at: float | None = None
        self.batches: list[int] = []

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self.epoch = epoch
        self.batches.append(0)

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        self.batches[-1] += 1
        if (self.epoch, batch) == (KILL_EPOCH, KILL_BATCH) and self.killed_at is None:
            self.cluster.kill("worker0")
            self.killed_at = time.monotonic()


def ends_in_time(killed_at: float | None, timeout: float) -> float:
    """Seconds from the kill to now, asserted within [timeout, timeout + SLACK_S)."""
    assert killed_at is not None, "the worker was never killed"
    after_kill = time.monotonic() - killed_at
    assert timeout <= after_kill < timeout + SLACK_S, after_kill
    return after_kill


def lost_or_complete(
    read: Callable[[], Any], killed_at: Callable[[], float | None], servers: tuple[str, str]
) -> tuple[bool, Any]:
    """(True, `read()`'s value) when it ended without an error, (False, None) when it raised the
    `SourceError` naming the dispatcher and the lost worker within the timeout (+ slack) of
    the kill. On a busy host the workers can have served every element before the kill (a
    full-suite run saw it): nothing was lost then, and the caller checks that every batch is
    there. A read that hangs fails (bounded at 120 s), as does any other error."""
    try:
        value = bounded(read, 120)
    except SourceError as error:
        after_kill = ends_in_time(killed_at(), TIMEOUT_S)
        print(f"{after_kill:.1f} s after the kill: {error}")
        check_lost_worker_named(error, *servers, TIMEOUT_S)
        del error  # its frames hold the stalled iterators: released while the dispatcher runs
        collect_now()
        return False, None
    assert killed_at() is not None, "the worker was never killed"
    return True, value


@pytest.mark.slow
@pytest.mark.fault(
    "a tf.data service worker SIGKILLed at batch 20 of epoch 2 of tfpipe.fit and left down "
    "(1,600 examples, 16 shards, batches of 8)",
    reader="tfpipe.fit over Pipeline.distribute",
    outcome="SourceError naming the dispatcher and the lost worker, timeout to timeout + 10 s "
    "after the kill",
)
def test_fit_stops_when_a_worker_is_killed_mid_epoch(labelled: str, cluster: Cluster) -> None:
    """The issue's run: two workers, `fit(epochs=3)`, worker 0 killed by a callback."""
    dispatcher, worker0 = dispatcher_and_two_workers(cluster)
    pipeline = (
        tfpipe.Pipeline(labelled)
        .batch(BATCH)
        .as_supervised("x", "label")
        .distribute(dispatcher, timeout=TIMEOUT_S)
    )
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    killer = KillWorker0(cluster)
    completed, _ = lost_or_complete(
        lambda: tfpipe.fit(model, pipeline, epochs=3, callbacks=[killer], verbose=0),
        lambda: killer.killed_at,
        (dispatcher, worker0),
    )
    if completed:
        assert killer.batches == [EXAMPLES // BATCH] * 3, killer.batches
    collect_now()


@pytest.mark.slow
@pytest.mark.fault(
    "a tf.data service worker SIGKILLed in the second pass of a loop over Pipeline.build() "
    "and left down",
    reader="Pipeline.distribute",
    outcome="SourceError (in named_errors) naming the lost worker, timeout to timeout + 10 s "
    "after the kill",
)
def test_a_loop_over_build_stops_when_a_worker_is_killed(labelled: str, cluster: Cluster) -> None:
    dispatcher, worker0 = dispatcher_and_two_workers(cluster)
    pipeline = tfpipe.Pipeline(labelled).batch(BATCH).distribute(dispatcher, timeout=TIMEOUT_S)
    dataset = pipeline.build()
    killed: dict[str, float] = {}

    def two_passes() -> int:
        with tfpipe.named_errors(pipeline):
            assert sum(len(b["x"]) for b in dataset) == EXAMPLES
            seen = 0
            for index, batch in enumerate(dataset):
                seen += len(batch["x"])
                if index == KILL_BATCH:
                    cluster.kill("worker0")
                    killed["at"] = time.monotonic()
            return seen

    completed, seen = lost_or_complete(two_passes, lambda: killed.get("at"), (dispatcher, worker0))
    if completed:
        assert seen == EXAMPLES, seen
    collect_now()


@pytest.mark.fault(
    "a tf.data service worker stopped while two iterators of one built Pipeline read, after "
    "the other one ended",
    reader="Pipeline.distribute",
    outcome="SourceError naming the lost worker after distribute(timeout=): each iterator is "
    "watched on its own",
)
def test_each_iterator_is_watched_on_its_own(
    labelled: str, in_process: tuple[str, list[Any]]
) -> None:
    """Iterator A reads a batch; iterator B of the same dataset reads a whole pass and ends;
    worker 0 stops; A must still fail once it has waited `timeout` seconds, or, on a busy host
    whose workers had sent A everything before the stop, end with all its data (the guard once
    shared one "data ended" mark among iterators, and B's end stopped A's watch: A hung)."""
    address, workers = in_process
    pipeline = tfpipe.Pipeline(labelled).batch(BATCH).distribute(address, timeout=1)
    dataset = pipeline.build()
    first = iter(dataset)
    assert len(bounded(lambda: next(first))["x"]) == BATCH
    assert bounded(lambda: sum(len(b["x"]) for b in dataset)) == EXAMPLES
    listed = registered_workers(address)
    assert listed is not None and len(listed) == 2
    workers[0].stop()
    start = time.monotonic()

    def rest_of_first() -> int:
        with tfpipe.named_errors(pipeline):
            return sum(len(b["x"]) for b in first)

    try:
        rest = bounded(rest_of_first, 30)
    except SourceError as error:
        assert time.monotonic() - start < 1 + SLACK_S
        message = str(error)
        del error
        collect_now()
        names_a_stopped_worker(message, address, listed)
    else:  # a busy host: the workers had sent A all its data before the stop; nothing lost
        assert rest == EXAMPLES - BATCH, rest
