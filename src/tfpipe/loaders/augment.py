"""`tfpipe.augment`: random flips, crops and resizes applied alike to images, masks and boxes.

One draw per example moves every key of it together::

    seed of the example ──▶ 6 uniform numbers ──▶ crop box, flip bits (one draw per example)
        ──▶ images: crop ─▶ resize (bilinear) ─▶ flip
        ──▶ masks:  crop ─▶ resize (nearest: the label values stay as they are) ─▶ flip
        ──▶ boxes:  moved into the crop and clipped ─▶ (a resize keeps fractions) ─▶ flip

The draw depends only on the seed of the example, never on thread timing, so a parallel map
gives the same augmented examples on every run. `Pipeline.map(joint)` zips a seed sequence
(`tf.data.Dataset.random`, new every epoch, never changed by TensorFlow's global seed) onto the
examples (after `start_at`, seeds folded from `(seed, epoch, example index)`);
`SequenceLoader(transform=joint)` passes the generator it seeds from `(seed, epoch, example
index)`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from tfpipe.checks import check_image_size, check_int, is_positive
from tfpipe.errors import SchemaError
from tfpipe.loaders.seeding import example_seeds, map_with_seeds

_FLIPS = {
    None: (False, False),
    "horizontal": (True, False),
    "vertical": (False, True),
    "horizontal_and_vertical": (True, True),
}


@dataclasses.dataclass(frozen=True)
class _Draw:
    """Where one example is cropped and whether it is flipped: python ints and bools for numpy
    examples, scalar tensors in a graph (a flip that is off is always a python False)."""

    top: Any
    left: Any
    height: Any
    width: Any
    flip_left_right: Any
    flip_up_down: Any


@dataclasses.dataclass(frozen=True)
class _Ops:
    """The few operations a draw and the boxes need, in numpy or in TensorFlow."""

    area: Callable[[Any, Any], Any]  # height, width -> float area
    side: Callable[[Any, Any], Any]  # area-like value, limit -> round(sqrt(value)) in [1, limit]
    offset: Callable[[Any, Any], Any]  # u, room -> an int in [0, room]
    coin: Callable[[Any], Any]  # u -> u < 1/2
    like: Callable[[Any, Any], Any]  # a number -> of the dtype of a box tensor
    clip: Callable[[Any], Any]  # box coordinates -> clipped to [0, 1]
    stack: Callable[[list[Any]], Any]  # 4 coordinates -> boxes (..., 4)


_NUMPY_OPS = _Ops(
    area=lambda height, width: float(height * width),
    side=lambda value, limit: min(max(round(math.sqrt(value)), 1), limit),
    offset=lambda u, room: min(int(u * (room + 1)), room),
    coin=lambda u: bool(u < 0.5),
    like=lambda number, boxes: number,
    clip=lambda boxes: np.clip(boxes, 0, 1),
    stack=lambda coordinates: np.stack(coordinates, axis=-1),
)
_TF_OPS = _Ops(
    area=lambda height, width: tf.cast(height * width, tf.float32),
    side=lambda value, limit: tf.clip_by_value(
        tf.cast(tf.round(tf.sqrt(value)), tf.int32), 1, limit
    ),
    offset=lambda u, room: tf.minimum(tf.cast(u * tf.cast(room + 1, tf.float32), tf.int32), room),
    coin=lambda u: u < 0.5,
    like=lambda number, boxes: tf.cast(number, boxes.dtype),
    clip=lambda boxes: tf.clip_by_value(boxes, 0, 1),
    stack=lambda coordinates: tf.stack(coordinates, axis=-1),
)


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
    """Random flips, crops and resizes applied identically to images, their masks and boxes.

    Every example gets one draw (crop box, flips) that moves all its keys together: images are
    resized bilinearly, masks with nearest neighbour so their integer values never change,
    boxes are moved and clipped to the crop. Dtypes are kept (uint8 images stay uint8). Order
    of the steps: crop, resize, flip.

    The draw depends only on the seed of the example (stateless random ops in a graph, a
    generator seeded per example for numpy arrays), so the same `seed` gives the same
    augmented examples on every run, in a parallel map as well:

    - `Pipeline(...).map(joint)` zips a seed sequence onto the examples (new every epoch,
      reproducible when the pipeline's order is: `shuffle(seed=...)`; after `start_at`, a
      function of the epoch and the example's place in it, so a resumed run draws alike);
    - `SequenceLoader(transform=joint)` draws from the generator the loader seeds from
      `(seed, epoch, example index)`, mixed with this `seed`; the loader's batches take the
      cropped or resized shape;
    - any other `tf.data.Dataset`: `dataset.apply(joint.map_dataset)`.

    Examples:
        >>> schema = tfpipe.Schema({"image": tfpipe.Image((128, 128, 3), encoding="raw"),
        ...                         "mask": tfpipe.Mask((128, 128, 1), num_classes=3)})
        >>> source = tfpipe.from_arrays({"image": np.zeros((8, 128, 128, 3), np.uint8),
        ...                              "mask": np.ones((8, 128, 128, 1), np.uint8)}, schema)
        >>> joint = tfpipe.augment.Joint(images="image", masks="mask", crop=(96, 96), seed=0)
        >>> ds = (tfpipe.Pipeline(source).shuffle(seed=0).map(joint).batch(4)
        ...       .as_supervised("image", "mask").build())
        >>> [tuple(t.shape) for t in next(iter(ds))]
        [(4, 96, 96, 3), (4, 96, 96, 1)]
        >>> loader = tfpipe.SequenceLoader(source, x="image", y="mask", batch_size=4,
        ...                                transform=joint)
        >>> [array.shape for array in loader[0]]
        [(4, 96, 96, 3), (4, 96, 96, 1)]

    Args:
        images: the image keys, each of shape (height, width, channels). Defaults to "image".
        masks: the mask keys: integer label images of shape (height, width) or (height, width,
            channels), aligned with the images. Defaults to () (no mask).
        boxes: the bounding-box keys: float tensors of shape (..., 4), rows `[ymin, xmin,
            ymax, xmax]` in [0, 1] of the image's height and width (TensorFlow's convention,
            as `tf.image.draw_bounding_boxes`). A crop clips them: a box outside the crop keeps
            its row with zero area (filter on `ymax > ymin and xmax > xmin`). Defaults to ().
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
    boxes: str | Sequence[str] = ()
    flip: str | None = "horizontal"
    crop: tuple[int, int] | None = None
    crop_area: tuple[float, float] | None = None
    crop_aspect: tuple[float, float] = (3 / 4, 4 / 3)
    size: tuple[int, int] | None = None
    seed: int | None = None

    def __post_init__(self) -> None:
        images, masks = _names("images", self.images), _names("masks", self.masks)
        boxes = _names("boxes", self.boxes)
        if len(set(images + masks + boxes)) != len(images + masks + boxes):
            raise ValueError(
                "each key must be named once, as an image, a mask or boxes. Received: "
                f"images={self.images!r}, masks={self.masks!r}, boxes={self.boxes!r}"
            )
        if not images + masks:
            raise ValueError(
                "Joint needs at least one image or mask key to augment (boxes are cropped in "
                f"its pixels). Received: images={self.images!r}, masks={self.masks!r}"
            )
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
            ("boxes", boxes),
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
        never caches after it.

        Examples:
            >>> Joint = tfpipe.augment.Joint
            >>> Joint(flip="vertical").random, Joint(flip=None, size=(64, 64)).random
            (True, False)
        """
        return self.flip is not None or self.crop is not None or self.crop_area is not None

    @property
    def _keys(self) -> tuple[str, ...]:
        return (*self.images, *self.masks)

    def output_shape(self, key: str, shape: Sequence[int]) -> tuple[int, ...]:
        """The shape `key` takes from an example of `shape`; `SequenceLoader` sizes its
        batches with it.

        Examples:
            >>> tfpipe.augment.Joint(masks="mask", crop=(96, 96)).output_shape("mask", (128, 128))
            (96, 96)
        """
        if key not in self._keys:
            return tuple(shape)
        height, width = self.size or self.crop or shape[:2]
        return (height, width, *shape[2:])

    def map_dataset(
        self,
        dataset: tf.data.Dataset,
        prepare: Callable[[Any], Any] | None = None,
        position: tuple[Any, Any] | None = None,
    ) -> tf.data.Dataset:
        """Maps `dataset` (of example dicts) in parallel, each example with its own seed.

        The seeds come from `tf.data.Dataset.random(seed)`, zipped onto the examples before the
        parallel map, and differ every epoch (every iteration of the dataset). They depend on
        `seed` only, not on TensorFlow's global seed (`tf.random.set_seed`,
        `keras.utils.set_random_seed`). `Pipeline.map(joint)` calls this.

        Examples:
            >>> images = np.zeros((4, 64, 64, 3), np.uint8)
            >>> masks = np.zeros((4, 64, 64), np.uint8)
            >>> ds = tf.data.Dataset.from_tensor_slices({"image": images, "mask": masks})
            >>> ds = ds.apply(tfpipe.augment.Joint(masks="mask", crop=(48, 48), seed=0).map_dataset)
            >>> example = next(iter(ds))
            >>> example["image"].shape, example["mask"].shape
            (TensorShape([48, 48, 3]), TensorShape([48, 48]))

        Args:
            dataset: the examples.
            prepare: turns each element into the example dict first, in the same parallel
                call (`Pipeline` decodes its images there: one map instead of two cost ~13%
                less CPU time per 256x256 image and mask). Defaults to None.
            position: `(epoch, index of the first example in it)`, ints or scalar tensors:
                each example's seed is then a function of (seed, epoch, its index in the
                epoch). `Pipeline.start_at` passes them, so that a resumed epoch draws as the
                uninterrupted one. Defaults to None (a seed sequence per iteration).
        """
        # Drawn from this seed alone: a global seed (keras.utils.set_random_seed) changes
        # nothing. The seeds are [seed, n]: as __call__ makes them of a scalar n.
        seeds = example_seeds(self.seed, position)  # type: ignore[arg-type]
        return map_with_seeds(dataset, seeds, self.__call__, prepare)

    def __call__(self, example: Mapping[str, Any], seed: Any) -> dict[str, Any]:
        """Augments one example: a dict of tensors, or of numpy arrays.

        Examples:
            >>> image = np.arange(12, dtype=np.uint8).reshape(2, 2, 3)
            >>> mask = np.array([[0, 1], [2, 3]], np.uint8)
            >>> joint = tfpipe.augment.Joint(masks="mask", flip="horizontal", seed=0)
            >>> out = joint({"image": image, "mask": mask}, np.random.default_rng(1))
            >>> out["mask"].tolist() in ([[0, 1], [2, 3]], [[1, 0], [3, 2]])  # flipped or not
            True

        Args:
            example: the example dict; keys other than `images` and `masks` pass unchanged.
            seed: the draw of this example: a `numpy.random.Generator` (as `SequenceLoader`
                passes; numpy arrays come back), or an integer tensor (as `map_dataset` passes;
                tensors come back): a scalar, mixed with this joint's `seed`, or a shape-(2,)
                stateless seed used as it is.
        """
        if not isinstance(example, Mapping):
            raise SchemaError(
                "augment.Joint augments example dicts of name -> image or mask; got "
                f"{type(example).__name__}"
            )
        missing = [key for key in (*self._keys, *self.boxes) if key not in example]
        if missing:
            raise SchemaError(
                f"augment.Joint: key {missing[0]!r} is not in the example; it has "
                f"{sorted(example)}. Name the image and mask keys with images= and masks="
            )
        if isinstance(seed, np.random.Generator):
            return {**example, **self._augment_arrays(example, seed)}
        values = {key: tf.convert_to_tensor(example[key]) for key in self._keys}
        boxes = {key: tf.convert_to_tensor(example[key]) for key in self.boxes}
        self._check(values)
        self._check_boxes(boxes)
        height, width = tf.unstack(tf.shape(next(iter(values.values())))[:2])
        seed = tf.cast(seed, tf.int64)
        if seed.shape.rank == 0:
            seed = tf.stack([tf.constant(self.seed, tf.int64), seed])
        uniforms = tf.random.stateless_uniform([6], seed)
        draw = self._draw(uniforms, height, width, _TF_OPS)
        with tf.control_dependencies(self._graph_checks(values)):
            out = {key: self._apply(key, v, draw) for key, v in values.items()}
        for key, value in boxes.items():
            out[key] = self._apply_boxes(value, draw, height=height, width=width, ops=_TF_OPS)
        return {**example, **out}

    def _augment_arrays(
        self, example: Mapping[str, Any], rng: np.random.Generator
    ) -> dict[str, np.ndarray]:
        arrays = {key: np.asarray(example[key]) for key in (*self._keys, *self.boxes)}
        specs = {}
        for key, array in arrays.items():
            try:
                specs[key] = tf.TensorSpec(array.shape, tf.as_dtype(array.dtype))
            except TypeError as e:
                raise SchemaError(
                    f"augment.Joint: {key!r} is not an image, mask or boxes array (dtype "
                    f"{array.dtype}); expected an integer or float numpy array"
                ) from e
        self._check({key: specs[key] for key in self._keys})
        self._check_boxes({key: specs[key] for key in self.boxes})
        height, width = arrays[self._keys[0]].shape[:2]
        rng = np.random.default_rng([self.seed or 0, int(rng.integers(2**63))])
        draw = self._draw(rng.random(6), height, width, _NUMPY_OPS)
        out = {key: np.ascontiguousarray(self._apply(key, arrays[key], draw)) for key in self._keys}
        for key in self.boxes:
            out[key] = self._apply_boxes(
                arrays[key], draw, height=height, width=width, ops=_NUMPY_OPS
            )
        return out

    def _check(self, values: Mapping[str, Any]) -> None:
        """Checks what the shapes and dtypes (of tensors or `tf.TensorSpec`s) already tell:
        ranks, mask dtypes, and the known sizes (aligned, at least the crop)."""
        for key, value in values.items():
            mask = key in self.masks
            what = "mask" if mask else "image"
            ranks = (2, 3) if mask else (3,)
            if value.shape.rank not in ranks:
                expected = ("(height, width) or " if mask else "") + "(height, width, channels)"
                fix = (
                    "Augment examples before batching them"
                    if (value.shape.rank or 0) > ranks[-1]
                    else "Give it a channel axis (image[..., None])"
                )
                raise SchemaError(
                    f"augment.Joint: {what} {key!r} must be {expected}; got shape "
                    f"{tuple(value.shape)}. {fix}"
                )
            if mask and not value.dtype.is_integer:
                raise SchemaError(
                    f"augment.Joint: mask {key!r} has dtype {value.dtype.name}; masks must be "
                    "integer label images (resized with nearest neighbour). Cast it to an "
                    "integer dtype, or name it in images= if it is a picture"
                )
        (first, reference), *others = values.items()
        for key, value in others:
            sizes = reference.shape[:2], value.shape[:2]
            if all(s.is_fully_defined() for s in sizes) and sizes[0] != sizes[1]:
                raise SchemaError(
                    f"augment.Joint: {self._kind(first)} {first!r} is {_size_text(sizes[0])} but "
                    f"{self._kind(key)} {key!r} is {_size_text(sizes[1])}: a joint crop needs "
                    "them aligned; store or resize them at the same size"
                )
        height, width = reference.shape[:2]
        known = self.crop is not None and height is not None and width is not None
        if known and (self.crop[0] > height or self.crop[1] > width):  # type: ignore[index]
            raise SchemaError(self._crop_message(repr(first), f"{height}x{width}"))

    def _check_boxes(self, boxes: Mapping[str, Any]) -> None:
        for key, value in boxes.items():
            if not value.dtype.is_floating or value.shape.rank == 0 or value.shape[-1] != 4:
                raise SchemaError(
                    f"augment.Joint: boxes {key!r} must be floats of shape (..., 4), rows "
                    f"[ymin, xmin, ymax, xmax] in [0, 1]; got {value.dtype.name} of shape "
                    f"{tuple(value.shape)}. Divide pixel boxes by the image's height and width"
                )

    def _graph_checks(self, values: dict[str, tf.Tensor]) -> list[Any]:
        """Assertions on the sizes the graph learns only from the data."""
        (first, reference), *others = values.items()
        checks = [
            tf.debugging.assert_equal(
                tf.shape(reference)[:2],
                tf.shape(value)[:2],
                # TensorFlow escapes quotes in assertion messages: backticks read better.
                message=f"augment.Joint: {self._kind(first)} `{first}` and {self._kind(key)} "
                f"`{key}` differ in height x width: a joint crop needs them aligned",
            )
            for key, value in others
            if not (reference.shape[:2].is_fully_defined() and value.shape[:2].is_fully_defined())
        ]
        if self.crop is not None and not reference.shape[:2].is_fully_defined():
            checks.append(
                tf.debugging.assert_less_equal(
                    tf.constant(self.crop, tf.int32),
                    tf.shape(reference)[:2],
                    message=self._crop_message(f"`{first}`", "a smaller height x width"),
                )
            )
        return checks

    def _kind(self, key: str) -> str:
        return "mask" if key in self.masks else "image"

    def _crop_message(self, key: str, size: str) -> str:
        crop = _size_text(self.crop or ())
        return (
            f"augment.Joint: crop {crop} is larger than {key} of {size}; crop at most the size "
            "of the examples, or resize them first (e.g. Pipeline(image_size=...))"
        )

    def _draw(self, u: Any, height: Any, width: Any, ops: _Ops) -> _Draw:
        """The draw of one example from 6 uniform numbers in [0, 1), with numpy or TF ops."""
        if self.crop is not None:
            crop_h, crop_w = self.crop
        elif self.crop_area is not None:
            (low, high), (a_low, a_high) = self.crop_area, self.crop_aspect
            area = ops.area(height, width) * (low + (high - low) * u[0])
            ratio = a_low * (a_high / a_low) ** u[1]  # log-uniform in crop_aspect
            crop_h, crop_w = ops.side(area / ratio, height), ops.side(area * ratio, width)
        else:
            crop_h, crop_w = height, width
        flip_lr, flip_ud = _FLIPS[self.flip]
        return _Draw(
            top=ops.offset(u[2], height - crop_h),
            left=ops.offset(u[3], width - crop_w),
            height=crop_h,
            width=crop_w,
            flip_left_right=flip_lr and ops.coin(u[4]),
            flip_up_down=flip_ud and ops.coin(u[5]),
        )

    def _apply_boxes(self, value: Any, draw: _Draw, height: Any, width: Any, ops: _Ops) -> Any:
        """Moves `[ymin, xmin, ymax, xmax]` rows (fractions of the image) as `draw` says."""
        ymin, xmin, ymax, xmax = (value[..., i] for i in range(4))
        if self.crop is not None or self.crop_area is not None:

            def crop(v: Any, size: Any, start: Any, length: Any) -> Any:
                return ops.clip((v * ops.like(size, v) - ops.like(start, v)) / ops.like(length, v))

            ymin, ymax = (crop(v, height, draw.top, draw.height) for v in (ymin, ymax))
            xmin, xmax = (crop(v, width, draw.left, draw.width) for v in (xmin, xmax))
        xmin, xmax = _choose(draw.flip_left_right, (1 - xmax, 1 - xmin), (xmin, xmax))
        ymin, ymax = _choose(draw.flip_up_down, (1 - ymax, 1 - ymin), (ymin, ymax))
        return ops.stack([ymin, xmin, ymax, xmax])

    def _apply(self, key: str, value: Any, draw: _Draw) -> Any:
        """Crops, resizes and flips one tensor or numpy array as `draw` says."""
        rank2 = len(value.shape) == 2
        out = value[..., None] if rank2 else value
        if self.crop is not None or self.crop_area is not None:
            out = out[draw.top : draw.top + draw.height, draw.left : draw.left + draw.width]
        size = self.size
        if size is None and self.crop_area is not None:  # back to the example's size
            size = value.shape[:2] if isinstance(value, np.ndarray) else tf.shape(value)[:2]
        if size is not None:
            resized = _resize(out, size, mask=key in self.masks)
            out = resized.numpy() if isinstance(out, np.ndarray) else resized
        out = _flip(out, draw.flip_left_right, axis=1)
        out = _flip(out, draw.flip_up_down, axis=0)
        out = out[..., 0] if rank2 else out
        if isinstance(out, tf.Tensor):
            out = tf.ensure_shape(out, self.output_shape(key, value.shape))
        return out


def _flip(value: Any, flag: Any, *, axis: int) -> Any:
    """`value` reversed along `axis` when `flag` (a bool, or a bool tensor) holds."""
    if isinstance(flag, bool):
        if not flag:
            return value
        return np.flip(value, axis) if isinstance(value, np.ndarray) else tf.reverse(value, [axis])
    return tf.cond(flag, lambda: tf.reverse(value, [axis]), lambda: value)


def _choose(flag: Any, chosen: tuple[Any, ...], other: tuple[Any, ...]) -> tuple[Any, ...]:
    """`chosen` where `flag` (a bool, or a bool tensor) holds, else `other`."""
    if isinstance(flag, bool):
        return chosen if flag else other
    return tuple(tf.where(flag, a, b) for a, b in zip(chosen, other, strict=True))


def _resize(value: Any, size: Any, *, mask: bool) -> tf.Tensor:
    """Resizes one (height, width, channels) tensor or array, keeping its dtype."""
    if mask:
        return tf.image.resize(value, size, method="nearest")
    resized = tf.image.resize(value, size, method="bilinear")
    dtype = tf.as_dtype(value.dtype)
    if dtype.is_integer:
        return tf.saturate_cast(tf.round(resized), dtype)
    return tf.cast(resized, dtype)
