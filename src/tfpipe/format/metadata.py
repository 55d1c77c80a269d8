"""Shard naming and the metadata file (`DatasetInfo`) written beside TFRecord shards.

A dataset written to the prefix `out/train` is the shards `out/train-00000-of-00008.tfrecord`
... and the metadata file `out/train.json`, written last.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from typing import Any

from tfpipe import fs
from tfpipe.errors import DataNotFoundError, SchemaError, SourceError
from tfpipe.features import ClassLabel
from tfpipe.format import tfds_folders
from tfpipe.schema import Schema

FORMAT_VERSION = 1
_COMPRESSION_SUFFIX = {None: "", "gzip": ".gz", "zlib": ".zz"}
_GZIP_MAGIC = b"\x1f\x8b"
_TEMPORARY = re.compile(r"\..+\.tmp-.*")  # a writer's `.<name>.tmp-<pid>`


def check_compression(compression: str | None) -> str | None:
    """Normalizes a compression argument: None, "gzip" or "zlib" ("" and "none" mean None)."""
    if compression in (None, "", "none", "NONE"):
        return None
    value = str(compression).lower()
    if value not in ("gzip", "zlib"):
        raise ValueError(
            f"compression must be None, 'gzip' or 'zlib'. Received: compression={compression!r}"
        )
    return value


def tf_compression(compression: str | None) -> str:
    """The `compression_type` string TensorFlow's record readers and writers take."""
    return (compression or "").upper()


def shard_name(name: str, index: int, count: int, compression: str | None = None) -> str:
    """The file name of shard `index` of `count`, e.g. `train-00003-of-00008.tfrecord.gz`."""
    return f"{name}-{index:05d}-of-{count:05d}.tfrecord{_COMPRESSION_SUFFIX[compression]}"


def metadata_path(prefix: str | os.PathLike[str]) -> fs.AnyPath:
    """The metadata file of a dataset prefix: `out/train` -> `out/train.json`."""
    return fs.path(f"{os.fspath(prefix)}.json")


def compression_of(path: str | os.PathLike[str]) -> str | None:
    """The compression of a TFRecord file, from its suffix or else its first bytes."""
    name = os.fspath(path)
    if name.endswith((".gz", ".gzip")):
        return "gzip"
    if name.endswith((".zz", ".zlib")):
        return "zlib"
    with fs.path(name).open("rb") as f:
        return "gzip" if f.read(2) == _GZIP_MAGIC else None


@dataclasses.dataclass(frozen=True)
class ShardInfo:
    """One shard: its file name (relative to the metadata file), examples, bytes and digest.

    Examples:
        >>> shard = tfpipe.DatasetInfo.load("out/train").shards[0]
        >>> shard.file, shard.num_examples, len(shard.crc32c)
        ('train-00000-of-00002.tfrecord', 12, 8)

    Attributes:
        file: the shard's file name.
        num_examples: the records it holds.
        num_bytes: its size in bytes.
        crc32c: the CRC-32C of the whole file (8 hex digits), computed as it was written: the
            content identity `tfpipe verify` checks and resuming compares. None in metadata
            written before tfpipe kept digests, and for TensorFlow Datasets folders.
    """

    file: str
    num_examples: int
    num_bytes: int
    crc32c: str | None = None


@dataclasses.dataclass(frozen=True)
class SkippedExample:
    """An input the writer skipped with `on_error="skip"`, and why.

    Examples:
        >>> source = tfpipe.from_arrays({"label": np.array([0, 1, 5])},
        ...                             tfpipe.Schema({"label": tfpipe.ClassLabel(num_classes=2)}))
        >>> import warnings
        >>> with warnings.catch_warnings(action="ignore", category=tfpipe.TfpipeWarning):
        ...     info = tfpipe.write_tfrecords(source, "out/skips", on_error="skip", progress=False)
        >>> skipped = info.skipped[0]
        >>> skipped.index, skipped.origin, info.num_examples
        (2, 'example 2', 2)
    """

    index: int
    origin: str
    error: str


