"""Where a dataset's files are: the TFRecord files a path names (a file, a glob, a folder,
a dataset prefix or its metadata file, a split of a TFDS folder, or a list of them), and the
metadata of the one dataset it names."""

from __future__ import annotations

import os
from typing import Any

from tfpipe import fs
from tfpipe.errors import DataNotFoundError, SourceError
from tfpipe.format import tfds_folders
from tfpipe.format.metadata import DatasetInfo
from tfpipe.format.naming import SHARDS, TEMPORARY, metadata_path


def names_dataset(text: str) -> bool:
    """Whether `text` names one dataset by its metadata: a tfpipe prefix (`out/train`) or
    metadata file, or a split of a prepared TensorFlow Datasets folder (`.../mnist-train`)."""
    if metadata_path(text).is_file() or text.endswith(".json"):
        return True
    where = fs.path(text)
    return not where.exists() and tfds_folders.find_split(where) is not None


def dataset_at(text: str) -> DatasetInfo | None:
    """The metadata of the one dataset `text` names (see `names_dataset`), or of the only
    split of the prepared TensorFlow Datasets folder `text`; None for anything else.

    Raises:
        SourceError: `text` is a TFDS folder of several splits, listing them (never merged).
    """
    if names_dataset(text):
        return DatasetInfo.load(text)
    folder = fs.path(text)
    if not (folder.is_dir() and tfds_folders.is_folder(folder)):
        return None
    split = tfds_folders.load(folder).only_split()
    return DatasetInfo.load(folder / split.prefix)


def with_split(path: Any, split: str | None) -> Any:
    """`path` narrowed to one split: for a prepared TensorFlow Datasets folder, the prefix of
    its split `split` (`mnist/3.0.1` -> `mnist/3.0.1/mnist-train`); for another folder, the
    tfpipe dataset prefix `<folder>/<split>`. Unchanged when `split` is None.

    Raises:
        ValueError: `split` is given with something other than a folder.
        DataNotFoundError: `path` does not exist.
        DataNotFoundError: a TFDS folder has no such split, listing its splits.
    """
    if split is None:
        return path
    folder = fs.path(path) if isinstance(path, str | os.PathLike) else None
    if folder is not None:
        folder = tfds_folders.folder_named_by(folder) or folder
    if (
        folder is not None
        and not folder.exists()
        and not any(folder.parent.glob(f"{folder.name}*"))
    ):
        raise DataNotFoundError(
            f"{str(path)!r} does not exist: no file or folder of that name, so no split "
            f"{split!r} of it"
        )
    if folder is None or not folder.is_dir():
        raise ValueError(
            "split= names a split of a dataset folder (a prepared TFDS folder or its "
            f"{tfds_folders.INFO_FILE}, or a folder of tfpipe datasets). Received: "
            f"path={path!r}, split={split!r}"
        )
    if tfds_folders.is_folder(folder):
        return str(folder / tfds_folders.load(folder).split(split).prefix)
    return str(folder / split)


def resolve_files(
    path: str | os.PathLike[str] | list[str | os.PathLike[str]],
) -> list[fs.AnyPath]:
    """TFRecord files named by a file, a glob, a folder, a dataset prefix, or a list of them.

    Hidden files (a writer's temporary `.<shard>.tmp-<pid>`) are left out of folders and
    globs; naming a temporary file raises `SourceError`, and so does a glob or folder that
    matches shards of several splits of a TFDS folder (see `tfds_folders.check_one_split`).
    """
    return locate_files(path)[0]


def locate_files(
    path: str | os.PathLike[str] | list[str | os.PathLike[str]],
) -> tuple[list[fs.AnyPath], DatasetInfo | None]:
    """The files of `resolve_files`, and the metadata of the one dataset `path` names (see
    `dataset_at`; its shards checked already), or None (files, globs, folders and lists)."""
    if isinstance(path, list | tuple):
        return [f for p in path for f in resolve_files(p)], None
    text = os.fspath(path)
    info = dataset_at(text)
    if info is not None:
        return info.files, info
    return _files_matching(text), None


def _files_matching(text: str) -> list[fs.AnyPath]:
    where = fs.path(text)
    if where.is_file():
        if TEMPORARY.fullmatch(where.name):
            raise SourceError(
                f"{text!r} is the temporary file of a write in progress (or of a killed one); "
                "read the finished shards or the dataset prefix instead"
            )
        return [where]
    files: list[fs.AnyPath]
    if where.is_dir():
        files = sorted(where.glob("*.tfrecord*"), key=str)
    else:
        files = [p for p in map(fs.path, fs.glob(text)) if p.is_file()]
        if not files:
            files = [fs.path(p) for p in fs.glob(SHARDS.glob(text))]
    files = [f for f in files if not f.name.startswith(".")]  # temporary files of writes
    if not files:
        raise DataNotFoundError(
            f"no TFRecord files at {text!r} (tried it as a file, a folder, a glob and a prefix)"
        )
    tfds_folders.check_one_split(files, text)
    return files
