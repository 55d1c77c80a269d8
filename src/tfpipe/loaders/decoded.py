"""`tfpipe.DecodedExamples`: a dataset's examples, decoded as `Pipeline` decodes them, by index.

What Grain calls a random-access data source and PyTorch a map-style dataset::

    examples[i] ──source[i] (stored values: JPEG bytes, class indices; checksums verified)──▶
        Image.load_batch (the Pipeline's graph: its pixels) / Mask.load / Feature.load
        ──▶ {feature name: numpy array}, or (x, y)

`grain.MapDataset.source(examples)` and `torch.utils.data.DataLoader(examples)` batch,
shuffle and split it among their worker processes themselves. A worker process gets the view
by pickling (Grain's workers are spawned: they decode with TensorFlow on the CPU, its GPUs
hidden) or by `fork` (PyTorch's default on Linux: TensorFlow's runtime does not survive a fork,
so Pillow decodes there, the pixels `tfpipe.Image.load` gives, within 1/255 of the Pipeline's).
Either way the shard files are opened again in each process.
"""

from __future__ import annotations

import multiprocessing
import os
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from tfpipe.checks import check_image_size, check_positive
from tfpipe.errors import TfpipeWarning
from tfpipe.features import Image, Mask
from tfpipe.loaders.example_decoding import ExampleDecoder, origin_of
from tfpipe.loaders.sequence import Selection, check_selection, indexed_source
from tfpipe.loaders.supervised import feature_names, pick

_WHERE = "DecodedExamples"


