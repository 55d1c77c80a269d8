"""Pictures of measured throughput (`FitReport.plot`, `tfpipe bench --plot`); matplotlib is an
optional extra, imported only when a picture is asked for."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

INSTALL_HINT = 'You can install it via `pip install "tfpipe[plot]"` (or `pip install matplotlib`).'


def new_figure(width: float, height: float, columns: int = 1) -> tuple[Any, Any]:
    """A matplotlib `Figure` (no pyplot, no GUI backend) and its axes."""
    try:
        from matplotlib.figure import Figure
    except ImportError as e:
        raise ImportError(f"Drawing a picture needs matplotlib. {INSTALL_HINT}") from e
    figure = Figure(figsize=(width, height), layout="constrained")
    return figure, figure.subplots(1, columns)


def throughput_bars(axes: Any, names: Sequence[str], rates: Sequence[float], title: str) -> None:
    """Horizontal bars of examples/s, labelled with their values, first name on top."""
    bars = axes.barh(list(names), list(rates), color="tab:blue")
    axes.bar_label(bars, labels=[f"{r:,.0f}" for r in rates], padding=3)
    axes.invert_yaxis()
    axes.set_xlabel("examples/s")
    axes.set_xlim(0, max(rates) * 1.25)
    axes.set_title(title)


def stacked_bar(axes: Any, names: Sequence[str], shares: Sequence[float], title: str) -> None:
    """One horizontal bar of shares (0 to 1), a segment per name, the legend to its right."""
    left = 0.0
    for name, share in zip(names, shares, strict=True):
        axes.barh([""], [share], left=[left], label=f"{name} {share:.0%}")
        left += share
    axes.set_xlim(0, max(1.0, left))
    axes.set_xlabel("share of training time")
    axes.set_title(title)
    axes.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)


def save(figure: Any, path: str | os.PathLike[str]) -> Path:
    """Saves the figure (format from the suffix, e.g. .png or .svg) and returns its path."""
    path = Path(path)
    if not path.parent.is_dir():
        raise FileNotFoundError(f"path: the folder {str(path.parent)!r} does not exist")
    figure.savefig(path, dpi=100)
    return path
