"""Two MultiWorkerMirroredStrategy workers on this 2-core machine against one process alone.

Each worker trains a small dense model (784 -> 256 -> 10) with `tfpipe.fit` on 4,096 in-memory
examples, 64 per worker per step (a global batch of 128 for two workers, 64 alone), for 3
epochs; its steps are timed after the first epoch (tracing, start-up). The metric is steps/s
per worker: on one machine it is expected below 1x the process alone (the two workers share
the 2 cores, and each step adds a gRPC all-reduce of the gradients over loopback); see
docs/guides/multi-worker.md.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.harness import compare, scale

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = scale(4096, 1024)
PER_WORKER_BATCH = 64
EPOCHS = 3
TIMEOUT_S = 600


def _example() -> Any:
    """examples/multi_worker.py, for its free ports and TF_CONFIG."""
    spec = importlib.util.spec_from_file_location("multi_worker", ROOT / "examples/multi_worker.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def worker(output: str, workers: int) -> None:
    """One training process (under MultiWorkerMirroredStrategy when TF_CONFIG is set)."""
    import keras
    import numpy as np
    import tensorflow as tf

    import tfpipe

    strategy = (
        tf.distribute.MultiWorkerMirroredStrategy() if workers > 1 else tf.distribute.get_strategy()
    )
    rng = np.random.default_rng(0)
    source = tfpipe.from_arrays(
        {
            "x": rng.normal(size=(EXAMPLES, 784)).astype(np.float32),
            "label": rng.integers(0, 10, EXAMPLES),
        }
    )
    pipeline = tfpipe.Pipeline(source).shuffle(seed=0).batch(PER_WORKER_BATCH * workers)
    with strategy.scope():
        hidden = keras.layers.Dense(256, activation="relu")
        model = keras.Sequential([keras.Input((784,)), hidden, keras.layers.Dense(10)])
        model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    timed = {"steps": 0, "start": 0.0}

    def begin(epoch: int, logs: Any) -> None:
        if epoch == 1:
            timed["start"] = time.perf_counter()

    def count(batch: int, logs: Any) -> None:
        timed["steps"] += 1

    timer = keras.callbacks.LambdaCallback(on_epoch_begin=begin, on_train_batch_end=count)
    history = tfpipe.fit(
        model,
        pipeline.as_supervised("x", "label"),
        epochs=EPOCHS,
        callbacks=[timer],
        report=False,
        verbose=0,
    )
    seconds = time.perf_counter() - timed["start"]
    steps = history.params["steps"] * (EPOCHS - 1)
    Path(output).write_text(json.dumps({"steps_per_s": steps / seconds, "steps": steps}))
    sys.stdout.flush()
    os._exit(0)  # no wait at the cluster's shutdown barrier


def train(workers: int) -> dict[str, Any]:
    """Steps/s per worker of `workers` processes training together (1: alone)."""
    example = _example()
    ports = [example.free_port() for _ in range(workers)]
    processes = []
    with tempfile.TemporaryDirectory() as tmp:
        try:
            for index in range(workers):
                env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "TF_CPP_MIN_LOG_LEVEL": "2"}
                if workers > 1:
                    env["TF_CONFIG"] = example.tf_config(ports, index)
                paths = [str(ROOT), env.get("PYTHONPATH")]
                env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
                code = (
                    "from benchmarks.bench_multi_worker import worker; "
                    f"worker({str(Path(tmp) / f'{index}.json')!r}, {workers})"
                )
                processes.append(
                    subprocess.Popen(
                        [sys.executable, "-c", code],
                        env=env,
                        cwd=ROOT,
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                        start_new_session=True,
                    )
                )
            deadline = time.monotonic() + TIMEOUT_S
            for process in processes:
                process.wait(timeout=max(1.0, deadline - time.monotonic()))
        finally:
            for process in processes:
                if process.poll() is None:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait(timeout=10)
        rates = [json.loads((Path(tmp) / f"{i}.json").read_text()) for i in range(workers)]
    per_worker = sum(r["steps_per_s"] for r in rates) / workers
    return {
        "steps_per_s": per_worker,
        "examples_per_s": per_worker * PER_WORKER_BATCH * workers,
        "each_worker_steps_per_s": [r["steps_per_s"] for r in rates],
    }


def main() -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    compare(
        "multi_worker",
        {
            "one process alone": (train, (1,)),
            "2 workers, MultiWorkerMirroredStrategy": (train, (2,)),
        },
        baseline="one process alone",
        metric="steps_per_s",
        extra={
            "examples": EXAMPLES,
            "batch_per_worker": PER_WORKER_BATCH,
            "epochs_timed": EPOCHS - 1,
            "model": "Dense 784-256-10",
        },
        pairs={"2 workers, MultiWorkerMirroredStrategy": "one process alone"},
    )


if __name__ == "__main__":
    main()
