"""The first batches of the next epoch, loaded while Keras restarts its worker threads.

Between two epochs of `model.fit`, Keras's adapter stops the threads of a PyDataset with
`workers > 1` (its enqueuer waits 0.1 s for a queue it knows is empty, then joins them) and
starts new ones; nothing is loaded meanwhile. On the uniform benchmark (4,000 JPEGs, 63
batches, ~0.75 s an epoch) that was ~0.13 s of idle cores per epoch::

    last batch of epoch e asked for ──▶ `ahead` batches of epoch e + 1 loaded in `threads`
        threads ──▶ Keras's new threads ask for them (in any order) ──▶ handed over, once

A batch is a pure function of `(epoch, index)`, so one loaded ahead is the one asked for. Which
batches come first: `model.fit(shuffle=True)` (its default) has Keras's `OrderedEnqueuer` ask
an epoch's batches in the order `random.shuffle(list(range(batches)))` gives at the start of
the epoch, with Python's global `random`, and hand them to training in that order, so the first
batch of an epoch waits for whichever batch comes first. When an epoch was not asked for in
order (each batch within `threads` places of its index), the batches loaded ahead are the first
ones of that shuffle, made on a copy of `random`'s state once the epoch was asked for in full
(in `model.fit` nothing else draws from `random` between that moment and the next epoch's
start, unless another thread of the process does). A wrong guess costs only the head start: a
batch loaded ahead is handed over whenever its epoch asks for it. On the uniform benchmark,
fit's first batch of an epoch came 90-330 ms after the epoch began when the batches loaded
ahead were `0..9`, of which Keras asks for one first 10 times out of 63.
"""

from __future__ import annotations

import concurrent.futures
import random
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
        self._asked: dict[int, dict[int, None]] = {}  # epoch -> the batches asked, in order
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
            asked = self._asked.setdefault(epoch, {})
            asked[index] = None
            if len(asked) == self._batches:  # the whole epoch asked for: start the next one
                del self._asked[epoch]
                self._start(epoch + 1, self.first_asked(list(asked)))
        return None if loaded is None else loaded.result()

    def first_asked(self, asked: list[int]) -> list[int]:
        """The batches the next epoch will ask for first, guessed from the order `asked` (every
        batch of an epoch, in the order of their first request): `0, 1, 2, ...` again when that
        epoch was asked for in order (each batch within `threads` places of its own, as the
        threads' races leave it), else the first ones of Keras's next shuffle (see the
        module's notes). The whole epoch is looked at, not its first batches: a shuffle that
        happens to begin 0, 1 is not taken for no shuffle.

        Examples:
            >>> import random
            >>> from tfpipe.loaders.read_ahead import ReadAhead
            >>> ahead = ReadAhead(lambda epoch, index: None, batches=6, ahead=2, threads=1)
            >>> ahead.first_asked([0, 1, 2, 3, 4, 5]), ahead.first_asked([1, 0, 2, 3, 4, 5])
            ([0, 1], [0, 1])
            >>> random.seed(7)
            >>> guess = ahead.first_asked([4, 2, 0, 5, 1, 3])
            >>> order = list(range(6))
            >>> random.shuffle(order)  # what Keras's enqueuer does when the next epoch starts
            >>> guess == order[:2]
            True
        """
        if all(abs(place - index) <= self._threads for place, index in enumerate(asked)):
            return list(range(self._ahead))  # in order, but for the threads' races
        keras_random = random.Random()
        keras_random.setstate(random.getstate())
        order = list(range(self._batches))
        keras_random.shuffle(order)
        return order[: self._ahead]

    def _start(self, epoch: int, indices: list[int]) -> None:
        """Submits batches `indices` of `epoch` (under the lock)."""
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(
                self._threads, thread_name_prefix="tfpipe-read-ahead"
            )
        for index in indices:
            self._loaded[epoch, index] = self._pool.submit(self._load, epoch, index)
