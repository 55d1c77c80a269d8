"""Stored examples decoded to numpy arrays: what `SequenceLoader` batches and
`DecodedExamples` gives one by one, through one implementation::

    stored examples ──Image.load_batch (the Pipeline's graph, one call for all)──▶ images
    each example ──its images from that call, else Image.load / Mask.load / Feature.load──▶
        {feature name: numpy array}, its masks checked against its images' sizes

A fault names the feature and where the example came from (`origin_of`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from tfpipe.errors import DecodeError
from tfpipe.features import Image, Mask
from tfpipe.features.mask import check_mask_sizes, mask_image_pairs
from tfpipe.schema import Schema


def origin_of(source: Any, index: int) -> str:
    """Where example `index` of `source` came from ("record 5 of train-00001-of-00002...",
    "row 3 of labels.csv"), or "example N" for a source that cannot say."""
    origin = getattr(source, "origin", None)
    return origin(index) if callable(origin) else f"example {index}"


class ExampleDecoder:
    """Decodes the features of `schema` that `sizes` names, images and masks at their size.

    Examples:
        >>> from tfpipe.loaders.example_decoding import ExampleDecoder
        >>> schema = tfpipe.from_directory("images").schema
        >>> decoder = ExampleDecoder(schema, {"image": (16, 16), "label": None}, True)
        >>> stored = tfpipe.from_directory("images")[0]
        >>> decoder.load(stored, {}, lambda: "example 0")["image"].shape
        (16, 16, 3)

    Args:
        schema: the schema of the stored examples.
        sizes: feature name -> `(height, width)` for an Image or Mask decoded at that size,
            None for the other features (and for images kept at their own size).
        reduced_decode: decode JPEGs at least twice the size at a reduced DCT scale.
    """

    def __init__(
        self,
        schema: Schema,
        sizes: Mapping[str, tuple[int, int] | None],
        reduced_decode: bool,
    ) -> None:
        self.sizes = dict(sizes)
        self.features = {name: schema[name] for name in self.sizes}
        self.reduced_decode = reduced_decode
        self.images = {n: f for n, f in schema.of(Image).items() if n in self.sizes}
        self.masks = {n: f for n, f in schema.of(Mask).items() if n in self.sizes}
        self.mask_pairs = mask_image_pairs(self.features)

    def images_together(
        self, examples: Sequence[Mapping[str, Any]], rescale: float | None = None
    ) -> dict[str, np.ndarray]:
        """The images of `examples` decoded in one call of the Pipeline's graph
        (`Image.load_batch`), by feature name: uint8, or float32 times `rescale` when it is
        given; a feature whose size is not fixed, or that the graph refuses, is left to `load`
        (Pillow, which names the faulty value)."""
        decoded = {}
        for name, image in self.images.items():
            size = self.sizes[name]
            if size is not None and all(name in example for example in examples):
                values = [example[name] for example in examples]
                batch = image.load_batch(values, size, self.reduced_decode, rescale)
                if batch is not None:
                    decoded[name] = batch
        return decoded

    def load(
        self,
        example: Mapping[str, Any],
        images: Mapping[str, np.ndarray],
        where: Callable[[], str],
    ) -> dict[str, Any]:
        """One stored example decoded (`images`: those of its images decoded already).

        Raises:
            DecodeError: a value cannot be decoded, or a mask's size is not its image's;
                the message names the feature and `where()`.
        """
        values: dict[str, Any] = {}
        for name, feature in self.features.items():
            try:
                stored = example[name]
                if name in images:
                    values[name] = images[name]
                elif name in self.images:
                    size = self.sizes[name]
                    values[name] = self.images[name].load(stored, size, self.reduced_decode)
                elif name in self.masks:
                    values[name] = self.masks[name].load(stored, size=self.sizes[name])
                else:
                    values[name] = feature.load(stored)
            except (KeyError, TypeError, ValueError, OSError) as e:
                raise DecodeError(f"{name}: {e} in {where()}") from e
        try:
            check_mask_sizes(self.mask_pairs, example)
        except ValueError as e:
            raise DecodeError(f"{e} in {where()}") from e
        return values
