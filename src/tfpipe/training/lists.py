"""Variable-length features (`tf.RaggedTensor`s in each batch) against what the model takes.

Keras passes a RaggedTensor to a model input declared dense, where the first layer that needs
a fixed shape fails with an error about its own weights, and a ragged target reaches the loss,
which gives NaN (a list with no value) or fails converting it. `tfpipe.fit` checks one batch
before training and names the feature and the fix instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import keras
import tensorflow as tf

from tfpipe.errors import SchemaError
from tfpipe.loaders.supervised import Names


def check_lists(model: keras.Model, batch: Any, x: Names | None, y: Names | None) -> None:
    """Raises a SchemaError naming the feature when a batch `(x, y, ...)` holds a RaggedTensor
    in `y`, or in `x` where the model's input is not declared `keras.Input(..., ragged=True)`.

    Examples:
        >>> model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
        >>> batch = (tf.ones((2, 3)), tf.ragged.constant([[1.0], []]))
        >>> check_lists(model, batch, x="features", y="boxes")
        Traceback (most recent call last):
        ...
        tfpipe.errors.SchemaError: fit: feature 'boxes' is a list of variable length: ...

    Args:
        model: the Keras model.
        batch: a batch as Keras takes it, `(x, y)` or `(x, y, sample_weight)`.
        x: the feature name(s) of `x`, to name them. Defaults to "x" and its positions.
        y: the feature name(s) of `y`, as `x`.
    """
    if not isinstance(batch, tuple) or len(batch) < 2:
        return
    inputs = _model_inputs(model)
    for name, value, key in _components(batch[0], x, "x"):
        if isinstance(value, tf.RaggedTensor) and not getattr(inputs.get(key), "ragged", False):
            raise SchemaError(
                f"fit: feature {name!r} is a list of variable length and the model's input "
                "takes a dense tensor. Read it padded to a fixed length: Pipeline(..., "
                f"pad={{{name!r}: length}}), or declare the input keras.Input(..., ragged=True) "
                f"for a model that takes lists. Received: x={name!r}, a tf.RaggedTensor of "
                f"shape {value.shape}"
            )
    for name, value, _ in _components(batch[1], y, "y"):
        if isinstance(value, tf.RaggedTensor):
            raise SchemaError(
                f"fit: feature {name!r} is a list of variable length: Keras losses take dense "
                "targets (a ragged one gives NaN or fails). Read it padded to a fixed length: "
                f"Pipeline(..., pad={{{name!r}: length}}), or predict another feature. "
                f"Received: y={name!r}, a tf.RaggedTensor of shape {value.shape}"
            )


def _model_inputs(model: keras.Model) -> dict[Any, Any]:
    """The model's declared inputs by the key `_components` gives them: position and name."""
    declared = list(getattr(model, "inputs", None) or [])
    by_key: dict[Any, Any] = dict(enumerate(declared))
    by_key.update({getattr(i, "name", None): i for i in declared})
    return by_key


def _components(value: Any, names: Names | None, side: str) -> list[tuple[str, Any, Any]]:
    """(feature name, tensor, key of the model's input) of each part of `x` or `y`: one
    tensor, a tuple (in the order of `names`) or a dict (of model name -> feature name)."""
    if isinstance(value, Mapping):
        chosen = names if isinstance(names, Mapping) else {}
        return [(chosen.get(key, key), part, key) for key, part in value.items()]
    if isinstance(value, tuple | list):
        listed = list(names) if isinstance(names, tuple | list) else []
        return [
            (listed[i] if i < len(listed) else f"{side}[{i}]", part, i)
            for i, part in enumerate(value)
        ]
    return [(names if isinstance(names, str) else side, value, 0)]
