"""Two training processes on localhost under `tf.distribute.MultiWorkerMirroredStrategy`.

The launcher writes a tiny dataset (101 examples, each with its `id`), starts two worker
processes with their `TF_CONFIG` (free ports on 127.0.0.1, CPU only) and waits for them, with
a time limit, killing both whatever happens. Each worker trains with `tfpipe.fit` on a
Pipeline of one TFRecord file (split by record), a Pipeline of four files (split by file) and a
SequenceLoader (split by slices of one shuffled order), recording the ids its model saw in each
epoch. The launcher checks that no id was used twice in an epoch, and prints how many were
left out (the last partial global batch, counted by a TfpipeWarning on each worker).

Run:
    python examples/multi_worker.py                  # about 30 s on 2 CPU cores
    python examples/multi_worker.py --kill-worker 1  # then worker 1 dies mid-epoch: 0 fails
    python examples/multi_worker.py --mirrored       # one process, 2 CPU replicas instead

With `--service grpc://HOST:PORT` (a tf.data service: `tfpipe service dispatcher` and
`tfpipe service worker`) the two workers train instead on one Pipeline read through it (the
examples written in 16 files, `distribute(..., timeout=--service-timeout, job_name=--job-name)`),
each its own 8 files as a job of its own: every example once per epoch; with
`--kill-service-worker PID` as well, worker 0 SIGKILLs that service worker's process group at
batch 20 of epoch 2 and leaves it down: both workers then fail with an error naming it, and
exit, within `--service-timeout` seconds and a few more.

A real cluster runs the `--worker` part on each host, with TF_CONFIG listing every worker:
    TF_CONFIG='{"cluster": {"worker": ["host0:12345", "host1:12345"]},
                "task": {"type": "worker", "index": 0}}' python train.py
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

SCRIPT = Path(__file__).resolve()
INPUTS = ("by_record", "by_file", "loader")
DIE_AFTER = 3  # steps of the run a killed worker dies in
KILL_AT = (1, 20)  # (epoch, batch) at which --kill-service-worker strikes: batch 20 of epoch 2
SERVED_SHARDS = 16  # the files of the Pipeline read through --service


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (the OS picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def tf_config(ports: list[int], index: int) -> str:
    """The TF_CONFIG of worker `index` of a cluster on 127.0.0.1."""
    workers = [f"127.0.0.1:{port}" for port in ports]
    return json.dumps({"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}})


def write_data(workdir: Path, examples: int, served: bool = False) -> None:
    """The same `examples` rows written as 1 TFRecord file and as 4 (with metadata), or, when
    `served`, as the 16 files of the Pipeline read through the tf.data service."""
    import tfpipe

    rng = np.random.default_rng(0)
    arrays = {
        "id": np.arange(examples, dtype=np.int64),
        "x": rng.normal(size=(examples, 4)).astype(np.float32),
        "label": rng.integers(0, 2, examples),
    }
    written = (("served", SERVED_SHARDS),) if served else (("one", 1), ("four", 4))
    for name, shards in written:
        tfpipe.write_tfrecords(tfpipe.from_arrays(arrays), workdir / name, num_shards=shards)


def launch(args: argparse.Namespace, workdir: Path) -> list[dict[str, Any]]:
    """Starts the workers, waits at most `args.timeout` s, and always kills them."""
    count = 1 if args.mirrored else 2
    ports = [free_port() for _ in range(count)]
    processes = []
    try:
        for index in range(count):
            env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
            if not args.mirrored:
                env["TF_CONFIG"] = tf_config(ports, index)
            command = [sys.executable, str(SCRIPT), "--worker", "--workdir", str(workdir)]
            command += ["--batch-size", str(args.batch_size), "--epochs", str(args.epochs)]
            command += ["--peer-timeout", str(args.peer_timeout)]
            command += ["--mirrored"] if args.mirrored else []
            if args.kill_worker is not None:
                command += ["--kill-worker", str(args.kill_worker)]
            if args.service is not None:
                command += ["--service", args.service, "--service-timeout"]
                command += [str(args.service_timeout)]
            if args.job_name is not None:
                command += ["--job-name", args.job_name]
            if args.kill_service_worker is not None:
                command += ["--kill-service-worker", str(args.kill_service_worker)]
            log = open(workdir / f"worker{index}.log", "w")  # noqa: SIM115 (closed below)
            process = subprocess.Popen(
                command, env=env, stdout=log, stderr=log, start_new_session=True
            )
            processes.append((process, log))
        deadline = time.monotonic() + args.timeout
        for process, _ in processes:
            process.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        for process, log in processes:
            if process.poll() is None:  # its own process group: nothing of it is left
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)
            log.close()
    results = []
    for index in range(count):
        path = workdir / f"worker{index}.json"
        died = workdir / f"worker{index}.died"
        result = json.loads(path.read_text()) if path.is_file() else {"worker": index}
        if died.is_file() or not path.is_file():
            result["died"] = True
        if died.is_file():
            result["died_at"] = float(died.read_text())
        result["exit_code"] = processes[index][0].returncode  # -9: killed at the time limit
        results.append(result)
    return results


class _Recorder:
    """The ids a model's train steps saw, per epoch (filled from inside the step function)."""

    def __init__(self) -> None:
        self.epoch = 0
        self.seen: dict[int, list[int]] = {}

    def record(self, ids: Any) -> None:
        self.seen.setdefault(self.epoch, []).extend(int(i) for i in ids.numpy())


