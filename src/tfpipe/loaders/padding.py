"""`pad=`: variable-length `Tensor` features as dense tensors of a fixed length.

A `Tensor(shape=(None, ...))` is read as a `tf.RaggedTensor` unless the pipeline pads it (a
`SequenceLoader` refuses it unless it pads it). The padding is a choice made when reading, not
a property of the stored data (one dataset can feed models of several sequence lengths), so it
sits next to `image_size` on the `Pipeline` and the `SequenceLoader`, not in the schema. A
value longer than the pad length is an error naming the feature, or, when the user asks for it
(`truncate=True`), cut and counted. `check_pad` gives both loaders that one meaning: `Padding`
pads a pipeline's batches in the graph (`Tensor.pad_batch`), `Pad.one` one example of a
`SequenceLoader` in numpy (`Tensor.pad`).
"""

from __future__ import annotations

import dataclasses
import numbers
import threading
from collections.abc import Mapping
from typing import Any

import numpy as np
import tensorflow as tf

from tfpipe.checks import check_int
from tfpipe.errors import SchemaError
from tfpipe.features import Tensor
from tfpipe.loaders.inputs import AUTOTUNE, Stage
from tfpipe.schema import Schema


@dataclasses.dataclass(frozen=True)
class Pad:
    """How one variable-length feature is padded, checked against its schema by `check_pad`.

    Args:
        name: the feature's name.
        feature: the feature, a `Tensor` with a variable first dimension.
        length: the rows of a padded value.
        filler: the value padding fills in, a value of the feature's dtype.
        truncate: cut longer values to `length` rows instead of failing.
    """

    name: str
    feature: Tensor
    length: int
    filler: Any
    truncate: bool

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape of one padded value: `length` rows of the feature's row shape."""
        return (self.length, *(int(d) for d in self.feature.shape[1:] if d is not None))

    def one(self, value: np.ndarray) -> tuple[np.ndarray, bool]:
        """One value (as `Tensor.load` gives it) padded, and whether it was cut."""
        return self.feature.pad(
            value, self.length, fill=self.filler, name=self.name, truncate=self.truncate
        )


def check_pad(pad: Any, value: Any, truncate: Any, schema: Schema | None) -> list[Pad]:
    """The `pad=`, `pad_value=` and `truncate=` arguments of a loader, checked against its
    schema: one `Pad` per padded feature (none when `pad` is None).

    Args:
        pad: feature name -> length, or None for no padding; each feature must be a `Tensor`
            with a variable first dimension.
        value: the value padding fills in; must be a value of each padded feature.
        truncate: cut longer values to the pad length, counting them, instead of failing.
        schema: the schema of the examples; None for a `PyDataset` (which cannot be padded).
    """
    if truncate not in (True, False) or (truncate and pad is None):
        raise ValueError(
            "truncate must be True or False, and applies with pad={name: length}. "
            f"Received: truncate={truncate!r}, pad={pad!r}"
        )
    if pad is None:
        return []
    if not isinstance(pad, Mapping) or not pad or not all(isinstance(n, str) for n in pad):
        raise ValueError(
            "pad must be a dict of feature name -> length, e.g. {'tokens': 16}. Received: "
            f"pad={pad!r}"
        )
    if schema is None:
        raise ValueError(
            "pad applies to the features of a schema; a keras.utils.PyDataset yields its own "
            f"batches: pad them there. Received: pad={pad!r}"
        )
    schema.check_names(list(pad), "pad")
    if not isinstance(value, numbers.Real):
        raise ValueError(f"pad_value must be a number. Received: pad_value={value!r}")
    pads = []
    for name, length in pad.items():
        length = check_int(f"pad[{name!r}]", length)
        feature = schema.of(Tensor).get(name)
        if feature is None or not feature.variable:
            raise SchemaError(
                f"pad: feature {name!r} is {schema[name]!r}; only a Tensor with a variable first "
                "dimension (shape=(None, ...)) has lengths to pad. Remove it from pad"
            )
        try:
            filler = feature.convert(np.asarray(value)).item()
        except (TypeError, ValueError) as e:
            raise ValueError(
                f"pad_value={value!r} is not a value of feature {name!r} ({feature.dtype}): {e}"
            ) from e
        pads.append(
            Pad(name=name, feature=feature, length=length, filler=filler, truncate=bool(truncate))
        )
    return pads


class Padding:
    """The padding stages of a pipeline (see `check_pad` for the arguments), and what they cut."""

    def __init__(self, pad: Any, value: Any, truncate: Any, schema: Schema | None) -> None:
        self.stages: list[Stage] = []
        self.cut: dict[str, tf.Variable] = {}
        for one in check_pad(pad, value, truncate, schema):
            if one.truncate:
                self.cut[one.name] = tf.Variable(0, dtype=tf.int64, trainable=False)
            self.stages.append(self._stage(one))

    def _stage(self, one: Pad) -> Stage:
        cut = self.cut.get(one.name)

        def pad(batch: dict[str, Any]) -> dict[str, Any]:
            padded = one.feature.pad_batch(
                batch[one.name], one.length, value=one.filler, name=one.name, cut=cut
            )
            return {**batch, one.name: padded}

        longer = "cut to it, counted" if cut is not None else "an error"
        return (
            f"pad {one.name} to {one.length} values with {one.filler!r} (longer values: {longer})",
            lambda ds: ds.map(pad, num_parallel_calls=AUTOTUNE),
        )

    def truncated(self) -> dict[str, int]:
        """Examples cut so far, per feature padded with truncation."""
        return {name: int(counter.numpy()) for name, counter in self.cut.items()}


class Cuts:
    """Values cut to their pad length so far, per feature, counted from any loader thread."""

    def __init__(self, names: list[str]) -> None:
        self._counts = dict.fromkeys(names, 0)
        self._lock = threading.Lock()

    def add(self, name: str) -> None:
        """Counts one value of `name` cut."""
        with self._lock:
            self._counts[name] += 1

    def counts(self) -> dict[str, int]:
        """The values cut so far, per feature."""
        with self._lock:
            return dict(self._counts)

    def __getstate__(self) -> dict[str, int]:
        return self.counts()

    def __setstate__(self, counts: dict[str, int]) -> None:
        self._counts = dict(counts)
        self._lock = threading.Lock()
