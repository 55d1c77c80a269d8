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

`build_color_photo_folder` makes a second set (issue 43): colour photos only, cut from the two
sample photos scikit-learn ships (`sklearn.datasets.load_sample_images`: china.jpg and
flower.jpg, 640x427) and scikit-image's colour photos, 300-900 px a side by default, no
grayscale, written the same way (JPEG quality 90, 4:2:0, 10 class folders). Photos of that size
shrunk to 128 px get a DCT scale of 1/2 at most, often none, so decoding them costs what a full
decode costs: the set where tfpipe's reduced decode helps least.

Nothing is downloaded: the photos are read from the files in the installed packages.
"""

from __future__ import annotations

import random
from collections.abc import Callable
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
    key = f"count={count} seed={seed} min_side={min_side} max_side={max_side}\n"
    return _write_folder(
        root, key, _skimage_photos, GRAYSCALE_SHARE, (count, seed, min_side, max_side)
    )


def build_color_photo_folder(
    root: str | Path,
    count: int = 2000,
    seed: int = 0,
    min_side: int = 300,
    max_side: int = 900,
) -> Path:
    """Writes `count` colour JPEGs cut from scikit-learn's and scikit-image's colour photos into
    `root/class_<i % 10>/`, no grayscale ones; reused when complete, as `build_photo_folder`.

    Examples:
        >>> folder = build_color_photo_folder("color", count=20, min_side=64, max_side=96)
        >>> len(list(folder.glob("class_*/*.jpg")))
        20

    Args:
        root: the folder to write; created if needed.
        count: how many images. Defaults to 2000.
        seed: the seed of the photos, crops and sizes. Defaults to 0.
        min_side: the smallest height or width, in pixels. Defaults to 300.
        max_side: the largest height or width, in pixels. Defaults to 900.
    """
    key = f"color count={count} seed={seed} min_side={min_side} max_side={max_side}\n"
    return _write_folder(root, key, _color_photos, 0.0, (count, seed, min_side, max_side))


def color_photos() -> list[PILImage.Image]:
    """scikit-learn's sample photos (china, flower) and scikit-image's colour photos, as RGB.

    Examples:
        >>> photos = color_photos()
        >>> len(photos), {p.mode for p in photos}
        (11, {'RGB'})
    """
    from sklearn.datasets import load_sample_images

    samples = [PILImage.fromarray(image) for image in load_sample_images().images]
    return samples + _skimage_photos()["color"]


def _skimage_photos() -> dict[str, list[PILImage.Image]]:
    return {
        kind: [PILImage.open(p).convert("RGB" if kind == "color" else "L") for p in group]
        for kind, group in photo_paths().items()
    }


def _color_photos() -> dict[str, list[PILImage.Image]]:
    return {"color": color_photos(), "grayscale": []}


def _write_folder(
    root: str | Path,
    key: str,
    load: Callable[[], dict[str, list[PILImage.Image]]],
    grayscale_share: float,
    sizes: tuple[int, int, int, int],
) -> Path:
    """The folder of `sizes` = (count, seed, min_side, max_side) crops of the photos `load`
    gives ("color", "grayscale"), a `grayscale_share` of them grayscale; reused when its
    `.complete` marker holds `key`."""
    count, seed, min_side, max_side = sizes
    if not 1 <= min_side <= max_side:
        raise ValueError(
            f"min_side and max_side must satisfy 1 <= min_side <= max_side. "
            f"Received: min_side={min_side}, max_side={max_side}"
        )
    root = Path(root)
    marker = root / _COMPLETE
    if marker.is_file() and marker.read_text() == key:
        return root
    for old in root.glob("class_*/*.jpg"):
        old.unlink()
    photos = load()
    rng = random.Random(seed)
    for index in range(count):
        kind = "grayscale" if rng.random() < grayscale_share else "color"
        image = _crop(rng.choice(photos[kind]), rng, min_side, max_side)
        folder = root / f"class_{index % NUM_CLASSES}"
        folder.mkdir(parents=True, exist_ok=True)
        image.save(folder / f"photo_{index:05d}.jpg", quality=QUALITY)
    marker.write_text(key)
    return root
