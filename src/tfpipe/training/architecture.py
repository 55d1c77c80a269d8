"""A model's architecture as a backup records it, and how two of them differ.

Keras loads saved weights by structure: the i-th layer with weights takes the i-th saved
layer's, whatever the layers are named (names like `dense_3` change with the order models are
built in). So two architectures are compared layer by layer in that order, and a difference
names the layers (both names when they differ), the weights and their shapes.
"""

from __future__ import annotations

from typing import Any

import keras

Weights = list[list[Any]]
"""`[layer, weight, shape]` of each weight of a model, in order, as JSON keeps it."""
_SHOWN = 3  # the most differences an error lists


def describe_model(model: keras.Model) -> Weights:
    """`[layer, weight, shape]` of each of the model's weights, in the order Keras saves
    them; the layer's path within the model ("dense_1", "block/conv").

    Examples:
        >>> from tfpipe.training.architecture import describe_model
        >>> model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2, name="head")])
        >>> describe_model(model)
        [['head', 'kernel', [4, 2]], ['head', 'bias', [2]]]
    """
    described = []
    for weight in model.weights:
        layer = weight.path.rsplit("/", 1)[0].removeprefix(f"{model.name}/")
        described.append([layer, weight.name, [int(d) for d in weight.shape]])
    return described


def _layers(weights: Weights) -> list[tuple[str, list[tuple[str, tuple[int, ...]]]]]:
    """The weights grouped by layer, in order: (layer, [(weight, shape), ...])."""
    layers: list[tuple[str, list[tuple[str, tuple[int, ...]]]]] = []
    for layer, name, shape in weights:
        if not layers or layers[-1][0] != layer:
            layers.append((layer, []))
        layers[-1][1].append((name, tuple(shape)))
    return layers


def _listed(weights: list[tuple[str, tuple[int, ...]]]) -> str:
    return ", ".join(f"{name} {shape}" for name, shape in weights)


def _layer_difference(
    number: int,
    saved: tuple[str, list[tuple[str, tuple[int, ...]]]],
    now: tuple[str, list[tuple[str, tuple[int, ...]]]],
) -> str:
    (saved_name, saved_weights), (name, weights) = saved, now
    if saved_name == name and [w for w, _ in saved_weights] == [w for w, _ in weights]:
        pairs = zip(saved_weights, weights, strict=True)  # the same weights, by name
        changed = [k for k, (old, new) in enumerate(pairs) if old != new]
        return (
            f"the backup's model has layer {name!r} with "
            f"{_listed([saved_weights[k] for k in changed])}; this model has "
            f"{_listed([weights[k] for k in changed])}"
        )
    return (
        f"layer {number} (counting layers with weights): the backup's model has "
        f"{saved_name!r} ({_listed(saved_weights)}); this model has {name!r} ({_listed(weights)})"
    )


def model_differences(saved: Weights, model: keras.Model) -> list[str]:
    """How `model`'s layers and weights differ from the `saved` description (of
    `describe_model`), layer by layer as Keras loads weights; empty when they match.

    Examples:
        >>> from tfpipe.training.architecture import describe_model, model_differences
        >>> def head(units):
        ...     layer = keras.layers.Dense(units, use_bias=False, name="head")
        ...     return keras.Sequential([keras.Input((4,)), layer])
        >>> model_differences(describe_model(head(5)), head(2))
        ["the backup's model has layer 'head' with kernel (4, 5); this model has kernel (4, 2)"]
    """
    before, after = _layers(saved), _layers(describe_model(model))
    differences = [
        _layer_difference(k + 1, old, new)
        for k, (old, new) in enumerate(zip(before, after, strict=False))
        if old[1] != new[1]
    ]
    for layer, weights in before[len(after) :]:
        differences.append(
            f"the backup's model has layer {layer!r} ({_listed(weights)}), this model has none "
            f"in its place (it has {len(after)} layers with weights, the backup's {len(before)})"
        )
    for layer, weights in after[len(before) :]:
        differences.append(
            f"this model has layer {layer!r} ({_listed(weights)}), the backup's model has none "
            f"in its place (it has {len(before)} layers with weights, this one {len(after)})"
        )
    if len(differences) > _SHOWN:
        differences[_SHOWN:] = [f"and {len(differences) - _SHOWN} more"]
    return differences
