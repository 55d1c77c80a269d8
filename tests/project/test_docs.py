"""The documentation site builds in strict mode, and strict mode catches broken links."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )


@pytest.mark.slow
def test_docs_build_strict(tmp_path: Path) -> None:
    result = build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert result.returncode == 0, result.stderr[-3000:]
    reference = (tmp_path / "site" / "reference" / "loaders" / "index.html").read_text()
    assert "as_supervised" in reference  # the API reference is generated from the docstrings


@pytest.mark.slow
def test_strict_build_fails_on_a_broken_link(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    shutil.copytree(ROOT / "docs", docs)
    with (docs / "index.md").open("a") as page:
        page.write("\nSee [the missing page](no-such-page.md).\n")
    config = (ROOT / "mkdocs.yml").read_text().replace("paths: [src]", f"paths: [{ROOT / 'src'}]")
    (tmp_path / "mkdocs.yml").write_text(config)
    result = build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert result.returncode != 0
    assert "no-such-page.md" in result.stderr


def test_every_page_is_in_the_navigation() -> None:
    config = (ROOT / "mkdocs.yml").read_text()
    pages = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")}
    missing = sorted(page for page in pages if f": {page}" not in config)
    assert not missing


def test_performance_page_keeps_the_place_for_benchmark_tables() -> None:
    text = (ROOT / "docs" / "performance.md").read_text()
    start = text.index("<!-- BENCHMARK TABLES")
    assert start < text.index("<!-- END BENCHMARK TABLES -->")
