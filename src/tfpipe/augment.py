"""`tfpipe.augment`: random flips, crops and resizes applied alike to an image and its masks.

One draw per example moves every key of it together::

    seed of the example ──stateless_split──▶ crop box, flip bits (one draw per example)
        ──▶ images: crop ─▶ resize (bilinear) ─▶ flip
        ──▶ masks:  crop ─▶ resize (nearest: the label values stay as they are) ─▶ flip

The draw depends only on the seed of the example, never on thread timing, so a parallel map
gives the same augmented examples on every run. `Pipeline.map(joint)` zips a seed sequence
(`tf.data.Dataset.random`, new every epoch) onto the examples; `SequenceLoader(transform=joint)`
passes the generator it seeds from `(seed, epoch, example index)`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from tfpipe._checks import check_image_size, check_int, is_positive
from tfpipe.errors import SchemaError

_FLIPS = {
    None: (False, False),
    "horizontal": (True, False),
    "vertical": (False, True),
    "horizontal_and_vertical": (True, True),
}


@dataclasses.dataclass(frozen=True)
class _Draw:
    """Where one example is cropped and whether it is flipped (scalar tensors)."""

    top: tf.Tensor
    left: tf.Tensor
    height: tf.Tensor
    width: tf.Tensor
    flip_left_right: tf.Tensor
    flip_up_down: tf.Tensor


def _names(argument: str, value: str | Sequence[str]) -> tuple[str, ...]:
    keys = (value,) if isinstance(value, str) else tuple(value)
    if not all(isinstance(k, str) and k for k in keys):
        raise ValueError(
            f"{argument} must be a feature name or a list of names. Received: {argument}={value!r}"
        )
    return keys


def _check_range(argument: str, value: Any, upper: float | None) -> tuple[float, float]:
    limit = f" and at most {upper}" if upper is not None else ""
    if (
        not isinstance(value, tuple | list)
        or len(value) != 2
        or not all(is_positive(v) and (upper is None or v <= upper) for v in value)
        or value[0] > value[1]
    ):
        raise ValueError(
            f"{argument} must be (low, high) with 0 < low <= high{limit}. "
            f"Received: {argument}={value!r}"
        )
    return float(value[0]), float(value[1])


def _size_text(shape: Sequence[Any]) -> str:
    return f"{shape[0]}x{shape[1]}"


@dataclasses.dataclass(frozen=True)
class Joint:
    """Random flips, crops and resizes applied identically to images and their masks.

    Every example gets one draw (crop box, flips) that moves all its keys together: images are
    resized bilinearly, masks with nearest neighbour so their integer values never change.
    Dtypes are kept (uint8 images stay uint8). Order of the steps: crop, resize, flip.

    The draw comes from the seed of the example (stateless random ops), so the same `seed`
    gives the same augmented examples on every run, in a parallel map as well:

    - `Pipeline(...).map(joint)` zips a seed sequence onto the examples (new every epoch,
      reproducible when the pipeline's order is: `shuffle(seed=...)`);
    - `SequenceLoader(transform=joint)` draws from the generator the loader seeds from
      `(seed, epoch, example index)`, mixed with this `seed`; the loader's batches take the
      cropped or resized shape;
    - any other `tf.data.Dataset`: `dataset.apply(joint.map_dataset)`.

    Example:
        >>> joint = tfpipe.augment.Joint(images="image", masks="mask", crop=(96, 96), seed=0)
        >>> ds = (tfpipe.Pipeline(source).shuffle(seed=0).map(joint).batch(32)
        ...       .as_supervised("image", "mask").build())
        >>> loader = tfpipe.SequenceLoader(source, x="image", y="mask", transform=joint)

    Args:
        images: the image keys, each of shape (height, width, channels). Defaults to "image".
        masks: the mask keys: integer label images of shape (height, width) or (height, width,
            channels), aligned with the images. Defaults to () (no mask).
        flip: random flips, as Keras's `RandomFlip` modes: "horizontal" (left-right),
            "vertical" (up-down), "horizontal_and_vertical" (each with probability 1/2), or
            None. Defaults to "horizontal".
        crop: a random crop of `(height, width)` (at most the size of the examples). Defaults
            to None.
        crop_area: a random-size crop instead: a fraction of the area drawn from `(low, high)`
            (in (0, 1]) and an aspect ratio from `crop_aspect`, then resized to `size` (or back
            to the example's size). Defaults to None.
        crop_aspect: the range of width / height of a `crop_area` crop. Defaults to (3/4, 4/3).
        size: resize to `(height, width)` after any crop. Defaults to None (no resize).
        seed: a non-negative int. Defaults to None (a random seed drawn once, kept here).
    """

    images: str | Sequence[str] = "image"
    masks: str | Sequence[str] = ()
    _: dataclasses.KW_ONLY
    flip: str | None = "horizontal"
    crop: tuple[int, int] | None = None
    crop_area: tuple[float, float] | None = None
    crop_aspect: tuple[float, float] = (3 / 4, 4 / 3)
    size: tuple[int, int] | None = None
    seed: int | None = None

    def __post_init__(self) -> None:
        images, masks = _names("images", self.images), _names("masks", self.masks)
        both = sorted(set(images) & set(masks))
        if both or len(set(images + masks)) != len(images + masks):
            raise ValueError(
                "each key must be named once, as an image or as a mask. "
                f"Received: images={self.images!r}, masks={self.masks!r}"
            )
        if not images + masks:
            raise ValueError("Joint needs at least one image or mask key to augment")
        if self.flip not in _FLIPS:
            raise ValueError(
                "flip must be 'horizontal', 'vertical', 'horizontal_and_vertical' or None. "
                f"Received: flip={self.flip!r}"
            )
        crop = check_image_size("crop", self.crop)
        if crop is not None and self.crop_area is not None:
            raise ValueError(
                "crop (a fixed size) and crop_area (a random size) exclude each other. "
                f"Received: crop={self.crop!r}, crop_area={self.crop_area!r}"
            )
        area = None if self.crop_area is None else _check_range("crop_area", self.crop_area, 1)
        seed = check_int("seed", self.seed, minimum=0, or_none=True)
        if seed is None:
            seed = int(np.random.default_rng().integers(2**31))
        for name, value in (
            ("images", images),
            ("masks", masks),
            ("crop", crop),
            ("crop_area", area),
            ("crop_aspect", _check_range("crop_aspect", self.crop_aspect, None)),
            ("size", check_image_size("size", self.size)),
            ("seed", seed),
        ):
            object.__setattr__(self, name, value)

    @property
    def random(self) -> bool:
        """Whether the output changes between calls (a flip or a crop); `Pipeline` then
        never caches after it."""
        return self.flip is not None or self.crop is not None or self.crop_area is not None

    @property
    def _keys(self) -> tuple[str, ...]:
        return (*self.images, *self.masks)

    def output_shape(self, key: str, shape: Sequence[int]) -> tuple[int, ...]:
        """The shape `key` takes from an example of `shape`; `SequenceLoader` sizes its
        batches with it.

        Example:
            >>> tfpipe.augment.Joint(masks="mask", crop=(96, 96)).output_shape("mask", (128, 128))
            (96, 96)
        """
        if key not in self._keys:
            return tuple(shape)
        height, width = self.size or self.crop or shape[:2]
        return (height, width, *shape[2:])

    def map_dataset(self, dataset: tf.data.Dataset) -> tf.data.Dataset:
        """Maps `dataset` (of example dicts) in parallel, each example with its own seed.

        The seeds come from `tf.data.Dataset.random(seed)`, zipped onto the examples before the
        parallel map, and differ every epoch. `Pipeline.map(joint)` calls this.

        Example:
            >>> ds = tf.data.Dataset.from_tensor_slices({"image": images, "mask": masks})
            >>> ds = ds.apply(tfpipe.augment.Joint(masks="mask", seed=0).map_dataset)
        """
        seeds = tf.data.Dataset.random(seed=self.seed, rerandomize_each_iteration=True).batch(2)
        # Not converted by AutoGraph (nothing here needs it): a SchemaError then stays one.
        augment = tf.autograph.experimental.do_not_convert(self.__call__)
        return tf.data.Dataset.zip(dataset, seeds).map(augment, num_parallel_calls=tf.data.AUTOTUNE)

    def __call__(self, example: Mapping[str, Any], seed: Any) -> dict[str, Any]:
        """Augments one example: a dict of tensors, or of numpy arrays.

        Example:
            >>> joint = tfpipe.augment.Joint(masks="mask", seed=0)
            >>> out = joint({"image": image, "mask": mask}, np.random.default_rng(1))

        Args:
            example: the example dict; keys other than `images` and `masks` pass unchanged.
            seed: the draw of this example: a `numpy.random.Generator` (as `SequenceLoader`
                passes; numpy arrays come back), or a shape-(2,) integer tensor (as
                `map_dataset` passes; tensors come back).
        """
        if not isinstance(example, Mapping):
            raise SchemaError(
                f"Joint augments example dicts of name -> image or mask; got "
                f"{type(example).__name__}"
            )
        missing = [key for key in self._keys if key not in example]
        if missing:
            raise SchemaError(
                f"augment.Joint: key {missing[0]!r} is not in the example; it has "
                f"{sorted(example)}. Name the image and mask keys with images= and masks="
            )
        if isinstance(seed, np.random.Generator):
            pair = tf.constant([self.seed, seed.integers(2**63 - 1)], tf.int64)
            tensors = _augment_numpy(self, {k: np.asarray(example[k]) for k in self._keys}, pair)
            return {**example, **{k: v.numpy() for k, v in tensors.items()}}
        return {**example, **self._augment(dict(example), tf.convert_to_tensor(seed))}

    def _augment(self, example: dict[str, Any], seed: tf.Tensor) -> dict[str, tf.Tensor]:
        values = self._checked(example)
        first = next(iter(values.values()))
        shape = tf.shape(first)
        draw = self._draw(seed, shape[0], shape[1])
        checks = self._check_crop(values)
        out = {}
        with tf.control_dependencies(checks):
            for key, value in values.items():
                out[key] = self._apply(value, draw, mask=key in self.masks)
        return out

    def _checked(self, example: dict[str, Any]) -> dict[str, tf.Tensor]:
        """The image and mask tensors, checked: of the right rank and dtype, aligned."""
        values: dict[str, tf.Tensor] = {}
        for key in self._keys:
            value = example[key]
            mask = key in self.masks
            what = "mask" if mask else "image"
            ranks = (2, 3) if mask else (3,)
            if value.shape.rank not in ranks:
                expected = (
                    "(height, width) or (height, width, channels)"
                    if mask
                    else ("(height, width, channels)")
                )
                raise SchemaError(
                    f"augment.Joint: {what} {key!r} must be {expected}; got shape "
                    f"{tuple(value.shape)}. Augment examples before batching them"
                )
            if mask and not value.dtype.is_integer:
                raise SchemaError(
                    f"augment.Joint: mask {key!r} has dtype {value.dtype.name}; masks must be "
                    "integer label images (resized with nearest neighbour). Cast it to an "
                    "integer dtype, or name it in images= if it is a picture"
                )
            values[key] = value
        self._check_aligned(values)
        return values

    def _check_aligned(self, values: dict[str, tf.Tensor]) -> None:
        (first, reference), *others = values.items()
        kind = lambda key: "mask" if key in self.masks else "image"  # noqa: E731
        for key, value in others:
            static = reference.shape[:2], value.shape[:2]
            if static[0].is_fully_defined() and static[1].is_fully_defined():
                if static[0] != static[1]:
                    raise SchemaError(
                        f"augment.Joint: {kind(first)} {first!r} is {_size_text(static[0])} but "
                        f"{kind(key)} {key!r} is {_size_text(static[1])}: a joint crop needs "
                        "them aligned; store or resize them at the same size"
                    )
                continue
            values[key] = _after(
                tf.debugging.assert_equal(
                    tf.shape(reference)[:2],
                    tf.shape(value)[:2],
                    # TensorFlow escapes quotes in assertion messages: backticks read better.
                    message=f"augment.Joint: {kind(first)} `{first}` and {kind(key)} `{key}` "
                    "differ in height x width: a joint crop needs them aligned",
                ),
                value,
            )

    def _check_crop(self, values: dict[str, tf.Tensor]) -> list[Any]:
        if self.crop is None:
            return []
        key, value = next(iter(values.items()))
        crop = _size_text(self.crop)
        message = (
            f"augment.Joint: crop {crop} is larger than {{}} of {{}}; crop at most the size "
            "of the examples, or resize them first (e.g. Pipeline(image_size=...))"
        )
        height, width = value.shape[:2]
        if height is not None and width is not None:
            if self.crop[0] > height or self.crop[1] > width:
                raise SchemaError(message.format(repr(key), f"{height}x{width}"))
            return []
        return [
            tf.debugging.assert_less_equal(
                tf.constant(self.crop, tf.int32),
                tf.shape(value)[:2],
                message=message.format(f"`{key}`", "a smaller height x width"),
            )
        ]

    def _draw(self, seed: tf.Tensor, height: tf.Tensor, width: tf.Tensor) -> _Draw:
        seeds = tf.random.experimental.stateless_split(seed, 6)
        if self.crop is not None:
            crop_h, crop_w = (tf.constant(d, tf.int32) for d in self.crop)
        elif self.crop_area is not None:
            area = tf.cast(height * width, tf.float32) * tf.random.stateless_uniform(
                [], seeds[0], *self.crop_area
            )
            low, high = (math.log(r) for r in self.crop_aspect)
            ratio = tf.exp(tf.random.stateless_uniform([], seeds[1], low, high))
            side = lambda value, limit: tf.clip_by_value(  # noqa: E731
                tf.cast(tf.round(tf.sqrt(value)), tf.int32), 1, limit
            )
            crop_h, crop_w = side(area / ratio, height), side(area * ratio, width)
        else:
            crop_h, crop_w = height, width
        offset = lambda s, room: tf.random.stateless_uniform(  # noqa: E731
            [], s, 0, room + 1, dtype=tf.int32
        )
        flip_lr, flip_ud = _FLIPS[self.flip]
        coin = lambda s, on: (  # noqa: E731
            tf.random.stateless_uniform([], s) < 0.5 if on else tf.constant(False)
        )
        return _Draw(
            top=offset(seeds[2], height - crop_h),
            left=offset(seeds[3], width - crop_w),
            height=crop_h,
            width=crop_w,
            flip_left_right=coin(seeds[4], flip_lr),
            flip_up_down=coin(seeds[5], flip_ud),
        )

    def _apply(self, value: tf.Tensor, draw: _Draw, *, mask: bool) -> tf.Tensor:
        rank2 = value.shape.rank == 2
        out = value[..., None] if rank2 else value
        channels = out.shape[-1]
        if self.crop is not None or self.crop_area is not None:
            out = out[draw.top : draw.top + draw.height, draw.left : draw.left + draw.width]
            if self.crop is not None:
                out = tf.ensure_shape(out, (*self.crop, channels))
        size = self.size
        if size is None and self.crop_area is not None:
            size = tf.shape(value)[:2]  # back to the example's size
        if size is not None:
            out = _resize(out, size, mask=mask)
        if self.size is None and self.crop_area is not None:
            out = tf.ensure_shape(out, (*value.shape[:2], channels))
        out = tf.cond(draw.flip_left_right, lambda: tf.reverse(out, [1]), lambda: out)
        out = tf.cond(draw.flip_up_down, lambda: tf.reverse(out, [0]), lambda: out)
        return out[..., 0] if rank2 else out


@tf.function(autograph=False)
def _augment_numpy(joint: Joint, example: dict[str, Any], seed: tf.Tensor) -> dict[str, tf.Tensor]:
    """`joint._augment` as one traced graph: numpy examples then cost one call, not one eager
    op after another (several times faster)."""
    return joint._augment(example, seed)


def _resize(value: tf.Tensor, size: Any, *, mask: bool) -> tf.Tensor:
    """Resizes one (height, width, channels) tensor, keeping its dtype."""
    if mask:
        return tf.image.resize(value, size, method="nearest")
    resized = tf.image.resize(value, size, method="bilinear")
    if value.dtype.is_integer:
        return tf.saturate_cast(tf.round(resized), value.dtype)
    return tf.cast(resized, value.dtype)


def _after(check: Any, value: tf.Tensor) -> tf.Tensor:
    """`value`, computed only once `check` has passed."""
    with tf.control_dependencies([check]):
        return tf.identity(value)
