"""Image and mask folders -> TFRecords -> Pipeline with a joint flip and crop -> a small U-Net.

A segmentation dataset is often two folders, `images/00001.jpg` and `masks/00001.png`, paired
by file name. The pairs become a DataFrame of two path columns; `from_dataframe(image_cols=
["image", "mask"], schema=...)` reads the image as an `Image` and the mask as a `tfpipe.Mask`
(stored as a lossless PNG, resized with nearest neighbour, never rescaled, integer values).
The records are written once per split; `Pipeline(image_size=...)` resizes image and mask
together, `tfpipe.augment.Joint` crops and flips both alike, and `tfpipe.fit(x="image",
y="mask")` trains a small encoder-decoder with a per-pixel softmax. The mean IoU on the
validation set is compared with predicting background everywhere.

Run:
    python examples/segmentation.py                # small: about 30 s on 2 CPU cores
    python examples/segmentation.py --size large   # more images, more epochs
    python examples/segmentation.py --epochs 2     # a shorter run (the tests use it)
"""

from __future__ import annotations

import argparse
from pathlib import Path

import keras
import numpy as np
import pandas as pd

import tfpipe
from tfpipe.errors import SourceError
from tfpipe.sources.synthetic import make_segmentation_folder

SIZES = {"small": (160, 8), "large": (1500, 10)}  # images, epochs
NUM_SHAPES = 3  # circle, square, triangle: mask values 1, 2, 3; 0 is the background
NUM_CLASSES = NUM_SHAPES + 1
STORED = (96, 96)  # size of the files and the records
IMAGE_SIZE = (64, 64)  # size the Pipeline resizes image and mask to
CROP = (48, 48)  # training crop; the model is fully convolutional, validation sees 64x64


def pair_by_stem(images: Path, masks: Path) -> pd.DataFrame:
    """A DataFrame of `image` and `mask` paths (relative to their common parent), one row per
    file name stem found in both folders, sorted by stem.

    Raises:
        SourceError: a file without its partner in the other folder, or two files of one
            stem in a folder, naming the file(s).
    """
    files = {folder: _by_stem(folder) for folder in (images, masks)}
    for folder, other in ((images, masks), (masks, images)):
        unpaired = sorted(set(files[folder]) - set(files[other]))
        if unpaired:
            path = files[folder][unpaired[0]]
            raise SourceError(
                f"{path} has no partner named {path.stem}.* in {other} ({len(unpaired)} "
                f"unpaired file(s) in {folder}); add the missing file or remove this one"
            )
    stems = sorted(files[images])
    return pd.DataFrame(
        {
            "image": [str(files[images][s].relative_to(images.parent)) for s in stems],
            "mask": [str(files[masks][s].relative_to(masks.parent)) for s in stems],
        }
    )


def _by_stem(folder: Path) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in sorted(p for p in folder.iterdir() if p.is_file()):
        if path.stem in found:
            raise SourceError(
                f"{found[path.stem]} and {path} have the same name stem, so a partner in the "
                "other folder would be ambiguous; keep one of them"
            )
        found[path.stem] = path
    return found


def build_model() -> keras.Model:
    """A small U-Net: two downsampling stages, two upsampling stages with skip connections,
    and one softmax over the classes per pixel. Any height and width divisible by 4."""

    def conv(x: keras.KerasTensor, filters: int) -> keras.KerasTensor:
        return keras.layers.Conv2D(filters, 3, padding="same", activation="relu")(x)

    image = keras.Input((None, None, 3), name="image")
    down1 = conv(image, 16)  # full size
    down2 = conv(keras.layers.MaxPooling2D()(down1), 32)  # 1/2
    bottom = conv(conv(keras.layers.MaxPooling2D()(down2), 48), 48)  # 1/4
    up2 = conv(keras.layers.Concatenate()([keras.layers.UpSampling2D()(bottom), down2]), 32)
    up1 = conv(keras.layers.Concatenate()([keras.layers.UpSampling2D()(up2), down1]), 16)
    probabilities = keras.layers.Conv2D(NUM_CLASSES, 1, activation="softmax", name="mask")(up1)
    model = keras.Model(image, probabilities)
    model.compile(
        keras.optimizers.Adam(5e-3),
        keras.losses.SparseCategoricalCrossentropy(),  # integer masks, one softmax per pixel
        metrics=["accuracy"],
    )
    return model


