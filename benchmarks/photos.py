"""A folder of real photographs of mixed sizes, cut from the photos scikit-image ships.

Synthetic images (flat shapes, noise) decode at speeds no real photo has. The photographs
bundled in the scikit-image wheel (`skimage.data.data_dir`: astronaut, coffee, chelsea, rocket,
the Hubble deep field, a retina, motorcycles, the camera man, the moon, coins, textures, ...)
are real, but few and mostly about 512 px a side. `build_photo_folder` turns them into a folder
of any size: each image is a seeded random crop of one of them, resized to a random height and
width (each between `min_side` and `max_side`) and saved as a JPEG of quality 90 (4:2:0
chroma, as cameras and most tools write them) in one of 10 class folders. About one image in
five comes from a grayscale photo and is saved as a one-channel JPEG, as real folders hold some.
Crops larger than their source are upscaled (Lanczos): their JPEGs are smoother, so a little
cheaper to decode per pixel than a camera's photo of that size.

Nothing is downloaded: the photos are read from the files in the installed package.
"""

from __future__ import annotations

import random
from pathlib import Path

from PIL import Image as PILImage

NUM_CLASSES = 10
QUALITY = 90
GRAYSCALE_SHARE = 0.2
# The photographs among the files of the scikit-image wheel (not its charts, drawings, masks).
COLOR_PHOTOS = (
    "astronaut.png",
    "chelsea.png",
    "coffee.png",
    "hubble_deep_field.jpg",
    "ihc.png",
    "motorcycle_left.png",
    "motorcycle_right.png",
    "retina.jpg",
    "rocket.jpg",
)
GRAYSCALE_PHOTOS = (
    "brick.png",
    "camera.png",
    "clock_motion.png",
    "coins.png",
    "grass.png",
    "gravel.png",
    "moon.png",
    "page.png",
    "text.png",
)
_COMPLETE = ".complete"


def photo_paths() -> dict[str, list[Path]]:
    """The bundled photographs, "color" and "grayscale", read from the installed scikit-image.

    Examples:
        >>> sorted(p.name for p in photo_paths()["color"])[:2]
        ['astronaut.png', 'chelsea.png']
    """
    import skimage.data

    folder = Path(skimage.data.data_dir)
    paths = {
        "color": [folder / name for name in COLOR_PHOTOS],
        "grayscale": [folder / name for name in GRAYSCALE_PHOTOS],
    }
    missing = [str(p) for group in paths.values() for p in group if not p.is_file()]
    if missing:
        raise FileNotFoundError(
            f"scikit-image {skimage.__version__} does not ship the photos {missing}; "
            "install the version in the `dev` extra (pip install -e '.[dev]')"
        )
    return paths


def _crop(
    photo: PILImage.Image, rng: random.Random, min_side: int, max_side: int
) -> PILImage.Image:
    """A random crop of `photo` with a random target size's aspect, resized to that size."""
    height, width = rng.randint(min_side, max_side), rng.randint(min_side, max_side)
    largest = min(photo.height / height, photo.width / width)  # crop scale that still fits
    scale = rng.uniform(0.5, 1.0) * largest
    crop_h, crop_w = max(1, round(height * scale)), max(1, round(width * scale))
    top, left = rng.randint(0, photo.height - crop_h), rng.randint(0, photo.width - crop_w)
    box = (left, top, left + crop_w, top + crop_h)
    return photo.resize((width, height), PILImage.Resampling.LANCZOS, box=box)


def build_photo_folder(
    root: str | Path,
    count: int = 2000,
    seed: int = 0,
    min_side: int = 300,
    max_side: int = 1200,
) -> Path:
    """Writes `count` JPEGs cut from real photographs into `root/class_<i % 10>/`.

    The same arguments give the same files. A folder completed before with the same arguments
    is reused as it is (a `.complete` file marks it); an incomplete one is rebuilt.

    Examples:
        >>> folder = build_photo_folder("photos", count=20, min_side=64, max_side=96)
        >>> len(list(folder.glob("class_*/*.jpg")))
        20

    Args:
        root: the folder to write; created if needed.
        count: how many images. Defaults to 2000.
        seed: the seed of the photos, crops and sizes. Defaults to 0.
        min_side: the smallest height or width, in pixels. Defaults to 300.
        max_side: the largest height or width, in pixels. Defaults to 1200.
    """
    if not 1 <= min_side <= max_side:
        raise ValueError(
            f"min_side and max_side must satisfy 1 <= min_side <= max_side. "
            f"Received: min_side={min_side}, max_side={max_side}"
        )
    root = Path(root)
    key = f"count={count} seed={seed} min_side={min_side} max_side={max_side}\n"
    marker = root / _COMPLETE
    if marker.is_file() and marker.read_text() == key:
        return root
    for old in root.glob("class_*/*.jpg"):
        old.unlink()
    paths = photo_paths()
    photos = {
        kind: [PILImage.open(p).convert("RGB" if kind == "color" else "L") for p in group]
        for kind, group in paths.items()
    }
    rng = random.Random(seed)
    for index in range(count):
        kind = "grayscale" if rng.random() < GRAYSCALE_SHARE else "color"
        image = _crop(rng.choice(photos[kind]), rng, min_side, max_side)
        folder = root / f"class_{index % NUM_CLASSES}"
        folder.mkdir(parents=True, exist_ok=True)
        image.save(folder / f"photo_{index:05d}.jpg", quality=QUALITY)
    marker.write_text(key)
    return root
