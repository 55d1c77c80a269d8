"""`ClassLabel`: a class (or several) stored as int64 indices, accepting names or indices."""

from __future__ import annotations

import ast
import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
import tensorflow as tf

from tfpipe.errors import DecodeError, SchemaError
from tfpipe.features.base import TFDS_FEATURES, Feature, describe_value, tfds_tensor
from tfpipe.features.tensor import Tensor


@dataclasses.dataclass(frozen=True)
class ClassLabel(Feature):
    """A class label stored as int64; accepts a class name or an index.

    With `multi_label=True` a value is a list of classes (names or indices, or a string such as
    "[1, 0, 3]") and decodes to a multi-hot float32 vector of length `num_classes`.

    Examples:
        >>> label = tfpipe.ClassLabel(names=["cat", "dog"])
        >>> int(label.load("dog"))
        1

    Args:
        names: the class names, index order. Defaults to None (then `num_classes` is needed).
        num_classes: the number of classes when there are no names. Defaults to len(names).
        multi_label: each example has a list of classes. Defaults to False.
    """

    kind: ClassVar[str] = "class_label"
    reads_file: ClassVar[bool] = False
    tfds_kinds: ClassVar[tuple[str, ...]] = ("classLabel",)
    names: Sequence[str] | None = None
    num_classes: int | None = None
    multi_label: bool = False

    def __post_init__(self) -> None:
        if self.names is not None:
            names = tuple(self.names)
            if not all(isinstance(n, str) for n in names) or len(set(names)) != len(names):
                raise SchemaError(f"ClassLabel.names must be unique strings. Received: {names}")
            if self.num_classes is not None and self.num_classes != len(names):
                raise SchemaError(
                    f"ClassLabel got {len(names)} names but num_classes={self.num_classes}"
                )
            object.__setattr__(self, "names", names)
            object.__setattr__(self, "num_classes", len(names))
        if self.num_classes is None or self.num_classes < 1:
            raise SchemaError(
                "ClassLabel needs names=[...] or num_classes >= 1. "
                f"Received: names={self.names}, num_classes={self.num_classes}"
            )

    @classmethod
    def _from_tfds(
        cls, kind: str, spec: Mapping[str, Any], class_names: Callable[[], list[str] | None]
    ) -> Feature:
        names = class_names()
        return cls(names=names) if names is not None else cls(num_classes=int(spec["numClasses"]))

    def tfds_json(self) -> dict[str, Any]:
        if self.multi_label:
            return tfds_tensor((None,), "int64")  # the class indices of the example
        return {
            "classLabel": {"numClasses": str(self.num_classes)},
            "pythonClassName": f"{TFDS_FEATURES}class_label_feature.ClassLabel",
        }

    def in_tfds_sequence(self, length: int | None) -> Feature:
        return Tensor(shape=(length,), dtype="int64")  # the class index of each element

    @property
    def inferred_because(self) -> str:
        return (
            "one int64 per record under a key containing 'label'; the class count is the "
            "largest label seen + 1, the names are unknown"
        )

    def summarize(self, value: np.ndarray) -> str:
        indices = [int(i) for i in np.flatnonzero(value)] if self.multi_label else [int(value)]
        names = self.names
        labels = ", ".join(f"{i} ({names[i]})" if names is not None else str(i) for i in indices)
        head = f"{value.dtype.name} {tuple(value.shape)}"
        return f"{head} = [{labels}]" if self.multi_label else f"{head} = {labels}"

    @property
    def dtype(self) -> str:
        return "float32" if self.multi_label else "int64"

    @property
    def decoded_shape(self) -> tuple[int | None, ...]:
        return (self.num_classes,) if self.multi_label else ()

    @functools.cached_property
    def positions(self) -> dict[str, int]:
        """Class name -> index (empty without names)."""
        return {name: i for i, name in enumerate(self.names or ())}

    def index(self, value: Any) -> int:
        """The class index of a name or an index; raises for unknown names and bad indices.

        Examples:
            >>> label = tfpipe.ClassLabel(names=["cat", "dog"])
            >>> label.index("dog"), label.index(0)
            (1, 0)
        """
        if isinstance(value, str | bytes) and self.names is not None:
            name = value.decode() if isinstance(value, bytes) else value
            position = self.positions.get(name)
            if position is None:
                raise ValueError(f"unknown class name {name!r}; expected one of {list(self.names)}")
            return position
        if isinstance(value, bool) or not isinstance(value, int | np.integer):
            expected = "an int64 index or a class name" if self.names else "an int64 index"
            raise TypeError(f"expected {expected}, got {describe_value(value)}")
        if not 0 <= int(value) < int(self.num_classes):  # type: ignore[arg-type]
            raise ValueError(f"class index {int(value)} is out of range [0, {self.num_classes})")
        return int(value)

    def indices(self, value: Any) -> list[int]:
        """The class indices of a single label or, with `multi_label`, of a list of labels.

        Examples:
            >>> tags = tfpipe.ClassLabel(names=["clear", "haze", "water"], multi_label=True)
            >>> tags.indices(["water", "clear"]), tags.indices("[1, 2]")
            ([2, 0], [1, 2])
        """
        if not self.multi_label:
            return [self.index(value)]
        if isinstance(value, str) and value.lstrip().startswith("["):
            value = parse_list_cell(value)
        if isinstance(value, str | bytes | int | np.integer):
            value = [value]
        return [self.index(v) for v in value]

    def parse_spec(self) -> tf.io.FixedLenFeature | tf.io.RaggedFeature:
        if self.multi_label:
            return tf.io.RaggedFeature(tf.int64)
        return tf.io.FixedLenFeature([], tf.int64)

    def encode_into(self, value: Any, proto: tf.train.Feature) -> None:
        proto.int64_list.value.extend(self.indices(value))

    def load(self, value: Any) -> np.ndarray:
        indices = self.indices(value)
        if not self.multi_label:
            return np.asarray(indices[0], np.int64)
        hot = np.zeros(self.num_classes, np.float32)  # type: ignore[arg-type]
        hot[indices] = 1.0
        return hot

    def keep(self, value: Any) -> Any:
        indices = self.indices(value)
        return indices if self.multi_label else indices[0]

    def array_column(self, name: str, array: np.ndarray) -> np.ndarray:
        return np.stack([self.load(v) for v in array])

    def stored(self, proto: tf.train.Feature) -> Any:
        values = proto.int64_list.value
        if self.multi_label:
            return list(values)
        if len(values) != 1:
            raise DecodeError(f"expected one int64 label, found {len(values)} values")
        return values[0]

    def decode_tensor(self, parsed: tf.Tensor) -> tf.Tensor:
        if not self.multi_label:
            return parsed
        hot = tf.one_hot(parsed, self.num_classes, dtype=tf.float32)
        return tf.cast(tf.reduce_sum(hot, axis=-2) > 0, tf.float32)


def parse_list_cell(text: str) -> list[Any]:
    """Parses a cell such as "[1, 0, 3]" or "['cat', 'dog']" safely (never with eval)."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError) as e:
        raise ValueError(f"cannot parse {describe_value(text)} as a list") from e
    if not isinstance(value, list | tuple):
        raise ValueError(f"expected a list such as '[1, 0, 3]', got {describe_value(text)}")
    return list(value)
