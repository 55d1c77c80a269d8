"""The `tfpipe` command: `write`, `inspect`, `verify`, `bench`, `demo` and `service`.

Errors a user can fix (a missing path, a bad option value, data that does not match) print one
line `tfpipe <command>: error: ...` and exit with status 2, without a traceback. `verify` exits
with status 1 when it finds a fault in the data.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import pandas as pd
import tensorflow as tf

from tfpipe import _plot, fs, tfds_format
from tfpipe._summary import (
    describe_example,
    describe_info,
    describe_schema,
    format_bytes,
    listed,
)
from tfpipe.adapters import DEFAULT_BATCH_SIZE, benchmark, named_errors
from tfpipe.demo import run_demo
from tfpipe.errors import DataNotFoundError, TfpipeError, TfpipeWarning
from tfpipe.features import Image, Text
from tfpipe.info import (
    DatasetInfo,
    compression_of,
    names_dataset,
    resolve_files,
    tf_compression,
    with_split,
)
from tfpipe.records import infer_schema, read_tfrecords, verify, write_tfrecords
from tfpipe.schema import Schema
from tfpipe.servers import run_dispatcher, run_worker
from tfpipe.sources import SourceBase, from_dataframe, from_directory
from tfpipe.sources.dataframe import reads_file

EXIT_ERROR = 2
EXIT_FAULTS = 1
_USER_ERRORS = (TfpipeError, FileNotFoundError, ValueError, ImportError, tf.errors.OpError)


def _fractions(text: str) -> dict[str, float]:
    """`"train=0.7,test=0.3"` -> `{"train": 0.7, "test": 0.3}`."""
    fractions: dict[str, float] = {}
    for part in text.split(","):
        name, _, value = part.partition("=")
        try:
            fractions[name.strip()] = float(value)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected name=fraction pairs such as train=0.7,test=0.3, got {text!r}"
            ) from None
        if not name.strip():
            raise argparse.ArgumentTypeError(f"a split has no name in {text!r}")
    return fractions


def _image_size(text: str) -> tuple[int, int]:
    """`"128x96"` -> `(128, 96)` (height x width); `"128"` -> `(128, 128)`."""
    parts = text.lower().split("x")
    if len(parts) not in (1, 2) or not all(p.strip().isdigit() and int(p) > 0 for p in parts):
        raise argparse.ArgumentTypeError(
            f"expected HEIGHTxWIDTH such as 128x128 (or one number), got {text!r}"
        )
    height, width = int(parts[0]), int(parts[-1])
    return height, width


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return int(text)


def _columns(text: str) -> list[str]:
    return [c.strip() for c in text.split(",") if c.strip()]


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
    """An image folder or a CSV of image paths and labels, as a source."""
    if fs.is_url(args.src):
        raise DataNotFoundError(
            f"SRC={args.src!r}: image folders and CSVs are read from local paths only (records "
            "are written and read at any URL TensorFlow opens); copy them to a local folder "
            "first, e.g. with `gcloud storage cp -r`"
        )
    src = Path(args.src)
    shape = (*args.image_size, 3) if args.image_size else (None, None, 3)
    if src.is_dir():
        given = [flag for flag, dest in _CSV_OPTIONS.items() if getattr(args, dest) is not None]
        if given:
            raise ValueError(f"{given[0]} applies to a CSV SRC; {str(src)!r} is an image folder")
        return from_directory(src, image_shape=shape)
    if src.suffix.lower() != ".csv":
        raise FileNotFoundError(
            f"SRC: {str(src)!r} is neither an image folder nor a .csv file"
            + ("" if src.exists() else " (it does not exist)")
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
        names += [n for n, f in schema.items() if reads_file(f) or isinstance(f, Text)]
    return dict.fromkeys(names, str)


def _stored_schema(source: SourceBase, args: argparse.Namespace) -> Schema:
    """The source's schema, with its images stored in `--encoding` (raw at `--image-size`);
    a `--schema` is kept as it is."""
    if args.schema is not None:
        return source.schema
    encoding = args.encoding or ("raw" if args.image_size else "jpeg")
    return Schema(
        {
            name: Image(shape=feature.shape, encoding=encoding)
            if type(feature) is Image  # not a subclass, such as a lossless label image
            else feature
            for name, feature in source.schema.items()
        }
    )


def _write(args: argparse.Namespace, out: TextIO) -> None:
    fs.check_paths(args.out, "OUT")  # a scheme TensorFlow cannot open fails before the read
    target = fs.path(args.out, "OUT")
    source = _open_source(args)
    schema = _stored_schema(source, args)
    prefixes: dict[str, fs.AnyPath]
    if args.split:
        parts: dict[str, Any] = source.split(args.split, seed=args.seed)
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
        else:
            from tfpipe import beam  # Apache Beam is an optional extra

            info = beam.write_tfrecords(
                part, prefixes[name], runner=args.runner, args=args.beam_args, **options
            )
        print(*describe_info(info), sep="\n", file=out)


def _dataset_prefixes(path: str) -> list[str]:
    """The datasets at `path`: itself, every split of a prepared TFDS folder, or every
    metadata file in a folder with shards."""
    where = fs.path(path, "PATH")  # a scheme TensorFlow cannot open fails here, named
    if names_dataset(path):
        return [path.removesuffix(".json")]
    if not where.is_dir():
        return []
    if tfds_format.is_folder(where):
        return [str(where / split.prefix) for split in tfds_format.load(where).splits.values()]
    metadata: list[fs.AnyPath] = sorted(where.glob("*.json"), key=str)
    return [
        str(meta.parent / meta.stem)
        for meta in metadata
        if any(meta.parent.glob(f"{meta.stem}-*-of-*.tfrecord*"))
    ]


def _count_records(file: fs.AnyPath) -> int:
    dataset = tf.data.TFRecordDataset(
        str(file), compression_type=tf_compression(compression_of(file))
    )
    return int(dataset.reduce(np.int64(0), lambda count, _: count + 1))


def _inspect_files(paths: list[str], out: TextIO) -> None:
    """Inspects TFRecord files without tfpipe metadata, with an inferred schema."""
    targets: list[str | os.PathLike[str]] = list(paths)
    files = resolve_files(targets)
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


def _show_first(path: str | list[str], schema: Schema, out: TextIO) -> None:
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
        info = DatasetInfo.load(prefix)
        print(*describe_info(info), sep="\n", file=out)
        if info.class_names:
            for feature, names in info.class_names.items():
                print(f"  classes of {feature}: {', '.join(names)}", file=out)
        with named_errors(prefix):
            _show_first(prefix, info.schema, out)


def _verify(args: argparse.Namespace, out: TextIO) -> int:
    report = verify(args.path)
    print(report.summary(), file=out)
    shown = report.faults[: args.max_faults]
    print(*(f"  {fault}" for fault in shown), sep="\n", file=out, end="\n" if shown else "")
    if len(report.faults) > len(shown):
        print(f"  ... and {len(report.faults) - len(shown)} more fault(s)", file=out)
    print(*report.notes, sep="\n", file=out, end="\n" if report.notes else "")
    return 0 if report.ok else EXIT_FAULTS


def _bench(args: argparse.Namespace, out: TextIO) -> None:
    size = DEFAULT_BATCH_SIZE if args.batch_size is None else args.batch_size
    result = benchmark(args.path, batches=args.batches, batch_size=size, image_size=args.image_size)
    print(
        f"{args.path}: {result.examples_per_s:,.0f} examples/s, "
        f"{result.batches_per_s:,.1f} batches/s of {size}, first batch after "
        f"{result.first_batch_s:.2f} s ({result.batches} batches timed)",
        file=out,
    )
    if args.plot:
        _plot_stages(args, size, result.examples_per_s, out)


def _plot_stages(args: argparse.Namespace, size: int, full_rate: float, out: TextIO) -> None:
    """Times reading the record bytes alone and draws it beside the full input's rate."""
    figure, axes = _plot.new_figure(8, 2.4)  # before timing: a missing matplotlib fails fast
    info = DatasetInfo.load(args.path)
    records = tf.data.TFRecordDataset(
        [str(f) for f in info.files], compression_type=tf_compression(info.compression)
    )
    read = benchmark(records.batch(size).prefetch(tf.data.AUTOTUNE), batches=args.batches)
    _plot.throughput_bars(
        axes,
        ["read record bytes", "+ parse, decode, batch\n(the tfpipe.fit input)"],
        [read.examples_per_s, full_rate],
        f"{args.path}: throughput per stage, batches of {size}",
    )
    print(f"read bytes alone: {read.examples_per_s:,.0f} examples/s", file=out)
    print(f"plot: {_plot.save(figure, args.plot)}", file=out)


