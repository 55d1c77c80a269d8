"""numpy arrays (MNIST-shaped) -> TFRecords -> a functional Keras model fed by tfpipe.Pipeline.

`from_arrays` turns `(N, 28, 28)` uint8 arrays into a raw `Image` feature and integer labels
into a `ClassLabel`. The training and validation sets are written as two TFRecord datasets; the
model's `keras.Input` is named after the image feature, and the Pipeline yields `(image,
label)` pairs for it. The digits are drawn on the spot (a bar per stroke), nothing is
downloaded.

Run:
    python examples/mnist_arrays.py                # small: about 10 s on 2 CPU cores
    python examples/mnist_arrays.py --size large   # 20,000 training images
"""

from __future__ import annotations

import argparse
from pathlib import Path

import keras
import numpy as np

import tfpipe

SIZES = {"small": (1000, 5), "large": (20000, 5)}  # training images, epochs
# Which of seven strokes (a seven-segment display) each digit lights up.
SEGMENTS = ("1110111", "0010010", "1011101", "1011011", "0111010",
            "1101011", "1101111", "1010010", "1111111", "1111011")  # fmt: skip
STROKES = (  # (row0, row1, col0, col1) of each stroke in a 28x28 image
    (4, 6, 8, 20), (4, 14, 8, 10), (4, 14, 18, 20), (13, 15, 8, 20),
    (13, 24, 8, 10), (13, 24, 18, 20), (22, 24, 8, 20),
)  # fmt: skip


def make_digits(count: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """`count` noisy, shifted seven-segment digits: uint8 `(count, 28, 28)` and int64 labels."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 10, count)
    images = rng.integers(0, 60, (count, 28, 28)).astype(np.uint8)
    for image, label in zip(images, labels, strict=True):
        dy, dx = rng.integers(-3, 4, 2)
        for lit, (r0, r1, c0, c1) in zip(SEGMENTS[label], STROKES, strict=True):
            if lit == "1":
                image[r0 + dy : r1 + dy, c0 + dx : c1 + dx] = rng.integers(180, 256)
    return images, labels


def build_model() -> keras.Model:
    """A functional model whose input is named after the `image` feature."""
    image = keras.Input((28, 28, 1), name="image")
    h = keras.layers.Rescaling(1 / 255)(image)
    h = keras.layers.Conv2D(16, 3, activation="relu")(h)
    h = keras.layers.MaxPooling2D()(h)
    h = keras.layers.Flatten()(h)
    logits = keras.layers.Dense(10, name="digit")(h)
    model = keras.Model(image, logits)
    model.compile(
        "adam",
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    return model


def main(argv: list[str] | None = None) -> dict[str, float]:
    """Writes the train/validation records, trains, and returns the last epoch's metrics."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=SIZES, default="small", help="data size (small)")
    parser.add_argument("--workdir", type=Path, default=Path("example-data/mnist"))
    args = parser.parse_args(argv)
    count, epochs = SIZES[args.size]

    pipelines = {}
    for name, n, seed in (("train", count, 0), ("validation", count // 5, 1)):
        x, y = make_digits(n, seed)
        source = tfpipe.from_arrays({"image": x, "label": y})  # (N, 28, 28) uint8 -> raw Image
        info = tfpipe.write_tfrecords(source, args.workdir / name, progress=False)
        print(f"{name}: {info.num_examples} examples, schema {info.schema}")
        pipeline = tfpipe.Pipeline(args.workdir / name)
        if name == "train":
            pipeline = pipeline.shuffle(seed=0)
        pipelines[name] = pipeline.batch(64).as_supervised("image", "label")

    model = build_model()
    history = tfpipe.fit(
        model,
        pipelines["train"],
        validation=pipelines["validation"],
        epochs=epochs,
        report=False,
        verbose=2,
    )
    metrics = {name: values[-1] for name, values in history.history.items()}
    print(f"validation accuracy {metrics['val_accuracy']:.2f} (chance 0.10)")
    return metrics


if __name__ == "__main__":
    main()