class DecodedExamples:
    """The examples of a dataset decoded as `tfpipe.Pipeline` decodes them, one per index:
    a random-access view that Grain (`grain.MapDataset.source`) and PyTorch
    (`torch.utils.data.DataLoader`) read directly.

    `examples[i]` reads record `i` (its checksums verified) and decodes it: a dict of feature
    name -> numpy array, images uint8 `(height, width, channels)` at `image_size` (or float32
    times `rescale`), with the pixels `Pipeline(source, image_size=..., rescale=...)` gives:
    the same TensorFlow graph decodes them (the one resize: block means, then bilinear). With
    `x` (and `y`) it is the `(x, y)` pair `Pipeline.as_supervised(x, y)` gives, as Keras's
    `model.fit` takes it from a Grain dataset or a DataLoader. Nothing is read until an
    example is asked for; the view pickles cheaply (file names and offsets) and opens the shard
    files again in each worker process. In a worker forked from a process that runs TensorFlow
    (a DataLoader's default on Linux), Pillow decodes instead: the pixels of `Image.load`,
    within 1/255 of the Pipeline's (pass `multiprocessing_context="spawn"` for the same ones).

    Examples:
        >>> examples = tfpipe.DecodedExamples("out/train", image_size=(16, 16))
        >>> len(examples), examples[0]["image"].shape, examples[0]["image"].dtype
        (24, (16, 16, 3), dtype('uint8'))
        >>> image, label = tfpipe.DecodedExamples("out/train", image_size=(16, 16),
        ...                                       rescale=1 / 255, x="image", y="label")[3]
        >>> image.dtype, label.dtype
        (dtype('float32'), dtype('int64'))

    Args:
        source: a path that `tfpipe.Pipeline` reads (a dataset prefix, uncompressed TFRecord
            files, a folder of class folders of images), any tfpipe source (`from_tfrecords`,
            `from_directory`, `from_dataframe`, `from_arrays`), or an object with `__len__`,
            `__getitem__` and a `schema`.
        image_size: resize images (block means, then bilinear, when shrinking) and masks
            (nearest neighbour) to `(height, width)`. Defaults to None (the schema's sizes;
            images of undeclared size keep their own).
        rescale: cast `Image` features to float32 and multiply by this finite number > 0, as
            `Pipeline(rescale=...)` does; masks are never rescaled. Defaults to None (uint8
            images: 4x fewer bytes between processes; rescale in the model).
        x: the model input: a feature name, a list of names or a dict of model input name ->
            feature name; each example is then `(x, y)`, or `(x,)` without `y`. Defaults to
            None (each example is a dict of every feature).
        y: the target, named like `x`; needs `x`. Defaults to None.
        reduced_decode: decode JPEGs at least twice `image_size` at a reduced DCT scale, as
            `Pipeline(reduced_decode=...)` does. Defaults to True.
    """

    def __init__(
        self,
        source: Any,
        *,
        image_size: tuple[int, int] | None = None,
        rescale: float | None = None,
        x: Selection = None,
        y: Selection = None,
        reduced_decode: bool = True,
    ) -> None:
        self.image_size = check_image_size("image_size", image_size)
        self.rescale = check_positive("rescale", rescale, or_none=True)
        self.reduced_decode = bool(reduced_decode)
        if x is None and y is not None:
            raise ValueError(f"{_WHERE}: y needs x, the model input. Received: y={y!r}")
        self.source, self.schema = indexed_source(source)
        self.x = check_selection(x, "x", self.schema, where=_WHERE)
        self.y = check_selection(y, "y", self.schema, where=_WHERE)
        selected = feature_names("x", x, _WHERE) if x is not None else list(self.schema)
        selected += [] if y is None else feature_names("y", y, _WHERE)
        self._features = {name: self.schema[name] for name in dict.fromkeys(selected)}
        sized = self.schema.of(Image, Mask)
        self._sizes = {
            name: self._size_of(feature.decoded_shape)
            for name, feature in sized.items()
            if name in self._features
        }
        if self.image_size is not None and not self._sizes:
            warnings.warn(
                f"{_WHERE}: image_size={self.image_size} is ignored: the features selected "
                f"({list(self._features)}) hold no Image or Mask",
                TfpipeWarning,
                stacklevel=2,
            )
        self._decoder = ExampleDecoder(
            self.schema,
            {name: self._sizes.get(name) for name in self._features},
            self.reduced_decode,
        )
        self._made_in = self._opened_in = os.getpid()

    def _size_of(self, shape: tuple[int | None, ...]) -> tuple[int, int] | None:
        """The size an image or mask of declared `shape` is decoded at; None: its own."""
        size = self.image_size or shape[:2]
        return None if size[0] is None or size[1] is None else (int(size[0]), int(size[1]))

    def __len__(self) -> int:
        return len(self.source)

    def __getitem__(self, index: int) -> Any:
        """Example `index`, decoded: a dict of feature name -> numpy array, or `(x, y)`."""
        return self.__getitems__([index])[0]

    def __getitems__(self, indices: Sequence[int]) -> list[Any]:
        """The examples `indices`, decoded, their images in one TensorFlow call (a
        `DataLoader` asks for a batch's examples together)."""
        self._reopen_in_this_process()
        stored = [(int(index), self.source[index]) for index in indices]
        # Not in a forked copy of the view, where TensorFlow must not run: Pillow decodes there.
        together = self._made_in == os.getpid()
        images = self._decoder.images_together([e for _, e in stored]) if together else {}
        return [
            self._example(index, example, {name: batch[k] for name, batch in images.items()})
            for k, (index, example) in enumerate(stored)
        ]

    def _example(self, index: int, example: Mapping[str, Any], images: dict[str, Any]) -> Any:
        """One stored example decoded (`images`: its images decoded already), then picked."""
        values = self._decoder.load(example, images, lambda: origin_of(self.source, index))
        if self.rescale is not None:
            for name in self._decoder.images:
                values[name] = np.multiply(values[name], np.float32(self.rescale), dtype=np.float32)
        if self.x is None:
            return values
        x = pick(values, self.x)
        return (x,) if self.y is None else (x, pick(values, self.y))

    def read_batch(self, indices: Sequence[int]) -> Any:
        """The examples `indices` decoded together (their images in one TensorFlow call) and
        stacked into one batch, as `examples[i]` gives them: a dict of arrays, or `(x, y)`.

        Grain asks a source for one example at a time; batching the indices and mapping this
        over them decodes each batch in one call instead (the "Other loaders" guide):
        `grain.MapDataset.range(len(examples)).shuffle(seed=0).batch(64).map(examples.read_batch)`.

        Examples:
            >>> examples = tfpipe.DecodedExamples("out/train", image_size=(16, 16),
            ...                                   x="image", y="label")
            >>> images, labels = examples.read_batch([0, 1, 2])
            >>> images.shape, labels.shape
            ((3, 16, 16, 3), (3,))
        """
        return stack_examples(self.__getitems__(indices))

    def _reopen_in_this_process(self) -> None:
        """Closes, in a forked process, the shard files it inherited: the source opens its
        own on the next read."""
        if self._opened_in != os.getpid():
            close = getattr(self.source, "close", None)
            if callable(close):
                close()
            self._opened_in = os.getpid()

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Unpickled in a worker process (Grain's): TensorFlow decodes here on the CPU."""
        self.__dict__.update(state)
        self._made_in = self._opened_in = os.getpid()
        if multiprocessing.parent_process() is not None:
            hide_gpus()


def stack_examples(examples: Sequence[Any]) -> Any:
    """Examples of one structure (dicts of arrays, tuples of them, arrays) stacked into one
    batch of that structure.

    Raises:
        ValueError: examples whose arrays differ in shape, naming the feature (images of
            undeclared size without `image_size`).
    """
    first = examples[0]
    if isinstance(first, dict):
        return {name: _stacked([e[name] for e in examples], name) for name in first}
    if isinstance(first, tuple):
        return tuple(stack_examples([e[part] for e in examples]) for part in range(len(first)))
    return _stacked(examples, "the examples")


def _stacked(values: Sequence[Any], name: str) -> np.ndarray:
    try:
        return np.stack(values)
    except ValueError as e:
        shapes = sorted({np.shape(value) for value in values})
        raise ValueError(
            f"{name}: examples of different shapes {shapes} cannot be stacked into one batch; "
            "give DecodedExamples an image_size= for images of several sizes, or leave a "
            "variable-length feature out of x= and y="
        ) from e


def hide_gpus() -> None:
    """Keeps TensorFlow off the GPUs in a worker process that only decodes (it would map most
    of each GPU's memory when it starts); nothing when TensorFlow started here already."""
    try:
        tf.config.set_visible_devices([], "GPU")
    except RuntimeError:  # started already: its devices can no longer change
        return
