"""Python's cycle collector in the test processes: full collections off the main thread.

Freeing an autotuned tf.data iterator can block for up to 60 s on a busy machine: the
cancellation wakes its autotuning thread before marking itself done, and the thread sleeps out
the rest of its optimization period (a period that doubles up to 60 s; TensorFlow releases the
GIL meanwhile). An iterator left in a reference cycle lives until a full collection, which
then blocks whatever test runs it: a test of 2.5 s took 10 s when an automatic full collection
landed in it. So the tests' processes run no automatic full collection (young generations are
still collected); each test file ends with one in a thread of its own (`collect_in_background`).
"""

from __future__ import annotations

import gc
import threading

from tfpipe.training.keras_internals import RELEASE_THREAD

COLLECTOR_THREAD = "tests-collect-garbage"
_NEVER = 2**31 - 1  # an automatic full collection's threshold that is never reached


def no_automatic_full_collections() -> None:
    """Leaves the objects alive now (TensorFlow's and Keras's modules) out of every later
    collection and stops automatic full collections; the young generations stay automatic."""
    gc.freeze()
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, _NEVER)


def collect_in_background() -> threading.Thread:
    """Starts a full collection in a daemon thread of its own; returns the thread."""
    collector = threading.Thread(target=gc.collect, name=COLLECTOR_THREAD, daemon=True)
    collector.start()
    return collector


def join_background_collections() -> None:
    """Waits for the collections running in other threads (the tests' and `tfpipe.fit`'s):
    while one runs, `gc.collect()` returns at once without collecting."""
    for thread in threading.enumerate():
        if thread.name in (COLLECTOR_THREAD, RELEASE_THREAD):
            thread.join(90)  # TensorFlow's stalled delete ends within its 60 s period


def collect_now() -> None:
    """A full collection on this thread, once the background ones have ended."""
    join_background_collections()
    gc.collect()
