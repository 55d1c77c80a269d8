"""What a path names, resolved once: `resolve` turns whatever names data (a tfpipe dataset
prefix or its metadata file, a TFRecord file, a glob, a folder of shards, a list of these, a
prepared TFDS folder or split, a folder of class folders of images) into one `ResolvedData`
that every entry point takes: `Pipeline`, `SequenceLoader`, `read_tfrecords`,
`from_tfrecords`, `infer_schema`, `verify`, `locate_fault`, `tfpipe.fit` and the CLI.

    "out/train" ──┐
    "out/*.tfrecord", ["a.tfrecord", ...], "out/" ──┼─▶ resolve() ─▶ ResolvedData(files, info,
    "mnist/3.0.1" (TFDS), "photos/" (class folders) ┘                declared, compression, ...)

A dataset's metadata file is read once per resolution, and each file's size is checked
against it there (see `tfpipe.format.file_checks.check_sizes`).
"""

from __future__ import annotations

import dataclasses
import difflib
import glob
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

from tfpipe import fs
from tfpipe.errors import DataNotFoundError, SchemaError, SourceError
from tfpipe.format import tfds_folders
from tfpipe.format.compression import (
    check_compression,
    compression_of,
    describe_compression,
    starts_like_gzip,
)
from tfpipe.format.file_checks import Declared, check_sizes, declared_examples, one_dataset
from tfpipe.format.metadata import DatasetInfo
from tfpipe.format.naming import SHARDS, TEMPORARY, metadata_path
from tfpipe.labels import check_stored_labels
from tfpipe.schema import Schema

PathArg = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]
"""A path argument: one path (file, glob, folder, prefix) or a list of them."""


@dataclasses.dataclass(frozen=True)
class ResolvedData:
    """What a path argument names, resolved once (see `resolve`).

    Examples:
        >>> data = resolve("out/train")
        >>> len(data.files), data.num_examples, data.info.name, data.compression
        (2, 24, 'train', None)

    Attributes:
        origin: what was passed, as text for messages ("out/train", "['a', 'b']").
        files: the TFRecord files, in order; empty for a folder of images.
        info: the metadata of the one dataset every file belongs to (a tfpipe metadata file
            or a TFDS split's `dataset_info.json`); None when there is none.
        declared: each file's entry in a metadata file, its size checked against it.
        image_folder: the folder, when the path names a folder of class folders of images
            (read by `tfpipe.from_directory`); None for records.
    """

    origin: str
    files: tuple[fs.AnyPath, ...] = ()
    info: DatasetInfo | None = None
    declared: Mapping[fs.AnyPath, Declared] = dataclasses.field(default_factory=dict)
    image_folder: fs.AnyPath | None = None

    @property
    def num_examples(self) -> int | None:
        """The examples the metadata declares for the files; None when a file has none."""
        if self.image_folder is not None:
            return None
        return declared_examples(self.files, self.declared)

    def record_files(self, reader: str) -> list[fs.AnyPath]:
        """The TFRecord files, for `reader` (a function's name) that reads only records.

        Raises:
            SourceError: the path names a folder of images, saying what reads one.
        """
        if self.image_folder is not None:
            raise SourceError(
                f"{self.origin!r} is a folder of class folders of images, and {reader} reads "
                "TFRecord files: read the folder with tfpipe.from_directory (or pass it to "
                "tfpipe.Pipeline, tfpipe.SequenceLoader or tfpipe.fit), or write it first "
                "with tfpipe.write_tfrecords / `tfpipe write`"
            )
        return list(self.files)

    def schema(self, given: Any = None) -> Schema | None:
        """The schema to read the records with: `given`, its class names matched by name with
        those of every metadata file, else the metadata's; None when neither is known. What
        the images' writer vouched for (`Image.storage`) comes from the one metadata file of
        the records only, never from `given`.

        Raises:
            SchemaError: `given` is not a `Schema`, or reading with it would change labels.
        """
        if given is None:
            return None if self.info is None else self.info.schema
        if not isinstance(given, Schema):
            raise SchemaError(f"schema must be a tfpipe.Schema. Received: {type(given).__name__}")
        infos = [self.info, *(entry.info for entry in self.declared.values())]
        for info in {id(i): i for i in infos if i is not None}.values():
            check_stored_labels(info.schema, given, str(info.metadata_path))
        return given.with_stored_images(
            {} if self.info is None else self.info.schema.stored_images()
        )

    @property
    def compression(self) -> str | None:
        """The one compression of the files: the metadata's, else their suffix or first bytes.

        Raises:
            ValueError: the files mix compressions, naming one file of each.
        """
        if self.info is not None:
            return self.info.compression
        return common_compression(self.files)

    def read_compression(self, compression: str | None) -> str | None:
        """The compression to read the files with: `compression`, checked against what each
        file's metadata says, else against its first bytes (gzip's show; zlib's do not);
        "auto" gives the files' own (`compression`).

        Raises:
            ValueError: `compression` is not a compression, or the metadata or a file's first
                bytes say otherwise, naming the argument, the file and what says so.
        """
        if compression == "auto":
            return self.compression
        asked = check_compression(compression)
        for file in self.files:
            evidence = _compression_evidence(file, self.declared.get(file), asked)
            if evidence is not None and evidence[0] != asked:
                actual, why = evidence
                raise ValueError(
                    f"compression={compression!r}, but {file.name} is "
                    f"{describe_compression(actual)} ({why}): pass compression={actual!r} or "
                    "leave it out (the default, 'auto', reads the files as they are); a read "
                    "with the wrong one fails with TensorFlow's 'corrupted record at 0'"
                )
        return asked


