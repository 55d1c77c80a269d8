"""`Pipeline.distribute` on the tf.data service, with the servers of `tfpipe service`.

Servers listen on free ports and announce 127.0.0.1; every wait on them is bounded, and every
server a test starts is stopped in a `finally` (subprocesses by killing their process group).
"""

from __future__ import annotations

import math
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import keras
import numpy as np
import pytest
import tensorflow as tf

import tfpipe
from collection import collect_now
from service_cluster import (
    WAIT_S,
    Cluster,
    bounded,
    dispatcher_and_two_workers,
    names_a_stopped_worker,
)
from tfpipe.errors import SourceError, TfpipeWarning
from tfpipe.training.report import FitReport
from tfpipe.training.throughput import Throughput

NUM_EXAMPLES = 101
pytestmark = pytest.mark.usefixtures("short_probes")  # their length is not under test


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def records(tmp_path_factory: pytest.TempPathFactory) -> str:
    """101 examples (`id` 0..100, `x` float32[3]) in 4 shards."""
    rng = np.random.default_rng(0)
    source = tfpipe.from_arrays(
        {"id": np.arange(NUM_EXAMPLES), "x": rng.random((NUM_EXAMPLES, 3), dtype=np.float32)}
    )
    prefix = str(tmp_path_factory.mktemp("service") / "train")
    tfpipe.write_tfrecords(source, prefix, num_shards=4)
    return prefix


def epoch_ids(dataset: tf.data.Dataset) -> tuple[list[int], list[int]]:
    """The ids of one pass over `dataset` and the size of each batch."""
    batches = bounded(lambda: [b["id"].numpy() for b in dataset])
    return sorted(np.concatenate(batches).tolist()), [len(b) for b in batches]


def test_dynamic_sharding_reads_every_example_once_per_epoch(records: str, service: str) -> None:
    pipeline = tfpipe.Pipeline(records).shuffle(seed=0).batch(8).distribute(service)
    dataset = pipeline.build()
    for _ in range(2):
        ids, sizes = epoch_ids(dataset)
        assert ids == list(range(NUM_EXAMPLES))
        # Rebatched here: every batch full but the last, although each worker ends short.
        assert sizes == [8] * 12 + [5]
    assert pipeline.batches_per_epoch() == 13


@pytest.mark.parametrize("kind", ["files", "arrays"])
def test_a_served_shard_is_that_shard_once_per_epoch(records: str, service: str, kind: str) -> None:
    """`shard(2, 1)` is dealt out before the service splits the data, so the served shard has
    the examples of the shard read here. (`Dataset.shard` inside the served dataset would be
    applied to each service worker's share: other examples, and fewer.)"""
    source = records if kind == "files" else tfpipe.from_arrays({"id": np.arange(NUM_EXAMPLES)})
    shard = tfpipe.Pipeline(source).shard(2, 1).batch(8)
    expected, _ = epoch_ids(shard.build())
    assert 0 < len(expected) < NUM_EXAMPLES and len(set(expected)) == len(expected)
    served = shard.distribute(service)
    assert f"shard {'files' if kind == 'files' else 'records'} 1 of 2" in served.explain()
    assert "(only those of shard 1 of 2) goes to one worker per epoch" in served.explain()
    dataset = served.build()
    for _ in range(2):
        assert epoch_ids(dataset)[0] == expected


def test_off_mode_makes_every_worker_read_all_the_data(records: str, service: str) -> None:
    pipeline = tfpipe.Pipeline(records).batch(16).distribute(service, mode="off")
    ids, _ = epoch_ids(pipeline.build())
    assert ids == sorted(list(range(NUM_EXAMPLES)) * 2)  # 2 workers, 2 copies
    assert pipeline.examples_per_epoch() is None


