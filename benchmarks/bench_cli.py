"""`tfpipe --help` and `tfpipe inspect`: wall time of the command, before and after issue 16.

Issue 16, "A CLI that answers at once" (goal: `tfpipe --help` under 0.5 s, TensorFlow not
imported). Each case runs the command several times, each in a fresh Python process, and
reports the median wall time (as runs/s, so that the ratio is the speed-up):

- the baseline, written by hand here, runs the same command after an eager
  `import tensorflow`: what every tfpipe command paid before, when `import tfpipe` imported
  TensorFlow (and TensorFlow's start-up logs came with it);
- tfpipe runs it as `python -m tfpipe` does: `--help` parses and prints without importing
  TensorFlow; `inspect` imports it after parsing, its start-up logs held back.

A separate run with `python -X importtime -m tfpipe --help` checks that no TensorFlow module
was imported at all.
"""

from __future__ import annotations

import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.harness import compare, scale

RUNS = scale(5, 2)
HELP_GOAL_S = 0.5
# The command as `python -m tfpipe ARGS` runs it; EAGER imports TensorFlow first, as before.
COMMAND = (
    "import runpy, sys; sys.argv[0] = 'tfpipe'; runpy.run_module('tfpipe', run_name='__main__')"
)
EAGER = "import tensorflow; " + COMMAND


def _median_wall(code: str, argv: list[str]) -> dict[str, Any]:
    """The median wall time of `RUNS` runs, and their median CPU time (user + system), which a
    busy machine disturbs less."""
    seconds, cpu = [], []
    for _ in range(RUNS):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-c", code, *argv], check=True, capture_output=True, timeout=600
        )
        seconds.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    median = statistics.median(seconds)
    return {
        "seconds": median,
        "runs_per_s": 1 / median,
        "cpu_s": statistics.median(cpu),
        "each_s": seconds,
    }


def eager_tensorflow_first(argv: list[str]) -> dict[str, Any]:
    return _median_wall(EAGER, argv)


def tfpipe_command(argv: list[str]) -> dict[str, Any]:
    return _median_wall(COMMAND, argv)


def tensorflow_imported_by_help() -> bool:
    """Whether `python -m tfpipe --help` imports any TensorFlow module (-X importtime)."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "tfpipe", "--help"],
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    )
    modules = [line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines()]
    return any(m.split(".")[0] in ("tensorflow", "keras") for m in modules)


def main() -> None:
    import tfpipe
    from tfpipe.sources.synthetic import make_image_folder

    root = tempfile.mkdtemp(prefix="tfpipe-bench-cli-")
    try:
        images = make_image_folder(Path(root) / "images", per_class=8, size=(32, 32))
        prefix = str(Path(root) / "out" / "train")
        tfpipe.write_tfrecords(tfpipe.from_directory(images), prefix, progress=False)
        imported = tensorflow_imported_by_help()
        before = "the same command after an eager import tensorflow (before)"
        help_report = compare(
            "cli_help",
            {
                before: (eager_tensorflow_first, (["--help"],)),
                "tfpipe --help": (tfpipe_command, (["--help"],)),
            },
            baseline=before,
            metric="runs_per_s",
            extra={"runs_per_case": RUNS, "goal_s": HELP_GOAL_S, "tensorflow_imported": imported},
        )
        compare(
            "cli_inspect",
            {
                before: (eager_tensorflow_first, (["inspect", prefix],)),
                "tfpipe inspect (24 images)": (tfpipe_command, (["inspect", prefix],)),
            },
            baseline=before,
            metric="runs_per_s",
            extra={"runs_per_case": RUNS, "examples": 24},
        )
        help_s = 1 / help_report["rows"][1]["runs_per_s"]
        print(
            f"tfpipe --help: {help_s:.2f} s (goal < {HELP_GOAL_S} s: "
            f"{'met' if help_s < HELP_GOAL_S else 'MISSED'}); TensorFlow imported: {imported}"
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
