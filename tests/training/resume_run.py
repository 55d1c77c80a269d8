"""A tiny training run for tests/training/test_resume.py: logs the ids of every batch it trains on.

Each training step writes one line `<optimizer step> <id> <id> ...` to the log file (flushed
per step; under MirroredStrategy one line per replica). `--kill EPOCH:BATCH` sends SIGKILL to
this process after that batch has trained, as a preemption would. With `--multi-worker` the
process is one worker of a MultiWorkerMirroredStrategy (its TF_CONFIG set by the caller) and
logs the ids of its own part of each global batch. Each `--then BACKUP LOG` trains once more
in the same process (and strategy) after the run before it ended, failed or not: stderr has a
line `run N: ok` or `run N: failed` after each run (the traceback of a failure before it),
and the process exits with 1 if any failed.

    python tests/training/resume_run.py KIND DATA BACKUP LOG [--kill 1:7] [--replicas 2]
    TF_CONFIG=... python tests/training/resume_run.py records DATA BACKUP LOG \
        --multi-worker --batch 10 [--then BACKUP2 LOG2 ...]
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import traceback
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image as PILImage

EPOCHS = 3
BATCH = 4
SAVE_EVERY = 4
SEED = 5
KINDS = ("records", "folder", "sequence", "mixture")


def make_data(kind: str, root: Path, count: int = 40, shards: int = 3) -> Path:
    """The data of `kind` with examples identified 0..count-1: TFRecords with an id feature,
    a folder of PNGs whose first pixel holds the id, or arrays (read by a SequenceLoader)."""
    import tfpipe

    ids = np.arange(count)
    if kind == "folder":
        for i in ids:
            folder = root / f"class_{i % 2}"
            folder.mkdir(parents=True, exist_ok=True)
            pixels = np.zeros((4, 4, 3), np.uint8)
            pixels[..., 0], pixels[..., 1] = i % 256, i // 256
            PILImage.fromarray(pixels).save(folder / f"{i:05d}.png")
        return root
    if kind == "records":
        source = tfpipe.from_arrays({"id": ids, "label": ids % 2})
        tfpipe.write_tfrecords(source, root / "ids", num_shards=shards, progress=False)
        return root / "ids"
    if kind == "mixture":  # four fifths of the ids in one dataset, the rest in another
        split = count * 4 // 5
        for name, part in (("many", ids[:split]), ("few", ids[split:])):
            source = tfpipe.from_arrays({"id": part, "label": part % 2})
            tfpipe.write_tfrecords(source, root / name, num_shards=shards, progress=False)
        return root
    root.mkdir(parents=True, exist_ok=True)
    np.save(root / "ids.npy", ids)
    return root / "ids.npy"


def _data(kind: str, path: Path, seed: int, batch_size: int) -> Any:
    import tfpipe

    if kind == "records":
        pipeline = tfpipe.Pipeline(path).shuffle(seed=seed).batch(batch_size)
        return pipeline.as_supervised("id", "label")
    if kind == "mixture":  # weights 4:1, so that an epoch holds every id once
        sources = [tfpipe.Pipeline(path / name).shuffle(seed=seed) for name in ("many", "few")]
        pipeline = tfpipe.Pipeline.sample_from(sources, [4, 1], seed=seed).batch(batch_size)
        return pipeline.as_supervised("id", "label")
    if kind == "folder":
        pipeline = tfpipe.Pipeline(tfpipe.from_directory(path), image_size=(4, 4))
        pipeline = pipeline.shuffle(seed=seed)
        return pipeline.batch(batch_size).as_supervised("image", "label")
    ids = np.load(path)
    source = tfpipe.from_arrays({"id": ids, "label": ids % 2})
    return tfpipe.SequenceLoader(source, batch_size, x="id", y="label", seed=seed)


class _Log:
    """Writes the ids of each trained batch once `active` (not during tfpipe.fit's probe)."""

    def __init__(self, path: Path) -> None:
        self.file = open(path, "a")  # noqa: SIM115  # closed by close()
        self.lock = threading.Lock()
        self.active = False

    def write(self, step: Any, ids: Any) -> int:
        if self.active:
            line = " ".join(str(int(i)) for i in [int(step), *np.asarray(ids).ravel()])
            with self.lock:
                self.file.write(line + "\n")
                self.file.flush()
        return 0

    def close(self) -> None:
        self.file.close()


def _model(kind: str, log: _Log) -> Any:
    import keras
    import tensorflow as tf

    class Logged(keras.Model):
        def train_step(self, data: Any) -> Any:
            x, _ = data
            if kind == "folder":  # the id is in the first pixel: red + 256 * green
                ids = tf.cast(x[:, 0, 0, 0], tf.int64) + 256 * tf.cast(x[:, 0, 0, 1], tf.int64)
            else:
                ids = tf.cast(tf.reshape(x, [-1]), tf.int64)
            tf.py_function(log.write, [self.optimizer.iterations, ids], tf.int64)
            return super().train_step(data)

    shape = (4, 4, 3) if kind == "folder" else ()
    inputs = keras.Input(shape)
    flat = (
        keras.layers.Flatten()(inputs) if kind == "folder" else keras.layers.Reshape((1,))(inputs)
    )
    outputs = keras.layers.Dense(2)(keras.layers.Rescaling(1 / 255)(flat))
    model = Logged(inputs, outputs)
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def run(
    kind: str,
    data: Path,
    backup: Path,
    log_path: Path,
    *,
    kill: tuple[int, int] | None = None,
    strategy: Any = None,
    seed: int = SEED,
    batch_size: int = BATCH,
) -> None:
    """Trains with `tfpipe.fit(backup_dir=backup, save_every=SAVE_EVERY)` under `strategy`
    (by default the current one)."""
    import keras
    import tensorflow as tf

    import tfpipe

    keras.utils.set_random_seed(0)
    log = _Log(log_path)

    class Control(keras.callbacks.Callback):
        epoch = 0

        def on_train_begin(self, logs: Any = None) -> None:
            log.active = True

        def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
            self.epoch = epoch

        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            if kill == (self.epoch, batch):
                os.kill(os.getpid(), signal.SIGKILL)

    strategy = tf.distribute.get_strategy() if strategy is None else strategy
    with strategy.scope():
        model = _model(kind, log)
    try:
        tfpipe.fit(
            model,
            _data(kind, data, seed, batch_size),
            epochs=EPOCHS,
            backup_dir=backup,
            save_every=SAVE_EVERY,
            callbacks=[Control()],
            report=False,
            verbose=0,
        )
    finally:
        log.close()


def _strategy(replicas: int, multi_worker: bool) -> Any:
    """A MultiWorkerMirroredStrategy, a MirroredStrategy over `replicas` CPUs, or None."""
    import tensorflow as tf

    if multi_worker:  # a dead peer fails a collective after 60 s instead of hanging it
        options = tf.distribute.experimental.CommunicationOptions(timeout_seconds=60)
        return tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    if replicas > 1:
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * replicas
        )
        return tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(replicas)])
    return None


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("kind", choices=KINDS)
    parser.add_argument("data", type=Path)
    parser.add_argument("backup", type=Path)
    parser.add_argument("log", type=Path)
    parser.add_argument("--kill", default=None)
    parser.add_argument("--replicas", type=int, default=1)
    parser.add_argument("--multi-worker", action="store_true")
    parser.add_argument("--batch", type=int, default=BATCH)
    parser.add_argument("--then", nargs=2, type=Path, action="append", default=[])
    args = parser.parse_args(argv)
    kill = tuple(int(part) for part in args.kill.split(":")) if args.kill else None
    failed = False
    try:
        strategy = _strategy(args.replicas, args.multi_worker)
        for number, (backup, log) in enumerate([(args.backup, args.log), *args.then]):
            try:
                run(args.kind, args.data, backup, log, kill=kill, strategy=strategy,  # type: ignore[arg-type]
                    batch_size=args.batch)  # fmt: skip
                print(f"run {number}: ok", file=sys.stderr)
            except Exception:
                traceback.print_exc()
                print(f"run {number}: failed", file=sys.stderr)
                failed = True
    except BaseException:
        traceback.print_exc()
        failed = True
    sys.stdout.flush()
    sys.stderr.flush()
    # A worker leaving normally would wait at the cluster's shutdown barrier for its peers.
    os._exit(1 if failed else 0)


if __name__ == "__main__":
    main(sys.argv[1:])