def names_paths(value: Any) -> bool:
    """Whether `value` names data by path: a path, a non-empty list of paths, or resolved data
    (a list of anything else, e.g. of example dicts, is not).

    Examples:
        >>> names_paths("out/train"), names_paths(["a.tfrecord"]), names_paths([{"x": 1}])
        (True, True, False)
    """
    if isinstance(value, str | os.PathLike | ResolvedData):
        return True
    return (
        isinstance(value, list | tuple)
        and bool(value)
        and all(isinstance(item, str | os.PathLike) for item in value)
    )


def resolve(
    data: PathArg | ResolvedData,
    *,
    split: str | None = None,
    argument: str = "path",
    check: bool = True,
) -> ResolvedData:
    """Resolves a path argument, once: the files it names and their metadata.

    Tried in this order, for each path: a tfpipe dataset prefix (`out/train`, beside
    `out/train.json`) or its metadata file; a split of a prepared TensorFlow Datasets folder
    (`mnist/3.0.1/mnist-train`) or a folder of one split; a TFRecord file; a folder of TFRecord
    files; a folder of class folders of images; a glob; the shards of a prefix without metadata.

    Examples:
        >>> [f.name for f in resolve("out/train-*").files]
        ['train-00000-of-00002.tfrecord', 'train-00001-of-00002.tfrecord']

    Args:
        data: a path, a list of paths, or a `ResolvedData` (returned as it is).
        split: the split to read when `data` is a folder: a TFDS split ("train"), or the name
            of a tfpipe dataset prefix in the folder. Defaults to None.
        argument: the argument's name, for messages. Defaults to "path".
        check: check each file's size against its metadata (a stat each). Defaults to True.

    Raises:
        DataNotFoundError: `data` names nothing (saying what was tried), a URL's scheme is
            not one TensorFlow opens, or shards of a dataset are missing.
        SourceError: a file's size differs from its metadata's, a temporary file of a write is
            named, or a folder or glob would merge several datasets or TFDS splits.
    """
    if isinstance(data, ResolvedData):
        return data
    fs.check_paths(data, argument)
    if isinstance(data, str | os.PathLike):
        text = os.fspath(with_split(data, split))
        info = dataset_at(text, check_files=check)
        if info is not None:
            files: list[fs.AnyPath] = info.files
        else:
            folder = _image_folder(text)
            if folder is not None:
                return ResolvedData(text, image_folder=folder)
            files = _files_matching(text, argument)
    elif split is not None:
        raise ValueError(
            f"split= names a split of one dataset folder, but {argument} is a list of "
            f"{len(data)} paths. Received: split={split!r}"
        )
    else:
        if not data:
            raise ValueError(f"{argument}: the list of TFRecord files is empty")
        wrong = next((p for p in data if not isinstance(p, str | os.PathLike)), None)
        if wrong is not None:
            raise TypeError(
                f"{argument} as a list names data by paths (TFRecord files, prefixes, globs, "
                f"folders), but it holds a {type(wrong).__name__}. Received: {wrong!r}"
            )
        text = str([os.fspath(p) for p in data])
        files = [f for p in data for f in resolve(p, argument=argument, check=check).files]
        info = None
    declared = check_sizes(files, info) if check else {}
    return ResolvedData(text, tuple(files), info or one_dataset(files, declared), declared)


def names_dataset(text: str) -> bool:
    """Whether `text` names one dataset by its metadata: a tfpipe prefix (`out/train`) or
    metadata file, or a split of a prepared TensorFlow Datasets folder (`.../mnist-train`)."""
    if metadata_path(text).is_file() or text.endswith(".json"):
        return True
    where = fs.path(text)
    return not where.exists() and tfds_folders.find_split(where) is not None


def dataset_at(text: str, *, check_files: bool = True) -> DatasetInfo | None:
    """The metadata of the one dataset `text` names (see `names_dataset`), or of the only
    split of the prepared TensorFlow Datasets folder `text`; None for anything else.

    Raises:
        SourceError: `text` is a TFDS folder of several splits, listing them (never merged).
    """
    if names_dataset(text):
        return DatasetInfo.load(text, check_files=check_files)
    folder = fs.path(text)
    if not (folder.is_dir() and tfds_folders.is_folder(folder)):
        return None
    split = tfds_folders.load(folder).only_split()
    return DatasetInfo.load(folder / split.prefix, check_files=check_files)


def datasets_in(folder: fs.AnyPath) -> list[str]:
    """The prefixes of the tfpipe datasets whose metadata file and shards are in `folder`."""
    metadata: list[fs.AnyPath] = sorted(folder.glob("*.json"), key=str)
    return [
        str(meta.parent / meta.stem)
        for meta in metadata
        if any(meta.parent.glob(SHARDS.glob(fs.escape(meta.stem))))
    ]


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


