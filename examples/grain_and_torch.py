"""The same records through Grain and a PyTorch DataLoader, with the Pipeline's pixels.

A folder of class folders is written as TFRecords; `tfpipe.DecodedExamples` is the view of its
decoded examples by index. Grain shuffles and batches it and Keras trains on the Grain dataset
(on whichever backend `KERAS_BACKEND` names); a PyTorch `DataLoader` reads one epoch of it
through 2 worker processes, every example once. Grain and PyTorch are optional: a missing one
is skipped with the command that installs it.

Run:
    python examples/grain_and_torch.py                # small: about 20 s on 2 CPU cores
    KERAS_BACKEND=jax python examples/grain_and_torch.py --size large
"""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

import keras

import tfpipe
from tfpipe.sources.synthetic import make_image_folder

SIZES = {"small": (40, 3), "large": (400, 5)}  # images per class, epochs
IMAGE_SIZE = (64, 64)


def train_on_grain(examples: tfpipe.DecodedExamples, epochs: int) -> list[float]:
    """Trains a small model on a shuffled Grain dataset of `examples`; the loss per epoch."""
    import grain

    dataset = grain.MapDataset.source(examples).shuffle(seed=0).batch(32)
    model = keras.Sequential(
        [
            keras.Input((*IMAGE_SIZE, 3)),
            keras.layers.Conv2D(8, 3, strides=2, activation="relu"),
            keras.layers.GlobalAveragePooling2D(),
            keras.layers.Dense(3, activation="softmax"),
        ]
    )
    model.compile(keras.optimizers.Adam(0.01), "sparse_categorical_crossentropy")
    history = model.fit(dataset, epochs=epochs, verbose=2)
    return [float(loss) for loss in history.history["loss"]]


def count_with_torch(examples: tfpipe.DecodedExamples) -> int:
    """The examples of one shuffled epoch of a DataLoader with 2 worker processes."""
    from torch.utils.data import DataLoader

    loader = DataLoader(examples, batch_size=32, shuffle=True, num_workers=2)
    return sum(len(labels) for _, labels in loader)


def main(argv: list[str] | None = None) -> dict[str, object]:
    """Writes the records, trains on Grain, reads an epoch with torch; what each gave."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=SIZES, default="small", help="data size (small)")
    parser.add_argument("--workdir", type=Path, default=Path("example-data/grain-and-torch"))
    args = parser.parse_args(argv)
    per_class, epochs = SIZES[args.size]
    root = make_image_folder(args.workdir / "images", per_class=per_class, size=(96, 96))
    tfpipe.write_tfrecords(tfpipe.from_directory(root), args.workdir / "train", progress=False)
    examples = tfpipe.DecodedExamples(
        args.workdir / "train", image_size=IMAGE_SIZE, rescale=1 / 255, x="image", y="label"
    )
    results: dict[str, object] = {"examples": len(examples)}
    if importlib.util.find_spec("grain") is None:
        print("Grain is not installed (pip install 'tfpipe[grain]'): skipped")
    else:
        results["grain_losses"] = train_on_grain(examples, epochs)
        print(f"Grain on {keras.backend.backend()}: loss per epoch {results['grain_losses']}")
    if importlib.util.find_spec("torch") is None:
        print("PyTorch is not installed (pip install torch): skipped")
    else:
        results["torch_examples"] = count_with_torch(examples)
        print(f"DataLoader: {results['torch_examples']} of {len(examples)} examples in an epoch")
    return results


if __name__ == "__main__":
    main()