@dataclasses.dataclass(frozen=True)
class DatasetInfo:
    """What `write_tfrecords` wrote: schema, counts, shards, skipped inputs.

    Examples:
        >>> info = tfpipe.DatasetInfo.load("out/train")
        >>> info.num_examples, len(info.files)
        (24, 2)

    Attributes:
        name: the prefix's base name, e.g. "train".
        directory: the folder holding the shards and the metadata file: a `pathlib.Path`,
            or for a URL ("gs://bucket/data") a path object whose `str()` is the URL.
        schema: the schema of every record.
        num_examples: examples written, over all shards.
        shards: per-shard file name, example count and byte size.
        compression: None or "gzip".
        skipped: inputs skipped with `on_error="skip"`.
        shuffled: whether a global permutation was written, and `seed` the one used.
        metadata_file: the metadata file's name when it is not `<name>.json`: for a split of
            a prepared TensorFlow Datasets folder, "dataset_info.json".
    """

    name: str
    directory: fs.AnyPath
    schema: Schema
    num_examples: int
    shards: tuple[ShardInfo, ...]
    compression: str | None = None
    skipped: tuple[SkippedExample, ...] = ()
    shuffled: bool = False
    seed: int | None = None
    tfpipe_version: str = ""
    metadata_file: str | None = None

    @property
    def files(self) -> list[fs.AnyPath]:
        """The shard paths, in order.

        Examples:
            >>> [path.name for path in tfpipe.DatasetInfo.load("out/train").files]
            ['train-00000-of-00002.tfrecord', 'train-00001-of-00002.tfrecord']
        """
        return [self.directory / shard.file for shard in self.shards]

    @property
    def num_bytes(self) -> int:
        """Bytes of all the shards, as written.

        Examples:
            >>> info = tfpipe.DatasetInfo.load("out/train")
            >>> info.num_bytes == sum(path.stat().st_size for path in info.files)
            True
        """
        return sum(shard.num_bytes for shard in self.shards)

    @property
    def class_names(self) -> dict[str, list[str]]:
        """Class names per ClassLabel feature that has names.

        Examples:
            >>> tfpipe.DatasetInfo.load("out/train").class_names
            {'label': ['circle', 'square', 'triangle']}
        """
        return {
            name: list(feature.names)
            for name, feature in self.schema.items()
            if isinstance(feature, ClassLabel) and feature.names is not None
        }

    @property
    def metadata_path(self) -> fs.AnyPath:
        """The metadata file: `<directory>/<name>.json` (`dataset_info.json` for a TFDS split).

        Examples:
            >>> tfpipe.DatasetInfo.load("out/train").metadata_path.name
            'train.json'
        """
        return self.directory / (self.metadata_file or f"{self.name}.json")

    def to_dict(self) -> dict[str, Any]:
        """The content of the metadata file, as JSON types.

        Examples:
            >>> data = tfpipe.DatasetInfo.load("out/train").to_dict()
            >>> data["format"], data["num_examples"], len(data["shards"])
            ('tfpipe-tfrecords', 24, 2)
        """
        return {
            "format": "tfpipe-tfrecords",
            "format_version": FORMAT_VERSION,
            "tfpipe_version": self.tfpipe_version,
            "name": self.name,
            "num_examples": self.num_examples,
            "num_bytes": self.num_bytes,
            "compression": self.compression,
            "shuffled": self.shuffled,
            "seed": self.seed,
            "class_names": self.class_names,
            "schema": self.schema.to_dict(),
            "shards": [dataclasses.asdict(s) for s in self.shards],
            "skipped": [dataclasses.asdict(s) for s in self.skipped],
        }

    def save(self) -> fs.AnyPath:
        """Writes the metadata file under a temporary name, then renames it (atomically on
        local disks; a copy then a delete on object stores, where the file appears whole).

        Examples:
            >>> info = tfpipe.DatasetInfo.load("out/train")
            >>> info.save().name
            'train.json'
        """
        path = self.metadata_path
        temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        temporary.write_text(json.dumps(self.to_dict(), indent=2))
        temporary.replace(path)  # type: ignore[arg-type]
        return path

    @classmethod
    def load(cls, prefix: str | os.PathLike[str], *, check_files: bool = True) -> DatasetInfo:
        """Reads the metadata of the dataset at `prefix` (`out/train` or `out/train.json`, or
        a split of a prepared TensorFlow Datasets folder: `mnist/3.0.1/mnist-train`, or its
        `dataset_info.json` when the folder holds one split); with `check_files` (the
        default), raises when a shard it lists does not exist, or (TFDS) when a shard holds
        another number of records than `dataset_info.json` lists.

        Examples:
            >>> info = tfpipe.DatasetInfo.load("out/train.json")
            >>> info.name, info.num_examples, info.compression
            ('train', 24, None)
        """
        path = fs.path(prefix, "prefix")
        folder = tfds_folders.folder_named_by(path)
        if folder is not None:
            tfds = tfds_folders.load(folder)
            return cls._of_tfds_split(tfds, tfds.only_split(), check_files=check_files)
        if path.suffix != ".json":
            found = None if metadata_path(prefix).is_file() else tfds_folders.find_split(path)
            if found is not None:
                return cls._of_tfds_split(*found, check_files=check_files)
            path = metadata_path(prefix)
        if not path.is_file():
            raise DataNotFoundError(
                f"no tfpipe metadata file {str(path)!r}; write the dataset with "
                "tfpipe.write_tfrecords, or pass the shard files and schema= explicitly"
            )
        try:
            data = json.loads(path.read_text())
            info = cls(
                name=data["name"],
                directory=path.parent,
                schema=Schema.from_json(data["schema"]),
                num_examples=int(data["num_examples"]),
                shards=tuple(ShardInfo(**s) for s in data["shards"]),
                compression=data.get("compression"),
                skipped=tuple(SkippedExample(**s) for s in data.get("skipped", [])),
                shuffled=bool(data.get("shuffled", False)),
                seed=data.get("seed"),
                tfpipe_version=data.get("tfpipe_version", ""),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise SchemaError(f"metadata file {str(path)!r} is not valid: {e!r}") from e
        listed = sum(shard.num_examples for shard in info.shards)
        if listed != info.num_examples:
            raise SchemaError(
                f"metadata file {str(path)!r} is not valid: it declares {info.num_examples} "
                f"examples, but its shards add up to {listed}; write the dataset again"
            )
        missing = [str(f) for f in info.files if not f.is_file()] if check_files else []
        if missing:
            raise DataNotFoundError(
                f"metadata file {str(path)!r} lists shards that do not exist: {missing[:3]}"
            )
        return info

    @classmethod
    def _of_tfds_split(
        cls, folder: tfds_folders.Folder, split: tfds_folders.Split, check_files: bool
    ) -> DatasetInfo:
        files = [folder.directory / name for name in split.files]
        if check_files:
            sizes = tfds_folders.check_split(folder, split)
        else:
            sizes = [f.stat().st_size if f.is_file() else 0 for f in files]
        return cls(
            name=split.prefix,
            directory=folder.directory,
            schema=folder.schema(),
            num_examples=sum(split.shard_lengths),
            shards=tuple(
                ShardInfo(*entry)
                for entry in zip(split.files, split.shard_lengths, sizes, strict=True)
            ),
            metadata_file=tfds_folders.INFO_FILE,
        )


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
        if _TEMPORARY.fullmatch(where.name):
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
            files = [fs.path(p) for p in fs.glob(f"{text}-*-of-*.tfrecord*")]
    files = [f for f in files if not f.name.startswith(".")]  # temporary files of writes
    if not files:
        raise DataNotFoundError(
            f"no TFRecord files at {text!r} (tried it as a file, a folder, a glob and a prefix)"
        )
    tfds_folders.check_one_split(files, text)
    return files