def test_explain_shows_which_stages_run_on_the_workers(records: str) -> None:
    # explain() does not contact the dispatcher: nothing listens at this port.
    address = f"grpc://127.0.0.1:{free_port()}"
    plan = tfpipe.Pipeline(records).shuffle().batch(8).distribute(address).explain()
    stages = [line.split(". ", 1)[1] for line in plan.splitlines()]
    served = next(i for i, s in enumerate(stages) if s.startswith("distribute:"))
    assert any(s.startswith("parse_example") for s in stages[:served])
    assert address in stages[served] and "each of the 4 TFRecord file(s)" in stages[served]
    assert stages[served + 1].startswith("rebatch to 8")
    assert stages[served + 2] == "prefetch AUTOTUNE"


@pytest.mark.fault(
    "no dispatcher at the distribute() address",
    reader="Pipeline.distribute",
    outcome="SourceError naming the address, before TensorFlow's hour of retries",
)
def test_an_unreachable_dispatcher_is_named(records: str) -> None:
    address = f"grpc://127.0.0.1:{free_port()}"
    pipeline = tfpipe.Pipeline(records).batch(8).distribute(address)
    with pytest.raises(SourceError, match=re.escape(address)):
        bounded(pipeline.build, 30)


@pytest.mark.fault(
    "bad distribute() arguments or stages that cannot run on workers",
    reader="Pipeline.distribute",
    outcome="ValueError naming the argument or the stage",
)
@pytest.mark.parametrize(
    ("build", "named"),
    [
        (lambda p: p.distribute("localhost"), "service='localhost'"),
        (lambda p: p.distribute("http://h:5050"), "service='http://h:5050'"),
        (lambda p: p.distribute("h:5050", mode="static"), "mode='static'"),
        (lambda p: p.distribute("h:5050", job_name=""), "job_name=''"),
        (lambda p: p.cache().distribute("h:5050").explain(), "cache()"),
        (lambda p: p.take(5).distribute("h:5050").explain(), "take()"),
        (lambda p: p.distribute("h:5050").shard(8, 0).explain(), "split 8 ways"),
    ],
)
def test_what_cannot_be_distributed_is_named(
    records: str, build: Callable[[tfpipe.Pipeline], Any], named: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(named)):
        build(tfpipe.Pipeline(records))


