"""What the dead-worker check costs: Keras's `multiprocessing.Pool` against tfpipe's `WatchedPool`.

A `SequenceLoader(use_multiprocessing=True)` makes Keras load through `WatchedPool`, which
fails pending batches when a worker dies instead of waiting for them forever. Its costs are an
`if` per submitted batch and a thread that waits on the workers' exit sentinels. The baseline
is the same loader with Keras's own pool put back (what every Keras version does by default).

The loader serves tiny batches (64 examples of 16 floats) from memory through 2 worker
processes, read through Keras's `PyDatasetAdapter(...).get_tf_dataset()` as `model.fit` reads
them: the pool's per-batch overhead is all there is to time, so this is the worst case for
the check. Goal: at least 0.95 of the baseline.
"""

from __future__ import annotations

import os
from typing import Any

from benchmarks.harness import compare, scale

BATCH_SIZE = 64
EXAMPLES = 64 * 1000


def loader_batches(watched: bool) -> dict[str, Any]:
    """Batches/s and examples/s of a 2-process SequenceLoader, with or without the check."""
    import numpy as np
    from keras.src.trainers.data_adapters import py_dataset_adapter

    import tfpipe
    from tfpipe.training.throughput import measure

    source = tfpipe.from_arrays(
        {"x": np.zeros((EXAMPLES, 16), np.float32), "y": np.zeros(EXAMPLES, np.int64)}
    )
    loader = tfpipe.SequenceLoader(
        source, batch_size=BATCH_SIZE, x="x", y="y", seed=0, workers=2, use_multiprocessing=True
    )
    if not watched:  # undo what the loader installed: Keras's own pool class
        py_dataset_adapter.get_pool_class = py_dataset_adapter.get_pool_class.args[0]
    adapter = py_dataset_adapter.PyDatasetAdapter(loader, shuffle=False)
    adapter.on_epoch_begin()
    try:
        result = measure(adapter.get_tf_dataset(), num_batches=scale(800, 100), warmup=20)
    finally:
        adapter.on_epoch_end()
    return {"examples_per_s": result.examples_per_s, "batches_per_s": result.batches_per_s}


def main() -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    compare(
        "workers",
        {
            "Keras multiprocessing.Pool (no check)": (loader_batches, (False,)),
            "tfpipe WatchedPool (dead-worker check)": (loader_batches, (True,)),
        },
        baseline="Keras multiprocessing.Pool (no check)",
        goals={"tfpipe WatchedPool (dead-worker check)": 0.95},
        pairs={"tfpipe WatchedPool (dead-worker check)": "Keras multiprocessing.Pool (no check)"},
        repeats=5,
        extra={"batch_size": BATCH_SIZE, "workers": 2, "examples": EXAMPLES},
    )


if __name__ == "__main__":
    main()
