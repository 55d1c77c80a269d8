"""The notebooks in examples/notebooks execute top to bottom, and stay reviewable."""

from __future__ import annotations

import json
import re
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import jupytext
import nbformat
import pytest
from nbclient import NotebookClient

from probe_lengths import short_source

NOTEBOOKS = Path(__file__).resolve().parents[2] / "examples" / "notebooks"
NAMES = ["quickstart", "fast_input", "segmentation"]
# Smaller parameters for the suite, run in a cell inserted after each notebook's cell tagged
# `parameters` (as papermill injects them): a shorter run of the same cells, with probes of a
# few hundred ms (their length is not under test).
PARAMETERS = {
    "quickstart": {"EPOCHS": 1},
    "fast_input": {"PER_CLASS": 16, "BATCHES": 4},
    "segmentation": {"EPOCHS": 1},
}


@pytest.fixture(scope="module")
def kernel_name(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A kernel spec that runs this interpreter (the venv's), whatever `python` is on PATH."""
    root = tmp_path_factory.mktemp("jupyter")
    spec = root / "kernels" / "tfpipe-test"
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(
        json.dumps({"argv": argv, "display_name": "tfpipe tests", "language": "python"})
    )
    mp = pytest.MonkeyPatch()
    mp.setenv("JUPYTER_PATH", str(root))
    yield "tfpipe-test"
    mp.undo()


def test_every_notebook_is_tested() -> None:
    assert sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb")) == sorted(NAMES)


def with_parameters(notebook: nbformat.NotebookNode, values: dict[str, int]) -> None:
    """Inserts a cell setting `values` (and short probes) after the cell tagged `parameters`,
    which must set each of them (else the new value would go unused)."""
    tagged = [i for i, c in enumerate(notebook.cells) if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1, "tag one code cell `parameters`"
    cell = notebook.cells[tagged[0]]
    for name in values:
        assert re.search(rf"^{name} = ", cell.source, re.M), f"{name} is not a parameter"
    source = "\n".join([short_source(), *(f"{name} = {value!r}" for name, value in values.items())])
    notebook.cells.insert(tagged[0] + 1, nbformat.v4.new_code_cell(source))


@pytest.mark.parametrize("name", NAMES)
def test_notebook_is_stored_without_outputs_and_paired(name: str) -> None:
    notebook = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code
    assert all(not cell.outputs and cell.execution_count is None for cell in code)
    markdown = jupytext.read(NOTEBOOKS / f"{name}.md")
    assert [(c.cell_type, c.source) for c in markdown.cells] == [
        (c.cell_type, c.source) for c in notebook.cells
    ], f"{name}.md and {name}.ipynb differ: run jupytext --sync examples/notebooks/{name}.ipynb"


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_notebook_executes(name: str, kernel_name: str, tmp_path: Path) -> None:
    shutil.copy(NOTEBOOKS / f"{name}.ipynb", tmp_path)
    notebook = nbformat.read(tmp_path / f"{name}.ipynb", as_version=4)
    with_parameters(notebook, PARAMETERS[name])
    client = NotebookClient(
        notebook,
        kernel_name=kernel_name,
        timeout=300,
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()  # raises CellExecutionError, with the cell and traceback, on failure
    errors = [
        output
        for cell in notebook.cells
        for output in cell.get("outputs", [])
        if output.get("output_type") == "error"
    ]
    assert not errors
    if name == "fast_input":
        assert (tmp_path / "throughput.png").stat().st_size > 0
    if name == "segmentation":
        assert (tmp_path / "prediction.png").stat().st_size > 0
