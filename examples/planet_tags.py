"""Kaggle Planet's own CSV format: tag strings, names without an extension -> a sigmoid model.

Planet's `train_classes.csv` has two columns: `image_name` (`train_0`, no extension; the file
is `train-jpg/train_0.jpg`) and `tags`, one string of space-separated tags
(`"haze primary water"`). `from_dataframe(label_sep=" ", image_suffix=".jpg")` turns the tags
into a multi-hot label over the sorted tag vocabulary; the records are written once and read
back by a `Pipeline`, and `tfpipe.fit` trains one sigmoid output per tag.

Run:
    python examples/planet_tags.py                # small: about 10 s on 2 CPU cores
    python examples/planet_tags.py --size large   # more images, more epochs
"""

from __future__ import annotations

import argparse
from pathlib import Path

import keras
import numpy as np
import pandas as pd
from PIL import Image, ImageDraw

import tfpipe

SIZES = {"small": (160, 10), "large": (2000, 10)}  # images, epochs
WEATHER = {"clear": 200, "haze": 150, "cloudy": 100}  # tile brightness
GROUND = {  # tag -> (box, colour) drawn on the tile
    "agriculture": ((2, 2, 14, 14), (220, 200, 40)),
    "water": ((18, 18, 30, 30), (20, 40, 170)),
    "road": ((0, 14, 31, 17), (60, 60, 60)),
}
SIZE = 32


def make_planet_csv(workdir: Path, count: int, seed: int = 0) -> Path:
    """Writes `count` tiles to `workdir/train-jpg/train_<i>.jpg` and `train_classes.csv`."""
    rng = np.random.default_rng(seed)
    (workdir / "train-jpg").mkdir(parents=True, exist_ok=True)
    rows = []
    for i in range(count):
        weather = str(rng.choice(list(WEATHER)))
        ground = [tag for tag in GROUND if rng.random() < 0.4]
        tile = Image.new("RGB", (SIZE, SIZE), (WEATHER[weather],) * 3)
        draw = ImageDraw.Draw(tile)
        for tag in ground:
            box, colour = GROUND[tag]
            draw.rectangle(box, fill=colour)
        tile.save(workdir / "train-jpg" / f"train_{i}.jpg", quality=90)
        rows.append({"image_name": f"train_{i}", "tags": " ".join([weather, *ground])})
    csv = workdir / "train_classes.csv"
    pd.DataFrame(rows).to_csv(csv, index=False)
    return csv


def build_model(num_tags: int) -> keras.Model:
    """A small model with one sigmoid output per tag (tags are not exclusive)."""
    model = keras.Sequential(
        [
            keras.Input((SIZE, SIZE, 3), name="image"),
            keras.layers.AveragePooling2D(4),
            keras.layers.Flatten(),  # tags are drawn at fixed places: keep where things are
            keras.layers.Dense(32, activation="relu"),
            keras.layers.Dense(num_tags, activation="sigmoid"),
        ]
    )
    model.compile(
        keras.optimizers.Adam(1e-2), loss="binary_crossentropy", metrics=["binary_accuracy"]
    )
    return model


def main(argv: list[str] | None = None) -> dict[str, float]:
    """Generates the CSV and tiles, writes records, trains, returns the final metrics."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=SIZES, default="small", help="data size (small)")
    parser.add_argument("--workdir", type=Path, default=Path("example-data/planet-tags"))
    args = parser.parse_args(argv)
    count, epochs = SIZES[args.size]

    csv = make_planet_csv(args.workdir, count)
    df = pd.read_csv(csv)  # an image with only a weather tag has a one-word cell
    print(df.head(3).to_string(index=False))
    source = tfpipe.from_dataframe(
        df,
        path_col="image_name",
        label_cols="tags",
        label_sep=" ",  # "haze road water" -> three tags
        image_suffix=".jpg",  # train_0 -> train_0.jpg
        base_dir=csv.parent / "train-jpg",
        image_shape=(SIZE, SIZE, 3),
    )
    tags = list(source.schema["tags"].names)
    print(f"{len(source)} images, tags {tags}")
    print(f"first row {df['tags'][0]!r} -> {source.schema.load(source[0])['tags']}")

    records = args.workdir / "records"
    for name, part in source.split({"train": 0.8, "val": 0.2}, seed=0).items():
        tfpipe.write_tfrecords(part, records / name, progress=False)
    train = tfpipe.Pipeline(records / "train", rescale=1 / 255).shuffle(seed=0).batch(8)
    val = tfpipe.Pipeline(records / "val", rescale=1 / 255).batch(64)
    train, val = (p.as_supervised("image", "tags") for p in (train, val))  # multi-hot targets
    keras.utils.set_random_seed(0)  # the same initial weights in every run
    model = build_model(len(tags))
    history = tfpipe.fit(model, train, validation=val, epochs=epochs, report=False, verbose=2)

    images, hot = next(iter(val.build()))
    predicted = model.predict(images, verbose=0)[0] > 0.5
    labelled = [tag for tag, h in zip(tags, hot[0], strict=True) if h]
    guessed = [tag for tag, p in zip(tags, predicted, strict=True) if p]
    print(f"first validation tile: tags {labelled} labelled, {guessed} predicted")
    return {name: values[-1] for name, values in history.history.items()}


if __name__ == "__main__":
    main()
