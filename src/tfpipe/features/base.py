"""The base of every feature: how one value is stored, decoded and parsed, and how it stands
in TFDS's `features.json`; shared helpers."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
import tensorflow as tf

from tfpipe.errors import SchemaError, SourceError


def describe_value(value: Any) -> str:
    """A value as an error message shows it: its repr, cut to 60 characters."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


Where = str | Callable[[], str]
SHOWN_VALUES = 10  # the most values `Feature.summarize` lists
_SHOWN_CHARS = 40  # the most characters of a text it shows


def where_text(where: Where) -> str:
    """The text naming an example in an error: `where` itself, or what it returns."""
    return where if isinstance(where, str) else where()


class Feature:
    """Base of the typed features: how one value is stored, decoded and parsed.

    Subclasses are frozen dataclasses, so a feature is a value that can be compared and
    serialized with `to_json()`. Each names its `kind` (what `from_json` reads back) and the
    TFDS feature kinds it reads (`tfds_kinds`, for `from_tfds`).

    Examples:
        >>> label = tfpipe.ClassLabel(names=["cat", "dog"])
        >>> isinstance(label, tfpipe.Feature), label == tfpipe.ClassLabel(names=["cat", "dog"])
        (True, True)
    """

    kind: ClassVar[str]
    # Whether a table cell of this feature (a DataFrame column) names a file to read, as for an
    # image or a mask, rather than holding the value itself.
    reads_file: ClassVar[bool] = True
    tfds_kinds: ClassVar[tuple[str, ...]] = ()
    _registry: ClassVar[dict[str, type[Feature]]] = {}
    _tfds_registry: ClassVar[dict[str, type[Feature]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        Feature._registry[cls.kind] = cls
        Feature._tfds_registry.update(dict.fromkeys(cls.tfds_kinds, cls))

    def encode(self, value: Any) -> tf.train.Feature:
        """Encodes a source value into a new `tf.train.Feature`.

        Examples:
            >>> tfpipe.ClassLabel(names=["cat", "dog"]).encode("dog").int64_list.value
            [1]
        """
        proto = tf.train.Feature()
        self.encode_into(value, proto)
        return proto

    def encode_into(self, value: Any, proto: tf.train.Feature) -> None:
        """Encodes a source value into an empty `tf.train.Feature`, in place (no copies).

        Examples:
            >>> proto = tf.train.Feature()
            >>> tfpipe.Tensor(shape=(2,), dtype="float32").encode_into([0.5, 2], proto)
            >>> proto.float_list.value
            [0.5, 2.0]
        """
        raise NotImplementedError

    def load(self, value: Any) -> np.ndarray:
        """Decodes a source value (or a stored value) into its numpy form.

        Examples:
            >>> tfpipe.ClassLabel(names=["cat", "dog"], multi_label=True).load(["dog"])
            array([0., 1.], dtype=float32)
        """
        raise NotImplementedError

    def keep(self, value: Any) -> Any:
        """`value` as a source keeps it in memory, once `load` accepts it (else raises as
        `load` does): the value itself, a ClassLabel's class index (indices), a Tensor's array.

        Examples:
            >>> tfpipe.ClassLabel(names=["cat", "dog"]).keep("dog")
            1
        """
        self.load(value)
        return value

    def stack(self, values: Sequence[np.ndarray]) -> np.ndarray:
        """Values as `load` gives them, as one array of rows: stacked, or (a variable-length
        Tensor's, whose lengths differ) an object array of one array per row.

        Examples:
            >>> tokens = tfpipe.Tensor(shape=(None,), dtype="int64")
            >>> tokens.stack([tokens.load([1, 2]), tokens.load([3])])
            array([array([1, 2]), array([3])], dtype=object)
        """
        return np.stack(values)

    def array_column(self, name: str, array: np.ndarray) -> np.ndarray:
        """The values of feature `name` in `array`, one row per example (as `from_arrays`
        holds them), as a `Pipeline` holds them in memory to gather batches from; raises a
        `SourceError` naming `name` for values it cannot hold.

        Examples:
            >>> pixels = np.zeros((5, 2, 2), np.uint8)  # 5 grayscale images
            >>> tfpipe.Image(shape=(2, 2, 1), encoding="raw").array_column("image", pixels).shape
            (5, 2, 2, 1)
        """
        raise SourceError(f"{name}: unsupported feature {type(self).__name__}")

    def stored(self, proto: tf.train.Feature) -> Any:
        """The stored value of a `tf.train.Feature`, in a form `load()` accepts.

        Examples:
            >>> text = tfpipe.Text()
            >>> text.stored(text.encode("hello"))
            b'hello'
        """
        raise NotImplementedError

    def check_stored(self, value: Any) -> None:
        """Raises when a stored value (as `stored` gives it) does not load: a label out of
        range, a text that is not UTF-8, a mask value that is not a class. `tfpipe verify`
        asks it of every record; images are checked apart, decoded in a graph all at once.

        Examples:
            >>> tfpipe.ClassLabel(num_classes=2).check_stored(5)
            Traceback (most recent call last):
            ...
            ValueError: class index 5 is out of range [0, 2)
        """
        self.load(value)

    @property
    def encoded_image(self) -> bool:
        """Whether a stored value is an encoded image file (JPEG, PNG) that a graph decodes:
        true of a `Mask`, and of an `Image` not stored as raw pixels.

        Examples:
            >>> tfpipe.Image().encoded_image, tfpipe.Image((8, 8, 3), "raw").encoded_image
            (True, False)
        """
        return False

    def decode_tensor(self, parsed: tf.Tensor) -> tf.Tensor:
        """Decodes the parsed tensor of one example inside a tf.data graph.

        Examples:
            >>> label = tfpipe.ClassLabel(num_classes=3, multi_label=True)
            >>> label.decode_tensor(tf.constant([0, 2], tf.int64)).numpy()
            array([1., 0., 1.], dtype=float32)
        """
        return parsed

    def parse_spec(self) -> tf.io.FixedLenFeature | tf.io.RaggedFeature:
        """How `tf.io.parse_example` parses the stored value: the feature's entry in
        `Schema.parse_spec()`.

        Examples:
            >>> tfpipe.ClassLabel(num_classes=2).parse_spec()
            FixedLenFeature(shape=[], dtype=tf.int64, default_value=None)
            >>> tfpipe.Tensor(shape=(None,), dtype="int64").parse_spec().dtype
            tf.int64
        """
        raise SchemaError(
            f"{self!r} has no parse spec: {type(self).__name__} must define parse_spec()"
        )

    def decode_batch(self, parsed: tf.Tensor) -> tf.Tensor:
        """Decodes the parsed values of a batch (`tf.io.parse_example` of a vector of
        records) inside a tf.data graph, as `decode_tensor` decodes one.

        Examples:
            >>> points = tfpipe.Tensor(shape=(None, 2), dtype="int64")
            >>> parsed = tf.ragged.constant([[1, 2, 3, 4], [5, 6]], tf.int64)
            >>> points.decode_batch(parsed).shape  # a RaggedTensor: one row per example
            TensorShape([2, None, 2])
        """
        return self.decode_tensor(parsed)

    @property
    def dtype(self) -> str:
        """The numpy dtype name of the decoded value.

        Examples:
            >>> tfpipe.Image().dtype, tfpipe.ClassLabel(num_classes=2).dtype, tfpipe.Text().dtype
            ('uint8', 'int64', 'str')
        """
        raise NotImplementedError

    @property
    def decoded_shape(self) -> tuple[int | None, ...]:
        """The shape of the decoded value (None where it varies).

        Examples:
            >>> tfpipe.Image(shape=(None, None, 3)).decoded_shape
            (None, None, 3)
            >>> tfpipe.ClassLabel(num_classes=4, multi_label=True).decoded_shape
            (4,)
        """
        raise NotImplementedError

    def summarize(self, value: np.ndarray) -> str:
        """One line about a decoded value, as `tfpipe inspect` shows it: its dtype and shape,
        then the value (a text, a class and its name) or its range.

        Examples:
            >>> tfpipe.Tensor(shape=(3,)).summarize(np.array([1, 2, 6], np.float32))
            'float32 (3,) min 1.0 max 6.0 mean 3'
            >>> tfpipe.ClassLabel(names=["cat", "dog"]).summarize(np.array(1))
            'int64 () = 1 (dog)'
        """
        if value.dtype.kind in "SUO":
            text = value.item()
            text = text.decode("utf-8", "replace") if isinstance(text, bytes) else str(text)
            shown = text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 3] + "..."
            return f"text {shown!r}"
        head = f"{value.dtype.name} {tuple(value.shape)}"
        if value.size == 0:
            return f"{head} empty"
        if value.size == 1:
            return f"{head} = {value.item()!r}"
        return (
            f"{head} min {value.min().item()!r} max {value.max().item()!r} mean {value.mean():.3g}"
        )

    @property
    def inferred_because(self) -> str:
        """Why `infer_schema` infers this feature from stored records, in words (its rule;
        `tfpipe inspect` shows it beside an inferred schema).

        Examples:
            >>> tfpipe.Image(encoding="auto").inferred_because
            'its bytes are JPEG and PNG images'
        """
        raise NotImplementedError

    def to_json(self) -> dict[str, Any]:
        """The feature as a JSON-compatible dict; `Feature.from_json` reads it back.

        Examples:
            >>> tfpipe.Tensor(shape=(3,), dtype="float32").to_json()
            {'kind': 'tensor', 'shape': [3], 'dtype': 'float32'}
        """
        fields = {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)  # type: ignore[arg-type]
            if f.metadata.get("json", True)  # not a fact of the records (`Image.storage`)
        }
        return {
            "kind": self.kind,
            **{k: list(v) if isinstance(v, tuple) else v for k, v in fields.items()},
        }

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> Feature:
        """The feature a `to_json()` dict describes.

        Examples:
            >>> tfpipe.Feature.from_json({"kind": "class_label", "names": ["cat", "dog"]})
            ClassLabel(names=('cat', 'dog'), num_classes=2, multi_label=False)
        """
        fields = dict(data)
        kind = fields.pop("kind", None)
        if kind not in Feature._registry:
            raise SchemaError(
                f"unknown feature kind {kind!r}; expected one of {sorted(Feature._registry)}"
            )
        return Feature._registry[kind](**fields)

    def tfds_json(self) -> dict[str, Any]:
        """The feature's entry in the `features.json` TFDS reads beside the records
        (`write_tfrecords(..., tfds_compatible=True)`).

        Examples:
            >>> tfpipe.ClassLabel(names=["cat", "dog"]).tfds_json()["classLabel"]
            {'numClasses': '2'}

        Raises:
            SchemaError: TFDS has no feature that reads this one.
        """
        raise SchemaError(f"TFDS has no feature for {type(self).__name__}")

    @staticmethod
    def from_tfds(
        kind: str, spec: Mapping[str, Any], class_names: Callable[[], list[str] | None]
    ) -> Feature:
        """The feature that reads what TFDS stores for an entry of its `features.json`: the
        feature of the class whose `tfds_kinds` has `kind`.

        Examples:
            >>> spec = {"shape": {"dimensions": ["28", "28", "1"]}, "encodingFormat": "png"}
            >>> tfpipe.Feature.from_tfds("image", spec, lambda: None)
            Image(shape=(28, 28, 1), encoding='png', quality=95)

        Args:
            kind: the entry's TFDS kind: "image", "classLabel", "tensor", ...
            spec: what the entry holds under its kind.
            class_names: gives the class names TFDS keeps beside `features.json` for the
                entry, None when there are none.

        Raises:
            ValueError: no feature reads `kind`, or not this entry of it.
            KeyError: the entry lacks what its feature needs.
        """
        if kind not in Feature._tfds_registry:
            raise ValueError(f"tfpipe has no feature for the TFDS kind {kind!r}")
        return Feature._tfds_registry[kind]._from_tfds(kind, spec, class_names)

    @classmethod
    def _from_tfds(
        cls, kind: str, spec: Mapping[str, Any], class_names: Callable[[], list[str] | None]
    ) -> Feature:
        """`from_tfds` for one of this class's `tfds_kinds`."""
        raise NotImplementedError

    def in_tfds_sequence(self, length: int | None) -> Feature:
        """The feature that reads a TFDS `Sequence` of `length` values of this feature (None:
        a length that varies), stacked along a first axis.

        Examples:
            >>> tfpipe.Tensor(shape=(4,), dtype="float32").in_tfds_sequence(None)
            Tensor(shape=(None, 4), dtype='float32', encoding='list')

        Raises:
            ValueError: tfpipe has no feature for such a sequence.
        """
        raise ValueError(f"tfpipe has no feature for a sequence of {self!r}")


