"""A source over a folder with one sub-folder of images per class."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tfpipe.errors import DataNotFoundError, SourceError
from tfpipe.schema import ClassLabel, Image, Schema
from tfpipe.sources.base import SourceBase

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".gif")


class DirectorySource(SourceBase):
    """Images in `root/<class name>/**/<file>`; classes are the sorted sub-folder names.

    `src[i]` is `{"image": "<path>", "label": <class index>}`.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        extensions: Sequence[str] = IMAGE_EXTENSIONS,
        follow_links: bool = False,
        image_shape: tuple[int | None, int | None, int] = (None, None, 3),
    ) -> None:
        self.root = Path(root)
        if not self.root.is_dir():
            raise DataNotFoundError(f"root: folder {str(self.root)!r} does not exist")
        if isinstance(extensions, str) or not extensions:
            raise ValueError(
                f"extensions must be a non-empty list such as ['.jpg'], got {extensions!r}"
            )
        wanted = tuple(e.lower() if e.startswith(".") else f".{e.lower()}" for e in extensions)
        self.class_names = sorted(
            entry.name
            for entry in os.scandir(self.root)
            if entry.is_dir(follow_symlinks=follow_links) and not entry.name.startswith(".")
        )
        if not self.class_names:
            raise SourceError(
                f"root: {str(self.root)!r} has no class sub-folders; expected "
                "root/<class name>/<image files>"
            )
        paths: list[str] = []
        labels: list[int] = []
        for label, name in enumerate(self.class_names):
            for folder, dirs, files in os.walk(self.root / name, followlinks=follow_links):
                dirs.sort()
                for file in sorted(files):
                    if file.lower().endswith(wanted) and not file.startswith("."):
                        paths.append(os.path.join(folder, file))
                        labels.append(label)
        if not paths:
            raise SourceError(
                f"root: found no files with extensions {list(wanted)} under {str(self.root)!r}"
            )
        self.paths = np.asarray(paths)
        self._labels = np.asarray(labels, np.int64)
        encoding = "png" if image_shape[2] == 4 else "jpeg"
        self.schema = Schema(
            {
                "image": Image(shape=image_shape, encoding=encoding),
                "label": ClassLabel(names=self.class_names),
            }
        )

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> dict[str, Any]:
        index = self.check_index(index)
        return {"image": str(self.paths[index]), "label": int(self._labels[index])}

    def origin(self, index: int) -> str:
        return str(self.paths[self.check_index(index)])

    def labels(self) -> np.ndarray:
        return self._labels


def from_directory(
    root: str | os.PathLike[str],
    *,
    extensions: Sequence[str] = IMAGE_EXTENSIONS,
    follow_links: bool = False,
    image_shape: tuple[int | None, int | None, int] = (None, None, 3),
) -> DirectorySource:
    """A source over `root/<class>/<image>` folders, like Keras's `image_dataset_from_directory`.

    Example:
        >>> src = tfpipe.from_directory("flowers")
        >>> src.class_names, len(src)
        (['daisy', 'rose'], 1200)

    Args:
        root: the folder holding one sub-folder per class.
        extensions: file endings that count as images (case-insensitive).
            Defaults to .jpg, .jpeg, .png, .bmp, .gif.
        follow_links: follow symbolic links to folders. Defaults to False.
        image_shape: the `Image` shape of the inferred schema; give height and width to store
            images resized. With 4 channels (RGBA) images are stored as PNG, else as JPEG.
            Defaults to (None, None, 3).
    """
    return DirectorySource(root, extensions, follow_links, image_shape)
