"""Trains a tiny Keras model on a Grain dataset of `tfpipe.DecodedExamples`
(tests/loaders/test_decoded.py), under the backend `KERAS_BACKEND` names.

Prints the backend and the loss of each epoch as its last line.

    KERAS_BACKEND=jax python tests/loaders/grain_fit_run.py PREFIX
"""

from __future__ import annotations

import sys

import grain
import keras

import tfpipe


def main(prefix: str) -> None:
    examples = tfpipe.DecodedExamples(
        prefix, image_size=(16, 16), rescale=1 / 255, x="image", y="label"
    )
    dataset = grain.MapDataset.source(examples).shuffle(seed=0).batch(8)
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [keras.Input((16, 16, 3)), keras.layers.Flatten(), keras.layers.Dense(3, "softmax")]
    )
    model.compile(keras.optimizers.Adam(0.01), "sparse_categorical_crossentropy")
    history = model.fit(dataset, epochs=3, verbose=0)
    print(keras.backend.backend(), *history.history["loss"])


if __name__ == "__main__":
    main(sys.argv[1])
