"""Listing a big folder of class folders: `tfpipe.from_directory` (and its `split`) against
Keras's file index and a bare `os.walk`.

Dataset: ImageNet-shaped folders of empty files (listing reads names, not bytes):
`n00000000/n00000000_0.JPEG`, ..., 1,000 class folders (100 for 10^4 files), for 10^4, 10^5,
2x10^5 (the issue's ImageNet-sized case) and 10^6 files (10^3 and 10^4 with
TFPIPE_BENCH_QUICK=1). Each size's folder is made once in a temporary folder (removed after)
and read by every case of every repeat, so the page cache holds it warm.

Cases (each in a fresh process, the imports before the timer):
- `os.walk (floor)`: the full paths of all files, as `os.walk` lists them; no sorting, no
  checks, no labels;
- `keras index_directory` (the baseline): the file index of
  `keras.utils.image_dataset_from_directory` (`keras.src.utils.dataset_utils.index_directory`
  with its arguments: Keras's image extensions, shuffle=True, seed 0, verbose=False);
- `tfpipe from_directory`: `tfpipe.from_directory(root, progress=False)`;
- `tfpipe from_directory + split`: the same, then `.split({"train": 0.8, "test": 0.2})`.

Each run reports files/s, seconds, CPU seconds, and the resident memory the result keeps
(RSS after minus before, per file). Beside the timed cases, each listing runs once more in a
fresh process under `tracemalloc`: the bytes per file the result keeps, and the peak while it
is made (tracemalloc slows allocation several times: those runs are not timed).
"""

from __future__ import annotations

import gc
import os
import time
import tracemalloc
from pathlib import Path
from typing import Any

from benchmarks.harness import QUICK, compare, prepared_data, run_isolated

SIZES = (1_000, 10_000) if QUICK else (10_000, 100_000, 200_000, 1_000_000)
BASELINE = "keras index_directory"
FLOOR = "os.walk (floor)"
TFPIPE = "tfpipe from_directory"
SPLIT = "tfpipe from_directory + split"


def make_folder(root: Path, files: int) -> Path:
    """`files` empty `.JPEG` files in ImageNet-named class folders (1,000 of them, or one per
    100 files when fewer)."""
    classes = min(1000, max(files // 100, 1))
    for c in range(classes):
        name = f"n{c:08d}"
        folder = root / name
        folder.mkdir(parents=True)
        for k in range(c, files, classes):
            (folder / f"{name}_{k}.JPEG").touch()
    return root


def _resident_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _lister(case: str) -> Any:
    """The listing of `case`: a function of the folder returning what it keeps."""
    if case == FLOOR:
        return lambda root: [
            os.path.join(parent, name) for parent, _, names in os.walk(root) for name in names
        ]
    if case == BASELINE:
        from keras.src.utils.dataset_utils import index_directory
        from keras.src.utils.image_dataset_utils import ALLOWLIST_FORMATS

        return lambda root: index_directory(
            root, "inferred", formats=ALLOWLIST_FORMATS, shuffle=True, seed=0, verbose=False
        )
    from tfpipe import from_directory  # imports tfpipe's sources before the timer

    def split(root: str) -> Any:
        source = from_directory(root, progress=False)
        return source, source.split({"train": 0.8, "test": 0.2})

    if case == TFPIPE:
        return lambda root: from_directory(root, progress=False)
    return split


def listing(root: str, files: int, case: str) -> dict[str, Any]:
    """One timed listing of `root`; files/s, seconds, CPU seconds, kept RSS per file."""
    lister = _lister(case)
    gc.collect()
    before = _resident_bytes()
    wall, cpu = time.perf_counter(), time.process_time()
    kept = lister(root)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    gc.collect()
    kept_bytes = _resident_bytes() - before
    del kept
    return {
        "files_per_s": files / wall,
        "seconds": wall,
        "cpu_s": cpu,
        "rss_kept_bytes_per_file": kept_bytes / files,
    }


def traced_memory(root: str, files: int, case: str) -> dict[str, Any]:
    """The bytes per file the listing keeps and its peak while made, under tracemalloc."""
    lister = _lister(case)
    gc.collect()
    tracemalloc.start()
    kept = lister(root)
    gc.collect()
    current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del kept
    return {"kept": current / files, "peak": peak / files}


def main() -> None:
    cases = (FLOOR, BASELINE, TFPIPE, SPLIT)
    for files in SIZES:
        with prepared_data(lambda tmp, n=files: make_folder(tmp / "images", n)) as (root, made):
            print(f"\n{files:,} files in {root}: made in {made:.1f} s")
            load = os.getloadavg()
            memory = {case: run_isolated(traced_memory, str(root), files, case) for case in cases}
            for case, used in memory.items():
                print(f"{case}: keeps {used['kept']:.0f} B/file, peak {used['peak']:.0f} B/file")
            compare(
                f"listing_{files}",
                {case: (listing, (str(root), files, case)) for case in cases},
                baseline=BASELINE,
                goals={TFPIPE: 1.0, SPLIT: 1.0},
                metric="files_per_s",
                extra={
                    "files": files,
                    "class_folders": min(1000, max(files // 100, 1)),
                    "load_average_at_start": load,
                    "tracemalloc_bytes_per_file": memory,
                },
                pairs={TFPIPE: BASELINE, SPLIT: BASELINE},
                spreads=("seconds", "cpu_s", "rss_kept_bytes_per_file"),
            )


if __name__ == "__main__":
    main()
