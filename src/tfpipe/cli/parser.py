"""The `tfpipe` command: `write`, `inspect`, `verify`, `bench`, `demo` and `service`.

Errors a user can fix (a missing path, a bad option value, data that does not match) print one
line `tfpipe <command>: error: ...` naming the command's own flags (`--image-size`), and exit
with status 2, without a traceback. `verify` exits with status 1 when it finds a fault in the
data, and 3 when it finds none but had no metadata to check the counts against.

The arguments are parsed before anything heavy is imported: `--help` and argument errors
answer at once, without TensorFlow. The command's code (`tfpipe.cli.commands`) is imported after,
with TensorFlow's start-up logs silenced unless `--verbose`.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import re
import sys
import warnings
from collections.abc import Iterator, Sequence
from typing import Any, TextIO

import tfpipe
from tfpipe import logs
from tfpipe.errors import TfpipeWarning  # light: tfpipe imports its public names on first use

EXIT_ERROR = 2
# Library arguments that a command's flag sets under another name.
_SET_BY = {"num_shards": "shards"}
_VALUE_FORMS = {"(height, width)": "HEIGHTxWIDTH"}
_SWITCHES = {"stratify=False": "--no-stratify"}  # library arguments a command's switch sets
_BARE = r"(?<![\w.\-/\\'\"(])"  # a name on its own: not in a path, a quoted name or a call
_VERBOSE: dict[str, Any] = {
    "action": "store_true",
    "help": "show TensorFlow's start-up and C++ log messages",
}


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


def _non_negative(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}")
    return int(text)


def _columns(text: str) -> list[str]:
    return [c.strip() for c in text.split(",") if c.strip()]


def _command(parser: argparse.ArgumentParser, handler: str) -> None:
    """Gives a command `--verbose` and the name of its handler in `tfpipe.cli.commands`."""
    parser.add_argument("--verbose", **_VERBOSE, default=argparse.SUPPRESS)  # keeps the global
    flags = {
        action.dest: max(action.option_strings, key=len)
        for action in parser._actions  # argparse's own: it lists a parser's actions no other way
        if action.option_strings and action.dest != "help"
    }
    flags |= {name: flags[dest] for name, dest in _SET_BY.items() if dest in flags}
    parser.set_defaults(handler=handler, flags=flags)


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
    _command(dispatcher, "dispatcher")
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
    _command(worker, "worker")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tfpipe", description="Write, inspect and read TFRecord datasets for Keras."
    )
    parser.add_argument("--version", action="version", version=f"tfpipe {tfpipe.__version__}")
    parser.add_argument("--verbose", **_VERBOSE)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_write(commands)
    _add_inspect(commands)
    _add_verify(commands)
    _add_bench(commands)
    _add_demo(commands)
    _add_service(commands)
    return parser


def _add_write(commands: Any) -> None:
    write = commands.add_parser(
        "write",
        help="write an image folder or a CSV to TFRecord shards",
        description="Write an image folder (one sub-folder per class), a CSV of image paths "
        "and labels, or a CSV table (no column of image paths: every column a feature, "
        "--label-cols its targets) to TFRecord shards plus a metadata file.",
    )
    write.add_argument(
        "src",
        metavar="SRC",
        help="an image folder, a .csv file, or TFRecords (a prefix, files, a glob, a folder)",
    )
    write.add_argument(
        "out",
        metavar="OUT",
        help="the dataset prefix, e.g. out/train; with --split, the folder of one prefix per split",
    )
    write.add_argument(
        "--split", type=_fractions, help="split fractions, e.g. train=0.7,test=0.3 (stratified)"
    )
    write.add_argument("--shards", type=_positive, help="shards per dataset (default: by size)")
    write.add_argument("--compression", choices=["gzip", "zlib"], help="compress the shards")
    write.add_argument(
        "--image-size", type=_image_size, help="store images resized to HEIGHTxWIDTH, e.g. 128x128"
    )
    write.add_argument(
        "--encoding",
        choices=["auto", "jpeg", "png", "raw"],
        help="how images are stored: raw pixels need no decoding when read (the fastest, "
        "H*W*3 bytes each), jpeg is ~5-10x smaller, auto keeps each file's format (JPEG files "
        "copied as they are, PNG, BMP and GIF files as PNG: no pixel lost) (default: raw with "
        "--image-size, else auto)",
    )
    _add_csv_columns(write)
    write.add_argument(
        "--seed", type=_non_negative, default=0, help="seed of the split and shuffle (0)"
    )
    write.add_argument(
        "--workers",
        type=_positive,
        help="encoding threads; with --runner direct, worker processes (default: CPU count)",
    )
    write.add_argument("--no-shuffle", action="store_true", help="keep the source order")
    write.add_argument(
        "--no-stratify",
        action="store_true",
        help="with --split, split at random instead of keeping each class's share (by label "
        "sets for multi-label data), e.g. when a class's share does not matter",
    )
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
    _add_runner(write)
    _command(write, "write")


def _add_csv_columns(write: argparse.ArgumentParser) -> None:
    """The arguments of `write` that say what a CSV's columns are."""
    write.add_argument("--path-col", help="CSV column of image paths, the feature 'image' (path)")
    write.add_argument(
        "--image-cols",
        type=_columns,
        help="comma-separated CSV image columns, each a feature of its name, e.g. image,mask "
        "(instead of --path-col)",
    )
    write.add_argument(
        "--label-cols",
        type=_columns,
        help="comma-separated CSV label columns, a table's targets (label)",
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


def _add_runner(write: argparse.ArgumentParser) -> None:
    """The arguments of `write` that run it on Beam or Spark."""
    write.add_argument(
        "--runner",
        choices=["direct", "dask", "DataflowRunner", "FlinkRunner", "SparkRunner", "spark"],
        help="write with an Apache Beam pipeline on this runner (pip install 'tfpipe[beam]', "
        "'tfpipe[dask]' for dask); any further --option=value goes to Beam, e.g. --project=p "
        "--region=r --temp_location=gs://b/tmp for Dataflow, --flink_master=host:8081 for "
        "Flink; spark: with PySpark itself, no Beam (pip install 'tfpipe[spark]', see "
        "--master) (default: write in this process)",
    )
    write.add_argument(
        "--master",
        metavar="URL",
        help="with --runner spark: the Spark master, e.g. local[4], spark://host:7077 or yarn "
        "(default: Spark's own, local[*])",
    )
    write.add_argument(
        "--dask-address",
        metavar="HOST:PORT",
        help="with --runner dask: the Dask scheduler to run on, e.g. 10.0.0.5:8786 (default: "
        "a local Dask cluster started for the write)",
    )


def _add_inspect(commands: Any) -> None:
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
    _command(inspect, "inspect")


def _add_verify(commands: Any) -> None:
    check = commands.add_parser(
        "verify",
        help="check every record: frame checksums, schema, images, counts against the metadata",
        description="Read every record of a TFRecord dataset checking both frame checksums, "
        "parse it against the schema, decode every image, and compare the counts and sizes "
        "with the metadata file. Prints each fault (file, record, feature, what is wrong); "
        "exits with 0 when all is well, 1 when something is wrong, 2 on a usage error, and 3 "
        "when no fault was found but nothing could be checked against what was written (no "
        "tfpipe metadata: record counts, sizes and checksums unchecked, so a shard cut short "
        "at a record boundary would pass).",
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
    _command(check, "verify")


def _add_bench(commands: Any) -> None:
    bench = commands.add_parser(
        "bench",
        help="measure how fast tfpipe reads a TFRecord dataset (no model)",
        description="Time the default tfpipe.fit input over a tfpipe dataset: examples/s, "
        "batches/s and time to the first batch.",
    )
    bench.add_argument("path", metavar="PATH", help="a dataset prefix, e.g. out/train")
    bench.add_argument("--batches", type=_positive, default=50, help="batches to time (50)")
    bench.add_argument("--batch-size", type=_positive, help="examples per batch (32)")
    bench.add_argument(
        "--image-size", type=_image_size, help="resize images to HEIGHTxWIDTH, e.g. 128x128"
    )
    bench.add_argument(
        "--plot",
        metavar="FILE",
        help="also time reading the bytes alone and draw both to FILE (.png, .svg); needs "
        'matplotlib: pip install "tfpipe[plot]"',
    )
    _command(bench, "bench")


def _add_demo(commands: Any) -> None:
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
        "--epochs",
        type=_positive,
        default=None,
        help="epochs to train (40 for small, 10 for large)",
    )
    _command(demo, "demo")


def cli_names(message: str, flags: dict[str, str]) -> str:
    """`message` with the library's argument names the command sets written as its flags:
    `Received: num_shards=0` -> `Received: --shards 0`, `image_size=(height, width)` ->
    `--image-size HEIGHTxWIDTH`, `path_col and image_cols` -> `--path-col and --image-cols`."""
    for given, switch in _SWITCHES.items():
        if switch in flags.values():
            message = message.replace(given, switch)
    for name in sorted(flags, key=len, reverse=True):
        flag = flags[name]
        for form, shown in _VALUE_FORMS.items():
            message = message.replace(f"{name}={form}", f"{flag} {shown}")
        message = re.sub(rf"{_BARE}{name}=(?=[\s,;:)]|$)", flag, message)
        message = re.sub(rf"{_BARE}{name}=", f"{flag} ", message)
        if "_" in name:  # an identifier, not a word of the sentence (workers, seed)
            message = re.sub(rf"{_BARE}{name}(?![\w=/\\'\"])", flag, message)
    return message


def _warning_printer(default: Any, flags: dict[str, str]) -> Any:
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
            print(f"tfpipe: warning: {cli_names(str(message), flags)}", file=sys.stderr)
        else:
            default(message, category, filename, lineno, file, line)

    return show


def _import_commands(verbose: bool) -> Any:
    """Imports `tfpipe.cli.commands` (and TensorFlow): unless `verbose`, with TensorFlow's C++
    logs off and what it writes to the stderr file descriptor while it loads held back
    (printed if the import fails)."""
    if verbose:
        logs.show()
        return importlib.import_module("tfpipe.cli.commands")
    os.environ.setdefault(logs.LEVEL, logs.QUIET_LEVEL)  # read once, when TensorFlow loads
    with logs.HeldStderr():
        return importlib.import_module("tfpipe.cli.commands")


@contextlib.contextmanager
def _quiet_logs(verbose: bool) -> Iterator[None]:
    """TensorFlow's Python logger shows errors only while the command runs, unless `verbose`."""
    import logging  # here, not above: --help never needs it

    logger = logging.getLogger("tensorflow")
    level = logger.level
    if not verbose:
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the `tfpipe` command; returns the exit status (0; 1 when `verify` finds a fault;
    2 for errors; 3 when `verify` finds none but has no metadata to check counts against).

    Examples:
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
    if getattr(args, "dask_address", None) and args.runner != "dask":
        parser.error(f"--dask-address needs --runner dask (received --runner {args.runner})")
    if getattr(args, "master", None) and args.runner != "spark":
        parser.error(f"--master needs --runner spark (received --runner {args.runner})")
    if extra and getattr(args, "runner", None) == "spark":
        parser.error(
            f"unrecognized arguments: {' '.join(extra)} (--runner spark takes no Beam options)"
        )
    args.beam_args = extra
    commands = _import_commands(args.verbose)
    with warnings.catch_warnings(), _quiet_logs(args.verbose):
        warnings.simplefilter("always", TfpipeWarning)
        warnings.showwarning = _warning_printer(warnings.showwarning, args.flags)
        try:
            status = commands.COMMANDS[args.handler](args, sys.stdout)
        except commands.USER_ERRORS as e:
            message = cli_names(commands.error_message(e), args.flags)
            print(f"tfpipe {args.command}: error: {message}", file=sys.stderr)
            return EXIT_ERROR
    return int(status or 0)


if __name__ == "__main__":
    sys.exit(main())
