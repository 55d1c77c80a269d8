"""Worker processes that cannot die unnoticed: a Keras process pool that fails on a dead worker.

Keras loads a `PyDataset` with `use_multiprocessing=True` through a `multiprocessing.Pool`
(`OrderedEnqueuer`, keras/src/trainers/data_adapters/py_dataset_adapter.py) and waits for each
batch with `AsyncResult.get()`, without a timeout. A worker killed by the kernel (SIGKILL from
the out-of-memory killer) takes its batch with it: the pool starts a replacement, the result
never arrives and `model.fit` waits forever.

`WatchedPool` is that pool with the check `concurrent.futures.ProcessPoolExecutor` has::

    pool.Process(...) ──registers every worker, replacements included──▶ workers
    watcher thread ──waits on the workers' sentinels──▶ a worker exited while the pool runs
        ──▶ every pending and later result fails with `TfpipeError` (pid, signal, the fix)

Keras's `get()` then raises, stops its enqueuer and closes the pool; `model.fit` stops with
the error instead of hanging or going on with a batch missing. `install()` makes Keras create
this pool for every process-based `PyDataset`; `SequenceLoader(use_multiprocessing=True)`
calls it.
"""

from __future__ import annotations

import contextlib
import functools
import multiprocessing
import multiprocessing.connection
import multiprocessing.pool
import os
import signal
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from keras.src.trainers.data_adapters import py_dataset_adapter

from tfpipe.errors import TfpipeError

_POLL_S = 0.1
IMPORTED_IN = os.getpid()  # the process that imported tfpipe, and TensorFlow with it


def forked_runtime() -> bool:
    """Whether this process is a fork of the one that imported tfpipe (a Keras worker process
    of `use_multiprocessing=True` under the fork start method), whose TensorFlow runtime it
    inherited and must not run. A process started any other way (spawned, as a benchmark's or
    a hyperparameter search's workers are) imported its own, and decodes as any other does.

    Examples:
        >>> from tfpipe.loaders.workers import forked_runtime
        >>> forked_runtime()
        False
    """
    return os.getpid() != IMPORTED_IN


def _register(workers: list[Any], ctx: Any, *args: Any, **kwargs: Any) -> Any:
    """`Pool.Process`: creates a worker process and remembers it before it starts."""
    process = ctx.Process(*args, **kwargs)
    workers.append(process)
    return process


def _describe_exit(exitcode: int) -> str:
    """How a process ended, from its `exitcode` (negative: the signal that killed it)."""
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        return f"was killed by {name} (exit code {exitcode})"
    return f"exited with code {exitcode}"


def _worker_died_error(pid: int, exitcode: int, pending: int) -> TfpipeError:
    """The error every pending batch fails with after worker `pid` died."""
    why = (
        "SIGKILL is what the out-of-memory killer sends: "
        if exitcode == -signal.SIGKILL
        else "a worker dies like this when it runs out of memory or crashes in native code: "
    )
    return TfpipeError(
        f"PyDataset worker process {pid} {_describe_exit(exitcode)} while loading batches; "
        f"{pending} pending batch(es) failed with it, so training stops here rather than go on "
        f"without them (no batch is dropped silently). {why}lower batch_size, workers or "
        "max_queue_size, or load in threads with use_multiprocessing=False"
    )


