"""`python -m benchmarks [name ...]` runs bench_<name>.py files (all of them by default)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path


def main(argv: list[str]) -> None:
    available = sorted(p.stem[len("bench_") :] for p in Path(__file__).parent.glob("bench_*.py"))
    names = argv or available
    unknown = [n for n in names if n not in available]
    if unknown:
        sys.exit(f"unknown benchmark(s) {unknown}; available: {available}")
    for name in names:
        importlib.import_module(f"benchmarks.bench_{name}").main()


if __name__ == "__main__":
    main(sys.argv[1:])
