"""A source over a folder with one sub-folder of images per class."""

from __future__ import annotations

import collections
import os
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tfpipe.errors import DataNotFoundError, SourceError, TfpipeWarning
from tfpipe.features import ClassLabel, Image
from tfpipe.schema import Schema
from tfpipe.sources.base import SourceBase

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".gif")


class _Walk:
    """The wanted files under class folders: each real file once, each folder once.

    Following links, a link to a folder already on the walk's path (a loop) is skipped and
    counted in `loops`; a folder or file reached a second time any other way would be read
    twice (under one class, or under two) and raises a SourceError naming both paths. An
    unreadable folder raises too, instead of being left out.
    """

    def __init__(self, root: Path, follow_links: bool, wanted: tuple[str, ...]) -> None:
        self.follow_links = follow_links
        self.wanted = wanted
        self.root_key = _key(os.stat(root))
        self.folders: dict[tuple[int, int], str] = {self.root_key: str(root)}
        self.files: dict[tuple[int, int], str] = {}
        self.loops: list[str] = []

    def classes(self, root: Path) -> list[str]:
        """The sub-folders of `root` (no hidden ones), sorted."""
        return sorted(
            entry.name
            for entry in _entries(str(root))
            if entry.is_dir(follow_symlinks=self.follow_links) and not entry.name.startswith(".")
        )

    def files_of(self, folder: str) -> Iterator[str]:
        """The wanted files under the class folder `folder`, as `os.walk` orders them."""
        return self._walk(folder, (self.root_key,))

    def _walk(self, folder: str, ancestors: tuple[tuple[int, int], ...]) -> Iterator[str]:
        key = _key(os.stat(folder))
        if key in ancestors:
            self.loops.append(folder)
            return
        if self.folders.setdefault(key, folder) != folder:
            raise SourceError(
                f"folder {folder!r} is the folder {self.folders[key]!r} again (through a "
                "symbolic link), so its images would be read twice; remove one of the links, "
                "or pass follow_links=False"
            )
        entries = _entries(folder)
        folders = []
        for entry in entries:
            if entry.is_dir():
                if self.follow_links or not entry.is_symlink():
                    folders.append(entry.path)
            elif entry.name.lower().endswith(self.wanted) and not entry.name.startswith("."):
                self._once(entry, key[0])
                yield entry.path
        for path in folders:
            yield from self._walk(path, (*ancestors, key))

    def _once(self, entry: os.DirEntry[str], device: int) -> None:
        try:
            key = _key(entry.stat()) if entry.is_symlink() else (device, entry.inode())
        except OSError:
            return  # a broken link: encoding it names the file
        first = self.files.setdefault(key, entry.path)
        if first != entry.path:
            raise SourceError(
                f"image {entry.path!r} is the file {first!r} again (a link), so it would be "
                "read twice, or under two classes; remove one of them"
            )


def _entries(folder: str) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(folder) as scan:
            return sorted(scan, key=lambda e: e.name)
    except OSError as e:
        raise SourceError(f"cannot list the folder {folder!r}: {e}") from e


def _key(stat: os.stat_result) -> tuple[int, int]:
    return stat.st_dev, stat.st_ino


def _check_class_names(class_names: Any, found: list[str], root: Path) -> list[str]:
    """`class_names` validated against the sub-folders `found`; warns about missing folders."""
    if isinstance(class_names, str) or not isinstance(class_names, Sequence):
        raise ValueError(
            f"class_names must be a list of class folder names. Received: {class_names!r}"
        )
    names = list(class_names)
    if not names or len(set(names)) != len(names) or not all(isinstance(n, str) for n in names):
        raise ValueError(f"class_names must be unique strings. Received: {names}")
    extra = [n for n in found if n not in names]
    if extra:
        raise SourceError(
            f"class_names: {str(root)!r} has the class folder(s) {extra}, which are not in "
            f"class_names={names}; add them to the list, or move them out of the folder"
        )
    absent = [n for n in names if n not in found]
    if absent:
        warnings.warn(
            f"from_directory({str(root)!r}): {len(absent)} of the {len(names)} classes have no "
            f"folder and so no examples: {absent}; their indices stay as in class_names",
            TfpipeWarning,
            stacklevel=4,
        )
    return names