class WatchedPool(multiprocessing.pool.Pool):
    """A `multiprocessing.pool.Pool` whose results fail when one of its workers dies.

    A worker that exits while the pool runs (any exit: a running pool never retires workers
    unless `maxtasksperchild` is set) breaks the pool, as in `ProcessPoolExecutor`: every
    pending result, and every result submitted afterwards, fails with a `TfpipeError` that
    names the worker's pid and how it died. Exits during `terminate()` are not failures.

    Examples:
        >>> with WatchedPool(2) as pool:
        ...     pool.apply_async(os.abort).get()  # a TfpipeError, not a hang
        TfpipeError: PyDataset worker process 4242 was killed by SIGABRT (exit code -6) ...
    """

    def __init__(
        self,
        processes: int | None = None,
        initializer: Callable[..., Any] | None = None,
        initargs: tuple[Any, ...] = (),
        maxtasksperchild: int | None = None,
        context: Any = None,
    ) -> None:
        self._workers: list[Any] = []
        # An instance attribute, not a bound method: the pool's threads must not keep it alive.
        self.Process = functools.partial(_register, self._workers)  # type: ignore[method-assign]
        self._broken: list[TfpipeError] = []  # the error, once a worker died
        super().__init__(processes, initializer, initargs, maxtasksperchild, context)
        self._watcher = threading.Thread(
            target=_watch,
            args=(weakref.ref(self), self._workers, self._cache, self._broken),  # type: ignore[attr-defined]
            name="tfpipe-worker-watcher",
            daemon=True,
        )
        self._watcher.start()

    def apply_async(self, *args: Any, **kwargs: Any) -> Any:
        """`Pool.apply_async`; the result fails at once when the pool is broken."""
        result = super().apply_async(*args, **kwargs)
        if self._broken:
            _fail_pending({result._job: result}, self._broken[0])  # type: ignore[attr-defined]
        return result


def _watch(
    pool_ref: weakref.ref[WatchedPool], workers: list[Any], cache: Any, broken: list[TfpipeError]
) -> None:
    """Waits on the workers' sentinels; after a death, fails every pending result."""
    while True:
        pool = pool_ref()
        if pool is None or _terminating(pool):
            return
        running = pool._state == multiprocessing.pool.RUN  # type: ignore[attr-defined]
        retires = pool._maxtasksperchild is not None  # type: ignore[attr-defined]
        del pool
        if not broken:
            for worker in list(workers):
                code = worker.exitcode
                if code is not None and (code != 0 or (running and not retires)):
                    broken.append(_worker_died_error(worker.pid, code, len(cache)))
                    break
        if broken:
            _fail_pending(cache, broken[0])
        alive = live_sentinels(workers)
        if alive:
            multiprocessing.connection.wait(alive, timeout=_POLL_S)
        else:
            time.sleep(_POLL_S)


def live_sentinels(workers: list[Any]) -> list[int]:
    """The exit sentinels of the started workers that have not exited."""
    found = []
    for worker in list(workers):
        try:
            if worker.exitcode is None:
                found.append(worker.sentinel)
        except ValueError:  # registered by the pool, not started yet
            pass
    return found


def _terminating(pool: WatchedPool) -> bool:
    handler = getattr(pool, "_worker_handler", None)
    states = (pool._state, getattr(handler, "_state", None))  # type: ignore[attr-defined]
    return multiprocessing.pool.TERMINATE in states


def _fail_pending(cache: Any, error: TfpipeError) -> None:
    """Fails every result of `cache` (job -> AsyncResult) that has not arrived."""
    for job in list(cache):
        result = cache.get(job)
        if result is None or result.ready():
            continue
        with contextlib.suppress(KeyError):  # the result handler delivered it meanwhile
            result._set(None, (False, error))


def _get_pool_class(original: Callable[[bool], Any], use_multiprocessing: bool) -> Any:
    pool_class = original(use_multiprocessing)
    return WatchedPool if pool_class == multiprocessing.Pool else pool_class


def install() -> None:
    """Makes Keras create a `WatchedPool` for every `PyDataset` loaded by worker processes.

    Keras picks the pool class in `py_dataset_adapter.get_pool_class` each time an epoch's
    enqueuer starts; this wraps that function once (later calls do nothing).
    """
    current = py_dataset_adapter.get_pool_class
    if isinstance(current, functools.partial) and current.func is _get_pool_class:
        return
    py_dataset_adapter.get_pool_class = functools.partial(_get_pool_class, current)
