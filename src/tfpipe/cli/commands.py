"""What each `tfpipe` command does, once `tfpipe.cli` has parsed its arguments.

Imported only after parsing, so that `--help` and argument errors answer without importing
TensorFlow. Each command takes the parsed arguments and the stream to print to, and returns
its exit status (None: 0).
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import pandas as pd
import tensorflow as tf

from tfpipe import fs
from tfpipe.cli.demo import run_demo
from tfpipe.cli.service import run_dispatcher, run_worker
from tfpipe.cli.summary import (
    describe_example,
    describe_inference,
    describe_info,
    describe_schema,
    format_bytes,
    listed,
)
from tfpipe.errors import DataNotFoundError, SchemaError, TfpipeError
from tfpipe.features import Image, Mask
from tfpipe.format import tfds_folders
from tfpipe.format.compression import compression_of, tf_compression
from tfpipe.format.metadata import DatasetInfo
from tfpipe.format.resolution import ResolvedData, datasets_in, names_dataset, resolve, with_split
from tfpipe.records import infer_schema, read_tfrecords, verify, write_tfrecords
from tfpipe.records.resolved import random_access
from tfpipe.schema import Schema
from tfpipe.sources import SourceBase, from_dataframe, from_directory
from tfpipe.sources.dataframe import reads_file
from tfpipe.training import plots
from tfpipe.training.adapters import DEFAULT_BATCH_SIZE
from tfpipe.training.benchmark import benchmark
from tfpipe.training.faults import named_errors

EXIT_FAULTS = 1
EXIT_UNCHECKED = 3  # `verify`: no fault found, but no metadata to check the counts against
USER_ERRORS = (TfpipeError, FileNotFoundError, ValueError, ImportError, tf.errors.OpError)


_CSV_OPTIONS = {
    "--path-col": "path_col",
    "--image-cols": "image_cols",
    "--label-cols": "label_cols",
    "--label-sep": "label_sep",
    "--image-suffix": "image_suffix",
    "--base-dir": "base_dir",
    "--schema": "schema",
}


def _open_source(args: argparse.Namespace) -> SourceBase:
    """What SRC names, as a source: a CSV of image paths and labels (or a table), or any path
    the readers resolve (an image folder; TFRecords, rewritten with tfpipe metadata)."""
    src = Path(args.src)
    shape = (*args.image_size, 3) if args.image_size else (None, None, 3)
    if src.suffix.lower() != ".csv":
        given = [flag for flag, dest in _CSV_OPTIONS.items() if getattr(args, dest) is not None]
        if given:
            raise ValueError(f"{given[0]} applies to a CSV SRC; {args.src!r} is not a .csv file")
        data = resolve(args.src, argument="SRC")
        if data.image_folder is None:
            return random_access(data, argument="SRC")
        return from_directory(data.image_folder, image_shape=shape)
    if fs.is_url(args.src):
        raise DataNotFoundError(
            f"SRC={args.src!r}: CSVs are read from local paths only (records are written and "
            "read at any URL TensorFlow opens); copy it to a local folder first, e.g. with "
            "`gcloud storage cp`"
        )
    schema = _given_schema(args)
    try:
        return from_dataframe(
            pd.read_csv(src, dtype=_text_columns(src, args, schema)),
            path_col=args.path_col,
            label_cols=args.label_cols,
            base_dir=args.base_dir if args.base_dir is not None else src.parent,
            schema=schema,
            image_shape=shape,
            image_cols=args.image_cols,
            label_sep=args.label_sep,
            image_suffix=args.image_suffix,
        )
    except DataNotFoundError as e:
        if args.base_dir is not None:
            raise
        raise DataNotFoundError(
            f"{e} (relative paths start from the CSV's folder; pass --base-dir to change that)"
        ) from e


def _check_out_not_in_folder(target: fs.AnyPath, args: argparse.Namespace) -> None:
    """Refuses shards written to a sub-folder of the image folder SRC: the next read of SRC
    would take that folder for one more class, and move the class indices."""
    folder = Path(args.src).resolve()
    if not isinstance(target, Path) or not folder.is_dir():
        return
    shards = (target if args.split else target.parent).resolve()
    if shards != folder and shards.is_relative_to(folder):
        raise ValueError(
            f"OUT {str(target)!r} is inside the image folder SRC {args.src!r}, whose every "
            "sub-folder is a class: the records' folder would be read as one more class next "
            f"time. Write outside it, e.g. {str(folder.parent / 'records' / target.name)!r}"
        )


def _given_schema(args: argparse.Namespace) -> Schema | None:
    """The `--schema` JSON file, which then alone says how images are stored."""
    if args.schema is None:
        return None
    if args.image_size or args.encoding:
        raise ValueError(
            f"{'--image-size' if args.image_size else '--encoding'} describes inferred images; "
            "with --schema, declare the images' shape and encoding in the schema"
        )
    return Schema.from_json(Path(args.schema))


def _text_columns(src: Path, args: argparse.Namespace, schema: Schema | None) -> dict[str, type]:
    """The CSV columns read as text: path and text columns, so that 0001 keeps its zeros."""
    header = list(pd.read_csv(src, nrows=0).columns)
    names = args.image_cols or [args.path_col or ("image" if "path" not in header else "path")]
    if schema is not None:
        names += [n for n, f in schema.items() if reads_file(f) or f.dtype == "str"]  # texts
    return dict.fromkeys(names, str)


def _stored_schema(source: SourceBase, args: argparse.Namespace) -> Schema:
    """The source's schema, with its images stored in `--encoding` (raw at `--image-size`,
    else as they came); a `--schema` is kept as it is."""
    if args.schema is not None:
        return source.schema
    encoding = args.encoding or ("raw" if args.image_size else "auto")
    return Schema(
        {
            name: Image(shape=feature.shape, encoding=encoding)
            if type(feature) is Image  # not a subclass, such as a lossless label image
            else feature
            for name, feature in source.schema.items()
        }
    )


def _write(args: argparse.Namespace, out: TextIO) -> None:
    if args.no_stratify and not args.split:
        raise ValueError("--no-stratify says how --split splits; pass --split too, or drop it")
    fs.check_paths(args.out, "OUT")  # a scheme TensorFlow cannot open fails before the read
    target = fs.path(args.out, "OUT")
    _check_out_not_in_folder(target, args)
    source = _open_source(args)
    schema = _stored_schema(source, args)
    prefixes: dict[str, fs.AnyPath]
    if args.split:
        parts: dict[str, Any] = source.split(
            args.split, seed=args.seed, stratify=not args.no_stratify
        )
        prefixes = {name: target / name for name in parts}
    else:
        parts = {target.name: source}
        prefixes = {target.name: target}
    print(f"{args.src}: {len(source)} examples", file=out)
    print(*describe_schema(schema), sep="\n", file=out)
    for name, part in parts.items():
        options: dict[str, Any] = {
            "schema": schema,
            "num_shards": args.shards,
            "compression": args.compression,
            "shuffle": not args.no_shuffle,
            "seed": args.seed,
            "workers": args.workers,
            "on_error": args.on_error,
            "check_copies": not args.no_check_copies,
        }
        if args.runner is None:
            info = write_tfrecords(part, prefixes[name], **options)
        elif args.runner == "spark":
            info = _write_with_spark(part, prefixes[name], args.master, options)
        else:
            from tfpipe import beam  # Apache Beam is an optional extra

            info = beam.write_tfrecords(
                part, prefixes[name], runner=args.runner, args=_beam_args(args), **options
            )
        print(*describe_info(info), sep="\n", file=out)


def _write_with_spark(
    source: Any, prefix: fs.AnyPath, master: str | None, options: dict[str, Any]
) -> DatasetInfo:
    """Writes with tfpipe.spark on a session of `master`, stopped after the write."""
    from tfpipe import spark  # PySpark is an optional extra

    session = spark.session(master)
    try:
        options = {k: v for k, v in options.items() if k != "workers"}  # Spark's executors
        return spark.write_tfrecords(source, prefix, spark=session, **options)
    finally:
        session.stop()


def _beam_args(args: argparse.Namespace) -> list[str]:
    """The options `tfpipe write` passes to Beam: those it does not know, and the scheduler
    of `--dask-address`."""
    if args.dask_address is None:
        return args.beam_args
    return [*args.beam_args, f"--dask_client_address={args.dask_address}"]


def _dataset_prefixes(path: str) -> list[str]:
    """The datasets at `path`: itself, every split of a prepared TFDS folder, or every
    metadata file in a folder with shards."""
    where = fs.path(path, "PATH")  # a scheme TensorFlow cannot open fails here, named
    if names_dataset(path):
        return [path.removesuffix(".json")]
    if not where.is_dir():
        return []
    if tfds_folders.is_folder(where):
        return [str(where / split.prefix) for split in tfds_folders.load(where).splits.values()]
    return datasets_in(where)


def _count_records(file: fs.AnyPath) -> int:
    """Counts by reading every record, each data checksum checked, rather than by the frame
    scan (headers only): past the records `infer_schema` samples, this is the one read of a
    file without metadata, so a damaged record there must fail here, named."""
    dataset = tf.data.TFRecordDataset(
        str(file), compression_type=tf_compression(compression_of(file))
    )
    return int(dataset.reduce(np.int64(0), lambda count, _: count + 1))


def _inspect_files(paths: list[str], out: TextIO) -> None:
    """Inspects TFRecord files without tfpipe metadata, with an inferred schema."""
    files = resolve(list(paths), argument="PATH").record_files("tfpipe inspect")
    schema = infer_schema(files)
    counts = [_count_records(f) for f in files]
    total_bytes = sum(f.stat().st_size for f in files)
    named = " ".join(paths) if len(paths) <= 2 else f"{paths[0]} and {len(paths) - 1} more"
    print(
        f"{named}: {sum(counts)} records in {len(files)} file(s), "
        f"{format_bytes(total_bytes)}, "
        f"compression {compression_of(files[0]) or 'none'} (no tfpipe metadata: schema inferred)",
        file=out,
    )
    shown = [
        f"  {file}  {count} records  {format_bytes(file.stat().st_size)}"
        for file, count in zip(files, counts, strict=True)
    ]
    print(*listed(shown, "files"), sep="\n", file=out)
    _show_first([str(f) for f in files], schema, out)
    print(*describe_inference(schema), sep="\n", file=out)


def _show_first(path: str | list[str] | ResolvedData, schema: Schema, out: TextIO) -> None:
    print("schema:", *describe_schema(schema), sep="\n", file=out)
    example = next(iter(read_tfrecords(path, schema=schema)))
    print("first example:", *describe_example(example, schema), sep="\n", file=out)


def _inspect(args: argparse.Namespace, out: TextIO) -> None:
    paths = [with_split(path, args.split) for path in args.paths]
    prefixes = {path: _dataset_prefixes(path) for path in paths}
    plain = [path for path in paths if not prefixes[path]]
    if plain:
        with named_errors(plain):
            _inspect_files(plain, out)
    for prefix in (p for path in paths for p in prefixes[path]):
        data = resolve(prefix, argument="PATH")
        info = data.info
        assert info is not None  # a prefix with metadata, as _dataset_prefixes found it
        print(*describe_info(info), sep="\n", file=out)
        if info.class_names:
            for feature, names in info.class_names.items():
                print(f"  classes of {feature}: {', '.join(names)}", file=out)
        with named_errors(prefix):
            _show_first(data, info.schema, out)


def _verify(args: argparse.Namespace, out: TextIO) -> int:
    report = verify(args.path)
    print(report.summary(), file=out)
    shown = report.faults[: args.max_faults]
    print(*(f"  {fault}" for fault in shown), sep="\n", file=out, end="\n" if shown else "")
    if len(report.faults) > len(shown):
        print(f"  ... and {len(report.faults) - len(shown)} more fault(s)", file=out)
    print(*report.notes, sep="\n", file=out, end="\n" if report.notes else "")
    if not report.ok:
        return EXIT_FAULTS
    return 0 if report.checked else EXIT_UNCHECKED


def _check_batchable(data: ResolvedData, image_size: tuple[int, int] | None) -> None:
    """Refuses, naming the dataset and the flag, images stored at varying sizes when
    `--image-size` does not give the one size to batch them at."""
    if image_size is not None or data.info is None:
        return
    varying = [
        name
        for name, feature in data.info.schema.of(Image, Mask).items()
        if None in feature.shape[:2]
    ]
    if varying:
        raise SchemaError(
            f"{data.origin}: {', '.join(varying)} stored at each image's own size (written "
            "without --image-size), and a batch needs one size: pass --image-size "
            "HEIGHTxWIDTH, e.g. --image-size 128x128"
        )


@contextlib.contextmanager
def _naming(dataset: str) -> Iterator[None]:
    """Puts the name of `dataset` before a tfpipe error that does not name it already."""
    try:
        yield
    except TfpipeError as e:
        if dataset in str(e):
            raise
        raise type(e)(f"{dataset}: {e}") from e


def _bench(args: argparse.Namespace, out: TextIO) -> None:
    size = DEFAULT_BATCH_SIZE if args.batch_size is None else args.batch_size
    prefixes = _dataset_prefixes(args.path) or [args.path]
    if args.plot and len(prefixes) > 1:
        raise ValueError(
            f"--plot draws one dataset, but PATH {args.path!r} holds {len(prefixes)}: pass "
            f"one of them, e.g. {prefixes[0]}"
        )
    datasets = {prefix: resolve(prefix, argument="PATH") for prefix in prefixes}
    for data in datasets.values():
        _check_batchable(data, args.image_size)
    for prefix, data in datasets.items():
        with _naming(prefix):
            result = benchmark(
                data, batches=args.batches, batch_size=size, image_size=args.image_size
            )
        print(
            f"{prefix}: {result.examples_per_s:,.0f} examples/s, "
            f"{result.batches_per_s:,.1f} batches/s of {size}, first batch after "
            f"{result.first_batch_s:.2f} s ({result.batches} batches timed)",
            file=out,
        )
        if args.plot:
            _plot_stages(data, args, size=size, full_rate=result.examples_per_s, out=out)


def _plot_stages(
    data: ResolvedData, args: argparse.Namespace, *, size: int, full_rate: float, out: TextIO
) -> None:
    """Times reading the record bytes alone and draws it beside the full input's rate."""
    figure, axes = plots.new_figure(8, 2.4)  # before timing: a missing matplotlib fails fast
    records = tf.data.TFRecordDataset(
        [str(f) for f in data.record_files("tfpipe bench --plot")],
        compression_type=tf_compression(data.compression),
    )
    read = benchmark(records.batch(size).prefetch(tf.data.AUTOTUNE), batches=args.batches)
    plots.throughput_bars(
        axes,
        ["read record bytes", "+ parse, decode, batch\n(the tfpipe.fit input)"],
        [read.examples_per_s, full_rate],
        f"{data.origin}: throughput per stage, batches of {size}",
    )
    print(f"read bytes alone: {read.examples_per_s:,.0f} examples/s", file=out)
    print(f"plot: {plots.save(figure, args.plot)}", file=out)


def _demo(args: argparse.Namespace, out: TextIO) -> None:
    run_demo(args.workdir, size=args.size, epochs=args.epochs, out=out)


def _dispatcher(args: argparse.Namespace, out: TextIO) -> None:
    run_dispatcher(args.port, args.host, args.work_dir, out)


def _worker(args: argparse.Namespace, out: TextIO) -> None:
    run_worker(args.dispatcher, args.port, args.host, out)


def error_message(error: Exception) -> str:
    if isinstance(error, tf.errors.OpError):
        return error.message.splitlines()[0]
    return str(error)


COMMANDS: dict[str, Callable[[argparse.Namespace, TextIO], int | None]] = {
    "write": _write,
    "inspect": _inspect,
    "verify": _verify,
    "bench": _bench,
    "demo": _demo,
    "dispatcher": _dispatcher,
    "worker": _worker,
}