def mean_iou(model: keras.Model, data: tfpipe.Pipeline) -> tuple[float, float]:
    """Mean IoU over the classes of `data`'s masks: of `model`'s argmax, and of predicting
    background (0) everywhere, the trivial baseline."""
    predicted = keras.metrics.MeanIoU(NUM_CLASSES, sparse_y_pred=False)
    background = keras.metrics.MeanIoU(NUM_CLASSES)
    for images, masks in data.build():
        predicted.update_state(masks, model(images, training=False))
        background.update_state(masks, np.zeros(masks.shape, np.int64))
    return float(predicted.result()), float(background.result())


def main(argv: list[str] | None = None) -> dict[str, float]:
    """Generates the folders, writes records, trains, returns the last epoch's metrics with
    the validation mean IoU (`val_mean_iou`) and its all-background baseline."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=SIZES, default="small", help="data size (small)")
    parser.add_argument("--workdir", type=Path, default=Path("example-data/segmentation"))
    parser.add_argument("--epochs", type=int, help="training epochs (8 small, 10 large)")
    args = parser.parse_args(argv)
    count, epochs = SIZES[args.size]
    epochs = args.epochs or epochs

    root = make_segmentation_folder(
        args.workdir / "data", count=count, num_classes=NUM_SHAPES, size=STORED
    )
    df = pair_by_stem(root / "images", root / "masks")
    print(df.head(3).to_string(index=False))
    schema = tfpipe.Schema(
        {
            "image": tfpipe.Image(shape=(*STORED, 3)),  # JPEG
            "mask": tfpipe.Mask(shape=(*STORED, 1), num_classes=NUM_CLASSES),  # PNG, exact
        }
    )
    source = tfpipe.from_dataframe(df, image_cols=["image", "mask"], schema=schema, base_dir=root)
    records = args.workdir / "records"
    parts = source.split({"train": 0.8, "validation": 0.2}, seed=0, stratify=False)
    for name, part in parts.items():
        info = tfpipe.write_tfrecords(part, records / name, progress=False)
        print(f"{name}: {info.num_examples} image/mask pairs in {len(info.files)} shards")

    # image_size resizes images bilinearly and masks with nearest neighbour; rescale applies
    # to images only. The joint crop and flip move each image and its mask together.
    joint = tfpipe.augment.Joint(images="image", masks="mask", flip="horizontal", crop=CROP, seed=0)
    train = (
        tfpipe.Pipeline(records / "train", image_size=IMAGE_SIZE, rescale=1 / 255)
        .shuffle(seed=0)
        .map(joint)
        .batch(8)
    )
    val = tfpipe.Pipeline(records / "validation", image_size=IMAGE_SIZE, rescale=1 / 255).batch(32)
    print("training pipeline:", train.explain(), sep="\n")

    keras.utils.set_random_seed(0)
    model = build_model()
    history = tfpipe.fit(
        model, train, x="image", y="mask", validation=val, epochs=epochs, report=False, verbose=2
    )
    metrics = {name: values[-1] for name, values in history.history.items()}
    metrics["val_mean_iou"], metrics["background_mean_iou"] = mean_iou(
        model, val.as_supervised("image", "mask")
    )
    print(
        f"validation mean IoU {metrics['val_mean_iou']:.2f} "
        f"(all background: {metrics['background_mean_iou']:.2f})"
    )
    return metrics


if __name__ == "__main__":
    main()