# ---- TFDS's features.json: the pieces the features' entries share ----

TFDS_FEATURES = "tensorflow_datasets.core.features."


def tfds_shape(spec: Mapping[str, Any]) -> tuple[int | None, ...]:
    """The shape of a `features.json` entry (-1 in TFDS is None)."""
    dims = spec.get("shape", {}).get("dimensions", [])
    return tuple(None if int(d) < 0 else int(d) for d in dims)


def _tfds_dims(shape: Sequence[int | None]) -> dict[str, Any]:
    return {"dimensions": [str(-1 if d is None else d) for d in shape]} if shape else {}


def tfds_tensor(shape: Sequence[int | None], dtype: str, encoding: str = "none") -> dict[str, Any]:
    """The `features.json` entry of a TFDS `Tensor`."""
    return {
        "pythonClassName": f"{TFDS_FEATURES}tensor_feature.Tensor",
        "tensor": {"dtype": dtype, "encoding": encoding, "shape": _tfds_dims(shape)},
    }


def tfds_image(shape: Sequence[int | None], dtype: str, encoding: str | None) -> dict[str, Any]:
    """The `features.json` entry of a TFDS `Image` (`encoding` None: each file as it came)."""
    spec = {"dtype": dtype} if encoding is None else {"dtype": dtype, "encodingFormat": encoding}
    return {
        "image": {**spec, "shape": _tfds_dims(shape)},
        "pythonClassName": f"{TFDS_FEATURES}image_feature.Image",
    }
