"""The end-to-end demo behind `tfpipe demo`: generate images, write TFRecords, read them back.

Each step is a function that prints what it did and returns what the next step needs:

    _generate ──▶ folder of JPEGs + labels.csv ──_write──▶ train/test shards ──_read_back──▶ report
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import sys
import time
from pathlib import Path
from typing import TextIO

import keras
import numpy as np
import pandas as pd
import tensorflow as tf

from tfpipe.checks import check_int
from tfpipe.cli.summary import describe_example, describe_info, format_bytes
from tfpipe.errors import DecodeError, SourceError
from tfpipe.format.metadata import DatasetInfo
from tfpipe.loaders.pipeline import Pipeline
from tfpipe.records import read_tfrecords, write_tfrecords
from tfpipe.sources import from_dataframe
from tfpipe.sources.synthetic import SHAPES, make_image_dataframe, make_image_folder
from tfpipe.training.fit import fit
from tfpipe.training.throughput import Throughput, measure

_MARKER = ".tfpipe-demo"
_SPLIT = {"train": 0.8, "test": 0.2}
_BATCH = 64


@dataclasses.dataclass(frozen=True)
class DemoSize:
    """How much data the demo makes: images per class, their size, and the size stored."""

    num_classes: int
    per_class: int
    image_size: tuple[int, int]
    stored_size: tuple[int, int]
    read_batches: int
    epochs: int


DEMO_SIZES = {
    "small": DemoSize(num_classes=3, per_class=40, image_size=(96, 96), stored_size=(64, 64),
                      read_batches=20, epochs=40),
    "large": DemoSize(num_classes=len(SHAPES), per_class=300, image_size=(160, 160),
                      stored_size=(128, 128), read_batches=60, epochs=10),
}  # fmt: skip


@dataclasses.dataclass(frozen=True)
class DemoResult:
    """What the demo made and measured.

    Attributes:
        workdir: the working folder.
        csv: the CSV of image paths (relative to `workdir`) and class names.
        datasets: split name -> the `DatasetInfo` written (prefixes under `workdir/records`).
        example: the first training example, decoded.
        read: throughput of reading the training records back in batches of 64.
        accuracy: test accuracy of the small CNN trained with `tfpipe.fit`.
    """

    workdir: Path
    csv: Path
    datasets: dict[str, DatasetInfo]
    example: dict[str, np.ndarray]
    read: Throughput
    accuracy: float


def _prepare(workdir: Path) -> None:
    """Creates `workdir`, or empties one an earlier demo made; never touches other folders."""
    made_by_demo = (workdir / _MARKER).is_file()
    if workdir.exists() and not made_by_demo and (not workdir.is_dir() or any(workdir.iterdir())):
        raise SourceError(
            f"workdir: {str(workdir)!r} exists and was not made by tfpipe demo; "
            "pass an empty or new folder"
        )
    for name in ("images", "records"):
        shutil.rmtree(workdir / name, ignore_errors=True)
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / _MARKER).write_text("made by `tfpipe demo`; the demo empties this folder\n")


def _step(number: int, text: str, started: float, out: TextIO) -> None:
    print(f"[{number}] {text} ({time.perf_counter() - started:.1f} s)", file=out)


def _generate(workdir: Path, config: DemoSize, seed: int, out: TextIO) -> Path:
    """Draws the class folders of JPEGs and writes `labels.csv` beside them."""
    started = time.perf_counter()
    images = make_image_folder(
        workdir / "images",
        num_classes=config.num_classes,
        per_class=config.per_class,
        size=config.image_size,
        seed=seed,
    )
    df = make_image_dataframe(images)
    df["path"] = [os.path.join("images", p) for p in df["path"]]
    csv = workdir / "labels.csv"
    df.to_csv(csv, index=False)
    num_bytes = sum(f.stat().st_size for f in images.glob("*/*.jpg"))
    height, width = config.image_size
    _step(
        1,
        f"generated {len(df)} JPEGs of {height}x{width} ({format_bytes(num_bytes)}) in "
        f"{config.num_classes} class folders under {images}, and {csv}",
        started,
        out,
    )
    return csv


def _write(
    workdir: Path, csv: Path, *, config: DemoSize, seed: int, progress: bool, out: TextIO
) -> tuple[dict[str, DatasetInfo], dict[str, np.ndarray]]:
    """Writes the CSV's images as train/test TFRecords; returns them and their class counts."""
    started = time.perf_counter()
    source = from_dataframe(
        pd.read_csv(csv), base_dir=workdir, image_shape=(*config.stored_size, 3)
    )
    parts = source.split(_SPLIT, seed=seed)
    infos = {
        name: write_tfrecords(part, workdir / "records" / name, seed=seed, progress=progress)
        for name, part in parts.items()
    }
    height, width = config.stored_size
    _step(
        2,
        f"wrote a stratified {'/'.join(parts)} split, images stored at {height}x{width}:",
        started,
        out,
    )
    for info in infos.values():
        print(*describe_info(info), sep="\n", file=out)
    counts = {
        name: np.bincount(part.labels(), minlength=config.num_classes)  # type: ignore[arg-type]
        for name, part in parts.items()
    }
    return infos, counts