def common_compression(files: Sequence[fs.AnyPath]) -> str | None:
    """The one compression all `files` share; raises when they mix compressions."""
    kinds = {f: compression_of(f) for f in files}
    if len(set(kinds.values())) > 1:
        by_kind = {
            str(kind): next(f.name for f, k in kinds.items() if k == kind)
            for kind in kinds.values()
        }
        raise ValueError(
            f"the files mix compressions (one file of each: {by_kind}); read them apart"
        )
    return next(iter(kinds.values()), None)


def _compression_evidence(
    file: fs.AnyPath, entry: Declared | None, asked: str | None
) -> tuple[str | None, str] | None:
    """How `file` is compressed and what says so: its metadata, else its first bytes when
    they tell (gzip's, or their absence when `asked` is gzip); None when nothing tells."""
    if entry is not None:
        said = entry.info.compression
        return said, f"{entry.metadata.name} says compression: {said}"
    if starts_like_gzip(file):
        return "gzip", "its first bytes say so"
    return (None, "its first bytes are not gzip's") if asked == "gzip" else None


def _image_folder(text: str) -> fs.AnyPath | None:
    """`text` as a folder of class folders (no TFRecord file in it, a sub-folder), or None."""
    where = fs.path(text)
    if fs.is_url(text) or not where.is_dir() or any(where.glob("*.tfrecord*")):
        return None
    return where if any(child.is_dir() for child in where.iterdir()) else None


_TABLES = (".csv", ".tsv", ".parquet")  # tables, which the readers do not take as paths


def _files_matching(text: str, argument: str) -> list[fs.AnyPath]:
    where = fs.path(text)
    if where.is_file():
        if TEMPORARY.fullmatch(where.name):
            raise SourceError(
                f"{argument}={text!r} is the temporary file of a write in progress (or of a "
                "killed one); read the finished shards or the dataset prefix instead"
            )
        if where.suffix.lower() in _TABLES:
            raise SourceError(
                f"{argument}={text!r} is a table, not TFRecords: pass a source of it, "
                "tfpipe.from_dataframe(pandas.read_csv(path), label_cols=...) (read_parquet "
                "for Parquet; docs/guides/tabular.md), or write it once as records: "
                f"`tfpipe write {where.name} out/{where.stem} --label-cols ...` (a CSV)"
            )
        return [where]
    files: list[fs.AnyPath]
    if where.is_dir():
        _check_one_dataset(where, argument)
        files = sorted(where.glob("*.tfrecord*"), key=str)
    else:
        files = [p for p in map(fs.path, fs.glob(text)) if p.is_file()]
    files = [f for f in files if not f.name.startswith(".")]  # temporary files of writes
    if not files:
        raise DataNotFoundError(_names_nothing(text, argument, where))
    tfds_folders.check_one_split(files, text)
    return files


def _check_one_dataset(folder: fs.AnyPath, argument: str) -> None:
    """Refuses a folder holding several tfpipe datasets (`out/train`, `out/val`): read
    together, they would merge into one."""
    prefixes = datasets_in(folder)
    if len(prefixes) > 1:
        names = [os.path.basename(p) for p in prefixes]
        raise SourceError(
            f"{argument}={str(folder)!r} holds the tfpipe datasets {names}; reading the folder "
            f"would merge them into one. Read one: pass its prefix {prefixes[0]!r}, or the "
            f"folder with split={names[0]!r} (a list of prefixes reads several on purpose)"
        )


def _names_nothing(text: str, argument: str, where: fs.AnyPath) -> str:
    """What a path that names no data was tried as, and what may have been meant."""
    if where.is_dir():
        return (
            f"{argument}={text!r} is a folder with no TFRecord file (*.tfrecord*) and no "
            "class folders of images in it"
        )
    if glob.has_magic(text):
        return f"{argument}={text!r}: no TFRecord files match the glob"
    tried = (
        f"{argument}={text!r} names no data: it is not a file, a folder (of TFRecord files or "
        f"of class folders of images), a glob, a dataset prefix (the metadata file "
        f"{str(metadata_path(text))!r} does not exist) or a TensorFlow Datasets folder"
    )
    shards = fs.glob(SHARDS.glob(fs.escape(text)))
    if shards:
        return (
            f"{tried}; {len(shards)} shard file(s) of that prefix exist without the metadata "
            "file: an interrupted or unfinished write? Write again, or read them anyway as "
            f"{text + '-*'!r} (a glob; the schema is inferred, or pass schema=)"
        )
    parent = where.parent
    if not parent.is_dir():
        return f"{tried}; its folder {str(parent)!r} does not exist"
    if fs.is_url(text):
        return tried
    names = {re.split(r"[-.]", p.name)[0]: p.name for p in parent.iterdir()}
    near = difflib.get_close_matches(where.name, names, n=3, cutoff=0.6)
    if not near:
        return tried
    return f"{tried}; did you mean {' or '.join(repr(str(parent / n)) for n in near)}?"