@pytest.mark.fault(
    "a worker given a malformed dispatcher address",
    reader="tfpipe service worker",
    outcome="one-line error naming --dispatcher, exit status 2",
)
def test_a_malformed_dispatcher_address_is_a_one_line_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from tfpipe.cli.parser import main

    assert main(["service", "worker", "--dispatcher", "dispatcher-without-port"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("tfpipe service: error: --dispatcher must be")
    assert "Received: --dispatcher='dispatcher-without-port'" in error


def test_the_service_address_is_normalised(records: str) -> None:
    service = tfpipe.Pipeline(records).distribute("10.0.0.5:5050", job_name="train").service
    assert service is not None
    assert (service.address, service.mode, service.job_name) == (
        "grpc://10.0.0.5:5050",
        "dynamic",
        "train",
    )


@pytest.mark.parametrize("timeout", [0, -1, math.inf, True, "60"])
def test_a_timeout_that_is_not_seconds_is_refused(records: str, timeout: Any) -> None:
    with pytest.raises(ValueError, match=r"timeout must be a finite number of seconds > 0"):
        tfpipe.Pipeline(records).distribute("10.0.0.5:5050", timeout=timeout)
    assert tfpipe.Pipeline(records).distribute("10.0.0.5:5050").service.timeout == 120
    assert (
        tfpipe.Pipeline(records).distribute("10.0.0.5:5050", timeout=None).service.timeout is None
    )


def test_the_stall_guard_passes_the_data_and_stops_a_stalled_fetch() -> None:
    """Two iterators, as Keras makes of a finite dataset per epoch: the first gets every
    element and ends; the second stalls at its third element and is stopped."""
    from tfpipe.loaders.service import DataService, stall_message

    service = DataService("127.0.0.1:1", timeout=1.5)  # nothing listens: no worker to list
    fetches = iter(range(100))
    # The stalled fetch waits up to 10 s, let go once the guard has stopped it: left asleep,
    # it held up the next test's Python fetches for the rest of its 10 s.
    stalled = threading.Event()

    def fetch(value: tf.Tensor) -> tf.Tensor:
        if next(fetches) == 7:
            stalled.wait(10)
        return value

    data = service.guard(
        tf.data.Dataset.range(5).map(lambda x: tf.py_function(fetch, [x], tf.int64))
    )
    assert bounded(lambda: [int(x) for x in data], 10) == [0, 1, 2, 3, 4]
    start = time.monotonic()
    try:
        with pytest.raises(tf.errors.OpError) as raised:
            bounded(lambda: [int(x) for x in data], 20)
    finally:
        stalled.set()
    assert time.monotonic() - start < 8
    message = stall_message(raised.value)
    assert message is not None, raised.value
    assert re.search(
        r"at grpc://127\.0\.0\.1:1, the dispatcher does not answer, for \d+ s "
        r"\(distribute\(timeout=1\.5\)\)\. Fix: restart it",
        message,
    )
    assert message.endswith("Workers that answer are waited for, however slow.")


def test_the_stall_guard_waits_for_slow_workers_that_answer(service: str) -> None:
    """A fetch slower than the timeout while the dispatcher and both workers answer is slow,
    not lost: it is waited for."""
    from tfpipe.loaders.service import DataService

    def fetch(value: tf.Tensor) -> tf.Tensor:
        time.sleep(3 if int(value) == 1 else 0)
        return value

    data = DataService(service, timeout=1).guard(
        tf.data.Dataset.range(3).map(lambda x: tf.py_function(fetch, [x], tf.int64))
    )
    assert bounded(lambda: [int(x) for x in data], 20) == [0, 1, 2]


@pytest.mark.fault(
    "a tf.data service worker stopped under a loop over Pipeline.build()",
    reader="Pipeline.distribute",
    outcome="SourceError (in named_errors) naming the lost worker after distribute(timeout=)",
)
def test_a_loop_over_build_stops_when_a_worker_is_lost(
    records: str, in_process: tuple[str, list[Any]]
) -> None:
    """In-process servers: a whole epoch with both workers, then worker 0 stops and the next
    epoch's read fails once it has waited `timeout` seconds, naming worker 0."""
    from tfpipe.loaders.service import registered_workers

    address, workers = in_process
    pipeline = tfpipe.Pipeline(records).batch(8).distribute(address, timeout=1)
    dataset = pipeline.build()
    assert epoch_ids(dataset)[0] == list(range(NUM_EXAMPLES))
    listed = registered_workers(address)
    assert listed is not None and len(listed) == 2
    workers[0].stop()

    def read_an_epoch() -> None:
        with tfpipe.named_errors(pipeline):
            list(dataset)

    start = time.monotonic()
    with pytest.raises(SourceError) as raised:
        bounded(read_an_epoch, 30)
    print(f"{time.monotonic() - start:.1f} s: {raised.value}")
    assert time.monotonic() - start < 1 + 10
    message = str(raised.value)
    del raised  # its frames hold the stalled iterator: released while the servers run
    collect_now()
    names_a_stopped_worker(message, address, listed)


def small_model() -> keras.Model:
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    return model


@pytest.mark.slow
def test_fit_trains_through_the_service_one_pass_per_epoch(records: str, service: str) -> None:
    pipeline = tfpipe.Pipeline(records).shuffle().batch(8).distribute(service)
    history = bounded(
        lambda: tfpipe.fit(small_model(), pipeline, x="x", y="id", epochs=2, verbose=0), 120
    )
    assert len(history.history["loss"]) == 2
    report = history.report
    assert report.service == service
    note = next(line for line in report.advice if "pass(es) over the data" in line)
    assert f"delivered [{NUM_EXAMPLES}, {NUM_EXAMPLES}] examples" in note


@pytest.fixture(scope="module")
def few(tmp_path_factory: pytest.TempPathFactory) -> str:
    """30 examples (`id` 1000..1029, `x` float32[3]) in 3 shards."""
    ids = np.arange(1000, 1030)
    source = tfpipe.from_arrays({"id": ids, "x": np.ones((30, 3), np.float32)})
    prefix = str(tmp_path_factory.mktemp("service-few") / "few")
    tfpipe.write_tfrecords(source, prefix, num_shards=3, progress=False)
    return prefix


def served_mixture(records: str, few: str, service: str) -> tfpipe.Pipeline:
    """Both sources on the service, mixed 3:1 in this process: 90 + 30 examples an epoch
    (the few used up first)."""
    sources = [
        tfpipe.Pipeline(path).shuffle(seed=i).distribute(service)
        for i, path in enumerate((records, few))
    ]
    return tfpipe.Pipeline.sample_from(sources, [3, 1]).batch(8)


def test_a_mixture_of_served_sources_contacts_no_dispatcher_until_built(
    records: str, few: str
) -> None:
    """Mixing and explain() register nothing (nothing listens at this port); build() names
    the address; a served source cannot be replayed, so start_at is refused, naming why."""
    address = f"grpc://127.0.0.1:{free_port()}"
    mixed = served_mixture(records, few, address)
    assert mixed.mixture is not None and mixed.mixture.counts == (90, 30)
    plan = mixed.explain()
    assert (
        plan.count(f"distribute: the stages above run on the tf.data service workers of {address}")
        == 2
    )
    with pytest.raises(SourceError, match=re.escape(address)):
        bounded(mixed.build, 30)
    with pytest.raises(ValueError, match=r"a mixed source .* runs on the tf.data service"):
        mixed.start_at(0)


def test_a_mixture_of_served_sources_has_its_counts_every_epoch(
    records: str, few: str, service: str
) -> None:
    dataset = served_mixture(records, few, service).build()
    for _ in range(2):
        ids = bounded(lambda: [int(i) for batch in dataset for i in batch["id"].numpy()])
        assert sorted(i for i in ids if i >= 1000) == list(range(1000, 1030))
        many = [i for i in ids if i < 1000]
        assert len(many) == len(set(many)) == 90 and set(many) < set(range(NUM_EXAMPLES))


@pytest.mark.slow
def test_fit_trains_on_a_mixture_of_served_sources(
    records: str, few: str, service: str, tmp_path: Path
) -> None:
    mixed = served_mixture(records, few, service).as_supervised("x", "id")
    history = bounded(lambda: tfpipe.fit(small_model(), mixed, epochs=2, verbose=0), 120)
    assert len(history.history["loss"]) == 2
    assert [share.examples for share in history.report.sources] == [90, 30]
    with pytest.raises(ValueError, match=r"a mixed source .* runs on the tf.data service"):
        tfpipe.fit(small_model(), mixed, backup_dir=tmp_path / "backup", verbose=0)


def throughput(examples_per_s: float) -> Throughput:
    return Throughput(examples_per_s, examples_per_s / 32, 0.1, 50, 1600)


@pytest.mark.parametrize(
    ("cpu_busy", "service", "expected"),
    [
        (0.95, None, "tfpipe service dispatcher --port 5050"),
        (0.95, None, ".distribute('grpc://DISPATCHER:5050')"),
        (0.3, None, None),
        (0.3, "grpc://10.0.0.5:5050", "tfpipe service worker --dispatcher 10.0.0.5:5050"),
    ],
)
def test_the_report_points_a_saturated_input_bound_host_at_the_service(
    cpu_busy: float, service: str | None, expected: str | None
) -> None:
    report = FitReport.build(
        input_alone=throughput(900),
        model_examples_per_s=1000,
        achieved_examples_per_s=500,
        input_kind="Pipeline",
        batch_size=32,
        steps_per_execution=1,
        steps_per_execution_chosen=False,
        cpu_busy=cpu_busy,
        service=service,
    )
    assert report.verdict == "input-bound"
    advice = "\n".join(report.advice)
    if expected is None:
        assert "tfpipe service" not in advice
    else:
        assert expected in advice
    assert f"{cpu_busy:.0%}" in str(report)


def _ids_in_shards(prefix: Path) -> int:
    """Writes 2,000 ids in 8 shards of 250 (a killed worker has files in flight)."""
    count = 2000
    source = tfpipe.from_arrays(
        {"id": np.arange(count), "x": np.zeros((count, 3), dtype=np.float32)}
    )
    tfpipe.write_tfrecords(source, prefix, num_shards=8)
    return count


class KillAndRestart(keras.callbacks.Callback):
    """Kills worker 0 at a batch of the second epoch and restarts it at the same address."""

    def __init__(self, cluster: Cluster, dispatcher: str, worker_port: str) -> None:
        super().__init__()
        self.cluster, self.dispatcher, self.port = cluster, dispatcher, worker_port
        self.epoch = 0

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self.epoch = epoch

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        if self.epoch == 1 and batch >= 2 and "worker0-restarted" not in self.cluster.servers:
            self.cluster.kill("worker0")
            self.cluster.start(
                "worker0-restarted", "worker", "--dispatcher", self.dispatcher, "--port", self.port
            )


class KillOnce(keras.callbacks.Callback):
    """Kills server `name` at batch 2 of the second epoch and leaves it down; `killed_at` is
    when (time.monotonic())."""

    def __init__(self, cluster: Cluster, name: str) -> None:
        super().__init__()
        self.cluster, self.name = cluster, name
        self.epoch = 0
        self.killed_at: float | None = None

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self.epoch = epoch

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        if self.epoch == 1 and batch >= 2 and self.killed_at is None:
            self.cluster.kill(self.name)
            self.killed_at = time.monotonic()


LOST_WORKER_TIMEOUT_S = 2.0


@pytest.mark.slow
@pytest.mark.fault(
    "a tf.data service worker killed and not restarted",
    reader="tfpipe.fit over Pipeline.distribute",
    outcome="SourceError naming the dispatcher and the lost worker after distribute(timeout=)",
)
def test_cli_servers_serve_each_example_once_and_survive_a_killed_worker(
    tmp_path: Path,
) -> None:
    """Dispatcher and 2 workers from `tfpipe service`: exactly once per epoch over 2 epochs;
    then `tfpipe.fit` with worker 0 killed mid-epoch (and restarted at its address, as a
    supervisor would): training goes on, and the pass it was killed in is at most one pass;
    then `tfpipe.fit` with worker 1 killed and not restarted: it stops with the error
    `timeout` seconds (plus a look at the servers) after the kill, although the other worker
    goes on serving the epoch; finally SIGTERM stops every server left with status 0."""
    count = _ids_in_shards(tmp_path / "train")
    cluster = Cluster(spares=4)  # the dispatcher, 2 workers, worker 0 restarted
    try:
        dispatcher, worker0 = dispatcher_and_two_workers(cluster)
        pipeline = tfpipe.Pipeline(str(tmp_path / "train")).shuffle().batch(50)
        _check_each_example_once_and_a_restarted_worker(cluster, pipeline, dispatcher, count)
        assert cluster.address("worker0-restarted") == worker0
        _check_a_lost_worker_stops_fit(cluster, pipeline, dispatcher, cluster.addresses["worker1"])
        for name in ("worker0-restarted", "dispatcher"):
            server = cluster.servers[name]
            server.send_signal(signal.SIGTERM)
            assert server.wait(WAIT_S) == 0
            assert "stopped" in server.stdout.read()  # type: ignore[union-attr]
    finally:
        cluster.stop_all()


def _fit_three_epochs(
    distributed: tfpipe.Pipeline, killer: keras.callbacks.Callback, seconds: float
) -> Any:
    """`tfpipe.fit` of `small_model` for 3 epochs with `killer`, bounded by `seconds`."""
    return bounded(
        lambda: tfpipe.fit(
            small_model(), distributed, x="x", y="id", epochs=3, callbacks=[killer], verbose=0
        ),
        seconds,
    )


def _check_each_example_once_and_a_restarted_worker(
    cluster: Cluster, pipeline: tfpipe.Pipeline, dispatcher: str, count: int
) -> None:
    dataset = pipeline.distribute(dispatcher).build()
    for _ in range(2):
        ids, _ = epoch_ids(dataset)
        assert ids == list(range(count))
    killer = KillAndRestart(cluster, dispatcher, cluster.addresses["worker0"].rsplit(":", 1)[1])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", TfpipeWarning)
        history = _fit_three_epochs(pipeline.distribute(dispatcher), killer, 180)
    assert len(history.history["loss"]) == 3  # training went on
    note = next(line for line in history.report.advice if "pass(es) over the data" in line)
    found = re.search(r"delivered \[([\d, ]+)\]", note)
    assert found is not None, note
    delivered = [int(n) for n in found[1].split(",")]
    print(f"examples per pass with worker 0 killed in pass 2: {delivered} of {count}")
    assert delivered[0] == count  # before the kill
    assert all(n <= count for n in delivered)  # at most once, never twice
    short = [str(w.message) for w in caught if "delivered fewer" in str(w.message)]
    assert bool(short) == any(n < count for n in delivered)


def _check_a_lost_worker_stops_fit(
    cluster: Cluster, pipeline: tfpipe.Pipeline, dispatcher: str, worker: str
) -> None:
    killer = KillOnce(cluster, "worker1")
    with pytest.raises(SourceError) as raised:
        _fit_three_epochs(
            pipeline.distribute(dispatcher, timeout=LOST_WORKER_TIMEOUT_S), killer, 90
        )
    assert killer.killed_at is not None
    after_kill = time.monotonic() - killer.killed_at
    message = str(raised.value)
    # The error's frames hold the stalled iterators: released here, while the dispatcher
    # answers (released after it was killed, they once delayed pytest's exit by ~40 s).
    del raised
    collect_now()
    print(f"{after_kill:.1f} s after the kill: {message}")
    assert dispatcher in message and repr([worker]) in message, message
    restart = f"`tfpipe service worker --dispatcher {dispatcher.removeprefix('grpc://')} --port"
    assert f"restart it at the same address ({restart}" in message
    # The timeout, a look at the servers (every timeout / 4 s) and slack for a busy host.
    assert after_kill < LOST_WORKER_TIMEOUT_S + 10


# Reads a served Pipeline until the guard's SourceError, prints the time of the error, and
# ends: the interpreter must then exit.
READ_UNTIL_LOST = """
import sys, time
import tfpipe
records, address = sys.argv[1:]
pipeline = tfpipe.Pipeline(records).batch(1).repeat().distribute(address, timeout=3)
batches = iter(pipeline.build())
next(batches)
print("reading", flush=True)
try:
    for _ in batches:
        time.sleep(0.01)
except tfpipe.errors.SourceError:
    print("raised", time.time(), flush=True)
"""


@pytest.mark.slow
@pytest.mark.fault(
    "a tf.data service worker killed and left down under a plain loop over Pipeline.build(), "
    "then the process ends",
    reader="Pipeline.distribute, a plain loop",
    outcome="SourceError naming the lost worker, without named_errors (was TensorFlow's raw "
    "UnknownError); the interpreter then exits within 15 s (it hung at exit: the guard's "
    "watcher thread was ended inside Python while its iterator waited for it)",
)
def test_a_process_exits_after_a_lost_workers_error(records: str) -> None:
    cluster = Cluster(spares=3)
    process = None
    try:
        dispatcher, _ = dispatcher_and_two_workers(cluster)
        process = subprocess.Popen(
            [sys.executable, "-c", READ_UNTIL_LOST, records, dispatcher],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        assert bounded(process.stdout.readline) == "reading\n"  # type: ignore[union-attr]
        cluster.kill("worker0")  # left down
        raised = bounded(process.stdout.readline)  # type: ignore[union-attr]
        assert raised.startswith("raised "), raised
        process.wait(15)  # raises TimeoutExpired while it hangs at exit
        exited = time.time()
        assert process.returncode == 0 and exited - float(raised.split()[1]) < 15
    finally:
        if process is not None and process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(WAIT_S)
        cluster.stop_all()
