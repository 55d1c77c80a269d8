"""A source over a folder with one sub-folder of images per class."""

from __future__ import annotations

import collections
import contextlib
import operator
import os
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from tfpipe.errors import DataNotFoundError, SourceError, TfpipeWarning
from tfpipe.features import ClassLabel, Image
from tfpipe.schema import Schema
from tfpipe.sources.base import SourceBase

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".gif")
PROGRESS_AFTER = 2.0
"""Seconds of listing after which `from_directory` shows a progress bar."""


class _Walk:
    """The wanted files under class folders: each real file once, each folder once.

    Following links, a link to a folder already on the walk's path (a loop) is skipped and
    counted in `loops`; a folder reached a second time any other way would be read twice
    (under one class, or under two) and raises a SourceError naming both paths, and so does
    a file (`check_once`). An unreadable folder raises too, instead of being left out.

    The files are listed in `found` as `os.walk` orders them, with their (device, inode) in
    `devices` and `inodes`: one vectorised check for repeats after the walk, not a
    lookup per file.
    """

    def __init__(self, root: Path, follow_links: bool, wanted: tuple[str, ...]) -> None:
        self.follow_links = follow_links
        self.wanted = wanted
        self.root_key = _key(os.stat(root))
        self.folders: dict[tuple[int, int], str] = {self.root_key: str(root)}
        self.found: list[str] = []
        self.devices: list[int] = []
        self.inodes: list[int] = []
        self.loops: list[str] = []

    def classes(self, root: Path) -> list[str]:
        """The sub-folders of `root` (no hidden ones), sorted."""
        with _scan(str(root)) as scan:
            return sorted(
                entry.name
                for entry in scan
                if entry.is_dir(follow_symlinks=self.follow_links)
                and not entry.name.startswith(".")
            )

    def files_of(self, folder: str) -> int:
        """Adds the wanted files under the class folder `folder` to `found`; how many."""
        before = len(self.found)
        self._walk(folder, (self.root_key,))
        return len(self.found) - before

    def _walk(self, folder: str, ancestors: tuple[tuple[int, int], ...]) -> None:
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
        with _scan(folder) as scan:
            entries = list(scan)
        files = [
            entry
            for entry in entries
            if not entry.is_dir()
            and entry.name.lower().endswith(self.wanted)
            and not entry.name.startswith(".")
        ]
        files.sort(key=operator.attrgetter("name"))
        self.found += [entry.path for entry in files]
        self.devices += [key[0]] * len(files)
        self.inodes += [entry.inode() for entry in files]
        for at in [k for k, entry in enumerate(files) if entry.is_symlink()]:
            self._link_key(files[at], len(self.found) - len(files) + at)
        folders = [
            entry.path
            for entry in (entries if len(files) < len(entries) else ())  # all images: none
            if entry.is_dir() and (self.follow_links or not entry.is_symlink())
        ]
        for path in sorted(folders):
            self._walk(path, (*ancestors, key))

    def _link_key(self, link: os.DirEntry[str], at: int) -> None:
        """The key of the linked file listed at `at`: its target's (the link's own when
        broken: reading it names the file)."""
        with contextlib.suppress(OSError):
            self.devices[at], self.inodes[at] = _key(link.stat())

    def check_once(self) -> None:
        """Raises a SourceError naming the first file listed again (a link to a file listed
        before, under this class or another) and that earlier file. Once, at the end: it
        empties `devices` and `inodes`."""
        keys = np.stack(
            [np.asarray(self.devices, np.uint64), np.asarray(self.inodes, np.uint64)], 1
        )
        self.devices, self.inodes = [], []  # ~50 bytes a file, freed before the paths' array
        order = np.lexsort((keys[:, 1], keys[:, 0]))  # stable: equal keys in walk order
        repeats = np.flatnonzero((keys[order[1:]] == keys[order[:-1]]).all(axis=1))
        if not len(repeats):
            return
        # The earliest file seen before is the second of its group: its predecessor is the
        # group's first.
        at = repeats[np.argmin(order[repeats + 1])]
        first, again = self.found[order[at]], self.found[order[at + 1]]
        raise SourceError(
            f"image {again!r} is the file {first!r} again (a link), so it would be "
            "read twice, or under two classes; remove one of them"
        )