def _check_no_records(root: Path, empty: list[str]) -> None:
    """Refuses class folders without images that hold TFRecord files: records written inside
    the image folder (`tfpipe write img img/_records/train`) would be read as one more class,
    which shifts the index of every class after it."""
    holding = {name: _first_record_file(root / name) for name in empty}
    found = {name: path for name, path in holding.items() if path is not None}
    if found:
        raise SourceError(
            f"root: the folder(s) {list(found)} in {str(root)!r} hold TFRecord files (first: "
            f"{next(iter(found.values()))!r}) and no images: each would be one more class, "
            "moving the indices of the classes after it. Records written inside the image "
            f"folder? Move them out of {str(root)!r}, and write records outside it"
        )


def _first_record_file(folder: Path) -> str | None:
    """The first TFRecord file (shard, compressed or not, or a TFDS file) under `folder`."""
    for parent, _, names in os.walk(folder):
        for name in sorted(names):
            if ".tfrecord" in name and not name.startswith("."):
                return os.path.join(parent, name)
    return None


def _check_not_splits(root: Path, files: dict[str, list[str]]) -> None:
    """Refuses a root one level too high (`data` over `data/train/<class>`,
    `data/test/<class>`): every class folder with images holds them only in sub-folders, and
    two class folders share one of those sub-folders, or one class folder holds several.
    Sub-folders no two classes share are a class's own (`cat/day1`, `dog/day2`)."""
    inner = {name: _image_folders(root / name, paths) for name, paths in files.items() if paths}
    shared = _shared(list(inner.values())) if all(inner.values()) else []
    if not shared:
        return
    names = sorted(inner)
    raise SourceError(
        f"root: the folder(s) {names} in {str(root)!r} hold no images of their own, only "
        f"sub-folders of images ({shared}): splits that each hold class folders, not "
        f"classes. Pass one of them, e.g. from_directory({str(root / _a_split(names))!r}); if "
        f"{names} are the classes, pass class_names={names}"
    )


def _shared(sub_folders: list[set[str]]) -> list[str]:
    """The sub-folder names two class folders share, or those of one class folder with
    several."""
    if len(sub_folders) == 1:
        return sorted(sub_folders[0]) if len(sub_folders[0]) > 1 else []
    counts = collections.Counter(name for names in sub_folders for name in names)
    return sorted(name for name, count in counts.items() if count > 1)


def _a_split(names: list[str]) -> str:
    """The split to name in an example: "train" when there is one."""
    return "train" if "train" in names else names[0]


def _image_folders(folder: Path, paths: list[str]) -> set[str]:
    """The sub-folders of `folder` holding its images `paths`; empty when one lies in
    `folder` itself."""
    start = len(os.path.join(folder, ""))  # the walk joins names to `folder` with os.sep
    parts = [path[start:].split(os.sep, 1) for path in paths]  # pathlib: 10x slower
    if any(len(p) == 1 for p in parts):
        return set()
    return {p[0] for p in parts}


def _warn_empty(
    root: Path, empty: list[str], class_names: list[str], wanted: tuple[str, ...]
) -> None:
    """Warns about class folders without images: their class indices are never used."""
    if empty:
        warnings.warn(
            f"from_directory({str(root)!r}): the class folder(s) {empty} hold no files with "
            f"extensions {list(wanted)}, so class(es) {[class_names.index(n) for n in empty]} "
            "have no examples; put images in them, or remove them",
            TfpipeWarning,
            stacklevel=4,
        )


