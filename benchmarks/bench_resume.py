"""Resuming mid-epoch: time from restart to the first batch, and the size of a backup.

Issue 15. Over 4,000 256x256 JPEG records (batches of 64 float32 images of 128x128), each case
in a fresh process builds `Pipeline(...).shuffle(seed=0).batch(64).start_at(0, batch)` and
times `build()` and the first batch:

- table "resume": resuming at 10% of an epoch (baseline) and at 90% (goal: at most 1.5x the
  time, i.e. a rate >= 0.67: the skipped records are read as bytes, never parsed or decoded),
  beside resuming at 90% the naive way (the epoch from its start, the decoded batches before
  the position thrown away);
- the size of one `tfpipe.fit(backup_dir=...)` save of a small CNN: its weights file (with
  the optimizer state) and the input position beside it (goal < 1 KB).
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.harness import compare, scale

SIZE = (128, 128)
BATCH = 64


def _pipeline(prefix: str) -> Any:
    import tfpipe

    return tfpipe.Pipeline(prefix, image_size=SIZE, rescale=1 / 255).shuffle(seed=0).batch(BATCH)


def resume_at(prefix: str, fraction: float) -> dict[str, Any]:
    """Builds the pipeline at `fraction` of epoch 0 and times its first batch."""
    import tensorflow as tf  # noqa: F401  # imported before the clock starts, as on a restart

    pipeline = _pipeline(prefix)
    batch = int(fraction * pipeline.batches_per_epoch())
    start = time.perf_counter()
    next(iter(pipeline.start_at(0, batch).build()))
    seconds = time.perf_counter() - start
    return {"first_batch_per_s": 1 / seconds, "first_batch_s": seconds, "batch": batch}


def resume_naively(prefix: str, fraction: float) -> dict[str, Any]:
    """The epoch from its start, skipping the decoded batches before the position."""
    import tensorflow as tf  # noqa: F401  # imported before the clock starts

    pipeline = _pipeline(prefix)
    batch = int(fraction * pipeline.batches_per_epoch())
    start = time.perf_counter()
    next(iter(pipeline.start_at(0).build().skip(batch)))
    seconds = time.perf_counter() - start
    return {"first_batch_per_s": 1 / seconds, "first_batch_s": seconds, "batch": batch}


def backup_sizes(work: Path) -> dict[str, int]:
    """Bytes of one save: the model's weights file (with the optimizer state) and the input
    position written beside it."""
    import keras
    import numpy as np

    import tfpipe
    from tfpipe.training.resume import POSITION, WEIGHTS, Backups, Position

    model = keras.Sequential(
        [
            keras.Input((*SIZE, 3)),
            keras.layers.Conv2D(16, 3, strides=2, activation="relu"),
            keras.layers.Conv2D(32, 3, strides=2, activation="relu"),
            keras.layers.GlobalAveragePooling2D(),
            keras.layers.Dense(6),
        ]
    )
    model.compile("adam", "sparse_categorical_crossentropy")
    model.optimizer.build(model.trainable_variables)
    source = tfpipe.from_arrays({"x": np.zeros((64, 1), np.float32)})
    identity = tfpipe.Pipeline(source).shuffle(seed=0).batch(BATCH).identity()
    folder = Backups(work / "backup", identity, steps=63).save(model, Position(12, 57))
    return {
        "weights_bytes": (folder / WEIGHTS).stat().st_size,
        "position_bytes": (folder / POSITION).stat().st_size,
    }


def _prepare(work: Path) -> str:
    import tfpipe
    from tfpipe.sources.synthetic import make_image_folder

    root = make_image_folder(
        work / "images", num_classes=6, per_class=scale(667, 40), size=(256, 256), seed=0
    )
    prefix = str(work / "jpeg" / "train")
    tfpipe.write_tfrecords(tfpipe.from_directory(root), prefix, progress=False)
    return prefix


def main() -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    with tempfile.TemporaryDirectory(prefix="tfpipe-bench-resume-") as tmp:
        prefix = _prepare(Path(tmp))
        sizes = backup_sizes(Path(tmp))
        print(f"backup: weights {sizes['weights_bytes']} bytes, position {sizes['position_bytes']}")
        compare(
            "resume",
            {
                "resume at 10% of the epoch (baseline)": (resume_at, (prefix, 0.1)),
                "resume at 90% of the epoch": (resume_at, (prefix, 0.9)),
                "naive: decode from the start, skip 90%": (resume_naively, (prefix, 0.9)),
            },
            baseline="resume at 10% of the epoch (baseline)",
            goals={"resume at 90% of the epoch": 1 / 1.5},
            metric="first_batch_per_s",
            # The machine is shared: each 90% run is compared with the 10% run next to it.
            pairs={"resume at 90% of the epoch": "resume at 10% of the epoch (baseline)"},
            extra={
                "records": scale(4002, 240),
                "batch": BATCH,
                "size": SIZE,
                **sizes,
                "position_goal_bytes": 1024,
                "position_met": sizes["position_bytes"] < 1024,
            },
            repeats=7,
        )


if __name__ == "__main__":
    main()