@contextlib.contextmanager
def _scan(folder: str) -> Iterator[Iterator[os.DirEntry[str]]]:
    """`os.scandir(folder)`; a folder that cannot be listed raises a SourceError naming it."""
    try:
        with os.scandir(folder) as scan:
            yield scan
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
    `folder` itself (the walk lists a folder's own files first: then the first does)."""
    start = len(os.path.join(folder, ""))  # the walk joins names to `folder` with os.sep
    if os.sep not in paths[0][start:]:
        return set()
    return {path[start:].split(os.sep, 1)[0] for path in paths}  # pathlib: 10x slower


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


def _list(walk: _Walk, root: Path, names: list[str], progress: bool) -> dict[str, int]:
    """Walks the class folders `names` in order: the number of files of each. A progress bar
    shows when it takes more than two seconds."""
    counts = {}
    with tqdm(
        total=len(names),
        unit=" class folders",
        desc=f"listing {str(root)!r}",
        delay=PROGRESS_AFTER,
        disable=not progress,
    ) as bar:
        for name in names:
            counts[name] = walk.files_of(os.path.join(root, name))
            bar.set_postfix_str(f"{len(walk.found):,} files", refresh=False)
            bar.update()
    return counts


def _by_class(paths: list[str], counts: dict[str, int]) -> dict[str, list[str]]:
    """The listed `paths` of each class, from the number of files of each, in order."""
    ends = np.cumsum(list(counts.values())).tolist()
    return {
        name: paths[end - count : end]
        for (name, count), end in zip(counts.items(), ends, strict=True)
    }


def _warn_one_class(root: Path, name: str) -> None:
    """Warns about a root holding a single class folder: every example would be class 0."""
    warnings.warn(
        f"from_directory({str(root)!r}): the folder holds a single class folder, {name!r}, "
        "so every example is class 0 and a classifier has nothing to tell apart. Is it one "
        "level too low (the folder of one class, or of a split that lacks the others)? Pass "
        "the folder that holds one sub-folder per class; to read one class on purpose, pass "
        f"class_names=[{name!r}]",
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
        progress: bool = True,
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
        counts = _list(walk, self.root, [n for n in self.class_names if n in found], progress)
        if not walk.found:
            raise SourceError(
                f"root: found no files with extensions {list(wanted)} under {str(self.root)!r}"
            )
        walk.check_once()
        empty = [name for name, count in counts.items() if not count]
        _check_no_records(self.root, empty)
        if class_names is None:
            _check_not_splits(self.root, _by_class(walk.found, counts))
        _warn_empty(self.root, empty, self.class_names, wanted)
        if walk.loops:
            warnings.warn(
                f"from_directory({str(self.root)!r}): skipped {len(walk.loops)} link(s) that "
                f"loop back to a folder above them (first: {walk.loops[0]!r}); their images "
                "are read once, from the folder itself",
                TfpipeWarning,
                stacklevel=3,
            )
        if class_names is None and len(found) == 1:
            _warn_one_class(self.root, found[0])
        self.paths = np.asarray(walk.found)
        self._labels = np.repeat(
            np.arange(len(self.class_names), dtype=np.int64),
            [counts.get(name, 0) for name in self.class_names],
        )
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
    progress: bool = True,
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
            examples) and warned about. Defaults to None (the sorted sub-folder names); a
            root holding a single class folder is then warned about (every example would be
            class 0): give `class_names` to read one class on purpose.
        progress: show a progress bar when listing takes more than two seconds (one update
            per class folder). Defaults to True.

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
        progress=progress,
    )