def make_model(recorder: _Recorder) -> Any:
    """A linear model on `x`, whose train step also records the batch's `id`s."""
    import keras
    import tensorflow as tf

    class IdModel(keras.Model):
        def __init__(self) -> None:
            super().__init__()
            self.dense = keras.layers.Dense(2)

        def call(self, inputs: Any) -> Any:
            return self.dense(inputs[1])

        def train_step(self, data: Any) -> Any:
            (ids, _), _ = data
            tf.py_function(recorder.record, [ids], [])
            return super().train_step(data)

    model = IdModel()
    model.compile(
        "sgd",
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=False,
    )
    return model


def work(args: argparse.Namespace) -> None:
    """One worker: its strategy from TF_CONFIG, then tfpipe.fit on each input (and with
    `--kill-worker`, one more run in which that worker dies)."""
    import tensorflow as tf

    if args.mirrored:  # one process, two CPU replicas
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * 2
        )
        strategy: Any = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
        index = 0
    else:
        # A peer that stops answering fails a collective after this long instead of hanging it.
        options = tf.distribute.experimental.CommunicationOptions(timeout_seconds=args.peer_timeout)
        strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
        index = strategy.cluster_resolver.task_id
    workdir = Path(args.workdir)
    inputs = _inputs(args, workdir)
    result: dict[str, Any] = {"worker": index, "replicas": strategy.num_replicas_in_sync}
    started = time.monotonic()
    record = workdir / f"worker{index}.json"
    kill = args.kill_service_worker if index == 0 else None
    try:
        for name, data in inputs.items():
            killer = [_kill_service_worker(kill, result)] if kill is not None else []
            result[name] = _train(strategy, name, data, args.epochs, killer)
        if args.kill_worker is not None:  # one more run, in which that worker dies
            record.write_text(json.dumps(result))  # what a worker that dies leaves
            died = workdir / f"worker{index}.died"
            dies = [_die_after(DIE_AFTER, died)] if index == args.kill_worker else []
            _train(strategy, "by_record", inputs["by_record"], args.epochs, dies)
    except Exception as e:  # reported to the launcher, which says what happened
        result["error"] = f"{type(e).__name__}: {e}"[:2000]
        result["failed_at"] = time.time()
    result["seconds"] = time.monotonic() - started
    record.write_text(json.dumps(result))
    sys.stdout.flush()
    if args.service is not None:  # both fail together: each leaves as any script would
        sys.exit(1 if "error" in result else 0)
    # Leaving would wait at the cluster's shutdown barrier for a peer that may be gone.
    os._exit(1 if "error" in result else 0)


