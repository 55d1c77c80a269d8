"""Small learnable image datasets generated on the spot (demo, tests, benchmarks).

Each class is a shape (circle, square, triangle, ...) drawn in a random colour, size and place
on a textured, photo-like background (smooth blotches plus fine grain, so JPEG sizes and
decode costs resemble photos'), so a small CNN learns it in a few epochs, and nothing is downloaded.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image as PILImage
from PIL import ImageDraw

SHAPES = ("circle", "square", "triangle", "cross", "ring", "bar")


def _draw(shape: str, size: tuple[int, int], rng: np.random.Generator) -> PILImage.Image:
    height, width = size
    coarse = rng.integers(0, 90, (max(2, height // 16), max(2, width // 16), 3), dtype=np.uint8)
    background = PILImage.fromarray(coarse).resize((width, height), PILImage.Resampling.BICUBIC)
    grain = rng.integers(0, 16, (height, width, 3), dtype=np.uint8)
    image = PILImage.fromarray(np.asarray(background) // 2 + grain)
    draw = ImageDraw.Draw(image)
    radius = int(min(height, width) * rng.uniform(0.18, 0.32))
    cx = int(rng.uniform(radius, width - radius))
    cy = int(rng.uniform(radius, height - radius))
    colour = tuple(int(c) for c in rng.integers(120, 256, 3))
    box = (cx - radius, cy - radius, cx + radius, cy + radius)
    line = max(2, radius // 3)
    if shape == "circle":
        draw.ellipse(box, fill=colour)
    elif shape == "square":
        draw.rectangle(box, fill=colour)
    elif shape == "triangle":
        draw.polygon(
            [(cx, cy - radius), (cx - radius, cy + radius), (cx + radius, cy + radius)], fill=colour
        )
    elif shape == "cross":
        draw.rectangle((cx - radius, cy - line // 2, cx + radius, cy + line // 2), fill=colour)
        draw.rectangle((cx - line // 2, cy - radius, cx + line // 2, cy + radius), fill=colour)
    elif shape == "ring":
        draw.ellipse(box, outline=colour, width=line)
    else:
        draw.rectangle((cx - radius, cy - line, cx + radius, cy + line), fill=colour)
    return image


def make_image_folder(
    root: str | os.PathLike[str],
    *,
    num_classes: int = 3,
    per_class: int = 20,
    size: tuple[int, int] = (64, 64),
    seed: int = 0,
    quality: int = 90,
) -> Path:
    """Writes `root/<shape>/<shape>_<i>.jpg` JPEGs, one folder per class; returns `root`.

    Example:
        >>> root = make_image_folder("shapes", num_classes=3, per_class=10)
        >>> sorted(p.name for p in root.iterdir())
        ['circle', 'square', 'triangle']
    """
    if not 1 <= num_classes <= len(SHAPES):
        raise ValueError(f"num_classes must be in 1..{len(SHAPES)}, got {num_classes}")
    if per_class < 1:
        raise ValueError(f"per_class must be >= 1, got {per_class}")
    rng = np.random.default_rng(seed)
    root = Path(root)
    for shape in SHAPES[:num_classes]:
        folder = root / shape
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(per_class):
            _draw(shape, size, rng).save(folder / f"{shape}_{i:05d}.jpg", quality=quality)
    return root


def make_image_dataframe(root: str | os.PathLike[str]) -> pd.DataFrame:
    """A DataFrame of `path` (relative to `root`) and `label` (class name) for a folder made by
    `make_image_folder`, sorted by path.

    Example:
        >>> df = make_image_dataframe(make_image_folder("shapes"))
        >>> list(df.columns)
        ['path', 'label']
    """
    root = Path(root)
    paths = sorted(p.relative_to(root) for p in root.glob("*/*.jpg"))
    return pd.DataFrame({"path": [str(p) for p in paths], "label": [p.parent.name for p in paths]})