def _demo(args: argparse.Namespace, out: TextIO) -> None:
    run_demo(args.workdir, size=args.size, epochs=args.epochs, out=out)


def _dispatcher(args: argparse.Namespace, out: TextIO) -> None:
    run_dispatcher(args.port, args.host, args.work_dir, out)


def _worker(args: argparse.Namespace, out: TextIO) -> None:
    run_worker(args.dispatcher, args.port, args.host, out)


def _add_service(commands: Any) -> None:
    service = commands.add_parser(
        "service",
        help="run a tf.data service dispatcher or worker (Pipeline.distribute)",
        description="Run a tf.data service server in the foreground: it prints its address and "
        "stops cleanly on SIGTERM or Ctrl+C. Start one dispatcher, then workers on the hosts "
        "with spare CPUs, and train with tfpipe.Pipeline(...).distribute('grpc://HOST:PORT').",
    )
    servers = service.add_subparsers(dest="server", required=True, metavar="SERVER")
    host = {
        "default": "localhost",
        "help": "the host name or IP the others reach this server at, printed in its address "
        "(localhost: this machine only; the server listens on every interface)",
    }
    dispatcher = servers.add_parser(
        "dispatcher",
        help="hand out the data to the workers",
        description="Run the tf.data service dispatcher, which hands out the data (TFRecord "
        "files, example indices) to the workers.",
    )
    dispatcher.add_argument(
        "--port", type=int, default=5050, help="port to listen on; 0 for any free port (5050)"
    )
    dispatcher.add_argument("--host", **host)
    dispatcher.add_argument(
        "--work-dir",
        metavar="DIR",
        help="journal the dispatcher's state in DIR, so that a restarted dispatcher resumes "
        "its jobs (fault-tolerant mode)",
    )
    dispatcher.set_defaults(handler=_dispatcher)
    worker = servers.add_parser(
        "worker",
        help="read, parse and decode for the trainers",
        description="Run a tf.data service worker: it reads, parses, decodes and batches the "
        "data the dispatcher gives it, and sends the batches to the trainers.",
    )
    worker.add_argument(
        "--dispatcher", required=True, metavar="HOST:PORT", help="the dispatcher's address"
    )
    worker.add_argument("--port", type=int, default=0, help="port to listen on (0: any free port)")
    worker.add_argument("--host", **host)
    worker.set_defaults(handler=_worker)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tfpipe", description="Write, inspect and read TFRecord datasets for Keras."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    write = commands.add_parser(
        "write",
        help="write an image folder or a CSV to TFRecord shards",
        description="Write an image folder (one sub-folder per class) or a CSV of image paths "
        "and labels to TFRecord shards plus a metadata file.",
    )
    write.add_argument("src", metavar="SRC", help="an image folder or a .csv file")
    write.add_argument(
        "out",
        metavar="OUT",
        help="the dataset prefix, e.g. out/train; with --split, the folder of one prefix per split",
    )
    write.add_argument(
        "--split", type=_fractions, help="split fractions, e.g. train=0.7,test=0.3 (stratified)"
    )
    write.add_argument("--shards", type=int, help="shards per dataset (default: by size)")
    write.add_argument("--compression", choices=["gzip", "zlib"], help="compress the shards")
    write.add_argument(
        "--image-size", type=_image_size, help="store images resized to HEIGHTxWIDTH, e.g. 128x128"
    )
    write.add_argument(
        "--encoding",
        choices=["jpeg", "png", "raw"],
        help="how images are stored: raw pixels need no decoding when read (the fastest, "
        "H*W*3 bytes each), jpeg is ~5-10x smaller (default: raw with --image-size, else jpeg, "
        "which copies JPEG files as they are)",
    )
    write.add_argument("--path-col", help="CSV column of image paths, the feature 'image' (path)")
    write.add_argument(
        "--image-cols",
        type=_columns,
        help="comma-separated CSV image columns, each a feature of its name, e.g. image,mask "
        "(instead of --path-col)",
    )
    write.add_argument(
        "--label-cols", type=_columns, help="comma-separated CSV label columns (label)"
    )
    write.add_argument(
        "--label-sep",
        metavar="SEP",
        help='split label cells into tags at SEP, e.g. " " for "haze primary water": each label '
        "column becomes multi-label over its sorted tags; an empty cell has no tags",
    )
    write.add_argument(
        "--image-suffix",
        metavar="SUFFIX",
        help="add SUFFIX to every CSV image path, e.g. .jpg for names without an extension",
    )
    write.add_argument("--base-dir", help="folder relative CSV paths start from (the CSV's)")
    write.add_argument(
        "--schema",
        metavar="FILE",
        help="a schema JSON file (tfpipe.Schema.to_json()) saying what each CSV column is "
        "(images, masks, labels, tensors, text) and how images are stored",
    )
    write.add_argument("--seed", type=int, default=0, help="seed of the split and shuffle (0)")
    write.add_argument(
        "--workers",
        type=int,
        help="encoding threads; with --runner direct, worker processes (default: CPU count)",
    )
    write.add_argument("--no-shuffle", action="store_true", help="keep the source order")
    write.add_argument(
        "--on-error",
        choices=["raise", "skip"],
        default="raise",
        help="stop at an unreadable input, or skip and count it (raise)",
    )
    write.add_argument(
        "--no-check-copies",
        action="store_true",
        help="do not decode JPEGs/PNGs stored byte for byte (~5x faster; for images checked "
        "already, e.g. by tfpipe verify)",
    )
    write.add_argument(
        "--runner",
        choices=["direct", "DataflowRunner", "FlinkRunner", "SparkRunner"],
        help="write with an Apache Beam pipeline on this runner (pip install 'tfpipe[beam]'); "
        "any further --option=value goes to Beam, e.g. --project=p --region=r "
        "--temp_location=gs://b/tmp for Dataflow, --flink_master=host:8081 for Flink "
        "(default: write in this process, without Beam)",
    )
    write.set_defaults(handler=_write)

    inspect = commands.add_parser(
        "inspect",
        help="summarise TFRecords: schema, counts, shards, one decoded example",
        description="Summarise a tfpipe dataset (prefix, metadata file or folder) or any "
        "TFRecord files of tf.train.Example (file, folder or glob; schema inferred).",
    )
    inspect.add_argument(
        "paths", nargs="+", metavar="PATH", help="a prefix, .json, folder, file or glob"
    )
    inspect.add_argument(
        "--split",
        help="the split of a dataset folder to show: a TFDS split (train) or a tfpipe prefix "
        "name in the folder (default: every dataset in the folder)",
    )
    inspect.set_defaults(handler=_inspect)

    check = commands.add_parser(
        "verify",
        help="check every record: frame checksums, schema, images, counts against the metadata",
        description="Read every record of a TFRecord dataset checking both frame checksums, "
        "parse it against the schema, decode every image, and compare the counts and sizes "
        "with the metadata file. Prints each fault (file, record, feature, what is wrong); "
        "exits with 0 when all is well, 1 when something is wrong.",
    )
    check.add_argument(
        "path", metavar="PATH", help="a dataset prefix or .json, a TFRecord file, folder or glob"
    )
    check.add_argument(
        "--max-faults",
        type=_positive,
        default=20,
        metavar="N",
        help="faults to print; the rest are counted (20)",
    )
    check.set_defaults(handler=_verify)

    bench = commands.add_parser(
        "bench",
        help="measure how fast tfpipe reads a TFRecord dataset (no model)",
        description="Time the default tfpipe.fit input over a tfpipe dataset: examples/s, "
        "batches/s and time to the first batch.",
    )
    bench.add_argument("path", metavar="PATH", help="a dataset prefix, e.g. out/train")
    bench.add_argument("--batches", type=int, default=50, help="batches to time (50)")
    bench.add_argument("--batch-size", type=int, help="examples per batch (32)")
    bench.add_argument(
        "--image-size", type=_image_size, help="resize images to HEIGHTxWIDTH, e.g. 128x128"
    )
    bench.add_argument(
        "--plot",
        metavar="FILE",
        help="also time reading the bytes alone and draw both to FILE (.png, .svg); needs "
        'matplotlib: pip install "tfpipe[plot]"',
    )
    bench.set_defaults(handler=_bench)

    demo = commands.add_parser(
        "demo",
        help="generate an image dataset, write TFRecords, read them back, train with tfpipe.fit",
        description="Generate a learnable image dataset, write TFRecords (train/test), read "
        "them back, report counts, sizes and read throughput, then train a small CNN with "
        "tfpipe.fit and print its report.",
    )
    demo.add_argument("--workdir", default="demo-data", help="working folder (demo-data)")
    demo.add_argument("--size", choices=["small", "large"], default="small", help="(small)")
    demo.add_argument(
        "--epochs", type=int, default=None, help="epochs to train (40 for small, 10 for large)"
    )
    demo.set_defaults(handler=_demo)
    _add_service(commands)
    return parser


