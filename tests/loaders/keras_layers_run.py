"""Keras preprocessing layers in `Pipeline.map` under the Keras backend of this process
(tests/loaders/test_keras_layers.py): run in the test process for TensorFlow, and as

    KERAS_BACKEND=jax python tests/loaders/keras_layers_run.py

for JAX and PyTorch, printing `observe()`'s JSON object as its last line.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import keras
import numpy as np

import tfpipe

EXAMPLES = 16
BATCH = 8
SIZE = 16
CROP = 12


def _source() -> Any:
    """16 copies of one image (so outputs differ only by the draws), labelled 0..15."""
    image = np.random.default_rng(0).integers(0, 256, (SIZE, SIZE, 3), dtype=np.uint8)
    images = np.repeat(image[None], EXAMPLES, axis=0)
    return tfpipe.from_arrays({"image": images, "label": np.arange(EXAMPLES)})


def _augment() -> keras.Sequential:
    return keras.Sequential(
        [
            keras.layers.Rescaling(1 / 255),
            keras.layers.RandomFlip("horizontal"),
            keras.layers.RandomCrop(CROP, CROP),
            keras.layers.RandomRotation(0.2),
        ]
    )


def _epochs(dataset: Any, count: int) -> list[np.ndarray]:
    """The images of `count` passes over `dataset`, each as one array ordered by label."""
    passes = []
    for _ in range(count):
        batches = [(b["image"].numpy(), b["label"].numpy()) for b in dataset]
        images = np.concatenate([images for images, _ in batches])
        labels = np.concatenate([labels for _, labels in batches])
        passes.append(images[np.argsort(labels)])
    return passes


def _distinct(layer: keras.layers.Layer) -> int:
    """How many different images one random layer makes of the 16 copies in one pass."""
    dataset = tfpipe.Pipeline(_source()).shuffle(seed=0).map(layer).batch(BATCH).build()
    (images,) = _epochs(dataset, 1)
    return len({image.tobytes() for image in images})


def _fit_error() -> str:
    """What Keras says when given an unbuilt Pipeline."""
    model = keras.Sequential([keras.Input((SIZE, SIZE, 3)), keras.layers.Flatten()])
    model.add(keras.layers.Dense(1))
    model.compile("sgd", "mse")
    pipeline = tfpipe.Pipeline(_source()).batch(BATCH).as_supervised("image", "label")
    try:
        model.fit(pipeline, epochs=1, verbose=0)
    except ValueError as e:
        return str(e)
    return "no error"


def observe() -> dict[str, Any]:
    """What the checks of tests/loaders/test_keras_layers.py read, on this backend."""
    pipeline = tfpipe.Pipeline(_source()).shuffle(seed=0).map(_augment()).batch(BATCH)
    dataset = pipeline.build()
    first, second = _epochs(dataset, 2)
    (again,) = _epochs(pipeline.build(), 1)
    (other_seed,) = _epochs(pipeline.shuffle(seed=1).build(), 1)
    spec = dataset.element_spec["image"]
    plain = tfpipe.Pipeline(_source(), rescale=1 / 255).batch(BATCH).build()
    scaled = tfpipe.Pipeline(_source()).map(keras.layers.Rescaling(1 / 255)).batch(BATCH).build()
    uninterrupted = [b["image"].numpy() for b in pipeline.start_at(0).repeat(2).build()]
    resumed = [b["image"].numpy() for b in pipeline.start_at(epoch=1, batch=1).build()]
    return {
        "backend": keras.backend.backend(),
        "shape": list(spec.shape),
        "dtype": spec.dtype.name,
        "distinct": {
            "RandomFlip": _distinct(keras.layers.RandomFlip("horizontal")),
            "RandomCrop": _distinct(keras.layers.RandomCrop(CROP, CROP)),
            "RandomRotation": _distinct(keras.layers.RandomRotation(0.2)),
            "all four": len({image.tobytes() for image in first}),
        },
        "same_seed_same": bool(np.array_equal(first, again)),
        "epochs_differ": bool(not np.array_equal(first, second)),
        "other_seed_differs": bool(not np.array_equal(first, other_seed)),
        "rescaling_equal": bool(np.array_equal(*(_epochs(d, 1)[0] for d in (plain, scaled)))),
        # epochs of 2 batches: batch 1 of epoch 1 is the 4th
        "resumed_as_uninterrupted": len(resumed) == 1
        and bool(np.array_equal(resumed[0], uninterrupted[3])),
        "digest": hashlib.sha256(first.tobytes()).hexdigest(),
        "fit_error": _fit_error(),
    }


if __name__ == "__main__":
    print(json.dumps(observe()))
