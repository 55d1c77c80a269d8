"""docs/reliability.md lists exactly the faults the tests inject (see tests/fault_table.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fault_table import BEGIN, END, marked_modules, render, replace_block, rows

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "reliability.md"


def test_fault_table_matches_the_tests(request: pytest.FixtureRequest) -> None:
    items = request.session.items
    collected = {item.path.name for item in items}
    missing = marked_modules(ROOT / "tests") - collected
    if missing:
        pytest.skip(f"run the whole suite to check the fault table (not collected: {missing})")
    table = rows(items)
    assert table, "no test carries a fault mark"
    text = PAGE.read_text()
    expected = replace_block(text, render(table))
    if os.environ.get("TFPIPE_WRITE_FAULT_TABLE"):
        PAGE.write_text(expected)
        return
    assert text == expected, (
        "docs/reliability.md's fault table differs from the tests' fault marks; rewrite it with "
        "TFPIPE_WRITE_FAULT_TABLE=1 python -m pytest tests"
    )


def test_the_page_keeps_the_place_for_the_table() -> None:
    text = PAGE.read_text()
    assert text.index(BEGIN) < text.index(END)
