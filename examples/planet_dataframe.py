"""Kaggle-Planet-style labels in a DataFrame -> tfpipe.SequenceLoader -> a two-output model.

The CSV has one row per image: its file name, a `weather` column holding one weather tag and a
`ground` column holding several ground tags, both as lists written into strings
(`"['haze']"`, `"['road', 'water']"`), the way such CSVs usually arrive. `from_dataframe`
parses the lists safely and turns each column into a multi-hot `ClassLabel`; the loader gives
the model one image input and two targets.

Run:
    python examples/planet_dataframe.py                # small: about 10 s on 2 CPU cores
    python examples/planet_dataframe.py --size large   # more images, more epochs
"""

from __future__ import annotations

import argparse
from pathlib import Path

import keras
import numpy as np
import pandas as pd
from PIL import Image, ImageDraw

import tfpipe

SIZES = {"small": (120, 2), "large": (2000, 8)}  # images, epochs
WEATHER = {"clear": (60, 110), "haze": (140, 170), "cloudy": (200, 235)}  # background range
GROUND = ("field", "road", "water")
IMAGE_SIZE = (64, 64)


def draw_tile(weather: str, ground: list[str], rng: np.random.Generator) -> Image.Image:
    """A 64x64 "satellite tile": the background brightness says the weather, shapes the ground."""
    low, high = WEATHER[weather]
    tile = Image.fromarray(rng.integers(low, high, (*IMAGE_SIZE, 3), dtype=np.uint8))
    draw = ImageDraw.Draw(tile)
    x, y = (int(v) for v in rng.integers(8, 40, 2))
    if "water" in ground:
        draw.ellipse((x, y, x + 22, y + 16), fill=(20, 40, 160))
    if "road" in ground:
        draw.line((0, y, 63, 63 - y), fill=(90, 90, 90), width=5)
    if "field" in ground:
        draw.rectangle((63 - x, 63 - y, 63 - x + 14, 63 - y + 14), fill=(200, 180, 40))
    return tile


def make_planet_csv(folder: Path, count: int, seed: int = 0) -> Path:
    """Writes `count` JPEG tiles and `labels.csv` (image_name, weather, ground) into `folder`."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    for i in range(count):
        weather = str(rng.choice(list(WEATHER)))
        ground = [g for g in GROUND if rng.random() < 0.5] or [str(rng.choice(GROUND))]
        name = f"train_{i}.jpg"
        draw_tile(weather, ground, rng).save(folder / name, quality=90)
        rows.append({"image_name": name, "weather": str([weather]), "ground": str(ground)})
    csv = folder / "labels.csv"
    pd.DataFrame(rows).to_csv(csv, index=False)
    return csv


def build_model(num_weather: int, num_ground: int) -> keras.Model:
    """One image input, two heads: weather (exactly one tag, softmax), ground (sigmoid each)."""
    image = keras.Input((*IMAGE_SIZE, 3), name="image")
    h = keras.layers.Conv2D(16, 3, strides=2, activation="relu")(image)
    h = keras.layers.Conv2D(32, 3, strides=2, activation="relu")(h)
    h = keras.layers.GlobalAveragePooling2D()(h)
    weather = keras.layers.Dense(num_weather, activation="softmax", name="weather")(h)
    ground = keras.layers.Dense(num_ground, activation="sigmoid", name="ground")(h)
    model = keras.Model(image, [weather, ground])
    model.compile(
        "adam",
        loss=["categorical_crossentropy", "binary_crossentropy"],
        metrics=[["categorical_accuracy"], ["binary_accuracy"]],
    )
    return model


def main(argv: list[str] | None = None) -> dict[str, float]:
    """Generates the CSV and images, trains, and returns the final validation metrics."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=SIZES, default="small", help="data size (small)")
    parser.add_argument("--workdir", type=Path, default=Path("example-data/planet"))
    args = parser.parse_args(argv)
    count, epochs = SIZES[args.size]

    csv = make_planet_csv(args.workdir / "train-jpg", count)
    df = pd.read_csv(csv)
    print(df.head(3).to_string(index=False))
    source = tfpipe.from_dataframe(
        df,
        path_col="image_name",
        label_cols=["weather", "ground"],
        base_dir=csv.parent,
        image_shape=(*IMAGE_SIZE, 3),
    )
    print("schema:", source.schema)
    parts = source.split({"train": 0.8, "val": 0.2}, seed=0)
    loaders = {
        name: tfpipe.SequenceLoader(
            part,
            batch_size=16,
            y=["weather", "ground"],  # two targets, in the order of the model's outputs
            shuffle=name == "train",
            seed=0,
            workers=2,  # threads; Pillow decodes with the GIL released
        )
        for name, part in parts.items()
    }
    images, (weather, ground) = loaders["train"][0]
    print(f"one batch: images {images.shape}, weather {weather.shape}, ground {ground.shape}")

    weather_names = source.schema["weather"].names
    model = build_model(len(weather_names), len(source.schema["ground"].names))
    history = model.fit(loaders["train"], validation_data=loaders["val"], epochs=epochs, verbose=2)

    predicted_weather, _ = model.predict(loaders["val"], verbose=0)  # rows in DataFrame order
    first = parts["val"][0]
    print(
        f"first validation image {parts['val'].origin(0)}: weather "
        f"{weather_names[int(np.argmax(predicted_weather[0]))]!r} predicted, "
        f"{weather_names[first['weather'][0]]!r} labelled"
    )
    return {name: values[-1] for name, values in history.history.items()}


if __name__ == "__main__":
    main()