def _warning_printer(default: Any) -> Any:
    """A `warnings.showwarning` that prints tfpipe's warnings as one line, others as usual."""

    def show(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: TextIO | None = None,
        line: str | None = None,
    ) -> None:
        if issubclass(category, TfpipeWarning):
            print(f"tfpipe: warning: {message}", file=sys.stderr)
        else:
            default(message, category, filename, lineno, file, line)

    return show


def _error_message(error: Exception) -> str:
    if isinstance(error, tf.errors.OpError):
        return error.message.splitlines()[0]
    return str(error)


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the `tfpipe` command; returns the exit status (0; 1 when `verify` finds a fault;
    2 for errors).

    Example:
        >>> main(["write", "images", "out", "--split", "train=0.8,test=0.2"])
        0

    Args:
        argv: the arguments after `tfpipe`. Defaults to `sys.argv[1:]`.
    """
    parser = _parser()
    args, extra = parser.parse_known_args(argv)
    if extra and getattr(args, "runner", None) is None:
        parser.error(
            f"unrecognized arguments: {' '.join(extra)} (options for Apache Beam need "
            "`tfpipe write ... --runner RUNNER`)"
        )
    args.beam_args = extra
    with warnings.catch_warnings():
        warnings.simplefilter("always", TfpipeWarning)
        warnings.showwarning = _warning_printer(warnings.showwarning)
        try:
            status = args.handler(args, sys.stdout)
        except _USER_ERRORS as e:
            print(f"tfpipe {args.command}: error: {_error_message(e)}", file=sys.stderr)
            return EXIT_ERROR
    return int(status or 0)


if __name__ == "__main__":
    sys.exit(main())