def _read_back(
    infos: dict[str, DatasetInfo], counts: dict[str, np.ndarray], config: DemoSize, out: TextIO
) -> tuple[dict[str, np.ndarray], Throughput]:
    """Reads every split back, checks its class counts, and times reading the training split."""
    started = time.perf_counter()
    lines = []
    for name, info in infos.items():
        read = np.zeros(config.num_classes, np.int64)
        for batch in read_tfrecords(info.metadata_path).batch(_BATCH):
            read += np.bincount(batch["label"].numpy(), minlength=config.num_classes)
        if not np.array_equal(read, counts[name]):
            raise DecodeError(
                f"{name}: read back class counts {read.tolist()}, "
                f"wrote {counts[name].tolist()} from {info.metadata_path}"
            )
        lines.append(f"  {name}: {read.sum()} examples, class counts {read.tolist()} as written")
    train = infos["train"]
    example = {k: v.numpy() for k, v in next(iter(read_tfrecords(train.metadata_path))).items()}
    batches = read_tfrecords(train.metadata_path).repeat().batch(_BATCH).prefetch(tf.data.AUTOTUNE)
    throughput = measure(batches, num_batches=config.read_batches, warmup=2)
    _step(3, "read the records back with tfpipe.read_tfrecords:", started, out)
    print(*lines, "  the first training example:", sep="\n", file=out)
    print(*describe_example(example, train.schema), sep="\n", file=out)
    print(
        f"  reading {train.name}: {throughput.examples_per_s:,.0f} examples/s "
        f"(decoded, batches of {_BATCH}, {throughput.batches} batches timed)",
        file=out,
    )
    return example, throughput


def _train(infos: dict[str, DatasetInfo], config: DemoSize, epochs: int, out: TextIO) -> float:
    """Trains a small CNN with tfpipe.fit from the train records; returns the test accuracy."""
    started = time.perf_counter()
    keras.utils.set_random_seed(0)
    layers = keras.layers
    model = keras.Sequential(
        [
            keras.Input((*config.stored_size, 3)),
            layers.Conv2D(16, 3, activation="relu"),
            layers.MaxPooling2D(),
            layers.Conv2D(32, 3, activation="relu"),
            layers.MaxPooling2D(),
            layers.Conv2D(32, 3, activation="relu"),
            layers.GlobalAveragePooling2D(),
            layers.Dense(config.num_classes),
        ]
    )
    model.compile(
        keras.optimizers.Adam(3e-3),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    train, test = (infos[name].directory / infos[name].name for name in ("train", "test"))
    with contextlib.redirect_stdout(out):
        fit(model, train, epochs=epochs, batch_size=16, verbose=0)
    # Tested once, after training: evaluating 24 images after every short epoch would take
    # most of the run, and the report would rightly advise validating less often.
    tests = Pipeline(test, rescale=1 / 255).batch(_BATCH).as_supervised("image", "label")
    accuracy = float(model.evaluate(tests.build(), verbose=0)[1])
    _step(4, f"trained a small CNN with tfpipe.fit for {epochs} epochs:", started, out)
    print(
        f"  test accuracy {accuracy:.0%} (chance {1 / config.num_classes:.0%}), evaluated once "
        "after training",
        file=out,
    )
    return accuracy


def run_demo(
    workdir: str | os.PathLike[str] = "demo-data",
    *,
    size: str = "small",
    seed: int = 0,
    epochs: int | None = None,
    progress: bool = True,
    out: TextIO | None = None,
) -> DemoResult:
    """Generates a learnable image dataset, writes it to TFRecords and reads it back.

    Steps, each printed with what it did: draw class folders of JPEGs and a CSV of their paths
    and labels; write a stratified train/test split of the CSV to TFRecord shards, images
    stored at training size; read both splits back, check their class counts, and time reading;
    train a small CNN on them with `tfpipe.fit` and print its report and test accuracy.
    `workdir` must be new, empty, or made by an earlier demo (which is then emptied).

    Examples:
        >>> result = run_demo("demo-data", size="small")
        >>> result.datasets["train"].num_examples
        96

    Args:
        workdir: the working folder. Defaults to "demo-data".
        size: "small" (120 images of 96x96, a few seconds) or "large" (1,800 of 160x160).
            Defaults to "small".
        seed: seed of the images, the split and the write order. Defaults to 0.
        epochs: how long to train. Defaults to None (40 for "small", 10 for "large").
        progress: show progress bars while writing. Defaults to True.
        out: where to print. Defaults to sys.stdout.
    """
    if size not in DEMO_SIZES:
        raise ValueError(f"size must be one of {list(DEMO_SIZES)}. Received: size={size!r}")
    out = out if out is not None else sys.stdout
    config = DEMO_SIZES[size]
    epochs = config.epochs if epochs is None else check_int("epochs", epochs)
    path = Path(workdir)
    _prepare(path)
    csv = _generate(path, config, seed, out)
    infos, counts = _write(path, csv, config=config, seed=seed, progress=progress, out=out)
    example, throughput = _read_back(infos, counts, config, out)
    accuracy = _train(infos, config, epochs, out)
    print(
        f"done: try `tfpipe inspect {path / 'records'}` or "
        f"`tfpipe write {csv} OUT --split train=0.8,test=0.2`",
        file=out,
    )
    return DemoResult(
        path, csv, datasets=infos, example=example, read=throughput, accuracy=accuracy
    )
