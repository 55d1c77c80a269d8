"""Where a `Pipeline` hands its expensive part to the tf.data service (`Pipeline.distribute`).

    this process: build the graph ──register──▶ dispatcher ──splits──▶ workers: read, parse,
    decode, map, batch ──gRPC──▶ this process: rebatch, repeat, prefetch ──▶ model.fit

Built on `tf.data.experimental.service.distribute`, never around it: the dispatcher hands out
*splits* (TFRecord files, or example indices of an in-memory source) and each worker runs the
stages before the split point on the splits it receives.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import gc
import itertools
import math
import re
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import grpc
import tensorflow as tf
from tensorflow.python.eager import context as eager_context

from tfpipe.errors import SourceError

# `ShardingPolicy` by tfpipe mode name. DYNAMIC gives each split to one worker per epoch (at
# most once: a worker that fails loses the rest of the splits it was reading); OFF makes every
# worker read the whole data.
MODES = {
    "dynamic": tf.data.experimental.service.ShardingPolicy.DYNAMIC,
    "off": tf.data.experimental.service.ShardingPolicy.OFF,
}
_ADDRESS = re.compile(
    r"^(?:(?P<protocol>[a-z+]+)://)?(?P<host>[^:/\s\[\]]+|\[[0-9a-fA-F:.]+\]):(?P<port>\d+)$"
)
_PROTOCOLS = ("grpc",)
_CONNECT_S = 5.0
STALL_TIMEOUT_S = 120.0
_WATCH_S = 0.5  # how often the guard's watcher wakes
_LOOK_S = 5.0  # the most seconds between two looks at the servers
_STALLED = "tf.data service stalled"  # starts the guard's error, to find it in TF's
_STALL_END = "Workers that answer are waited for, however slow."  # and ends it
_GET_WORKERS = "/tensorflow.data.DispatcherService/GetWorkers"
_EXIT_WAIT_S = 3 * _CONNECT_S  # the most an exiting process waits for a look to end
_aborting = 0  # open `aborting_collectives` blocks in this process


def grpc_address(argument: str, value: Any) -> str:
    """`value` ("grpc://HOST:PORT" or "HOST:PORT") as "grpc://HOST:PORT"; else a ValueError
    naming `argument`."""
    found = _ADDRESS.match(value) if isinstance(value, str) else None
    protocol = (found.group("protocol") or "grpc") if found else None
    if found is None or protocol not in _PROTOCOLS or not 0 < int(found.group("port")) < 65536:
        raise ValueError(
            f"{argument} must be the dispatcher's address 'grpc://HOST:PORT' or 'HOST:PORT' "
            "(what `tfpipe service dispatcher` prints), e.g. 'grpc://10.0.0.5:5050'. "
            f"Received: {argument}={value!r}"
        )
    return f"{protocol}://{found.group('host')}:{found.group('port')}"


@dataclasses.dataclass(frozen=True)
class DataService:
    """A tf.data service dispatcher and how the Pipeline shares its data among the workers.

    Attributes:
        address: the dispatcher, `"grpc://HOST:PORT"`.
        mode: "dynamic" (each file, or example of an in-memory source, goes to one worker per
            epoch) or "off" (every worker reads all the data).
        job_name: trainers iterating a Pipeline with the same job name share one job (and so
            split the data among them); None gives every iteration a job of its own.
    """

    address: str
    mode: str = "dynamic"
    job_name: str | None = None
    timeout: float | None = STALL_TIMEOUT_S

    def __post_init__(self) -> None:
        object.__setattr__(self, "address", grpc_address("service", self.address))
        if self.timeout is not None and (
            isinstance(self.timeout, bool)
            or not isinstance(self.timeout, int | float)
            or not math.isfinite(self.timeout)
            or self.timeout <= 0
        ):
            raise ValueError(
                "timeout must be a finite number of seconds > 0, or None to wait for the "
                f"workers forever. Received: timeout={self.timeout!r}"
            )
        if self.mode not in MODES:
            raise ValueError(
                f"mode must be one of {sorted(MODES)}: 'dynamic' for training (each example "
                "once per epoch while no worker fails), 'off' to have every worker read all "
                f"the data. Received: mode={self.mode!r}"
            )
        if self.job_name is not None and (not isinstance(self.job_name, str) or not self.job_name):
            raise ValueError(
                f"job_name must be a non-empty str or None. Received: job_name={self.job_name!r}"
            )

    def for_worker(self, worker: int) -> DataService:
        """The service of training worker `worker`'s part of the data: a shared job's name
        gets the worker's index (one job per part; the same part's job is still shared)."""
        if self.job_name is None:
            return self
        return dataclasses.replace(self, job_name=f"{self.job_name}/worker-{worker}")

    def describe(self, splits: str) -> str:
        """The label of the distribute stage in `Pipeline.explain()`."""
        if self.mode == "dynamic":
            how = (
                f"dynamic sharding: each of {splits} goes to one worker per epoch; a worker that "
                "fails loses the rest of its splits for that epoch"
            )
        else:
            how = "no sharding: every worker reads all the data, so k workers give k copies"
        job = "" if self.job_name is None else f", shared job {self.job_name!r}"
        return (
            f"distribute: the stages above run on the tf.data service workers of {self.address} "
            f"({how}{job}); the stages below run in this process"
        )

    def apply(self, dataset: tf.data.Dataset) -> tf.data.Dataset:
        """`dataset` read through the service, registered with the dispatcher now; batches
        travel uncompressed, and a server lost for `timeout` seconds fails the read (`guard`).

        TensorFlow retries an unreachable dispatcher for up to an hour, so the address is
        tried first: a `SourceError` names it when nothing listens there.
        """
        host, port = self.address.split("://", 1)[1].rsplit(":", 1)
        try:
            socket.create_connection((host.strip("[]"), int(port)), _CONNECT_S).close()
        except OSError as e:
            raise SourceError(
                f"distribute(service={self.address!r}): no tf.data service dispatcher answers "
                f"there ({e}). Start one with `tfpipe service dispatcher --port {port}` on "
                f"{host}, or pass the address it printed"
            ) from e
        served = dataset.apply(
            tf.data.experimental.service.distribute(
                processing_mode=MODES[self.mode],
                service=self.address,
                job_name=self.job_name,
                # TensorFlow's default ("AUTO": snappy) made batches of float32 images 2-4x
                # slower to serve (benchmarks/bench_data_service.py); pixels compress poorly.
                compression=None,
            )
        )
        # Every read of the service is watched, not only training's: a lost worker also hung
        # the input-alone probe `tfpipe.fit` runs after training, and custom loops.
        return self.guard(served)

    def guard(self, dataset: tf.data.Dataset) -> tf.data.Dataset:
        """`dataset` that fails with an error naming the dispatcher and the workers that no
        longer answer once one has not answered for `timeout` seconds while it is read (a
        worker that died and was not restarted: the service waits for it forever).

        Workers that answer are never given up on, however slow. `apply` guards every dataset
        it builds; every iterator of it is watched on its own, whether iterators follow one
        another or run at the same time."""
        return dataset if self.timeout is None else StallGuard(self).wrap(dataset)

    def silent(self, known: set[str], since: dict[str, float], now: float) -> str | None:
        """The error when the dispatcher, every worker, or a worker has not answered for
        `timeout` seconds; None while all answer, or not for long enough yet.

        Args:
            known: workers seen registered at earlier looks; this look's list is added (a
                dispatcher may drop a lost worker from its list while a job waits for it).
            since: what did not answer (the dispatcher's address, "no worker" or a worker's)
                -> the time (`now`'s clock) it was first found so; updated here.
            now: the time of this look (time.monotonic()).
        """
        workers = registered_workers(self.address)
        target = self.address.split("://", 1)[1]
        if workers is None:
            silent = [self.address]
            who = "the dispatcher does not answer"
            fix = "restart it at the same address (with --work-dir, it resumes its jobs)"
        elif not workers and not known:
            silent = ["no worker"]
            who = "the dispatcher lists no worker"
            fix = f"start one: `tfpipe service worker --dispatcher {target}`"
        else:
            known.update(workers)
            silent = sorted(w for w in known if not _answers(w))
            who = f"worker(s) {silent} of {sorted(known)} registered there no longer answer(s)"
            fix = (
                "the dispatcher keeps giving a lost worker a share of every epoch, which then "
                "waits for it: restart it at the same address (`tfpipe service worker "
                f"--dispatcher {target} --port PORT`)"
            )
        for gone in set(since) - set(silent):
            del since[gone]
        waited = max((now - since.setdefault(s, now) for s in silent), default=0.0)
        if waited < self.timeout:  # type: ignore[operator]
            return None
        return (
            f"{_STALLED}: at {self.address}, {who}, for {waited:.0f} s "
            f"(distribute(timeout={self.timeout:g})). Fix: {fix}. {_STALL_END}"
        )


class StallGuard:
    """Raises, in the iteration of the data, once the dispatcher or a worker of the service
    has not answered for `service.timeout` seconds.

    Each iteration (each iterator of the wrapped dataset, as Keras makes per epoch, or a pass
    of a repeat) draws a number of its own, and runs its data (marking that number ended when
    the data ends) interleaved in parallel with a watcher of that number. The watcher wakes
    every half second and, every `timeout / 4` seconds (at most 5), asks the dispatcher for
    its workers and tries to connect to each (`DataService.silent`); it stops when its own
    iteration's data has ended. Looking at the servers rather than at how long a batch takes
    bounds the time to the error: with a worker lost, the others still serve (slowly, ~1
    batch/s in tests/loaders/test_data_service.py) until the end of the epoch, where the client
    waits for the lost one forever. Iterations never share a mark: one that ends, or one that
    starts, leaves the watch of every other as it is.
    """

    def __init__(self, service: DataService) -> None:
        self.service = service
        self._numbers = itertools.count()
        self._ended: set[int] = set()  # iterations whose data ended, until their watcher sees it
        self._known: set[str] = set()  # workers the dispatcher listed at earlier looks
        self._since: dict[str, float] = {}  # what did not answer -> since when
        self._next_look = 0.0  # time.monotonic() of the next look at the servers
        self._looking = threading.Lock()  # one look at a time (watchers run in parallel)

    def wrap(self, dataset: tf.data.Dataset) -> tf.data.Dataset:
        """Per iteration: its number, then its data (marking the number ended at the end) and
        its watcher, interleaved in parallel; only the data yields elements."""
        empty = dataset.take(0)
        tick = tf.data.Dataset.from_tensors(tf.constant(0, tf.int8))

        @tf.autograph.experimental.do_not_convert
        def nothing(_: Any) -> tf.data.Dataset:
            return empty

        @tf.autograph.experimental.do_not_convert
        def number(_: Any) -> tf.Tensor:
            return tf.py_function(lambda: next(self._numbers), [], tf.int64)

        @tf.autograph.experimental.do_not_convert
        def iteration(index: tf.Tensor) -> tf.data.Dataset:
            @tf.autograph.experimental.do_not_convert
            def end(_: Any) -> tf.Tensor:
                return tf.py_function(self._end, [index], tf.bool)

            @tf.autograph.experimental.do_not_convert
            def watch(_: Any) -> tf.Tensor:
                return tf.py_function(self._watch, [index], tf.bool)

            data = dataset.concatenate(tick.filter(end).flat_map(nothing))
            watcher = tick.repeat().map(watch).take_while(tf.identity).flat_map(nothing)

            @tf.autograph.experimental.do_not_convert
            def branch(part: tf.Tensor) -> tf.data.Dataset:
                # take(0) opens nothing: branch 0 reads only the data, branch 1 only the watcher.
                def only(one: tf.data.Dataset, mine: tf.Tensor) -> tf.data.Dataset:
                    return one.take(tf.where(mine, tf.constant(-1, tf.int64), 0))

                return only(data, part == 0).concatenate(only(watcher, part == 1))

            return tf.data.Dataset.range(2).interleave(
                branch, cycle_length=2, num_parallel_calls=2, deterministic=False
            )

        return tick.map(number).flat_map(iteration)

    def _end(self, index: tf.Tensor) -> bool:
        """Marks iteration `index`'s data ended; False (the mark yields nothing)."""
        self._ended.add(int(index))
        return False

    def _watch(self, index: tf.Tensor) -> bool:
        """False when iteration `index`'s data has ended, or the process is exiting; raises when
        a server has not answered for too long."""
        with _WATCHERS.inside():
            return self._look(int(index))

    def _look(self, index: int) -> bool:
        if _WATCHERS.exiting.wait(_WATCH_S):
            return False
        if index in self._ended:
            self._ended.discard(index)
            return False
        with self._looking:
            now = time.monotonic()
            if now < self._next_look:
                return True
            self._next_look = now + min(self.service.timeout / 4, _LOOK_S)  # type: ignore[operator]
            error = self.service.silent(self._known, self._since, now)
        if error is not None:
            if _aborting:
                eager_context.context().abort_collective_ops(tf.errors.UNAVAILABLE, error)
            raise TimeoutError(error)
        return True


class _Watchers:
    """The watchers of every `StallGuard` of the process, as the interpreter exits.

    A watcher spends its time inside Python (it waits there between looks). Once the
    interpreter finalizes, a thread that is in Python, or enters it, is ended by Python; the
    tf.data iterator that ran the watcher then waits for it forever when it is destroyed, so
    a process that read a served Pipeline often never exited (3 runs out of 3 after a lost
    worker's `SourceError`). At exit (`atexit`, while threads still run) `stop` ends every
    watcher and waits until none is inside Python.
    """

    def __init__(self) -> None:
        self.exiting = threading.Event()  # set at exit: every watcher ends
        self._count = 0  # watchers inside Python now
        self._changed = threading.Condition()

    @contextlib.contextmanager
    def inside(self) -> Iterator[None]:
        """Counts a watcher inside Python for the block."""
        with self._changed:
            self._count += 1
        try:
            yield
        finally:
            with self._changed:
                self._count -= 1
                self._changed.notify_all()

    def stop(self) -> None:
        """Ends every watcher, frees the iterators left in reference cycles (an error's frames
        hold them) while their threads can still finish a call into Python, and waits (at most
        `_EXIT_WAIT_S`) until no watcher is inside Python."""
        self.exiting.set()
        gc.collect()
        with self._changed:
            self._changed.wait_for(lambda: self._count == 0, _EXIT_WAIT_S)


_WATCHERS = _Watchers()
atexit.register(_WATCHERS.stop)


@contextlib.contextmanager
def aborting_collectives() -> Iterator[None]:
    """While the block runs, a guard that stops a read of the service (`DataService.guard`)
    also aborts this process's collective ops with its message, as TensorFlow's own check of a
    dead peer does.

    Under a multi-worker strategy the stall shows first on one worker, in its data; the others
    wait in an all-reduce for that worker's gradients and never ask their data again, so their
    guards' errors went unseen: they waited for the peer's heartbeats to stop, or forever while
    it lived (leaving through the cluster's shutdown barrier). Aborted, the all-reduce fails at
    once with the guard's message (`stall_message` finds it). Collectives stay aborted for the
    rest of the process, as after any failed multi-worker step: restart it.
    """
    global _aborting
    _aborting += 1
    try:
        yield
    finally:
        _aborting -= 1


def stall_message(error: BaseException) -> str | None:
    """The guard's message inside a TensorFlow error, if the error is a stalled fetch."""
    text = str(error)
    start = text.find(_STALLED)
    if start < 0:
        return None
    end = text.find(_STALL_END, start)
    return text[start : end + len(_STALL_END)]


def registered_workers(address: str) -> list[str] | None:
    """The addresses of the workers the dispatcher at `address` lists (its GetWorkers call);
    None when it does not answer within a few seconds."""
    target = address.split("://", 1)[1]
    try:
        with grpc.insecure_channel(target) as channel:
            call = channel.unary_unary(_GET_WORKERS)
            reply = call(b"", timeout=_CONNECT_S)
    except grpc.RpcError:
        return None
    return [_string_field(info, 1) for info in _fields(reply, 1)]


def _fields(message: bytes, number: int) -> list[bytes]:
    """The length-delimited fields `number` of a serialized protocol buffer message."""
    found, at = [], 0
    while at < len(message):
        key, at = _varint(message, at)
        kind = key & 7
        if kind == 2:
            size, at = _varint(message, at)
            if key >> 3 == number:
                found.append(message[at : at + size])
            at += size
        elif kind == 0:
            _, at = _varint(message, at)
        else:  # fixed 32/64-bit fields: none in the messages read here
            at += 4 if kind == 5 else 8
    return found


def _string_field(message: bytes, number: int) -> str:
    values = _fields(message, number)
    return values[0].decode() if values else "?"


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, at


def _answers(worker: str) -> bool:
    host, port = worker.rsplit(":", 1)
    try:
        socket.create_connection((host.strip("[]"), int(port)), _CONNECT_S).close()
    except (OSError, ValueError):
        return False
    return True


class PassCounter:
    """Passes over a distributed dataset, one after another, counting each pass's examples.

    With dynamic sharding a pass is shorter when a service worker fails (the rest of its files
    are lost for that pass), so `tfpipe.fit` cannot trust a fixed number of steps to be one
    pass: it counts what every pass delivered, here in this process, and reports short ones.

    Args:
        passes: how many passes `repeat` yields at most.
    """

    def __init__(self, passes: int) -> None:
        self.passes = passes
        self._counts = tf.Variable(tf.zeros([passes], tf.int64), trainable=False)

    def repeat(self, dataset: tf.data.Dataset) -> tf.data.Dataset:
        """`dataset` repeated `passes` times (a new service job each pass), counted."""

        def counted(index: tf.Tensor, *batch: Any) -> Any:
            first = tf.nest.flatten(batch, expand_composites=False)[0]
            rows = first.nrows() if isinstance(first, tf.RaggedTensor) else tf.shape(first)[0]
            with tf.control_dependencies(
                [self._counts.scatter_nd_add([[index]], [tf.cast(rows, tf.int64)])]
            ):
                batch = tf.nest.map_structure(tf.identity, batch)
            return batch if len(batch) > 1 else batch[0]

        def one_pass(index: tf.Tensor) -> tf.data.Dataset:
            return dataset.map(lambda *batch: counted(index, *batch))

        return tf.data.Dataset.range(self.passes).flat_map(one_pass)

    def counts(self) -> list[int]:
        """Examples delivered by each pass started so far, in order (the last may be running)."""
        counts = [int(c) for c in self._counts.numpy()]
        started = [i for i, c in enumerate(counts) if c > 0]
        return counts[: started[-1] + 1] if started else []
