"""`Text`: a UTF-8 string."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import numpy as np
import tensorflow as tf

from tfpipe.errors import DecodeError
from tfpipe.features.base import TFDS_FEATURES, Feature, describe_value


@dataclasses.dataclass(frozen=True)
class Text(Feature):
    """A string stored as UTF-8 bytes; decoded to `str` by numpy, `tf.string` in graphs.

    Examples:
        >>> str(tfpipe.Text().load(b"hello"))
        'hello'
    """

    kind: ClassVar[str] = "text"
    reads_file: ClassVar[bool] = False
    tfds_kinds: ClassVar[tuple[str, ...]] = ("text",)

    @classmethod
    def _from_tfds(
        cls, kind: str, spec: Mapping[str, Any], class_names: Callable[[], list[str] | None]
    ) -> Feature:
        return cls()

    def tfds_json(self) -> dict[str, Any]:
        return {"pythonClassName": f"{TFDS_FEATURES}text_feature.Text", "text": {}}

    @property
    def inferred_because(self) -> str:
        return "bytes that are not JPEG or PNG (raw pixel bytes look like text too)"

    @property
    def dtype(self) -> str:
        return "str"

    @property
    def decoded_shape(self) -> tuple[int | None, ...]:
        return ()

    def parse_spec(self) -> tf.io.FixedLenFeature | tf.io.RaggedFeature:
        return tf.io.FixedLenFeature([], tf.string)

    def encode_into(self, value: Any, proto: tf.train.Feature) -> None:
        if isinstance(value, str):
            value = value.encode("utf-8")
        if not isinstance(value, bytes):
            raise TypeError(f"expected str or bytes, got {describe_value(value)}")
        proto.bytes_list.value.append(value)

    def load(self, value: Any) -> np.ndarray:
        if isinstance(value, bytes):
            value = value.decode("utf-8")
        if not isinstance(value, str):
            raise TypeError(f"expected str or bytes, got {describe_value(value)}")
        return np.asarray(value)

    def array_column(self, name: str, array: np.ndarray) -> np.ndarray:
        return array.astype(str).astype(object)

    def stored(self, proto: tf.train.Feature) -> Any:
        values = proto.bytes_list.value
        if len(values) != 1:
            raise DecodeError(f"expected one bytes value, found {len(values)}")
        return values[0]
