"""The first batches of the next epoch, loaded while Keras restarts its worker threads.

Between two epochs of `model.fit`, Keras's adapter stops the threads of a PyDataset with
`workers > 1` (its enqueuer waits 0.1 s for a queue it knows is empty, then joins them) and
starts new ones; nothing is loaded meanwhile. On the uniform benchmark (4,000 JPEGs, 63
batches, ~0.75 s an epoch) that was ~0.13 s of idle cores per epoch::

    last batch of epoch e asked for ──▶ `ahead` batches of epoch e + 1 loaded in `threads`
        threads ──▶ Keras's new threads ask for them (in any order) ──▶ handed over, once

A batch is a pure function of `(epoch, index)`, so one loaded ahead is the one asked for.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable
from typing import Any


class ReadAhead:
    """Loads the first `ahead` batches of an epoch once every batch of the one before was asked
    for, and hands each over once.

    Examples:
        >>> from tfpipe.loaders.read_ahead import ReadAhead
        >>> ahead = ReadAhead(lambda epoch, index: (epoch, index), batches=2, ahead=1, threads=1)
        >>> ahead.take(0, 0), ahead.take(0, 1)  # epoch 0 asked for in full: batch 0 of 1 loads
        (None, None)
        >>> ahead.take(1, 0)
        (1, 0)

    Args:
        load: `(epoch, index) -> batch`.
        batches: the batches of an epoch.
        ahead: how many of the next epoch's first batches to load.
        threads: the threads they are loaded in.
    """

    def __init__(
        self, load: Callable[[int, int], Any], batches: int, ahead: int, threads: int
    ) -> None:
        self._load = load
        self._batches = batches
        self._ahead = min(ahead, batches)
        self._threads = threads
        self._lock = threading.Lock()
        self._asked: dict[int, set[int]] = {}  # epoch -> the batches asked for
        self._loaded: dict[tuple[int, int], concurrent.futures.Future[Any]] = {}
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None

    def take(self, epoch: int, index: int) -> Any | None:
        """Batch `index` of `epoch` if it was loaded ahead (waiting for it if it is still
        loading), else None; counts it as asked for."""
        with self._lock:
            loaded = self._loaded.pop((epoch, index), None)
            for stale in [key for key in self._loaded if key[0] < epoch]:
                self._loaded.pop(stale).cancel()  # an epoch left before its end
            for old in [e for e in self._asked if e < epoch]:
                del self._asked[old]
            asked = self._asked.setdefault(epoch, set())
            asked.add(index)
            if len(asked) == self._batches:  # the whole epoch asked for: start the next one
                del self._asked[epoch]
                self._start(epoch + 1)
        return None if loaded is None else loaded.result()

    def _start(self, epoch: int) -> None:
        """Submits the first batches of `epoch` (under the lock)."""
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(
                self._threads, thread_name_prefix="tfpipe-read-ahead"
            )
        for index in range(self._ahead):
            self._loaded[epoch, index] = self._pool.submit(self._load, epoch, index)
