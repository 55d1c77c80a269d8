"""A small clean dataset mixed with a large one at chosen rates, then data echoing.

Two class folders of the same classes: a small "clean" set stored at training size and a
larger "web" set of full-size JPEGs whose label column is called otherwise. Both are written
as TFRecords; `tfpipe.Pipeline.sample_from` mixes them 50/50 one example at a time (every
clean image once per epoch, the web set walked through across epochs), `rename` matches the
feature names, and `tfpipe.fit(backup_dir=...)` can resume the run exactly. The report gives
each source's share of the examples and of the input time. Then the same mixture echoed
(`.echo(2)`): each decoded example used twice per epoch, and the report gives the fresh
examples per second.

Run:
    python examples/mixing_and_echoing.py                # small: about 20 s on 2 CPU cores
    python examples/mixing_and_echoing.py --size large   # more images, more epochs
"""

from __future__ import annotations

import argparse
from pathlib import Path

import keras
import pandas as pd

import tfpipe
from tfpipe.sources.synthetic import make_image_folder

SIZES = {"small": (3, 20, 60, 2), "large": (5, 100, 400, 5)}  # classes, clean, web, epochs
IMAGE_SIZE = (64, 64)


def write_sets(workdir: Path, classes: int, clean: int, web: int) -> tuple[Path, Path]:
    """The clean set stored at 64x64; the web set at full size from a CSV-like table whose
    label column is "class"."""
    clean_images = make_image_folder(
        workdir / "clean", num_classes=classes, per_class=clean, size=(64, 64), seed=0
    )
    web_images = make_image_folder(
        workdir / "web", num_classes=classes, per_class=web, size=(256, 256), seed=1
    )
    tfpipe.write_tfrecords(
        tfpipe.from_directory(clean_images, image_shape=(*IMAGE_SIZE, 3)),
        workdir / "records" / "clean",
        progress=False,
    )
    rows = [{"path": str(p), "class": p.parent.name} for p in sorted(web_images.glob("*/*"))]
    web_source = tfpipe.from_dataframe(pd.DataFrame(rows), path_col="path", label_cols="class")
    tfpipe.write_tfrecords(web_source, workdir / "records" / "web", progress=False)
    return workdir / "records" / "clean", workdir / "records" / "web"


def build_model(num_classes: int) -> keras.Model:
    """A small CNN for 64x64 RGB images in [0, 1]."""
    model = keras.Sequential(
        [
            keras.Input((*IMAGE_SIZE, 3)),
            keras.layers.Conv2D(16, 3, activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Conv2D(32, 3, activation="relu"),
            keras.layers.GlobalMaxPooling2D(),
            keras.layers.Dense(num_classes),
        ]
    )
    model.compile(
        keras.optimizers.Adam(3e-3),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    return model


def main(argv: list[str] | None = None) -> dict[str, tfpipe.training.FitReport]:
    """Writes both sets, trains on their mixture, then on the mixture echoed; returns the two
    fit reports."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=SIZES, default="small", help="data size (small)")
    parser.add_argument("--workdir", type=Path, default=Path("example-data/mixing"))
    parser.add_argument("--epochs", type=int, help="training epochs (2 small, 5 large)")
    args = parser.parse_args(argv)
    classes, clean_count, web_count, epochs = SIZES[args.size]
    clean_path, web_path = write_sets(args.workdir, classes, clean_count, web_count)

    clean = tfpipe.Pipeline(clean_path, rescale=1 / 255).shuffle(seed=0)
    web = tfpipe.Pipeline(web_path, image_size=IMAGE_SIZE, rescale=1 / 255).shuffle(seed=1)
    mixed = tfpipe.Pipeline.sample_from([clean, web.rename({"class": "label"})], [0.5, 0.5])
    counts = dict(zip(mixed.mixture.names, mixed.mixture.counts, strict=True))
    print(f"examples per epoch: {counts}")
    train = mixed.batch(16).as_supervised("image", "label")
    print("the mixture:", train.explain(), sep="\n")

    echoed = mixed.echo(2).batch(16).as_supervised("image", "label")
    reports = {}
    for name, data in (("mixed", train), ("mixed and echoed 2x", echoed)):
        print(f"\n{name}: ", end="")  # tfpipe.fit prints its report
        keras.utils.set_random_seed(0)  # the same initial weights in every run
        history = tfpipe.fit(
            build_model(classes),
            data,
            epochs=args.epochs or epochs,
            backup_dir=args.workdir / f"backup-{len(reports)}",  # run again after a kill
            verbose=0,
        )
        reports[name] = history.report
    return reports


if __name__ == "__main__":
    main()
