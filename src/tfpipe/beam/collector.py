"""Python's cyclic garbage collector around TensorFlow's import, where a process starts.

Importing TensorFlow creates ~400k objects that live as long as the process. The collector
runs a full collection each time the objects it tracks grow by a quarter, so it traverses them
again and again while they load (~0.6 s of a ~2.6 s import on 2 cores), and then again at
interpreter exit (~1 s, that a Beam runner waits for, worker by worker). Nothing is garbage
among them: `paused()` skips the first, `freeze()` the later ones.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """No automatic collection inside the block (e.g. module imports); as before after it."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def freeze() -> None:
    """Leaves every object alive now out of all later collections, the one at exit included.

    For a process that exists to run tfpipe's work (a Beam worker): in a user's process, a
    reference cycle alive now would never be collected once it is dropped.
    """
    gc.freeze()
