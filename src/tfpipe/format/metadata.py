"""The metadata file (`DatasetInfo`) written beside TFRecord shards: the schema, the counts,
each shard's size and digest, and the inputs skipped (see `tfpipe.format.naming` for the names
of the files)."""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

from tfpipe import fs
from tfpipe.errors import DataNotFoundError, SchemaError
from tfpipe.features import ClassLabel
from tfpipe.format import tfds_folders
from tfpipe.format.naming import metadata_name, metadata_path, temporary_name
from tfpipe.schema import Schema

FORMAT_VERSION = 1


@dataclasses.dataclass(frozen=True)
class ShardInfo:
    """One shard: its file name (relative to the metadata file), examples, bytes and digest.

    Examples:
        >>> from tfpipe.format.metadata import DatasetInfo
        >>> shard = DatasetInfo.load("out/train").shards[0]
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
        >>> from tfpipe.errors import TfpipeWarning
        >>> with warnings.catch_warnings(action="ignore", category=TfpipeWarning):
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
        >>> from tfpipe.format.metadata import DatasetInfo
        >>> info = DatasetInfo.load("out/train")
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
            >>> from tfpipe.format.metadata import DatasetInfo
            >>> [path.name for path in DatasetInfo.load("out/train").files]
            ['train-00000-of-00002.tfrecord', 'train-00001-of-00002.tfrecord']
        """
        return [self.directory / shard.file for shard in self.shards]

    @property
    def num_bytes(self) -> int:
        """Bytes of all the shards, as written.

        Examples:
            >>> from tfpipe.format.metadata import DatasetInfo
            >>> info = DatasetInfo.load("out/train")
            >>> info.num_bytes == sum(path.stat().st_size for path in info.files)
            True
        """
        return sum(shard.num_bytes for shard in self.shards)

    @property
    def class_names(self) -> dict[str, list[str]]:
        """Class names per ClassLabel feature that has names.

        Examples:
            >>> from tfpipe.format.metadata import DatasetInfo
            >>> DatasetInfo.load("out/train").class_names
            {'label': ['circle', 'square', 'triangle']}
        """
        return {
            name: list(feature.names)
            for name, feature in self.schema.of(ClassLabel).items()
            if feature.names is not None
        }

    @property
    def metadata_path(self) -> fs.AnyPath:
        """The metadata file: `<directory>/<name>.json` (`dataset_info.json` for a TFDS split).

        Examples:
            >>> from tfpipe.format.metadata import DatasetInfo
            >>> DatasetInfo.load("out/train").metadata_path.name
            'train.json'
        """
        return self.directory / (self.metadata_file or metadata_name(self.name))

    def to_dict(self) -> dict[str, Any]:
        """The content of the metadata file, as JSON types.

        Examples:
            >>> from tfpipe.format.metadata import DatasetInfo
            >>> data = DatasetInfo.load("out/train").to_dict()
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
            "stored_images": self.schema.stored_images(),
            "shards": [dataclasses.asdict(s) for s in self.shards],
            "skipped": [dataclasses.asdict(s) for s in self.skipped],
        }

    def save(self) -> fs.AnyPath:
        """Writes the metadata file under a temporary name, then renames it (atomically on
        local disks; a copy then a delete on object stores, where the file appears whole).

        Examples:
            >>> from tfpipe.format.metadata import DatasetInfo
            >>> info = DatasetInfo.load("out/train")
            >>> info.save().name
            'train.json'
        """
        path = self.metadata_path
        temporary = path.with_name(temporary_name(path.name, str(os.getpid())))
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
            >>> from tfpipe.format.metadata import DatasetInfo
            >>> info = DatasetInfo.load("out/train.json")
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
                schema=Schema.from_json(data["schema"]).with_stored_images(
                    data.get("stored_images", {})
                ),
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
