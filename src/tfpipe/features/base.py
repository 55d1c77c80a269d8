"""The base of every feature: how one value is stored, decoded and parsed; shared helpers."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import numpy as np
import tensorflow as tf

from tfpipe.errors import SchemaError

_FLOAT_DTYPES = ("float16", "float32", "float64")
_INT_DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32")


def _describe(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


Where = str | Callable[[], str]


def _where(where: Where) -> str:
    """The text naming an example in an error: `where` itself, or what it returns."""
    return where if isinstance(where, str) else where()


class Feature:
    """Base of the typed features: how one value is stored, decoded and parsed.

    Subclasses are frozen dataclasses, so a feature is a value that can be compared and
    serialized with `to_json()`.
    """

    kind: ClassVar[str]
    _registry: ClassVar[dict[str, type[Feature]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        Feature._registry[cls.kind] = cls

    def encode(self, value: Any) -> tf.train.Feature:
        """Encodes a source value into a new `tf.train.Feature`."""
        proto = tf.train.Feature()
        self.encode_into(value, proto)
        return proto

    def encode_into(self, value: Any, proto: tf.train.Feature) -> None:
        """Encodes a source value into an empty `tf.train.Feature`, in place (no copies)."""
        raise NotImplementedError

    def load(self, value: Any) -> np.ndarray:
        """Decodes a source value (or a stored value) into its numpy form."""
        raise NotImplementedError

    def stored(self, proto: tf.train.Feature) -> Any:
        """The stored value of a `tf.train.Feature`, in a form `load()` accepts."""
        raise NotImplementedError

    def decode_tensor(self, parsed: tf.Tensor) -> tf.Tensor:
        """Decodes the parsed tensor of one example inside a tf.data graph."""
        return parsed

    @property
    def dtype(self) -> str:
        """The numpy dtype name of the decoded value."""
        raise NotImplementedError

    @property
    def decoded_shape(self) -> tuple[int | None, ...]:
        """The shape of the decoded value (None where it varies)."""
        raise NotImplementedError

    def to_json(self) -> dict[str, Any]:
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}  # type: ignore[arg-type]
        return {
            "kind": self.kind,
            **{k: list(v) if isinstance(v, tuple) else v for k, v in fields.items()},
        }

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> Feature:
        fields = dict(data)
        kind = fields.pop("kind", None)
        if kind not in Feature._registry:
            raise SchemaError(
                f"unknown feature kind {kind!r}; expected one of {sorted(Feature._registry)}"
            )
        return Feature._registry[kind](**fields)
