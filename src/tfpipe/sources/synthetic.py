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


def _background(size: tuple[int, int], rng: np.random.Generator) -> PILImage.Image:
    height, width = size
    coarse = rng.integers(0, 90, (max(2, height // 16), max(2, width // 16), 3), dtype=np.uint8)
    background = PILImage.fromarray(coarse).resize((width, height), PILImage.Resampling.BICUBIC)
    grain = rng.integers(0, 16, (height, width, 3), dtype=np.uint8)
    return PILImage.fromarray(np.asarray(background) // 2 + grain)


def _draw_shape(
    shape: str,
    size: tuple[int, int],
    rng: np.random.Generator,
    draws: list[tuple[ImageDraw.ImageDraw, int | tuple[int, ...] | None]],
    scale: tuple[float, float] = (0.18, 0.32),
) -> None:
    """Draws one shape at a random place and size, the same geometry on every `(draw, fill)`;
    a fill of None takes a random colour."""
    height, width = size
    radius = int(min(height, width) * rng.uniform(*scale))
    cx = int(rng.uniform(radius, width - radius))
    cy = int(rng.uniform(radius, height - radius))
    colour = tuple(int(c) for c in rng.integers(120, 256, 3))
    box = (cx - radius, cy - radius, cx + radius, cy + radius)
    line = max(2, radius // 3)
    for draw, given in draws:
        fill = colour if given is None else given
        if shape == "circle":
            draw.ellipse(box, fill=fill)
        elif shape == "square":
            draw.rectangle(box, fill=fill)
        elif shape == "triangle":
            corners = [(cx, cy - radius), (cx - radius, cy + radius), (cx + radius, cy + radius)]
            draw.polygon(corners, fill=fill)
        elif shape == "cross":
            draw.rectangle((cx - radius, cy - line // 2, cx + radius, cy + line // 2), fill=fill)
            draw.rectangle((cx - line // 2, cy - radius, cx + line // 2, cy + radius), fill=fill)
        elif shape == "ring":
            draw.ellipse(box, outline=fill, width=line)
        else:
            draw.rectangle((cx - radius, cy - line, cx + radius, cy + line), fill=fill)


def _draw(shape: str, size: tuple[int, int], rng: np.random.Generator) -> PILImage.Image:
    image = _background(size, rng)
    _draw_shape(shape, size, rng, [(ImageDraw.Draw(image), None)])
    return image


def _draw_scene(
    size: tuple[int, int], rng: np.random.Generator, num_classes: int
) -> tuple[PILImage.Image, PILImage.Image, list[str]]:
    """An image with 1-3 shapes of random classes, its mask (0 = background, class k + 1 where
    shape k is on top) and the names of the shapes it shows, in `SHAPES` order."""
    image = _background(size, rng)
    mask = PILImage.new("L", (size[1], size[0]), 0)
    drawn = [int(k) for k in rng.choice(num_classes, int(rng.integers(1, 4)), replace=False)]
    for k in drawn:
        pair = [(ImageDraw.Draw(image), None), (ImageDraw.Draw(mask), k + 1)]
        _draw_shape(SHAPES[k], size, rng=rng, draws=pair, scale=(0.12, 0.24))  # type: ignore[arg-type]
    shown = set(np.unique(np.asarray(mask)).tolist()) - {0}
    return image, mask, [SHAPES[k - 1] for k in sorted(shown)]


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

    Examples:
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

    Examples:
        >>> df = make_image_dataframe(make_image_folder("shapes"))
        >>> list(df.columns)
        ['path', 'label']
    """
    root = Path(root)
    paths = sorted(p.relative_to(root) for p in root.glob("*/*.jpg"))
    return pd.DataFrame({"path": [str(p) for p in paths], "label": [p.parent.name for p in paths]})


def make_segmentation_folder(
    root: str | os.PathLike[str],
    *,
    count: int = 40,
    num_classes: int = 3,
    size: tuple[int, int] = (64, 64),
    seed: int = 0,
) -> Path:
    """Writes `root/images/<i>.jpg` and their masks `root/masks/<i>.png`; returns `root`.

    Each image shows 1-3 shapes; its mask is a gray PNG holding 0 for the background and
    `k + 1` where a shape of class `SHAPES[k]` is on top.

    Examples:
        >>> root = make_segmentation_folder("seg", count=4)
        >>> sorted(p.name for p in (root / "masks").iterdir())
        ['00000.png', '00001.png', '00002.png', '00003.png']
    """
    _check_scene(count, num_classes)
    rng = np.random.default_rng(seed)
    root = Path(root)
    (root / "images").mkdir(parents=True, exist_ok=True)
    (root / "masks").mkdir(parents=True, exist_ok=True)
    for i in range(count):
        image, mask, _ = _draw_scene(size, rng, num_classes)
        image.save(root / "images" / f"{i:05d}.jpg", quality=90)
        mask.save(root / "masks" / f"{i:05d}.png")
    return root


def make_tagged_images(
    root: str | os.PathLike[str],
    *,
    count: int = 40,
    num_classes: int = 4,
    size: tuple[int, int] = (64, 64),
    seed: int = 0,
) -> pd.DataFrame:
    """Writes `root/train-jpg/train_<i>.jpg` and returns their tags as Kaggle Planet's CSV has
    them: `image_name` without extension, `tags` the space-separated names of the shapes shown.

    Examples:
        >>> df = make_tagged_images("planet", count=3)
        >>> list(df.columns), df["image_name"][0]
        (['image_name', 'tags'], 'train_0')
    """
    _check_scene(count, num_classes)
    rng = np.random.default_rng(seed)
    folder = Path(root) / "train-jpg"
    folder.mkdir(parents=True, exist_ok=True)
    names, tags = [], []
    for i in range(count):
        image, _, shown = _draw_scene(size, rng, num_classes)
        image.save(folder / f"train_{i}.jpg", quality=90)
        names.append(f"train_{i}")
        tags.append(" ".join(shown))
    return pd.DataFrame({"image_name": names, "tags": tags})


def _check_scene(count: int, num_classes: int) -> None:
    if not 1 <= num_classes <= len(SHAPES):
        raise ValueError(f"num_classes must be in 1..{len(SHAPES)}, got {num_classes}")
    if count < 1:
        raise ValueError(f"count must be >= 1, got {count}")
