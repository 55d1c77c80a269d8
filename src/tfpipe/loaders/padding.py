"""`Pipeline(pad=...)`: variable-length `Tensor` features as dense tensors of a fixed length.

A `Tensor(shape=(None, ...))` is read as a `tf.RaggedTensor` unless the pipeline pads it. The
padding is a choice made when reading, not a property of the stored data (one dataset can feed
models of several sequence lengths), so it sits next to `image_size` on the `Pipeline`, not in
the schema. A value longer than the pad length is an error naming the feature, or, when the
user asks for it (`truncate=True`), cut and counted.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from typing import Any

import numpy as np
import tensorflow as tf

from tfpipe.checks import check_int
from tfpipe.errors import SchemaError
from tfpipe.features import Tensor
from tfpipe.loaders.inputs import AUTOTUNE, Step
from tfpipe.schema import Schema


class Padding:
    """The padding steps of a pipeline, checked against its schema, and what they cut.

    Args:
        pad: feature name -> length, or None for no padding; each feature must be a `Tensor`
            with a variable first dimension.
        value: the value padding fills in; must be a value of each padded feature.
        truncate: cut longer values to the pad length, counting them, instead of failing.
        schema: the schema of the examples; None for a `PyDataset` (which cannot be padded).
    """

    def __init__(self, pad: Any, value: Any, truncate: bool, schema: Schema | None) -> None:
        self.steps: list[Step] = []
        self.cut: dict[str, tf.Variable] = {}
        if pad is None:
            return
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
        for name, length in pad.items():
            length = check_int(f"pad[{name!r}]", length)
            feature = schema[name]
            if not isinstance(feature, Tensor) or not feature.variable:
                raise SchemaError(
                    f"pad: feature {name!r} is {feature!r}; only a Tensor with a variable first "
                    "dimension (shape=(None, ...)) has lengths to pad. Remove it from pad"
                )
            try:
                filler = feature.convert(np.asarray(value)).item()
            except (TypeError, ValueError) as e:
                raise ValueError(
                    f"pad_value={value!r} is not a value of feature {name!r} ({feature.dtype}): {e}"
                ) from e
            if truncate:
                self.cut[name] = tf.Variable(0, dtype=tf.int64, trainable=False)
            self.steps.append(self._step(feature, name, length, filler))

    def _step(self, feature: Tensor, name: str, length: int, filler: Any) -> Step:
        cut = self.cut.get(name)

        def pad(batch: dict[str, Any]) -> dict[str, Any]:
            return {**batch, name: feature.pad_batch(batch[name], length, filler, name, cut)}

        longer = "cut to it, counted" if cut is not None else "an error"
        return (
            f"pad {name} to {length} values with {filler!r} (longer values: {longer})",
            lambda ds: ds.map(pad, num_parallel_calls=AUTOTUNE),
        )

    def truncated(self) -> dict[str, int]:
        """Examples cut so far, per feature padded with truncation."""
        return {name: int(counter.numpy()) for name, counter in self.cut.items()}
