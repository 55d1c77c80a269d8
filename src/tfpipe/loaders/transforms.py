"""The `map()`s and `filter()`s of a `Pipeline`: each applied to the dataset, checked and
traced.

    Pipeline.map(fn) / .filter(predicate) ──Transform──▶ assembly: applied after the decoding
        (the first map may decode the images in its own parallel calls: `prepare`)
        ──is_random──▶ where a cache may go, and whether the report's map timing is of a random
        augmentation
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import tensorflow as tf

from tfpipe.errors import SchemaError
from tfpipe.loaders.inputs import AUTOTUNE
from tfpipe.schema import Schema


@dataclasses.dataclass(frozen=True)
class Transform:
    """A `map()` or `filter()` of a pipeline."""

    kind: str  # "map" or "filter"
    fn: Callable[..., Any]
    random: bool | None

    @property
    def name(self) -> str:
        return f"{self.kind}({getattr(self.fn, '__name__', type(self.fn).__name__)})"

    @property
    def maps(self) -> bool:
        """Whether it is a `map()`, run in parallel calls (else a `filter()`, which drops the
        examples its predicate refuses)."""
        return self.kind == "map"

    @property
    def _map_dataset(self) -> Callable[..., tf.data.Dataset] | None:
        # A map with its own map_dataset (tfpipe.augment.Joint) zips a seed onto each example.
        map_dataset = getattr(self.fn, "map_dataset", None)
        return map_dataset if callable(map_dataset) else None

    def takes_prepare(self) -> bool:
        """Whether `apply` can run a `prepare` function in the same parallel call: a map, or
        a `map_dataset` with a `prepare` argument (as `tfpipe.augment.Joint` has)."""
        if not self.maps:
            return False
        map_dataset = self._map_dataset
        return map_dataset is None or "prepare" in inspect.signature(map_dataset).parameters

    def apply(
        self,
        dataset: tf.data.Dataset,
        prepare: Callable[[Any], Any] | None = None,
        position: tuple[Any, Any] | None = None,
        seed: int | None = None,
    ) -> tf.data.Dataset:
        """Applies the function, checking that it keeps the structure of the examples;
        `prepare` first turns each element into the example, in the same call. A
        `map_dataset` with a `position` argument gets the `(epoch, first example index)` of a
        `start_at` epoch; one with a `seed` argument, the seed of this stage of a seeded
        pipeline (a Keras layer's `LayerMap`)."""
        if not self.maps:
            try:
                return dataset.filter(self.fn)
            except (TypeError, ValueError) as e:
                raise SchemaError(f"{self.name} must return a scalar bool tensor: {e}") from e
        before = dataset.element_spec if prepare is None else dataset.element_spec[0]
        map_dataset = self._map_dataset
        if map_dataset is not None:
            given = {"prepare": prepare, "position": position, "seed": seed}
            parameters = inspect.signature(map_dataset).parameters
            dataset = map_dataset(
                dataset, **{k: v for k, v in given.items() if v is not None and k in parameters}
            )
        else:
            fn = self.fn if prepare is None else (lambda *parts: self.fn(prepare(parts)))
            dataset = dataset.map(fn, num_parallel_calls=AUTOTUNE)
        after = dataset.element_spec
        if isinstance(before, Mapping) and not isinstance(after, Mapping):
            raise SchemaError(
                f"{self.name} must return a dict of feature name -> tensor like its input "
                f"(features {sorted(before)}); got {type(after).__name__}. Keep examples as "
                "dicts and use as_supervised(x, y) to make (x, y) pairs"
            )
        if isinstance(before, tuple) and not isinstance(after, tuple):
            raise SchemaError(
                f"{self.name} must return a tuple like its input ({len(before)} parts); "
                f"got {type(after).__name__}"
            )
        return dataset

    def is_random(self, spec: Any) -> bool:
        """`random` as given or as `fn.random` says, else whether the traced function uses
        random ops."""
        declared = self.random if self.random is not None else getattr(self.fn, "random", None)
        if isinstance(declared, bool):
            return declared
        args = spec if isinstance(spec, tuple) else (spec,)
        graph = tf.function(self.fn).get_concrete_function(*args).graph.as_graph_def()
        ops = [n.op for n in graph.node] + [
            n.op for f in graph.library.function for n in f.node_def
        ]
        return any("Random" in op for op in ops)


class Renaming:
    """A map renaming features (`Pipeline.rename`): the schema knows the new names.

    Examples:
        >>> Renaming({"img": "image"})({"img": 1, "y": 2})
        {'image': 1, 'y': 2}
    """

    random = False

    def __init__(self, names: Mapping[str, str]) -> None:
        self.names = dict(names)
        self.__name__ = "rename " + ", ".join(f"{old}->{new}" for old, new in self.names.items())

    def __call__(self, example: Mapping[str, Any]) -> dict[str, Any]:
        return {self.names.get(name, name): value for name, value in example.items()}

    def schema(self, schema: Schema) -> Schema:
        """`schema` with the new names; a SchemaError names an unknown feature or a clash."""
        for old, new in self.names.items():
            if old not in schema:
                raise SchemaError(
                    f"rename: feature {old!r} is not in the schema; it has {list(schema)}"
                )
            if not isinstance(new, str) or not new:
                raise ValueError(
                    f"rename: the new name of {old!r} must be a non-empty str. Received: {new!r}"
                )
        renamed = [self.names.get(name, name) for name in schema]
        clash = sorted({n for n in renamed if renamed.count(n) > 1})
        if clash:
            raise SchemaError(
                f"rename: two features would be named {clash[0]!r}; rename or drop the other"
            )
        return Schema({self.names.get(name, name): feature for name, feature in schema.items()})


def renamed_schema(schema: Schema | None, transforms: Sequence[Transform]) -> Schema | None:
    """`schema` after the `Renaming`s among `transforms` (the other maps are not followed)."""
    for transform in transforms:
        if schema is not None and isinstance(transform.fn, Renaming):
            schema = transform.fn.schema(schema)
    return schema


def new_transform(kind: str, fn: Any, random: bool | None) -> Transform:
    """A `map` or `filter` of `fn`, its arguments checked."""
    if not callable(fn):
        raise TypeError(f"{kind}() needs a function. Received: {fn!r}")
    if random not in (None, True, False):
        raise ValueError(f"random must be True, False or None. Received: {random!r}")
    return Transform(kind, fn, random)


def any_random(maps: Sequence[Transform], examples: tf.data.Dataset) -> bool:
    """Whether one of `maps` is random, each traced on what it receives from the ones before."""
    for transform in maps:
        if transform.is_random(examples.element_spec):
            return True
        examples = transform.apply(examples)
    return False
