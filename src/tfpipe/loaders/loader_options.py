"""The batching options of a `SequenceLoader`, validated once (shared with its distribution)."""

from __future__ import annotations

import dataclasses

import numpy as np

from tfpipe.checks import check_image_size, check_int, check_positive


@dataclasses.dataclass(frozen=True)
class LoaderOptions:
    """The batching options of a `SequenceLoader`, validated once."""

    batch_size: int = 32
    image_size: tuple[int, int] | None = None
    shuffle: bool = True
    seed: int | None = None
    drop_remainder: bool = False
    dtype: str = "float32"
    rescale: float | None = 1 / 255
    workers: int = 1
    use_multiprocessing: bool = False
    max_queue_size: int = 10
    reduced_decode: bool = True

    def __post_init__(self) -> None:
        for name in ("batch_size", "workers", "max_queue_size"):
            check_int(name, getattr(self, name))
        object.__setattr__(self, "image_size", check_image_size("image_size", self.image_size))
        check_int("seed", self.seed, minimum=0, or_none=True)
        check_positive("rescale", self.rescale, or_none=True)
        try:
            dtype = np.dtype(self.dtype)
        except TypeError as e:
            raise ValueError(
                f"dtype must be a numpy dtype name. Received: dtype={self.dtype!r}"
            ) from e
        if dtype.kind not in "fiu":
            raise ValueError(
                "dtype must be a float or integer dtype for image batches. "
                f"Received: dtype={self.dtype!r}"
            )
        object.__setattr__(self, "dtype", dtype.name)
        if self.rescale is not None and dtype.kind != "f":
            raise ValueError(
                f"rescale needs a float dtype; pass rescale=None to get {dtype.name} pixels. "
                f"Received: dtype={self.dtype!r}, rescale={self.rescale!r}"
            )
