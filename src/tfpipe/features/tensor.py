"""`Tensor`: a numeric array of fixed shape or with a variable first dimension."""

from __future__ import annotations

import dataclasses
import functools
import math
import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
import tensorflow as tf

from tfpipe.errors import SchemaError, SourceError
from tfpipe.features.base import Feature, describe_value, tfds_shape, tfds_tensor
from tfpipe.features.text import Text

_FLOAT_DTYPES = ("float16", "float32", "float64")
_INT_DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32")


@dataclasses.dataclass(frozen=True)
class Tensor(Feature):
    """A numeric array of fixed shape, or with a variable first dimension (None).

    Integers and bools are stored as int64, floats as float32 (float64 loses precision).
    A variable first dimension is read back as a `tf.RaggedTensor` in tf.data batches, and as
    an array of its own length by `Schema.decode()`. With `encoding="bytes"` (or "zlib") a
    value of fixed shape is stored as its raw little-endian bytes (zlib-compressed), in its
    own dtype, as TensorFlow Datasets stores `Tensor(..., encoding="bytes")`.

    Examples:
        >>> tfpipe.Tensor(shape=(3,), dtype="float32").load([1, 2, 3])
        array([1., 2., 3.], dtype=float32)

    Args:
        shape: the shape of one value; only the first dimension may be None. Defaults to ().
        dtype: a numpy dtype name. Defaults to "float32".
        encoding: "list" (an int64 or float list), "bytes" or "zlib". Defaults to "list".
    """

    kind: ClassVar[str] = "tensor"
    reads_file: ClassVar[bool] = False
    tfds_kinds: ClassVar[tuple[str, ...]] = ("tensor", "boundingBox")
    shape: tuple[int | None, ...] = ()
    dtype: str = "float32"
    encoding: str = "list"

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(self.shape))
        try:
            name = np.dtype(self.dtype).name
        except TypeError as e:
            raise SchemaError(f"Tensor.dtype {self.dtype!r} is not a numpy dtype") from e
        if name not in _FLOAT_DTYPES + _INT_DTYPES:
            raise SchemaError(
                f"Tensor.dtype must be one of {list(_FLOAT_DTYPES + _INT_DTYPES)} "
                f"(use Text for strings). Received: dtype={self.dtype!r}"
            )
        object.__setattr__(self, "dtype", name)
        if any(d is None for d in self.shape[1:]) or any(
            d is not None and (not isinstance(d, int) or d < 0) for d in self.shape
        ):
            raise SchemaError(
                "Tensor.shape takes non-negative ints, and None only as the first dimension. "
                f"Received: shape={self.shape}"
            )
        if self.encoding not in _ENCODINGS:
            raise SchemaError(
                f"Tensor.encoding must be one of {list(_ENCODINGS)}. "
                f"Received: encoding={self.encoding!r}"
            )
        if self.as_bytes and (self.variable or name == "uint32"):
            raise SchemaError(
                f"Tensor(encoding={self.encoding!r}) needs a fixed shape and a dtype other than "
                f"uint32. Received: shape={self.shape}, dtype={name!r}"
            )

    def to_json(self) -> dict[str, Any]:
        data = super().to_json()
        if self.encoding == "list":  # metadata written before the option reads the same
            del data["encoding"]
        return data

    @classmethod
    def _from_tfds(
        cls, kind: str, spec: Mapping[str, Any], class_names: Callable[[], list[str] | None]
    ) -> Feature:
        if kind == "boundingBox":  # four floats
            return cls(shape=tfds_shape(spec), dtype=spec.get("dtype", "float32"))
        encoding = spec.get("encoding") or "none"
        dtype = spec.get("dtype", "float32")
        if dtype in ("string", "str") and not tfds_shape(spec) and encoding == "none":
            return Text()
        return cls(
            shape=tfds_shape(spec), dtype=dtype, encoding="list" if encoding == "none" else encoding
        )

    def tfds_json(self) -> dict[str, Any]:
        return tfds_tensor(
            self.shape, self.dtype, "none" if self.encoding == "list" else self.encoding
        )

    @property
    def inferred_because(self) -> str:
        if self.dtype == "int64":
            return "int64 values; only one int per record under a key containing 'label' is a class"
        return "float values (images stored as floats stay Tensors: only JPEG and PNG are Images)"

    def in_tfds_sequence(self, length: int | None) -> Feature:
        if self.variable or self.as_bytes:
            return super().in_tfds_sequence(length)
        return Tensor(shape=(length, *self.shape), dtype=self.dtype)

    @property
    def decoded_shape(self) -> tuple[int | None, ...]:
        return self.shape

    @property
    def is_float(self) -> bool:
        """Whether the dtype is a float one (stored as a float list, else as an int64 list).

        Examples:
            >>> tfpipe.Tensor(shape=(), dtype="float16").is_float
            True
        """
        return self.dtype in _FLOAT_DTYPES

    @property
    def storage_dtype(self) -> tf.DType:
        """The dtype of the stored list: float32 for float dtypes, else int64.

        Examples:
            >>> tfpipe.Tensor(shape=(3,), dtype="uint8").storage_dtype
            tf.int64
        """
        return tf.float32 if self.is_float else tf.int64

    @property
    def variable(self) -> bool:
        """Whether the first dimension varies between examples (`shape=(None, ...)`).

        Examples:
            >>> tfpipe.Tensor(shape=(None,), dtype="int64").variable
            True
        """
        return bool(self.shape) and self.shape[0] is None

    @property
    def as_bytes(self) -> bool:
        """Whether a value is stored as its raw bytes ("bytes" or "zlib").

        Examples:
            >>> tfpipe.Tensor((3,), "float64", encoding="zlib").as_bytes
            True
        """
        return self.encoding != "list"

    def load(self, value: Any) -> np.ndarray:
        array = np.asarray(value)
        if array.dtype.kind not in "biuf":
            raise TypeError(f"expected {self.dtype}, got {describe_value(value)}")
        if self.variable and array.ndim == 1 and len(self.shape) > 1:
            array = array.reshape(-1, *self.shape[1:])
        if array.ndim != len(self.shape) or any(
            d is not None and d != n for d, n in zip(self.shape, array.shape, strict=True)
        ):
            raise ValueError(f"expected shape {self.shape}, got {array.shape}")
        return self.convert(array)

    def keep(self, value: Any) -> Any:
        return self.load(value)

    def stack(self, values: Sequence[np.ndarray]) -> np.ndarray:
        if not self.variable:
            return super().stack(values)
        rows = np.empty(len(values), dtype=object)
        for row, value in enumerate(values):
            rows[row] = value
        return rows

    def array_column(self, name: str, array: np.ndarray) -> np.ndarray:
        if self.variable and array.dtype == object:
            loaded = []
            for row, value in enumerate(array):
                try:
                    loaded.append(self.load(value))
                except (TypeError, ValueError) as e:
                    raise SourceError(f"{name}: {e} in row {row}") from e
            return self.stack(loaded)
        try:
            return self.convert(array)
        except (TypeError, ValueError) as e:
            raise SourceError(f"{name}: {e}") from e

    def convert(self, array: np.ndarray) -> np.ndarray:
        """`array` (any shape) as this dtype; raises ValueError naming the first value that
        would become a different number (300 as uint8, 1e39 as float32).

        Examples:
            >>> tfpipe.Tensor(shape=(2,), dtype="uint8").convert(np.array([7, 300]))
            Traceback (most recent call last):
            ...
            ValueError: ...300...
        """
        return _convert(array, self.dtype)

    def parse_spec(self) -> tf.io.FixedLenFeature | tf.io.RaggedFeature:
        if self.as_bytes:
            return tf.io.FixedLenFeature([], tf.string)
        if self.variable:
            return tf.io.RaggedFeature(self.storage_dtype)
        return tf.io.FixedLenFeature(self.shape, self.storage_dtype)

    def encode_into(self, value: Any, proto: tf.train.Feature) -> None:
        flat = self.load(value).ravel()
        if self.as_bytes:
            data = flat.astype(np.dtype(self.dtype).newbyteorder("<")).tobytes()
            proto.bytes_list.value.append(zlib.compress(data) if self.encoding == "zlib" else data)
        elif self.is_float:
            proto.float_list.value.extend(_convert(flat, "float32").tolist())
        else:
            proto.int64_list.value.extend(flat.astype(np.int64).tolist())

    def stored(self, proto: tf.train.Feature) -> Any:
        if self.as_bytes:
            return self._from_bytes(proto.bytes_list.value)
        values = proto.float_list.value if self.is_float else proto.int64_list.value
        return np.asarray(values, self.dtype).reshape(
            [-1 if d is None else d for d in self.shape] if self.shape else ()
        )

    def _from_bytes(self, values: Any) -> np.ndarray:
        if len(values) != 1:
            raise ValueError(f"expected one bytes value, found {len(values)}")
        try:
            data = zlib.decompress(values[0]) if self.encoding == "zlib" else values[0]
        except zlib.error as e:
            raise ValueError(f"expected zlib-compressed bytes: {e}") from e
        array = np.frombuffer(data, np.dtype(self.dtype).newbyteorder("<"))
        shape = [int(d) for d in self.shape if d is not None]  # fixed: every d is an int
        if array.size != math.prod(shape):
            raise ValueError(
                f"{len(data)} bytes hold {array.size} {self.dtype} values; shape {self.shape} "
                f"needs {math.prod(shape)}"
            )
        return array.astype(self.dtype).reshape(shape)

    def decode_tensor(self, parsed: tf.Tensor) -> tf.Tensor:
        if self.as_bytes:  # one string per example: a scalar, or a vector for a batch
            if self.encoding == "zlib":
                parsed = tf.io.decode_compressed(parsed, compression_type="ZLIB")
            values = tf.io.decode_raw(parsed, tf.as_dtype(self.dtype))
            return tf.reshape(values, tf.concat([tf.shape(parsed), self.shape], 0))
        if self.variable and len(self.shape) > 1:
            parsed = tf.reshape(parsed, [-1, *self.shape[1:]])
        return tf.cast(parsed, self.dtype)

    def decode_batch(self, parsed: tf.Tensor) -> tf.Tensor:
        if not self.variable:
            return self.decode_tensor(parsed)
        inner = math.prod(self.shape[1:])  # type: ignore[arg-type]
        values = self.decode_tensor(parsed.flat_values)
        return tf.RaggedTensor.from_row_lengths(values, parsed.row_lengths() // inner)

    def pad_batch(
        self,
        batch: tf.RaggedTensor,
        length: int,
        value: Any,
        name: str,
        cut: tf.Variable | None = None,
    ) -> tf.Tensor:
        """A batch of variable-length values as a dense tensor of `length` rows per example,
        filled with `value`. A longer value fails the graph with an error naming the feature;
        with a `cut` counter it is cut to its first `length` rows instead, and counted there
        (`to_tensor` alone would cut silently).

        Examples:
            >>> tokens = tfpipe.Tensor(shape=(None,), dtype="int64")
            >>> batch = tf.ragged.constant([[1, 2, 3], [4]], tf.int64)
            >>> tokens.pad_batch(batch, 4, 0, "tokens").numpy()
            array([[1, 2, 3, 0],
                   [4, 0, 0, 0]])
        """
        lengths = batch.row_lengths()
        if cut is None:
            check = tf.debugging.Assert(
                tf.reduce_all(lengths <= length),
                [
                    f"{name}: a value is longer than its pad length {length} (Pipeline pad=); "
                    f"{_LONGER_FIX}. Longest in this batch:",
                    tf.reduce_max(lengths),
                ],
                name="pad_check",
            )
        else:
            check = cut.assign_add(tf.math.count_nonzero(lengths > length))
        with tf.control_dependencies([check]):
            return batch.to_tensor(
                default_value=tf.constant(value, batch.dtype), shape=[None, length, *self.shape[1:]]
            )

    def pad(
        self, value: np.ndarray, length: int, fill: Any, name: str, truncate: bool = False
    ) -> tuple[np.ndarray, bool]:
        """One variable-length value (as `load` gives it) as `length` rows filled with
        `fill`, as `pad_batch` pads each value of a batch, and whether it was cut. A longer
        value raises a ValueError naming the feature; with `truncate` it is cut to its first
        `length` rows instead.

        Examples:
            >>> tokens = tfpipe.Tensor(shape=(None,), dtype="int64")
            >>> tokens.pad(np.array([1, 2, 3]), 4, 0, "tokens")
            (array([1, 2, 3, 0]), False)
            >>> tokens.pad(np.array([1, 2, 3]), 2, 0, "tokens", truncate=True)
            (array([1, 2]), True)
        """
        rows = len(value)
        if rows > length and not truncate:
            raise ValueError(
                f"{name}: a value is longer than its pad length {length} (pad=); {_LONGER_FIX}. "
                f"Received: a value of {rows} rows"
            )
        padded = np.full((length, *value.shape[1:]), fill, self.dtype)
        padded[: min(rows, length)] = value[:length]
        return padded, rows > length


_LONGER_FIX = (
    "raise the pad length to the longest value, write shorter values, or pass truncate=True "
    "to cut them (counted)"
)
_ENCODINGS = ("list", "bytes", "zlib")


@functools.cache
def _range(dtype: np.dtype[Any]) -> tuple[float, float, str]:
    """The lowest and highest value of a dtype, and how errors show them."""
    if dtype.kind == "b":
        return 0, 1, "0 or 1"
    if dtype.kind == "f":
        top = float(np.finfo(dtype).max)
        return -top, top, f"±{top:.8g}"
    info = np.iinfo(dtype)
    return int(info.min), int(info.max), f"[{info.min}, {info.max}]"


def _convert(array: np.ndarray, dtype: str) -> np.ndarray:
    """`array` as `dtype`; raises ValueError naming the first value that would not survive.

    numpy wraps integers (300 as uint8 is 44) and turns floats beyond the range into inf; NaN
    and inf themselves are data and pass.
    """
    target = np.dtype(dtype)
    if array.size == 0 or np.can_cast(array.dtype, target):
        return array.astype(target, copy=False)
    if array.dtype.kind == "f" and target.kind != "f" and not np.all(np.mod(array, 1) == 0):
        raise TypeError(f"expected {target.name}, got non-integral values {describe_value(array)}")
    low, high, limits = _range(target)
    if low <= array.min() and array.max() <= high:  # the common case; NaN takes the long way
        return array.astype(target)
    if target.kind == "f":
        with np.errstate(over="ignore"):
            bad = np.isinf(array.astype(target)) & np.isfinite(array)
    elif target.kind == "b":
        bad = (array != 0) & (array != 1)
    else:
        bad = ~((array >= low) & (array <= high))
    if np.any(bad):
        position = tuple(int(i) for i in np.argwhere(bad)[0])
        at = f" at index {position}" if position else ""
        raise ValueError(
            f"value {array[position].item()!r}{at} is outside the range of {target.name} "
            f"({limits}) and would be stored as a different number; clip or rescale the data, "
            "or declare a wider dtype"
        )
    return array.astype(target)
