"""The photo benchmark's folder: real photographs of mixed sizes that decode, in 10 classes."""

from __future__ import annotations

from pathlib import Path

import tensorflow as tf
from benchmarks.photos import (
    COLOR_PHOTOS,
    NUM_CLASSES,
    build_color_photo_folder,
    build_photo_folder,
    color_photos,
)
from PIL import Image as PILImage
from PIL import JpegImagePlugin


def test_photo_folder_has_decodable_jpegs_of_varied_sizes_in_ten_classes(tmp_path: Path) -> None:
    folder = build_photo_folder(tmp_path / "photos", count=20, seed=3, min_side=40, max_side=120)

    files = sorted(folder.glob("class_*/*.jpg"))
    assert len(files) == 20
    assert sorted(p.name for p in folder.iterdir() if p.is_dir()) == [
        f"class_{k}" for k in range(NUM_CLASSES)
    ]
    shapes = [tuple(tf.io.decode_jpeg(p.read_bytes()).shape) for p in files]
    assert all(40 <= h <= 120 and 40 <= w <= 120 for h, w, _ in shapes)
    assert len({h for h, _, _ in shapes}) > 5 and len({w for _, w, _ in shapes}) > 5
    assert {c for _, _, c in shapes} == {1, 3}  # grayscale-origin photos among the color ones


def test_photo_folder_is_reused_when_complete_and_rebuilt_for_other_arguments(
    tmp_path: Path,
) -> None:
    root = tmp_path / "photos"
    build_photo_folder(root, count=10, seed=0, min_side=40, max_side=60)
    first = {p: p.stat().st_mtime_ns for p in root.glob("*/*.jpg")}

    build_photo_folder(root, count=10, seed=0, min_side=40, max_side=60)
    assert {p: p.stat().st_mtime_ns for p in root.glob("*/*.jpg")} == first

    build_photo_folder(root, count=12, seed=1, min_side=40, max_side=60)
    assert len(list(root.glob("*/*.jpg"))) == 12


def test_color_photo_folder_has_colour_jpegs_of_300_to_900_px_from_both_libraries(
    tmp_path: Path,
) -> None:
    folder = build_color_photo_folder(tmp_path / "color", count=30, seed=2)

    files = sorted(folder.glob("class_*/*.jpg"))
    assert len(files) == 30
    assert sorted(p.name for p in folder.iterdir() if p.is_dir()) == [
        f"class_{k}" for k in range(NUM_CLASSES)
    ]
    shapes = [tuple(tf.io.decode_jpeg(p.read_bytes()).shape) for p in files]
    assert all(300 <= h <= 900 and 300 <= w <= 900 for h, w, _ in shapes)
    assert {c for _, _, c in shapes} == {3}  # no grayscale photo
    with PILImage.open(files[0]) as image:
        assert image.info.get("progressive", 0) == 0
        assert JpegImagePlugin.get_sampling(image) == 2  # 4:2:0 chroma


def test_color_photos_are_scikit_learns_samples_and_scikit_images_colour_photos() -> None:
    photos = color_photos()

    assert len(photos) == 2 + len(COLOR_PHOTOS)
    assert {p.mode for p in photos} == {"RGB"}
    assert [p.size for p in photos[:2]] == [(640, 427), (640, 427)]  # china.jpg, flower.jpg


def test_color_photo_folder_is_not_mistaken_for_the_first_set(tmp_path: Path) -> None:
    root = tmp_path / "photos"
    build_photo_folder(root, count=10, seed=0, min_side=40, max_side=60)

    build_color_photo_folder(root, count=10, seed=0, min_side=40, max_side=60)
    channels = {tf.io.decode_jpeg(p.read_bytes()).shape[-1] for p in root.glob("*/*.jpg")}
    assert channels == {3} and (root / ".complete").read_text().startswith("color ")
