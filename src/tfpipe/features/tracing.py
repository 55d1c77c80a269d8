"""Functions given to `tf.data` traced as written, without AutoGraph."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tensorflow as tf


def plain(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` traced as written, without AutoGraph: tfpipe's step functions use TensorFlow's
    control flow ops already, and converting them took ~3 s before the first batch.

    Examples:
        >>> ds = tf.data.Dataset.range(3).map(plain(lambda x: x * 2))
        >>> [int(x) for x in ds]
        [0, 2, 4]
    """
    return tf.autograph.experimental.do_not_convert(fn)
