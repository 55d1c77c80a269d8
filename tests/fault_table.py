"""The table of injected faults in docs/reliability.md, rendered from the tests' `fault` marks.

A fault-injection test says what it breaks, which reader it tries and what must happen::

    @pytest.mark.fault("zero-byte shard", reader="read_tfrecords", outcome="DecodeError naming it")
    def test_...

`tests/project/test_reliability_doc.py` checks that the page's table is exactly the one
rendered from every marked test; `TFPIPE_WRITE_FAULT_TABLE=1 python -m pytest
tests/project/test_reliability_doc.py tests` rewrites it.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pytest

BEGIN = "<!-- FAULT TABLE: generated from the tests' fault marks; do not edit by hand -->"
END = "<!-- END FAULT TABLE -->"


def rows(items: Iterable[pytest.Item]) -> list[tuple[str, str, str, str]]:
    """(fault, reader, outcome, test module) of every marked test, sorted, without repeats."""
    found = set()
    for item in items:
        for mark in item.iter_markers("fault"):
            fault = mark.args[0] if mark.args else mark.kwargs["fault"]
            found.add((fault, mark.kwargs["reader"], mark.kwargs["outcome"], item.path.name))
    return sorted(found)


def render(table: list[tuple[str, str, str, str]]) -> str:
    lines = ["| fault | reader | what happens | test |", "|---|---|---|---|"]
    lines += [
        f"| {fault} | {reader} | {outcome} | `{test}` |" for fault, reader, outcome, test in table
    ]
    return "\n".join([BEGIN, *lines, END])


def replace_block(text: str, block: str) -> str:
    start, end = text.index(BEGIN), text.index(END) + len(END)
    return text[:start] + block + text[end:]


def marked_modules(folder: Path) -> set[str]:
    """The test modules that contain fault marks."""
    return {p.name for p in folder.rglob("test_*.py") if "mark.fault(" in p.read_text()}