def _inputs(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """The inputs trained on, by name: the three of `INPUTS`, or with `--service` the
    Pipeline of the 16 files read through the tf.data service."""
    import tfpipe

    size = args.batch_size
    if args.service is not None:
        served = tfpipe.Pipeline(workdir / "served").batch(size)
        served = served.distribute(
            args.service, job_name=args.job_name, timeout=args.service_timeout
        )
        return {"served": served}
    return {
        "by_record": tfpipe.Pipeline(workdir / "one").shuffle(seed=0).batch(size),
        "by_file": tfpipe.Pipeline(workdir / "four").shuffle(seed=0).batch(size),
        "loader": tfpipe.SequenceLoader(
            tfpipe.from_tfrecords(workdir / "one"), batch_size=size, x=("id", "x"), seed=0
        ),
    }


def _train(strategy: Any, name: str, data: Any, epochs: int, callbacks: Any = ()) -> Any:
    """`tfpipe.fit` of a fresh model on input `name`: the ids it saw per epoch, its steps per
    epoch and the TfpipeWarnings it gave."""
    import keras

    import tfpipe
    from tfpipe.errors import TfpipeWarning

    recorder = _Recorder()
    with strategy.scope():
        model = make_model(recorder)
    on_epoch = keras.callbacks.LambdaCallback(
        on_epoch_begin=lambda epoch, logs: setattr(recorder, "epoch", epoch)
    )
    xy = {} if name == "loader" else {"x": ["id", "x"], "y": "label"}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", TfpipeWarning)
        history = tfpipe.fit(
            model, data, **xy, epochs=epochs, callbacks=[on_epoch, *callbacks], report=False,
            verbose=0,
        )  # fmt: skip
    return {
        "ids": {str(e): ids for e, ids in recorder.seen.items()},
        "steps": history.params["steps"],
        "warnings": [str(w.message) for w in caught],
    }


def _die_after(steps: int, record: Path) -> Any:
    """A callback that kills its own process, as the kernel kills one out of memory, after
    writing the time it died to `record`."""
    import keras

    def die(batch: int, logs: Any) -> None:
        if batch + 1 >= steps:
            record.write_text(repr(time.time()))
            os.kill(os.getpid(), signal.SIGKILL)

    return keras.callbacks.LambdaCallback(on_train_batch_end=die)


def _kill_service_worker(pid: int, result: dict[str, Any]) -> Any:
    """A callback that SIGKILLs the process group `pid` (a tf.data service worker, left down)
    at batch 20 of epoch 2, noting the time in `result["service_worker_killed_at"]`."""
    import keras

    at = {"epoch": 0}

    def kill(batch: int, logs: Any) -> None:
        if (at["epoch"], batch) == KILL_AT and "service_worker_killed_at" not in result:
            os.killpg(pid, signal.SIGKILL)
            result["service_worker_killed_at"] = time.time()

    return keras.callbacks.LambdaCallback(
        on_epoch_begin=lambda epoch, logs: at.update(epoch=epoch), on_train_batch_end=kill
    )


def summarize(results: list[dict[str, Any]], examples: int) -> dict[str, Any]:
    """Per input and epoch: ids used (summed over workers), used twice, left out."""
    summary: dict[str, Any] = {}
    for name in (*INPUTS, "served"):
        parts = [r[name] for r in results if name in r]
        if len(parts) < len(results):
            continue
        epochs = {}
        for epoch in sorted({e for p in parts for e in p["ids"]}, key=int):
            ids = [i for p in parts for i in p["ids"].get(epoch, [])]
            epochs[epoch] = {
                "used": len(ids),
                "twice": len(ids) - len(set(ids)),
                "left_out": examples - len(set(ids)),
            }
        summary[name] = {"steps": [p["steps"] for p in parts], "epochs": epochs}
    return summary


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--examples", type=int, default=101)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=240.0)
    parser.add_argument("--peer-timeout", type=float, default=30.0)
    parser.add_argument(
        "--kill-worker",
        type=int,
        default=None,
        choices=(0, 1),
        help="after the three inputs, one more run in which that worker dies mid-epoch",
    )
    parser.add_argument(
        "--mirrored", action="store_true", help="one process, MirroredStrategy on 2 CPU replicas"
    )
    parser.add_argument(
        "--service",
        default=None,
        help="train on a Pipeline read through the tf.data service at this dispatcher address",
    )
    parser.add_argument("--service-timeout", type=float, default=120.0)
    parser.add_argument(
        "--job-name", default=None, help="with --service: distribute(..., job_name=...)"
    )
    parser.add_argument(
        "--kill-service-worker",
        type=int,
        default=None,
        metavar="PID",
        help="with --service: worker 0 SIGKILLs this process group at batch 20 of epoch 2",
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.service is not None and args.kill_worker is not None:
        parser.error("--kill-worker runs the three inputs: leave out --service")
    if args.worker:
        work(args)
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(args.workdir or tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        write_data(workdir, args.examples, served=args.service is not None)
        started = time.monotonic()
        results = launch(args, workdir)
        outcome = {
            "seconds": time.monotonic() - started,
            "workers": results,
            "summary": summarize(results, args.examples),
        }
    for name, part in outcome["summary"].items():
        print(f"{name}: steps per worker {part['steps']}")
        for epoch, counts in part["epochs"].items():
            print(f"  epoch {epoch}: {counts}")
    for result in results:
        if "error" in result or "died" in result:
            print(f"worker {result.get('worker', '?')}: {result.get('error', 'died')[:300]}")
    return outcome


if __name__ == "__main__":
    main()
