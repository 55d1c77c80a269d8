"""Checks of numeric arguments, shared by every public entry point.

One message format, Keras's: what the argument must be, then `Received: name=value`. A bool
is not an int (`batch_size=True` is a mistake, not 1), and NaN, infinities, zero and negative
values are refused where they cannot mean anything, instead of falling back to a default.
"""

from __future__ import annotations

import math
import numbers
from typing import Any


def is_int(value: Any) -> bool:
    """An int or numpy integer, but not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_positive(value: Any) -> bool:
    """A finite real number > 0, but not a bool."""
    return (
        isinstance(value, numbers.Real)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and float(value) > 0
    )


def check_int(name: str, value: Any, *, minimum: int = 1, or_none: bool = False) -> Any:
    """`value` as an int >= `minimum` (None passes when `or_none`); else a `ValueError`.

    Examples:
        >>> check_int("batch_size", 0)
        ValueError: batch_size must be a positive int. Received: batch_size=0
    """
    if value is None and or_none:
        return None
    if not is_int(value) or value < minimum:
        what = {0: "a non-negative int", 1: "a positive int"}.get(minimum, f"an int >= {minimum}")
        raise ValueError(
            f"{name} must be {what}{' or None' if or_none else ''}. Received: {name}={value!r}"
        )
    return int(value)


def check_positive(name: str, value: Any, *, or_none: bool = False) -> Any:
    """`value` as a finite float > 0 (None passes when `or_none`); else a `ValueError`.

    Examples:
        >>> check_positive("rescale", float("nan"))
        ValueError: rescale must be a finite number > 0. Received: rescale=nan
    """
    if value is None and or_none:
        return None
    if not is_positive(value):
        raise ValueError(
            f"{name} must be a finite number > 0{' or None' if or_none else ''}. "
            f"Received: {name}={value!r}"
        )
    return float(value)


def check_image_size(name: str, value: Any) -> tuple[int, int] | None:
    """None, or `(height, width)` of two positive ints, as a tuple; else a `ValueError`."""
    if value is None:
        return None
    if (
        not isinstance(value, tuple | list)
        or len(value) != 2
        or not all(is_int(d) and d > 0 for d in value)
    ):
        raise ValueError(
            f"{name} must be (height, width), two positive ints. Received: {name}={value!r}"
        )
    return int(value[0]), int(value[1])
