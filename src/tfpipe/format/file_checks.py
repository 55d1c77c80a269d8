"""What a read of TFRecord files expects of each file, checked before any record is read.

Files named like tfpipe shards (`<prefix>-00003-of-00008.tfrecord[.gz]`) are grouped by
prefix. When `<prefix>.json` exists beside them, each file's size must be the `num_bytes` it
declares (a stat: truncated, zero-byte and appended-to shards fail at once), and a reader that
counts records (the random-access index) compares them with `num_examples`. Without metadata,
all N of N shards of a group must be there (else an interrupted write is reported), and a
warning says that counts, sizes and checksums cannot be checked. Shards of a prepared
TensorFlow Datasets folder
(`mnist-train.tfrecord-00000-of-00004`, or tfpipe-named shards of a `tfds_compatible` write,
beside `dataset_info.json`) are checked against the shard lengths it lists (see
`tfpipe.format.tfds_folders.check_split`). Other files are only refused when they are empty.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Mapping, Sequence

from tfpipe import fs
from tfpipe.errors import DataNotFoundError, SourceError, TfpipeWarning
from tfpipe.format import tfds_folders
from tfpipe.format.metadata import DatasetInfo, ShardInfo
from tfpipe.format.naming import SHARDS, TFDS_SHARDS, metadata_path


@dataclasses.dataclass(frozen=True)
class Declared:
    """A file's entry in its dataset's metadata file."""

    shard: ShardInfo
    info: DatasetInfo

    @property
    def metadata(self) -> fs.AnyPath:
        return self.info.metadata_path


def _group(file: fs.AnyPath) -> tuple[fs.AnyPath, str, int, bool] | None:
    """The folder, prefix and shard count of a shard-named file, and whether it is named as
    TFDS names shards."""
    for template, tfds in ((SHARDS, False), (TFDS_SHARDS, True)):
        name = template.parse(file.name)
        if name is not None:
            return file.parent, name.prefix, name.count, tfds
    return None


def _declared_by(info: DatasetInfo, files: list[fs.AnyPath]) -> dict[fs.AnyPath, Declared]:
    metadata = info.metadata_path
    by_name = {shard.file: shard for shard in info.shards}
    declared = {}
    for file in files:
        shard = by_name.get(file.name)
        if shard is None:
            raise SourceError(
                f"TFRecord file {str(file)!r} is named like a shard of the dataset "
                f"{info.name!r}, but its metadata file {str(metadata)!r} does not list it (it "
                f"lists {[s.file for s in info.shards][:3]}...): a leftover of another write? "
                "Remove it, or read the dataset by its prefix"
            )
        declared[file] = Declared(shard, info)
    return declared


def _check_complete(directory: fs.AnyPath, prefix: str, count: int) -> None:
    found = {
        name.index
        for p in directory.glob(SHARDS.glob(fs.escape(prefix), count))
        if (name := SHARDS.parse(p.name)) and name.prefix == prefix
    }
    missing = [f"{prefix}-{k:05d}-of-{count:05d}" for k in range(count) if k not in found]
    if missing:
        raise DataNotFoundError(
            f"the TFRecord shards {prefix}-*-of-{count:05d} in {str(directory)!r} are "
            f"incomplete: {len(missing)} of {count} are missing ({missing[:3]}) and there is no "
            f"metadata file {prefix}.json: an interrupted write? Write the dataset again"
        )


def declared_shards(
    files: Sequence[fs.AnyPath], located: DatasetInfo | None = None
) -> dict[fs.AnyPath, Declared]:
    """The metadata entry of each of `files` that a tfpipe metadata file (or a TFDS folder's
    `dataset_info.json`) describes. `located` is the metadata `files` were listed from, loaded
    and checked already (so a TFDS split's shards are not counted again).

    Groups of shard-named files without metadata must be complete (all N of N on disk); a
    TfpipeWarning says once that their counts, sizes and checksums cannot be checked.

    Raises:
        DataNotFoundError: shards of a group without metadata are missing, naming them.
        SourceError: a shard-named file is not listed by its group's metadata file.
        SchemaError: a metadata file is not valid.
    """
    if located is not None:
        return {
            file: Declared(shard, located)
            for file, shard in zip(files, located.shards, strict=True)
        }
    groups: dict[tuple[fs.AnyPath, str, int, bool], list[fs.AnyPath]] = {}
    for file in files:
        key = _group(file)
        if key is not None:
            groups.setdefault(key, []).append(file)
    declared: dict[fs.AnyPath, Declared] = {}
    unchecked = []
    for (directory, prefix, count, tfds), members in groups.items():
        metadata = metadata_path(directory / prefix)
        if metadata.is_file():
            declared.update(_declared_by(DatasetInfo.load(metadata), members))
        elif tfds_folders.find_split(directory / prefix) is not None:  # also tfpipe-named
            declared.update(_declared_by(DatasetInfo.load(directory / prefix), members))
        elif not tfds:
            _check_complete(directory, prefix, count)
            unchecked.append(f"{directory / prefix}-*-of-{count:05d}")
    if unchecked:
        warnings.warn(
            f"the TFRecord shards {unchecked[:3]} have no tfpipe metadata file "
            "(<prefix>.json) beside them, so nothing can be compared with what was written: "
            "their record counts, sizes and checksums cannot be checked, and a shard cut short "
            "at a record boundary (an interrupted copy) reads as fewer records without any "
            "error. Copy the metadata file along with the shards, or write them with "
            "tfpipe.write_tfrecords to get one",
            TfpipeWarning,
            stacklevel=3,
        )
    return declared


def check_sizes(
    files: Sequence[fs.AnyPath], located: DatasetInfo | None = None
) -> dict[fs.AnyPath, Declared]:
    """Checks each file's size against its metadata (a stat each); returns the entries.
    `located`: see `declared_shards`.

    A zero-byte file is refused unless its metadata declares it empty (a shard whose every
    example was skipped).

    Raises:
        SourceError: a file's size differs from its metadata's, or a file is empty; the
            message names the file, the metadata file, and both sizes.
        DataNotFoundError: see `declared_shards`.
    """
    declared = declared_shards(files, located)
    for file in files:
        size = file.stat().st_size
        entry = declared.get(file)
        if entry is not None and size != entry.shard.num_bytes:
            raise SourceError(
                f"TFRecord file {str(file)!r} has {size} bytes, but the metadata file "
                f"{str(entry.metadata)!r} declares {entry.shard.num_bytes} bytes "
                f"({entry.shard.num_examples} records): the shard is truncated or was appended "
                "to (an interrupted copy?), or the metadata does not describe it; copy or write "
                "the dataset again"
            )
        if entry is None and size == 0:
            raise SourceError(
                f"TFRecord file {str(file)!r} is empty (0 bytes) and no tfpipe metadata "
                "declares it empty: a failed write or copy? Remove it, or write it again"
            )
    return declared


def check_counts(
    files: Sequence[fs.AnyPath], counts: Sequence[int], declared: Mapping[fs.AnyPath, Declared]
) -> None:
    """Compares the records found in each file with its metadata's `num_examples`.

    Raises:
        SourceError: a count differs, naming the file and the metadata file.
    """
    for file, count in zip(files, counts, strict=True):
        entry = declared.get(file)
        if entry is not None and count != entry.shard.num_examples:
            raise SourceError(
                f"TFRecord file {str(file)!r} holds {count} records, but the metadata file "
                f"{str(entry.metadata)!r} declares {entry.shard.num_examples} for it (with the "
                "right byte size): the metadata file is wrong; write the dataset again"
            )


def declared_examples(
    files: Sequence[fs.AnyPath], declared: Mapping[fs.AnyPath, Declared]
) -> int | None:
    """The examples the metadata declares for `files`; None when one of them has none."""
    if any(file not in declared for file in files):
        return None
    return sum(declared[file].shard.num_examples for file in files)


def one_dataset(
    files: Sequence[fs.AnyPath], declared: Mapping[fs.AnyPath, Declared]
) -> DatasetInfo | None:
    """The dataset all of `files` belong to, when one metadata file describes them all."""
    infos = {id(entry.info): entry.info for entry in declared.values()}
    if len(infos) != 1 or len(declared) != len(files):
        return None
    return next(iter(infos.values()))
