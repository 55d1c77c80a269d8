"""`Pipeline(pad=...)`: variable-length `Tensor` features as dense tensors of a fixed length.

A `Tensor(shape=(None, ...))` is read as a `tf.RaggedTensor` unless the pipeline pads it. The
padding is a choice made when reading, not a property of the stored data (one dataset can feed
models of several sequence lengths), so it sits next to `image_size` on the `Pipeline`, not in
the schema. A value longer than the pad length is an error naming the feature, never cut.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from typing import Any

import numpy as np

from tfpipe._checks import check_int
from tfpipe.errors import SchemaError
from tfpipe.features import Tensor
from tfpipe.loaders.inputs import AUTOTUNE, Stage
from tfpipe.schema import Schema


def padding_stages(pad: Any, value: Any, schema: Schema | None) -> list[Stage]:
    """The stages padding each feature of `pad` (name -> length) with `value`, checked against
    the schema: each must be a Tensor with a variable first dimension, `value` one of its
    values. None gives no stage."""
    if pad is None:
        return []
    if not isinstance(pad, Mapping) or not pad or not all(isinstance(n, str) for n in pad):
        raise ValueError(
            f"pad must be a dict of feature name -> length, e.g. {{'tokens': 16}}. Received: "
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
    stages = []
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
        stages.append(_stage(feature, name, length, filler))
    return stages


def _stage(feature: Tensor, name: str, length: int, filler: Any) -> Stage:
    def pad(batch: dict[str, Any]) -> dict[str, Any]:
        return {**batch, name: feature.pad_batch(batch[name], length, filler, name)}

    return (
        f"pad {name} to {length} values with {filler!r} (an error when longer)",
        lambda ds: ds.map(pad, num_parallel_calls=AUTOTUNE),
    )
