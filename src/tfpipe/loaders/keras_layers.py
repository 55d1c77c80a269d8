"""Keras preprocessing and augmentation layers in a `Pipeline`, on every Keras backend, their
random draws seeded by the Pipeline.

    Pipeline.map(layer) ──layer_map──▶ LayerMap: the layer's steps, the keys they transform
        ──build: map_dataset──▶ one stateless seed zipped onto every example (from the
        Pipeline's shuffle seed, new every epoch) ──parallel map──▶ each step called on each
        key in turn, every random draw of the call folded from the example's seed

Keras's preprocessing layers (`keras.layers.RandomFlip`, `Rescaling`, ...) run TensorFlow ops
inside a tf.data graph whatever the backend; a `keras.Sequential` of them does not on JAX or
PyTorch (it converts its inputs to that backend's tensors), so its layers are called one by
one, as `keras.layers.Pipeline` calls them. Left alone, a random layer draws from its own
`keras.random.SeedGenerator`: a variable every call reads and advances, which the parallel
calls of a map share, so which example gets which draw depends on thread timing, and the
generator of the TensorFlow ops (under JAX or PyTorch) starts from a random seed unless the
layer was given one. Instead, while the map's function is traced, each layer's
`_get_seed_generator` (the one private Keras attribute tfpipe touches here; written against
Keras 3.15, where every random preprocessing layer asks it for its seeds) returns an
`ExampleSeeds` of the example being mapped; `_flatten_layers` finds the layers inside another.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from tfpipe.errors import SchemaError
from tfpipe.features import Image, Mask
from tfpipe.loaders.seeding import example_seeds, map_with_seeds
from tfpipe.schema import Schema

_SEEDS_HOOK = "_get_seed_generator"


class ExampleSeeds(keras.random.SeedGenerator):
    """The seeds of one example's random draws: every `next()` a new stateless seed, folded
    from the example's seed and the number of draws before it (counted while tracing, so every
    call of the traced map draws alike). Holds no variable, unlike its base class.

    Examples:
        >>> seeds = ExampleSeeds(tf.constant([0, 7], tf.int64))
        >>> first, second = seeds.next(), seeds.next()
        >>> bool(tf.reduce_all(first == second))
        False
    """

    def __init__(self, seed: Any) -> None:
        self.name = "tfpipe_example_seeds"
        self._seed = tf.cast(seed, tf.int64)
        self._draws = 0

    def next(self, ordered: bool = True) -> tf.Tensor:
        """A new seed, of shape (2,), for one random op."""
        self._draws += 1
        return tf.random.experimental.stateless_fold_in(self._seed, self._draws)


def _is_layer(value: Any) -> bool:
    return isinstance(value, keras.layers.Layer)


def _steps(layer: Any) -> tuple[Any, ...]:
    """The layers to call in turn: those of a `keras.Sequential` or `keras.layers.Pipeline`
    (recursively), else the layer itself."""
    if isinstance(layer, keras.Sequential | keras.layers.Pipeline):
        return tuple(step for inner in layer.layers for step in _steps(inner))
    return (layer,)


def _inner_layers(steps: Sequence[Any]) -> list[Any]:
    """Every layer of `steps` and every layer inside them, once each."""
    found: dict[int, Any] = {}
    for step in steps:
        for layer in step._flatten_layers(include_self=True, recursive=True):
            found.setdefault(id(layer), layer)
    return list(found.values())


def _draws(layer: Any) -> bool:
    """Whether `layer` holds a `keras.random.SeedGenerator` (draws at random)."""
    return any(isinstance(v, keras.random.SeedGenerator) for v in vars(layer).values())


@contextlib.contextmanager
def _drawing_from(layers: Sequence[Any], seeds: ExampleSeeds) -> Iterator[None]:
    """Every layer of `layers` takes its seeds from `seeds` while the block runs."""
    for layer in layers:
        object.__setattr__(layer, _SEEDS_HOOK, lambda backend=None: seeds)
    try:
        yield
    finally:
        for layer in layers:
            object.__delattr__(layer, _SEEDS_HOOK)


class LayerMap:
    """A Keras layer (or a `keras.Sequential` / `keras.layers.Pipeline` of layers) applied to
    `keys` of every example, each key with draws of its own; what `Pipeline.map(layer)` runs.

    Examples:
        >>> flip = LayerMap(keras.layers.RandomFlip("horizontal", name="flip"), ("image",))
        >>> flip.random, flip.__name__
        (True, 'keras flip on image')
        >>> images = tf.data.Dataset.from_tensor_slices({"image": np.zeros((4, 8, 8, 3))})
        >>> next(iter(flip.map_dataset(images, seed=0)))["image"].shape
        TensorShape([8, 8, 3])

    Args:
        layer: the Keras layer.
        keys: the feature names it transforms.
    """

    def __init__(self, layer: Any, keys: tuple[str, ...]) -> None:
        self.layer, self.keys = layer, keys
        self._steps = _steps(layer)
        inner = _inner_layers(self._steps)
        for each in inner:
            if _draws(each) and not hasattr(each, _SEEDS_HOOK):
                raise TypeError(
                    f"Pipeline.map: Keras layer {each.name!r} ({type(each).__name__}) draws "
                    "from its own keras.random.SeedGenerator, which the parallel calls of a "
                    "map would share (draws in the order threads run): apply it in the model, "
                    "or use Keras's preprocessing layers (keras.layers.Random*)"
                )
        self._seeded = [each for each in inner if hasattr(each, _SEEDS_HOOK)]
        self.random = any(_draws(each) for each in inner)
        self.__name__ = f"keras {layer.name} on {', '.join(keys)}"

    def map_dataset(
        self,
        dataset: tf.data.Dataset,
        prepare: Any = None,
        position: tuple[Any, Any] | None = None,
        seed: int | None = None,
    ) -> tf.data.Dataset:
        """Maps `dataset` (of example dicts) in parallel, each example with its own seed.

        Examples:
            >>> crop = LayerMap(keras.layers.RandomCrop(6, 6), ("image",))
            >>> images = tf.data.Dataset.from_tensor_slices({"image": np.zeros((4, 8, 8, 3))})
            >>> crop.map_dataset(images, seed=0).element_spec["image"].shape
            TensorShape([6, 6, 3])

        Args:
            dataset: the examples.
            prepare: turns each element into the example first, in the same call. Defaults to
                None.
            position: `(epoch, index of the first example)` after `Pipeline.start_at`: seeds
                from (seed, epoch, index). Defaults to None (a seed sequence per epoch).
            seed: the seed of the draws. Defaults to None (a random one).
        """
        if seed is None:
            seed = int(np.random.default_rng().integers(2**31))
        return map_with_seeds(dataset, example_seeds(seed, position), self.__call__, prepare)

    def __call__(self, example: Mapping[str, Any], seed: Any = (0, 0)) -> dict[str, Any]:
        """Transforms `keys` of one example dict of tensors, drawing from `seed` (shape (2,)).

        Examples:
            >>> scale = LayerMap(keras.layers.Rescaling(0.5), ("x",))
            >>> scale({"x": tf.constant([2.0, 4.0])})["x"].numpy().tolist()
            [1.0, 2.0]
        """
        if not isinstance(example, Mapping):
            raise SchemaError(
                f"Pipeline.map({self.layer.name}): a Keras layer transforms features of "
                f"example dicts; got {type(example).__name__}. Call the layer in a function "
                "of your own: .map(lambda x, y: (layer(x), y))"
            )
        missing = [key for key in self.keys if key not in example]
        if missing:
            raise SchemaError(
                f"Pipeline.map({self.layer.name}): feature {missing[0]!r} is not in the "
                f"examples; they have {sorted(example)}. Name the features with keys="
            )
        seeds = ExampleSeeds(seed)
        out = dict(example)
        with _drawing_from(self._seeded, seeds):
            for key in self.keys:
                for step in self._steps:
                    try:
                        out[key] = step(out[key])
                    except Exception as e:
                        e.add_note(
                            f"in Pipeline.map: Keras layer {step.name!r} on feature {key!r} "
                            f"(Keras backend {keras.backend.backend()})"
                        )
                        raise
        return out


def layer_map(fn: Any, keys: str | Sequence[str] | None, schema: Schema | None) -> Any:
    """`fn` as `Pipeline.map` runs it: a `LayerMap` of a Keras layer, on `keys` (by default
    the Image features of `schema`); any other `fn` as it is, without `keys`.

    Examples:
        >>> schema = tfpipe.Schema({"image": tfpipe.Image(), "mask": tfpipe.Mask()})
        >>> layer_map(keras.layers.Rescaling(1 / 255), None, schema).keys
        ('image',)
        >>> layer_map(keras.layers.RandomFlip(name="flip"), None, schema)
        Traceback (most recent call last):
        ...
        ValueError: Pipeline.map(flip): the examples have masks ['mask'], which ...
    """
    if not _is_layer(fn):
        if keys is not None:
            raise ValueError(
                "keys= names the features a Keras layer transforms, and fn is not a "
                f"keras.layers.Layer. Received: fn={fn!r}, keys={keys!r}"
            )
        return fn
    if keys is not None:
        names = (keys,) if isinstance(keys, str) else tuple(keys)
        if not names or not all(isinstance(k, str) and k for k in names):
            raise ValueError(
                f"keys must be a feature name or a list of names. Received: keys={keys!r}"
            )
        return LayerMap(fn, names)
    if schema is None:
        raise ValueError(
            f"Pipeline.map({fn.name}): the source has no schema to find its images in; name "
            "the features the layer transforms with keys="
        )
    images, masks = list(schema.of(Image)), list(schema.of(Mask))
    if not images:
        raise ValueError(
            f"Pipeline.map({fn.name}): the schema has no Image feature (it has "
            f"{list(schema)}); name the features the layer transforms with keys="
        )
    mapped = LayerMap(fn, tuple(images))
    if masks and mapped.random:
        raise ValueError(
            f"Pipeline.map({fn.name}): the examples have masks {masks}, which a Keras layer "
            "would not move with the images (it draws for each feature on its own): use "
            "tfpipe.augment.Joint to flip and crop images with their masks, or name the "
            "features the layer transforms with keys="
        )
    return mapped
