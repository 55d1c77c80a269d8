"""The Python quick starts of the README and of the docs' overview page run as written."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs" / "index.md"


def quick_start(page: Path) -> str:
    """The first ```python block after the "## Quick start" heading of `page`."""
    text = page.read_text()
    section = text[text.index("## Quick start") :]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match, f"{page.name} has no ```python block under ## Quick start"
    return match.group(1)


def test_readme_opens_with_the_two_make_commands() -> None:
    first_block = re.search(r"```bash\n(.*?)```", README.read_text(), re.DOTALL)
    assert first_block
    commands = [line.split("#")[0].strip() for line in first_block.group(1).splitlines()]
    assert commands[:2] == ["make demo", "make test"]


def programs(pages: list[Path]) -> list[Path]:
    """`pages` less those whose quick start is the same program as an earlier page's (the
    same syntax tree: it differs only in comments and layout), which runs for both."""
    first: dict[str, Path] = {}
    for page in pages:
        first.setdefault(ast.dump(ast.parse(quick_start(page))), page)
    return list(first.values())


@pytest.mark.slow
@pytest.mark.usefixtures("short_probes")  # the report's figures are not checked here
@pytest.mark.parametrize("page", programs([README, DOCS]), ids=lambda page: page.stem)
def test_quick_start_runs(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    code = compile(quick_start(page), f"{page} (quick start)", "exec")
    namespace: dict[str, object] = {"__name__": "__main__"}
    exec(code, namespace)
    assert (tmp_path / "records" / "train.json").is_file()
    assert "model" in namespace


def test_readme_stays_short() -> None:
    """The README is a front page; the guides hold the rest (issue 39: at most 5,000
    characters)."""
    assert len(README.read_text()) <= 5000
