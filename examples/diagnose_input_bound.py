"""Diagnose an input-bound run with the fit report, then fix it.

The slow start is the Keras `Sequence` copied from blog posts: it opens, fully decodes and
resizes each JPEG with PIL in Python, one image at a time. `tfpipe.fit` trains with it and
reports how fast the input and the model are on their own: with a small, fast model the
verdict is "input-bound", and the advice says what to do. Following it (store the images at
training size, as raw pixels, in TFRecords and read them with a tf.data pipeline) removes most
of the wait. The last lines say which verdict the second run got and, if the input still
cannot keep up with this deliberately tiny model, what the report says is left to try.

Run:
    python examples/diagnose_input_bound.py                # small: about 15 s on 2 CPU cores
    python examples/diagnose_input_bound.py --size large   # more images, a longer epoch
    python examples/diagnose_input_bound.py --plot         # also draw both reports
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import keras
import numpy as np
from PIL import Image

import tfpipe
from tfpipe.sources.synthetic import make_image_folder
from tfpipe.training.report import FitReport

SIZES = {"small": 80, "large": 600}  # images per class (3 classes)
IMAGE_SIZE = (64, 64)
BATCH = 32


class BlogSequence(keras.utils.PyDataset):
    """The widely copied loader: full decode + resize + /255 per image, in Python."""

    def __init__(self, paths: list[Path], labels: np.ndarray, batch_size: int) -> None:
        super().__init__()  # workers=1, threads
        self.paths, self.labels, self.batch_size = paths, labels, batch_size

    def __len__(self) -> int:
        return math.ceil(len(self.paths) / self.batch_size)

    def __getitem__(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        rows = slice(index * self.batch_size, (index + 1) * self.batch_size)
        images = [
            np.asarray(Image.open(p).convert("RGB").resize(IMAGE_SIZE)) / 255.0
            for p in self.paths[rows]
        ]
        return np.stack(images).astype("float32"), self.labels[rows]


def build_model() -> keras.Model:
    """A deliberately light model: its steps are short, so the input shows."""
    model = keras.Sequential(
        [
            keras.Input((*IMAGE_SIZE, 3)),
            keras.layers.Conv2D(8, 3, strides=4, activation="relu"),
            keras.layers.GlobalAveragePooling2D(),
            keras.layers.Dense(3),
        ]
    )
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def what_is_left(after: FitReport) -> str:
    """The second run's verdict in words: fixed, or what its own report says is left."""
    if after.verdict != "input-bound":
        return f"now {after.verdict}: the input keeps up with the model"
    return (
        f"still input-bound: this tiny model takes {after.model_examples_per_s or 0:,.0f} "
        f"examples/s alone, more than even raw pixels read by tf.data give on this machine "
        f"({after.input_examples_per_s:,.0f}/s); left to try, from its report: "
        + "; ".join(after.advice[1:] or after.advice)
    )


def main(argv: list[str] | None = None) -> dict[str, FitReport]:
    """Trains from the slow loader, then from TFRecords at training size; returns both reports."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=SIZES, default="small", help="data size (small)")
    parser.add_argument("--workdir", type=Path, default=Path("example-data/diagnose"))
    parser.add_argument(
        "--plot", action="store_true", help='draw both reports (pip install "tfpipe[plot]")'
    )
    args = parser.parse_args(argv)

    root = make_image_folder(
        args.workdir / "images", num_classes=3, per_class=SIZES[args.size], size=(256, 256)
    )
    source = tfpipe.from_directory(root, image_shape=(*IMAGE_SIZE, 3))
    paths = [Path(source.origin(i)) for i in range(len(source))]
    order = np.random.default_rng(0).permutation(len(paths))  # a shuffled file list
    blog = BlogSequence([paths[i] for i in order], source.labels()[order], BATCH)

    print("1. the blog-style Sequence:")
    before = tfpipe.fit(build_model(), blog, epochs=1, verbose=0).report

    print("\n2. the fix the report suggests: raw pixels at training size, read by tf.data")
    raw = tfpipe.Schema({**source.schema, "image": tfpipe.Image((*IMAGE_SIZE, 3), "raw")})
    tfpipe.write_tfrecords(source, args.workdir / "records" / "train", raw, progress=False)
    after = tfpipe.fit(
        build_model(), args.workdir / "records" / "train", batch_size=BATCH, verbose=0
    ).report

    print(
        f"\ninput wait {before.input_wait_fraction:.0%} -> {after.input_wait_fraction:.0%}; "
        f"input alone {before.input_examples_per_s:,.0f} -> "
        f"{after.input_examples_per_s:,.0f} examples/s"
    )
    print(what_is_left(after))
    if args.plot:
        for name, report in (("before", before), ("after", after)):
            print("picture:", report.plot(args.workdir / f"report-{name}.png"))
    return {"before": before, "after": after}


if __name__ == "__main__":
    main()
