"""One folder per class (like UC Merced land use) -> 70/30 split -> TFRecords -> Pipeline -> fit.

`from_directory` reads the class names from the sub-folders; `split` keeps each class's share
in both parts; `write_tfrecords` stores each part as shuffled shards at training size, so
training decodes small JPEGs; `tfpipe.Pipeline` builds the tf.data graph (file and record
shuffle, batch, vectorised parse, parallel decode, prefetch) for training and evaluation.

Run:
    python examples/land_use_folder.py                # small: about 10 s on 2 CPU cores
    python examples/land_use_folder.py --size large   # 6 classes x 300 images, 6 epochs
    python examples/land_use_folder.py --epochs 2     # a shorter run (the tests use it)
"""

from __future__ import annotations

import argparse
from pathlib import Path

import keras

import tfpipe
from tfpipe.sources.synthetic import make_image_folder

SIZES = {"small": (3, 60, 5), "large": (6, 300, 6)}  # classes, images per class, epochs
IMAGE_SIZE = (64, 64)


def build_model(num_classes: int) -> keras.Model:
    """A small CNN for 64x64 RGB images in [0, 1]."""
    model = keras.Sequential(
        [
            keras.Input((*IMAGE_SIZE, 3)),
            keras.layers.Conv2D(16, 3, activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Conv2D(32, 3, activation="relu"),
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


def main(argv: list[str] | None = None) -> dict[str, float]:
    """Generates the folder, writes the splits, trains and returns the last epoch's metrics."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=SIZES, default="small", help="data size (small)")
    parser.add_argument("--workdir", type=Path, default=Path("example-data/land_use"))
    parser.add_argument("--epochs", type=int, help="training epochs (5 small, 6 large)")
    args = parser.parse_args(argv)
    num_classes, per_class, epochs = SIZES[args.size]
    epochs = args.epochs or epochs

    root = make_image_folder(
        args.workdir / "images", num_classes=num_classes, per_class=per_class, size=(96, 96)
    )
    source = tfpipe.from_directory(root, image_shape=(*IMAGE_SIZE, 3))  # stored at 64x64
    print(f"{len(source)} images of classes {source.class_names}")
    for name, part in source.split({"train": 0.7, "test": 0.3}, seed=0).items():
        info = tfpipe.write_tfrecords(part, args.workdir / "records" / name, progress=False)
        print(f"{name}: {info.num_examples} examples in {len(info.files)} shards")

    records = args.workdir / "records"
    train = (
        tfpipe.Pipeline(records / "train", rescale=1 / 255)
        .shuffle(seed=0)
        .batch(16)
        .as_supervised("image", "label")
    )
    test = tfpipe.Pipeline(records / "test", rescale=1 / 255).batch(64)
    test = test.as_supervised("image", "label")
    print("training pipeline:", train.explain(), sep="\n")

    keras.utils.set_random_seed(0)  # the same initial weights in every run
    model = build_model(len(source.class_names))
    # tfpipe.fit tells Keras the epoch length from the metadata (no "input ran out of data"),
    # keeps the shuffle in the pipeline and, with report=True, times input and model apart.
    history = tfpipe.fit(model, train, validation=test, epochs=epochs, report=False, verbose=2)
    metrics = {name: values[-1] for name, values in history.history.items()}
    print(f"test accuracy {metrics['val_accuracy']:.2f} (chance {1 / num_classes:.2f})")
    return metrics


if __name__ == "__main__":
    main()