class DirectorySource(SourceBase):
    """Images in `root/<class name>/**/<file>`; classes are `class_names` or the sorted
    sub-folder names.

    `src[i]` is `{"image": "<path>", "label": <class index>}`.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        extensions: Sequence[str] = IMAGE_EXTENSIONS,
        follow_links: bool = False,
        image_shape: tuple[int | None, int | None, int] = (None, None, 3),
        class_names: Sequence[str] | None = None,
    ) -> None:
        self.root = Path(root)
        if not self.root.is_dir():
            raise DataNotFoundError(f"root: folder {str(self.root)!r} does not exist")
        if isinstance(extensions, str) or not extensions:
            raise ValueError(
                f"extensions must be a non-empty list such as ['.jpg'], got {extensions!r}"
            )
        wanted = tuple(e.lower() if e.startswith(".") else f".{e.lower()}" for e in extensions)
        walk = _Walk(self.root, follow_links, wanted)
        found = walk.classes(self.root)
        if not found:
            raise SourceError(
                f"root: {str(self.root)!r} has no class sub-folders; expected "
                "root/<class name>/<image files>"
            )
        self.class_names = (
            found if class_names is None else _check_class_names(class_names, found, self.root)
        )
        files = {
            name: list(walk.files_of(str(self.root / name)))
            for name in self.class_names
            if name in found
        }
        if not any(files.values()):
            raise SourceError(
                f"root: found no files with extensions {list(wanted)} under {str(self.root)!r}"
            )
        empty = [name for name, paths in files.items() if not paths]
        _check_no_records(self.root, empty)
        if class_names is None:
            _check_not_splits(self.root, files)
        _warn_empty(self.root, empty, self.class_names, wanted)
        paths: list[str] = []
        labels: list[int] = []
        for label, name in enumerate(self.class_names):
            paths += files.get(name, [])
            labels += [label] * len(files.get(name, []))
        if walk.loops:
            warnings.warn(
                f"from_directory({str(self.root)!r}): skipped {len(walk.loops)} link(s) that "
                f"loop back to a folder above them (first: {walk.loops[0]!r}); their images "
                "are read once, from the folder itself",
                TfpipeWarning,
                stacklevel=3,
            )
        self.paths = np.asarray(paths)
        self._labels = np.asarray(labels, np.int64)
        self.schema = Schema(
            {
                "image": Image(shape=image_shape, encoding="auto"),
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

    def columns(self) -> dict[str, np.ndarray] | None:
        return {"image": self.paths, "label": self.labels()}


def from_directory(
    root: str | os.PathLike[str],
    *,
    extensions: Sequence[str] = IMAGE_EXTENSIONS,
    follow_links: bool = False,
    image_shape: tuple[int | None, int | None, int] = (None, None, 3),
    class_names: Sequence[str] | None = None,
) -> DirectorySource:
    """A source over `root/<class>/<image>` folders, like Keras's `image_dataset_from_directory`.

    Classes are numbered in the order of `class_names`, else of the sorted sub-folder names,
    which differ between folders that do not hold the same classes: give a test folder the
    training folder's class names, so that an index means the same class in both.

    Examples:
        >>> train = tfpipe.from_directory("images")
        >>> train.class_names, len(train)
        (['circle', 'square', 'triangle'], 24)
        >>> test = tfpipe.from_directory("images", class_names=train.class_names)

    Args:
        root: the folder holding one sub-folder per class. A class folder without images
            is warned about: its class has no examples.
        extensions: file endings that count as images (case-insensitive).
            Defaults to .jpg, .jpeg, .png, .bmp, .gif.
        follow_links: follow symbolic links to folders. A link back to a folder above it (a
            loop) is skipped, with one warning counting them; a folder or image reached twice
            any other way raises a `SourceError` naming both paths. Defaults to False.
        image_shape: the `Image` shape of the inferred schema; give height and width to store
            images resized. The schema stores each image as it came (`encoding="auto"`): a
            JPEG as JPEG (its own bytes unless resized or converted), a PNG as PNG, a BMP or
            GIF (or an RGBA image from a JPEG) as PNG; give `write_tfrecords` a schema with
            `encoding="jpeg"` to store all as JPEG. Defaults to (None, None, 3).
        class_names: the classes, in index order. A sub-folder not in the list raises a
            `SourceError` naming it; a listed class without a folder is allowed (it has no
            examples) and warned about. Defaults to None (the sorted sub-folder names).

    Raises:
        SourceError: a sub-folder holds TFRecord files and no images (records written inside
            the image folder would be one more class), or `root` is one level too high
            (`data` over `data/train/<class>` and `data/test/<class>`: folders that hold no
            images of their own, only sub-folders of images that two of them share, or one
            folder holding several); pass `class_names` if those folders are the classes.
    """
    return DirectorySource(
        root,
        extensions=extensions,
        follow_links=follow_links,
        image_shape=image_shape,
        class_names=class_names,
    )
