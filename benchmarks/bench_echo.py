"""Data echoing on an input-bound job and on a compute-bound one: steps/s and the validation
accuracy reached in the same wall-clock budget, echo factors 1, 2 and 4 (issue 42).

Data: `make_image_folder` shapes (all 6 classes) as full-size 1024x1024 JPEGs, a train and a
validation split, written to TFRecords with the JPEG bytes kept, so every example is decoded
at training time: `Pipeline(prefix, image_size=(64, 64), rescale=1/255).shuffle(seed=0)
.echo(factor).batch(32)` (example echo, its default window).

Jobs (each case in its own process, interleaved, median of 3):
- A, input-bound: `small_cnn` with filters (16, 32, 64); the model alone runs ~3x faster
  than the input delivers.
- B, compute-bound: `small_cnn` with filters (64, 128, 256); the model alone is slower than
  the input, so echoing cannot add steps/s, only take fresh examples away.

Every case trains with `model.fit` for BUDGET_S seconds of wall clock (from the start of
`fit`, compilation included, alike for all), then the accuracy on the fixed validation split
(not echoed) is measured. Metric: steps/s after the first steps; fresh examples/s is steps/s x
32 / factor. The factor-1 case of each job also times the model alone (one batch in memory)
and the input alone (no model). As in the fit report, echoing is advised only when the input
alone is slower than the model alone, from the gap between the model and the slower of the
input alone and factor 1's steps/s (`echo_factor_for`).

Baseline, written by hand: echo as a user writes it in tf.data for factor 2 on job A:
TFRecordDataset -> parse -> decode (at the same 1/8 DCT scale as tfpipe's reduced decode, so
that the echo, not the decode, is compared) and resize -> `flat_map(from_tensors((x, y))
.repeat(2))` -> shuffle(1024) -> batch(32); tfpipe's echo(2) is paired with it run by run.
The same hand-written pipeline without the echo stage runs too, so that its own gain from
echoing (its factor 2 over its factor 1) stands beside tfpipe's.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

from benchmarks.harness import RESULTS, compare, prepared_data, scale, small_cnn, step_timer

SIZE = (64, 64)
STORED = (1024, 1024)
BATCH = 32
NUM_CLASSES = 6
WARMUP_STEPS = 3
BUDGET_S = scale(20, 8)
FACTORS = (1, 2, 4)
JOBS = {"A input-bound": (16, 32, 64), "B compute-bound": (64, 128, 256)}
HAND = "A input-bound, hand-written echo {}"


def _data(root: Path) -> dict[str, str]:
    """Train and validation TFRecords of full-size JPEGs (the image folders are removed)."""
    import shutil

    import tfpipe
    from tfpipe.sources.synthetic import make_image_folder

    paths = {}
    for split, count, seed in (("train", scale(3000, 160), 0), ("val", scale(600, 64), 1)):
        folder = make_image_folder(
            root / split,
            num_classes=NUM_CLASSES,
            per_class=count // NUM_CLASSES,
            size=STORED,
            seed=seed,
        )
        paths[split] = str(root / "records" / split)
        tfpipe.write_tfrecords(tfpipe.from_directory(folder), paths[split], progress=False)
        shutil.rmtree(folder)
    return paths


def _pipeline(paths: dict[str, str], factor: int) -> Any:
    import tfpipe

    pipeline = tfpipe.Pipeline(paths["train"], image_size=SIZE, rescale=1 / 255).shuffle(seed=0)
    if factor > 1:
        pipeline = pipeline.echo(factor)
    return pipeline.batch(BATCH).as_supervised("image", "label").build().repeat()


def _handwritten(paths: dict[str, str], factor: int) -> Any:
    """Echo by hand: each decoded example repeated in place, then spread by a shuffle buffer."""
    import tensorflow as tf

    autotune = tf.data.AUTOTUNE
    spec = {
        "image": tf.io.FixedLenFeature([], tf.string),
        "label": tf.io.FixedLenFeature([], tf.int64),
    }

    def decode(serialized: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        parsed = tf.io.parse_single_example(serialized, spec)
        image = tf.io.decode_jpeg(parsed["image"], channels=3, ratio=8)
        return tf.image.resize(image, SIZE) / 255.0, parsed["label"]

    files = tf.data.Dataset.list_files(f"{paths['train']}-*.tfrecord", shuffle=True, seed=0)
    dataset = (
        files.interleave(tf.data.TFRecordDataset, num_parallel_calls=autotune)
        .shuffle(1024, seed=0)
        .map(decode, num_parallel_calls=autotune)
    )
    if factor > 1:
        dataset = dataset.flat_map(
            lambda x, y: tf.data.Dataset.from_tensors((x, y)).repeat(factor)
        ).shuffle(1024, seed=0)
    return dataset.batch(BATCH).repeat().prefetch(autotune)


def _budget() -> Any:
    """A callback stopping training BUDGET_S seconds after `fit` began."""
    import keras

    class Budget(keras.callbacks.Callback):
        def on_train_begin(self, logs: Any = None) -> None:
            self.start = time.perf_counter()

        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            if time.perf_counter() - self.start >= BUDGET_S:
                self.model.stop_training = True

    return Budget()


def _accuracy(model: Any, paths: dict[str, str]) -> float:
    """Top-1 accuracy on the whole validation split, in its stored order, not echoed."""
    import numpy as np

    import tfpipe

    validation = tfpipe.Pipeline(paths["val"], image_size=SIZE, rescale=1 / 255).batch(64)
    right = total = 0
    for images, labels in validation.as_supervised("image", "label").build():
        logits = model(images, training=False)
        right += int(np.sum(np.argmax(logits, axis=-1) == labels.numpy()))
        total += len(labels)
    return right / total


def _model_alone(filters: tuple[int, ...]) -> float:
    """Steps/s of the model on one batch held in memory: no input cost."""
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(0)
    batch = (rng.random((BATCH, *SIZE, 3), dtype=np.float32), rng.integers(0, NUM_CLASSES, BATCH))
    dataset = tf.data.Dataset.from_tensors(batch).repeat().prefetch(tf.data.AUTOTUNE)
    timer = step_timer(BATCH, WARMUP_STEPS)
    model = small_cnn((*SIZE, 3), NUM_CLASSES, filters)
    model.fit(dataset, steps_per_epoch=scale(60, 10), callbacks=[timer], verbose=0)
    return float(timer.result()["steps_per_s"])


def _input_alone(paths: dict[str, str]) -> float:
    """Fresh batches/s of the factor-1 pipeline without a model."""
    from tfpipe.training.throughput import measure

    result = measure(_pipeline(paths, 1), num_batches=10_000, warmup=5, max_seconds=scale(8, 2))
    return result.batches_per_s


def train(paths: dict[str, str], job: str, factor: int, by_hand: bool = False) -> dict[str, Any]:
    """One job at one factor for BUDGET_S seconds; the factor-1 case also times the gap."""
    filters = JOBS[job]
    gap = {}
    if factor == 1 and not by_hand:
        gap["model_steps_per_s"] = _model_alone(filters)
    dataset = _handwritten(paths, factor) if by_hand else _pipeline(paths, factor)
    timer = step_timer(BATCH, WARMUP_STEPS)
    model = small_cnn((*SIZE, 3), NUM_CLASSES, filters)
    model.fit(dataset, steps_per_epoch=10**7, callbacks=[timer, _budget()], verbose=0)
    result = timer.result()
    if factor == 1 and not by_hand:
        gap["input_steps_per_s"] = _input_alone(paths)
    return {
        **result,
        **gap,
        "fresh_examples_per_s": result["examples_per_s"] / factor,
        "val_accuracy": _accuracy(model, paths),
    }


def _cases(paths: dict[str, str]) -> dict[str, Any]:
    cases: dict[str, Any] = {}
    for job in JOBS:
        for factor in FACTORS:
            cases[f"{job}, echo {factor}"] = (train, (paths, job, factor))
    for factor in FACTORS[:2]:
        cases[HAND.format(factor)] = (train, (paths, "A input-bound", factor, True))
    return cases


def _summarise(report: dict[str, Any]) -> dict[str, Any]:
    """Adds each row's job, factor and steps/s ratio to the job's factor 1 (the hand-written
    one's for the hand-written rows; of the medians, and run by run), and each job's gap and
    the factor `echo_factor_for` advises."""
    from tfpipe.training.echoing import echo_factor_for

    rows = {row["case"]: row for row in report["rows"]}
    jobs = {}
    for job in JOBS:
        first = rows[f"{job}, echo 1"]
        model = statistics.median(r["model_steps_per_s"] for r in first["runs"])
        alone = statistics.median(r["input_steps_per_s"] for r in first["runs"])
        # As the fit report judges it: advice only when the input alone is the slower, from the
        # slower of the input alone and what fit achieved.
        fed = min(alone, first["steps_per_s"])
        advised = echo_factor_for(fed, model) if alone < model else None
        jobs[job] = {
            "model_steps_per_s": model,
            "input_steps_per_s": alone,
            "delivered_steps_per_s": fed,
            "gap": model / fed,
            "advised_factor": advised or 1,
        }
    for name, row in rows.items():
        row["job"], row["factor"] = name.split(",")[0], int(name.rsplit(" ", 1)[1])
        row["by_hand"] = "hand-written" in name
        one = rows[HAND.format(1) if row["by_hand"] else f"{row['job']}, echo 1"]
        row["ratio_to_factor_1"] = row["steps_per_s"] / one["steps_per_s"]
        row["ratios_to_factor_1"] = [
            mine["steps_per_s"] / theirs["steps_per_s"]
            for mine, theirs in zip(row["runs"], one["runs"], strict=True)
        ]
    report["extra"]["jobs"] = jobs
    return report


def _print_notes(report: dict[str, Any]) -> None:
    print("\nsteps/s ratio to the job's factor 1 (of the medians; run by run)")
    for row in report["rows"]:
        each = ", ".join(f"{r:.2f}" for r in row["ratios_to_factor_1"])
        print(f"  {row['case']:<46} {row['ratio_to_factor_1']:5.2f}  ({each})")
    for job, facts in report["extra"]["jobs"].items():
        print(
            f"{job}: model alone {facts['model_steps_per_s']:.1f} steps/s, input alone "
            f"{facts['input_steps_per_s']:.1f}, delivered in fit (factor 1) "
            f"{facts['delivered_steps_per_s']:.1f}: gap {facts['gap']:.2f}x; the fit report's "
            f"advice (echo_factor_for): factor {facts['advised_factor']}"
        )
    pair = next(row for row in report["rows"] if "paired_ratios" in row)
    print(
        f"tfpipe echo 2 / hand-written echo 2, steps/s run by run: "
        f"{', '.join(f'{r:.2f}' for r in pair['paired_ratios'])}; "
        f"median {pair['paired_ratio']:.2f}"
    )


def main() -> None:
    with prepared_data(_data) as (paths, prepare_s):
        load = os.getloadavg()
        report = compare(
            "echo",
            _cases(paths),
            baseline=HAND.format(2),
            metric="steps_per_s",
            pairs={"A input-bound, echo 2": HAND.format(2)},
            spreads=("fresh_examples_per_s", "val_accuracy"),
            extra={
                "batch_size": BATCH,
                "image_size": SIZE,
                "stored_size": STORED,
                "budget_s": BUDGET_S,
                "prepare_s": prepare_s,
                "load_average_at_start": load,
            },
        )
    report = _summarise(report)
    report["extra"]["load_average_at_end"] = os.getloadavg()
    _print_notes(report)
    name = f"echo{'-quick' if report['quick'] else ''}.json"
    (RESULTS / name).write_text(json.dumps(report, indent=2))
