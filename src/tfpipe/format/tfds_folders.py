"""Prepared TensorFlow Datasets folders, read and written without TFDS installed.

A prepared TFDS dataset is a folder such as `~/tensorflow_datasets/mnist/3.0.1/` holding
`dataset_info.json` (the splits, each with its shard lengths and file name template),
`features.json` (the feature tree), `<feature>.labels.txt` (class names, one a line) and the
shards, `mnist-train.tfrecord-00000-of-00004` by default. How TFDS stores each feature in a
`tf.train.Example` (its `example_serializer.py` and `features/`), and the tfpipe feature
that reads it:

- `Image` (uint8; png, jpeg, or no format: each file as it came): one encoded image (bytes)
  -> `Image` (encoding "auto" for no format, and the reverse);
- `ClassLabel` (names in `<key>.labels.txt`): one int64 -> `ClassLabel` with those names;
- `Tensor` (encoding "none", at most the first dimension unknown): a flat list, ints and
  bools as int64, floats as float32 -> `Tensor`;
- `Tensor` (encoding "bytes" or "zlib", a fixed shape): its raw bytes, zlib-compressed or not
  -> `Tensor(encoding="bytes")` (or "zlib");
- `Text`: one UTF-8 string (bytes) -> `Text`;
- `BBoxFeature`: four floats -> `Tensor(shape=(4,))`;
- a `FeaturesDict` inside another: its keys joined with "/" (`meta/id`), one feature each;
- a `Sequence` of the tensors, labels and boxes above (or of a dict of them): each element's
  values one after the other -> `Tensor` with a first dimension of the sequence's length
  (None when it varies); a sequence of class labels gives their int64 indices.

Other TFDS features (video, audio, sequences of images or of sequences, tensors of more than
one unknown dimension) raise a `SchemaError` naming them.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from tfpipe import fs
from tfpipe.errors import DataNotFoundError, SchemaError, SourceError
from tfpipe.features import ClassLabel, Feature
from tfpipe.features.base import TFDS_FEATURES
from tfpipe.format.frames import FRAME_OVERHEAD, scan_offsets
from tfpipe.format.naming import temporary_name
from tfpipe.schema import Schema

INFO_FILE = "dataset_info.json"
FEATURES_FILE = "features.json"
DEFAULT_TEMPLATE = "{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}"
TFPIPE_TEMPLATE = "{SPLIT}-{SHARD_X_OF_Y}.{FILEFORMAT}"  # naming.SHARDS in TFDS words
_SPLIT_NAME = re.compile(r"\w+")


@dataclasses.dataclass(frozen=True)
class Split:
    """One split of a prepared TFDS dataset, as `dataset_info.json` lists it.

    Attributes:
        name: the split's name, e.g. "train".
        prefix: the shards' common base name, e.g. "mnist-train" (`<folder>/mnist-train`
            names the split wherever tfpipe takes a dataset prefix).
        files: the shard file names, in order.
        shard_lengths: the examples of each shard.
        num_bytes: the split's size that TFDS recorded (the examples' bytes, or the files').
    """

    name: str
    prefix: str
    files: tuple[str, ...]
    shard_lengths: tuple[int, ...]
    num_bytes: int


@dataclasses.dataclass(frozen=True)
class Folder:
    """A prepared TFDS dataset folder: its name, version, splits and features."""

    directory: fs.AnyPath
    name: str
    version: str
    splits: dict[str, Split]

    @property
    def info_path(self) -> fs.AnyPath:
        return self.directory / INFO_FILE

    def split(self, name: str) -> Split:
        """The split called `name` (or whose prefix is `name`).

        Raises:
            DataNotFoundError: there is no such split, listing the ones there are.
        """
        for split in self.splits.values():
            if name in (split.name, split.prefix):
                return split
        raise DataNotFoundError(
            f"the TFDS dataset {str(self.directory)!r} has no split {name!r}; its splits are "
            f"{sorted(self.splits)} (pass split= one of them, or the path "
            f"{str(self.directory / self.some_prefix())!r})"
        )

    def some_prefix(self) -> str:
        return next(iter(self.splits.values())).prefix

    def only_split(self) -> Split:
        """The folder's one split.

        Raises:
            SourceError: the folder holds several splits (reading them as one would merge
                train and test), listing them.
        """
        if len(self.splits) == 1:
            return next(iter(self.splits.values()))
        prefixes = [str(self.directory / s.prefix) for s in self.splits.values()]
        raise SourceError(
            f"{str(self.directory)!r} is a TFDS dataset with the splits {list(self.splits)}; "
            "reading the folder would merge them into one dataset. Name one: pass "
            f"split={next(iter(self.splits))!r}, or the path {prefixes[0]!r}"
        )

    def schema(self) -> Schema:
        """The tfpipe schema of `features.json`, with class names from the `.labels.txt` files.

        Raises:
            DataNotFoundError: `features.json` is missing (datasets made before TFDS 4.0).
            SchemaError: a feature has no tfpipe counterpart, naming it and its TFDS kind.
        """
        path = self.directory / FEATURES_FILE
        if not path.is_file():
            raise DataNotFoundError(
                f"the TFDS dataset {str(self.directory)!r} has no {FEATURES_FILE} (it was made "
                "before TFDS 4.0?); pass schema=, or prepare it again with a recent TFDS"
            )
        tree = _read_json(path)
        return Schema(dict(_features(tree, (), directory=self.directory, where=str(path))))


def is_folder(directory: fs.AnyPath) -> bool:
    """Whether `directory` holds a TFDS `dataset_info.json`: one that lists its `splits` (a
    list; other tools' files of that name, such as Hugging Face's, keep them in a mapping or
    have none), or that is not a JSON object at all (`load` names the fault)."""
    path = directory / INFO_FILE
    if not path.is_file():
        return False
    try:
        data = _parsed(path)
    except ValueError:
        return True
    return not isinstance(data, dict) or _lists_splits(data)


def _lists_splits(info: Mapping[str, Any]) -> bool:
    return isinstance(info.get("splits"), list)


def load(directory: fs.AnyPath) -> Folder:
    """Reads the `dataset_info.json` of a prepared TFDS dataset folder.

    Raises:
        SchemaError: the file is not valid JSON, lacks the splits, or the dataset is in a
            file format other than TFRecord (ArrayRecord, Parquet, ...).
    """
    path = directory / INFO_FILE
    data = _read_json(path)
    file_format = data.get("fileFormat") or "tfrecord"
    if file_format != "tfrecord":
        raise SchemaError(
            f"the TFDS dataset {str(directory)!r} is stored as {file_format!r} ({path.name}: "
            f'fileFormat), and tfpipe reads TFRecord only; prepare it with file_format="tfrecord"'
        )
    try:
        name = str(data["name"])
        splits = {str(s["name"]): _split(s, name, file_format) for s in data.get("splits", [])}
    except (KeyError, TypeError, ValueError) as e:
        raise SchemaError(f"TFDS metadata file {str(path)!r} is not valid: {e!r}") from e
    if not splits:
        raise SchemaError(f"TFDS metadata file {str(path)!r} lists no splits")
    return Folder(directory, name, str(data.get("version", "")), splits)


def _split(data: Mapping[str, Any], dataset: str, file_format: str) -> Split:
    lengths = tuple(int(n) for n in data.get("shardLengths", []))
    if not lengths:  # older TFDS lists numShards only: reading them would give no examples
        raise ValueError(
            f"split {data['name']!r} lists no shardLengths, so its shards and their lengths "
            "are unknown; prepare it again with TFDS >= 4"
        )
    template = data.get("filepathTemplate") or DEFAULT_TEMPLATE
    names = {"DATASET": dataset, "SPLIT": data["name"], "FILEFORMAT": file_format}
    files = tuple(_shard_file(template, names, k, len(lengths)) for k in range(len(lengths)))
    base = template.format(**names, SHARD_X_OF_Y="", SHARD_INDEX="", NUM_SHARDS="")
    prefix = base.replace(f".{file_format}", "").rstrip("-._")
    return Split(
        str(data["name"]),
        prefix=prefix,
        files=files,
        shard_lengths=lengths,
        num_bytes=int(data.get("numBytes", 0)),
    )


def _shard_file(template: str, names: dict[str, str], index: int, count: int) -> str:
    digits = max(len(str(count)), 5)
    x, y = f"{index:0{digits}d}", f"{count:0{digits}d}"
    return template.format(**names, SHARD_INDEX=x, NUM_SHARDS=y, SHARD_X_OF_Y=f"{x}-of-{y}")


def find_split(path: fs.AnyPath) -> tuple[Folder, Split] | None:
    """The TFDS split that `path` names as `<folder>/<split prefix>` (`.../mnist-train`)."""
    if not is_folder(path.parent):
        return None
    folder = load(path.parent)
    for split in folder.splits.values():
        if path.name == split.prefix:
            return folder, split
    return None


def folder_named_by(path: fs.AnyPath) -> fs.AnyPath | None:
    """The TFDS folder whose `dataset_info.json` `path` is; None for any other path.

    Raises:
        SourceError: `path` is the folder's `features.json`, which names no split.
    """
    if path.name not in (INFO_FILE, FEATURES_FILE) or not is_folder(path.parent):
        return None
    if path.name == FEATURES_FILE:
        raise SourceError(
            f"{str(path)!r} is the feature tree of the TFDS dataset {str(path.parent)!r}, not a "
            f"dataset; pass the folder (with split=), or its {INFO_FILE}"
        )
    return path.parent


def check_one_split(files: Sequence[fs.AnyPath], pattern: str) -> None:
    """Raises when `files`, what the glob or folder `pattern` matched, hold shards of several
    splits of one TFDS folder: read together, they would merge train and test.

    Raises:
        SourceError: naming the splits and how to read one (or several, on purpose).
    """
    by_folder: dict[str, list[fs.AnyPath]] = {}
    for file in files:
        by_folder.setdefault(str(file.parent), []).append(file)
    for members in by_folder.values():
        directory = members[0].parent
        if not is_folder(directory):
            continue
        names = {file.name for file in members}
        splits = [s for s in load(directory).splits.values() if names.intersection(s.files)]
        if len(splits) > 1:
            listed = sorted(s.name for s in splits)
            raise SourceError(
                f"{pattern!r} matches shards of the splits {listed} of the TFDS dataset "
                f"{str(directory)!r}; reading them together would merge the splits into one "
                f"dataset. Read one: pass the folder with split={listed[0]!r}, or the path "
                f"{str(directory / splits[0].prefix)!r} (a list of split paths reads several "
                "on purpose)"
            )


def check_split(folder: Folder, split: Split) -> list[int]:
    """Checks that every shard of `split` is there, whole; returns the shards' sizes.

    The sizes must add up to what `dataset_info.json` records (TFDS records the examples'
    bytes, so the files hold 16 more per record; some writers record the files' bytes). When
    they do not, each shard's records are counted by their frame headers (data skipped, see
    `tfpipe.format.frames.scan_offsets`) against its listed length, so the error names the shard
    that is short (or long); a split whose counts all match passes.

    Raises:
        DataNotFoundError: a shard is missing.
        SourceError: a shard holds another number of records than listed, or is truncated
            (naming the byte offset).
    """
    files = [folder.directory / name for name in split.files]
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise DataNotFoundError(
            f"{len(missing)} of the {len(files)} shards of split {split.name!r} that "
            f"{str(folder.info_path)!r} lists do not exist: {missing[:3]}; copy or prepare the "
            "dataset again"
        )
    sizes = [f.stat().st_size for f in files]
    records = sum(split.shard_lengths)
    if sum(sizes) in (split.num_bytes + FRAME_OVERHEAD * records, split.num_bytes):
        return sizes
    for file, listed, size in zip(files, split.shard_lengths, sizes, strict=True):
        found = len(scan_offsets(file, size))
        if found != listed:
            raise SourceError(
                f"TFDS shard {str(file)!r} holds {found} records, but {str(folder.info_path)!r}"
                f" lists {listed} for it (split {split.name!r}): the shard is "
                f"{'short' if found < listed else 'long'} (an interrupted copy?); copy or "
                "prepare the dataset again"
            )
    return sizes


def _parsed(path: fs.AnyPath) -> Any:
    """The JSON in `path`, read once while the file keeps its size and modification time (a
    resolution asks about one dataset_info.json several times)."""
    stat = path.stat()
    return _parsed_text(str(path), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=16)
def _parsed_text(path: str, mtime_ns: int, size: int) -> Any:
    return json.loads(fs.path(path).read_text())


def _read_json(path: fs.AnyPath) -> dict[str, Any]:
    try:
        data = _parsed(path)
    except ValueError as e:
        raise SchemaError(f"TFDS metadata file {str(path)!r} is not valid JSON: {e}") from e
    if not isinstance(data, dict):
        raise SchemaError(f"TFDS metadata file {str(path)!r} is not a JSON object")
    return data


def _kind(node: Mapping[str, Any]) -> str:
    """The TFDS feature kind of a `features.json` node: "image", "classLabel", ..."""
    kinds = [k for k in node if k not in ("pythonClassName", "description", "valueRange")]
    return kinds[0] if len(kinds) == 1 else str(node.get("pythonClassName", kinds))


_NOT_IN_SEQUENCE = -2  # the sequence length of a feature outside any Sequence


def _features(
    node: Mapping[str, Any],
    path: tuple[str, ...],
    *,
    directory: fs.AnyPath,
    where: str,
    length: int | None = _NOT_IN_SEQUENCE,
) -> Iterator[tuple[str, Feature]]:
    """(flattened key, tfpipe feature) for every leaf under a `features.json` node; `length`
    is the length of the `Sequence` the node is in (None: variable)."""
    kind = _kind(node)
    name = "/".join(path)
    if kind == "featuresDict":
        for key, child in node["featuresDict"]["features"].items():
            yield from _features(
                child, (*path, key), directory=directory, where=where, length=length
            )
        return
    try:
        if kind == "sequence" and length == _NOT_IN_SEQUENCE:
            inner = int(node["sequence"].get("length", -1))
            yield from _features(
                node["sequence"]["feature"],
                path,
                directory=directory,
                where=where,
                length=None if inner < 0 else inner,
            )
            return
        names = functools.partial(_class_names, directory, path)
        feature = Feature.from_tfds(kind, node.get(kind, {}), names)
        yield name, feature if length == _NOT_IN_SEQUENCE else feature.in_tfds_sequence(length)
    except (KeyError, TypeError, ValueError) as e:
        if isinstance(e, SchemaError) and str(e).startswith("TFDS feature"):
            raise
        raise SchemaError(
            f"TFDS feature {name!r} in {where!r} ({node.get('pythonClassName', kind)}) cannot be "
            f"read by tfpipe: {e}. tfpipe reads the TFDS features Image (uint8), ClassLabel, "
            "Tensor (at most the first dimension unknown; a fixed shape when stored as bytes), "
            "BBoxFeature and Text, nested in dicts or not, and one-level Sequences of tensors, "
            "labels and boxes"
        ) from e


def _class_names(directory: fs.AnyPath, path: tuple[str, ...]) -> list[str] | None:
    """The class names TFDS keeps for the feature at `path`; None without their file."""
    labels = directory / f"{_label_file(path)}.labels.txt"
    if not labels.is_file():
        return None
    return [line.strip() for line in labels.read_text().splitlines() if line.strip()]


def _label_file(path: tuple[str, ...]) -> str:
    """The base name TFDS gives the class names of the feature at `path` (nested dict keys
    joined by "-", a "/" inside a key turned to ".")."""
    return "-".join(key.replace("/", ".") for key in path)


# ---- writing: the files `tfds.builder_from_directory` reads beside tfpipe shards ----


def check_writable(
    directory: fs.AnyPath, split: str, schema: Schema, compression: str | None
) -> None:
    """Raises before a write when TFDS could not read what `tfds_compatible=True` would write
    into `directory`, so that a refused write leaves the folder as it was.

    Raises:
        ValueError: compression is not None, or `split` is not a TFDS split name (or is
            "dataset_info" or "features": its tfpipe metadata would replace TFDS's file).
        SchemaError: a feature has no TFDS counterpart, the folder's `features.json`
            describes other features, or its `dataset_info.json` is not valid or not TFDS's.
    """
    if compression is not None:
        raise ValueError(
            f"tfds_compatible=True needs compression=None: TFDS reads uncompressed TFRecords "
            f"only. Received: compression={compression!r}"
        )
    if not _SPLIT_NAME.fullmatch(split):
        raise ValueError(
            f"tfds_compatible=True: the prefix's name {split!r} is the TFDS split name, which "
            "takes letters, digits and underscores only; write to a prefix such as out/train"
        )
    check_metadata_name(directory, split, tfds_compatible=True)
    _check_features(directory, split, _features_json(schema))
    info_path = directory / INFO_FILE
    if info_path.is_file() and not _lists_splits(_read_json(info_path)):
        raise SchemaError(
            f"{str(info_path)!r} is not a TFDS dataset_info.json (it lists no splits; another "
            f"tool's?), and a tfds_compatible=True write to {str(directory / split)!r} would "
            "replace it; write into another folder"
        )


def check_metadata_name(directory: fs.AnyPath, split: str, *, tfds_compatible: bool) -> None:
    """Raises when the tfpipe metadata file of the prefix `<directory>/<split>` would replace
    a TFDS metadata file: a prefix named "dataset_info" or "features", written with
    `tfds_compatible` or into a TFDS folder.

    Raises:
        ValueError: naming the prefix and the file it would replace.
    """
    metadata = f"{split}.json"
    if metadata not in (INFO_FILE, FEATURES_FILE):
        return
    if tfds_compatible or is_folder(directory):
        holder = (
            "where tfds_compatible=True writes TFDS's own"
            if tfds_compatible
            else f"which describes the TFDS dataset {str(directory)!r}"
        )
        raise ValueError(
            f"the prefix {str(directory / split)!r} would write tfpipe's metadata to "
            f"{metadata}, {holder}: one would replace the other. Write to a prefix with "
            "another name, such as out/train"
        )


def _check_features(directory: fs.AnyPath, split: str, features: dict[str, Any]) -> None:
    features_path = directory / FEATURES_FILE
    if features_path.is_file() and _read_json(features_path) != features:
        raise SchemaError(
            f"{str(features_path)!r} describes other features than the schema written to "
            f"{str(directory / split)!r}: every split of a TFDS dataset has the same features; "
            "write the splits with one schema, or into another folder"
        )


def save(
    directory: fs.AnyPath,
    split: str,
    *,
    schema: Schema,
    shard_lengths: Sequence[int],
    num_bytes: int,
) -> None:
    """Writes (or updates) `dataset_info.json`, `features.json` and the class names files
    so that `tfds.builder_from_directory(directory)` reads the split `split` from tfpipe's
    shards `<split>-NNNNN-of-NNNNN.tfrecord`. Other splits already listed are kept.

    Raises:
        SchemaError: the folder holds a TFDS dataset with other features.
    """
    features = _features_json(schema)
    _check_features(directory, split, features)  # again: another split may have been written
    info_path = directory / INFO_FILE
    info = _read_json(info_path) if info_path.is_file() else _new_info(directory)
    entry = {
        "name": split,
        "numBytes": str(num_bytes),
        "shardLengths": [str(n) for n in shard_lengths],
        "filepathTemplate": TFPIPE_TEMPLATE,
    }
    info["splits"] = [s for s in info.get("splits", []) if s.get("name") != split] + [entry]
    for path, names in _label_files(schema).items():
        _write_atomically(directory / f"{path}.labels.txt", "".join(f"{n}\n" for n in names))
    _write_atomically(directory / FEATURES_FILE, json.dumps(features, indent=2))
    _write_atomically(info_path, json.dumps(info, indent=2))


def _new_info(directory: fs.AnyPath) -> dict[str, Any]:
    name = re.sub(r"\W", "_", directory.name) or "dataset"
    return {
        "name": name if name[0].isalpha() else f"d{name}",
        "version": "1.0.0",
        "fileFormat": "tfrecord",
        "moduleName": "tfpipe",
        "description": "Written by tfpipe.write_tfrecords(..., tfds_compatible=True).",
        "splits": [],
    }


def _write_atomically(path: fs.AnyPath, text: str) -> None:
    temporary = path.with_name(temporary_name(path.name, str(os.getpid())))
    temporary.write_text(text)
    temporary.replace(path)  # type: ignore[arg-type]


def _features_json(schema: Schema) -> dict[str, Any]:
    """The `features.json` tree of a schema (names with "/" become nested dicts)."""
    root: dict[str, Any] = {}
    for name, feature in schema.items():
        *parents, leaf = name.split("/")
        node = root
        for key in parents:
            node = node.setdefault(key, {})
            if "pythonClassName" in node:
                raise SchemaError(f"feature {name!r} is nested under feature {key!r}")
        if leaf in node:
            raise SchemaError(f"feature {name!r} would hold features nested under it")
        try:
            node[leaf] = feature.tfds_json()
        except SchemaError as e:
            raise SchemaError(f"feature {name!r}: {e}") from e
    return _dict_json(root)


def _dict_json(children: dict[str, Any]) -> dict[str, Any]:
    features = {
        key: child if "pythonClassName" in child else _dict_json(child)
        for key, child in children.items()
    }
    return {
        "featuresDict": {"features": features},
        "pythonClassName": f"{TFDS_FEATURES}features_dict.FeaturesDict",
    }


def _label_files(schema: Schema) -> dict[str, list[str]]:
    """Base name of the class names file -> names, for each single-label ClassLabel."""
    return {
        _label_file(tuple(name.split("/"))): list(feature.names)
        for name, feature in schema.of(ClassLabel).items()
        if not feature.multi_label and feature.names
    }
