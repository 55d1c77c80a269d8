"""One resize everywhere: every path gives the same pixels for the same stored image and size.

The paths: `Image.load` (Pillow), `SequenceLoader` over the folder and over its records,
`Pipeline` over the folder and over records of the full-size files, the default pipeline of
`tfpipe.fit` (`adapters.adapt`), and the writer resizing at write time. Between any two, per
image: mean absolute difference <= 0.5 and maximum <= 2 (of 255), on real photographs of
varied sizes (JPEG and PNG, colour and grayscale), shrunk a lot, a little, and enlarged.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from matplotlib import cbook
from PIL import Image as PILImage

import tfpipe
from tfpipe.features import imaging
from tfpipe.features.image import box_reduce, resize_and_scale
from tfpipe.training.adapters import adapt

MEAN_LIMIT, MAX_LIMIT = 0.5, 2
# (width, height, format, mode): 4-8x shrinks (a JPEG's DCT scale), under 2x, and enlargements
PHOTOS = [
    (900, 700, "JPEG", "RGB"),
    (640, 480, "JPEG", "RGB"),
    (333, 517, "JPEG", "L"),
    (1000, 300, "JPEG", "RGB"),
    (700, 500, "PNG", "RGB"),
    (260, 300, "PNG", "L"),
    (200, 150, "JPEG", "RGB"),
    (32, 32, "PNG", "RGB"),
]


def _photo() -> PILImage.Image:
    with cbook.get_sample_data("grace_hopper.jpg") as f:  # a real photograph, 512x600
        return PILImage.open(f).convert("RGB")


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("photos")
    (root / "all").mkdir()
    photo = _photo()
    rng = np.random.default_rng(0)
    for i, (width, height, fmt, mode) in enumerate(PHOTOS):
        left, top = int(rng.integers(0, 100)), int(rng.integers(0, 100))
        crop = photo.crop((left, top, left + 400, top + 480)).resize((width, height))
        suffix = "jpg" if fmt == "JPEG" else "png"
        crop.convert(mode).save(root / "all" / f"{i:02d}.{suffix}", fmt, quality=90)
    return root


def _assert_agree(results: dict[str, np.ndarray], names: list[str]) -> None:
    for (a, first), (b, second) in itertools.combinations(results.items(), 2):
        for name, x, y in zip(names, first, second, strict=True):
            diff = np.abs(x.astype(np.float64) - y.astype(np.float64))
            assert diff.mean() <= MEAN_LIMIT and diff.max() <= MAX_LIMIT, (
                f"{name}: {a} and {b} differ by {diff.mean():.3f} mean, {diff.max():.0f} max"
            )


@pytest.mark.slow
@pytest.mark.parametrize(("channels", "size"), [(3, (128, 128)), (1, (96, 160))])
def test_every_path_gives_the_same_pixels_for_photos_of_every_size(
    folder: Path, tmp_path: Path, channels: int, size: tuple[int, int]
) -> None:
    source = tfpipe.from_directory(folder, image_shape=(None, None, channels), class_names=["all"])
    paths = sorted((folder / "all").iterdir())
    count = len(paths)
    feature = tfpipe.Image(shape=(None, None, channels))
    full, at_size_prefix = tmp_path / "full", tmp_path / "resized"
    tfpipe.write_tfrecords(source, full, shuffle=False, progress=False)
    at_size = tfpipe.Schema(
        {
            "image": tfpipe.Image(shape=(*size, channels), encoding="png"),
            "label": source.schema["label"],
        }
    )
    tfpipe.write_tfrecords(
        source, tmp_path / "resized", schema=at_size, shuffle=False, progress=False
    )

    fit_input = adapt(full, batch_size=count, shuffle=False, image_size=size)
    stored = tfpipe.from_tfrecords(full)  # re-encoded where a JPEG is not of `channels`
    names = [path.name for path in paths]
    from_files = {
        "Image.load": np.stack([feature.load(path, size) for path in paths]),
        "SequenceLoader(folder)": _sequence(source, size, count),
        "Pipeline(folder)": _pipeline(source, size, count),
        "write_tfrecords(image at size)": np.stack(
            [e["image"].numpy() for e in tfpipe.read_tfrecords(at_size_prefix)]
        ),
    }
    from_records = {
        "Image.load(stored)": np.stack([feature.load(e["image"], size) for e in stored]),
        "SequenceLoader(records)": _sequence(stored, size, count),
        "Pipeline(records)": _pipeline(full, size, count),
        "tfpipe.training.fit's pipeline": np.round(next(fit_input.batches())[0].numpy() * 255),
    }
    _assert_agree(from_files, names)
    _assert_agree(from_records, names)
    # SequenceLoader's worker threads decode with the Pipeline's own graph: no difference
    assert np.array_equal(from_files["SequenceLoader(folder)"], from_files["Pipeline(folder)"])
    assert np.array_equal(
        from_records["SequenceLoader(records)"], from_records["Pipeline(records)"]
    )
    # PNGs stay PNG (copied, or converted to `channels` losslessly) and JPEGs of the declared
    # channels are copied: their records give the files' pixels. Other JPEGs are re-encoded.
    kept = [
        i
        for i, path in enumerate(paths)
        if path.suffix == ".png" or stored[i]["image"] == path.read_bytes()
    ]
    assert all(stored[i]["image"].startswith(imaging.PNG_MAGIC) for i in _pngs(paths))
    assert len(kept) > len(_pngs(paths))  # JPEGs too
    both = {name: pixels[kept] for name, pixels in {**from_files, **from_records}.items()}
    _assert_agree(both, [names[i] for i in kept])


def _pngs(paths: list[Path]) -> list[int]:
    return [i for i, path in enumerate(paths) if path.suffix == ".png"]


def _sequence(data: object, size: tuple[int, int], count: int) -> np.ndarray:
    """The `count` examples of `data` as one uint8 batch of `SequenceLoader`, in order."""
    loader = tfpipe.SequenceLoader(
        data, batch_size=count, image_size=size, shuffle=False, rescale=None, dtype="uint8"
    )
    return loader[0][0]


def _pipeline(data: object, size: tuple[int, int], count: int) -> np.ndarray:
    """The `count` examples of `data` as one uint8 batch of `Pipeline`, in order."""
    built = tfpipe.Pipeline(data, image_size=size).options(deterministic=True).batch(count)
    return next(iter(built.build()))["image"].numpy()


@pytest.mark.parametrize(("channels", "size"), [(3, (64, 64)), (1, (96, 160))])
def test_records_of_a_png_folder_give_the_folder_s_pixels(
    tmp_path: Path, channels: int, size: tuple[int, int]
) -> None:
    """Written with the defaults, a folder of PNGs stays PNG, so its records give the folder's
    pixels (as JPEG at quality 95 they were 13/255 apart in mean, 39 at most, on a 32x32 PNG
    read at 64x64)."""
    (tmp_path / "img" / "all").mkdir(parents=True)
    photo = _photo()
    for i, (width, height, mode) in enumerate([(32, 32, "RGB"), (700, 500, "RGB"), (90, 60, "L")]):
        photo.resize((width, height)).convert(mode).save(tmp_path / "img" / "all" / f"{i}.png")
    source = tfpipe.from_directory(
        tmp_path / "img", image_shape=(None, None, channels), class_names=["all"]
    )
    prefix = tmp_path / "out" / "train"
    tfpipe.write_tfrecords(source, prefix, shuffle=False, progress=False)
    stored = tfpipe.from_tfrecords(prefix)
    count = len(stored)
    assert all(stored[i]["image"].startswith(imaging.PNG_MAGIC) for i in range(count))
    results = {
        "Pipeline(folder)": _pipeline(source, size, count),
        "SequenceLoader(folder)": _sequence(source, size, count),
        "Pipeline(records)": _pipeline(prefix, size, count),
        "SequenceLoader(records)": _sequence(stored, size, count),
    }
    _assert_agree(results, ["32x32", "700x500", "gray 90x60"])


def test_raw_pixels_give_the_same_pixels_on_every_path(tmp_path: Path) -> None:
    photo = np.asarray(_photo().resize((400, 300)))
    images = np.stack([photo, photo[::-1], photo[:, ::-1]])
    source = tfpipe.from_arrays({"image": images, "label": np.arange(3)})
    raw = tfpipe.Schema(
        {
            "image": tfpipe.Image(shape=(300, 400, 3), encoding="raw"),
            "label": source.schema["label"],
        }
    )
    tfpipe.write_tfrecords(source, tmp_path / "raw", schema=raw, shuffle=False, progress=False)
    for size in [(128, 96), (450, 700)]:
        results = {
            "Image.load": np.stack([raw["image"].load(image, size) for image in images]),
            "Pipeline(arrays)": next(
                iter(
                    tfpipe.Pipeline(source, image_size=size)
                    .options(deterministic=True)
                    .batch(3)
                    .build()
                )
            )["image"].numpy(),
            "Pipeline(raw records)": next(
                iter(
                    tfpipe.Pipeline(tmp_path / "raw", image_size=size)
                    .options(deterministic=True)
                    .batch(3)
                    .build()
                )
            )["image"].numpy(),
            "SequenceLoader(arrays)": tfpipe.SequenceLoader(
                source, batch_size=3, image_size=size, shuffle=False, rescale=None, dtype="uint8"
            )[0][0],
        }
        _assert_agree(results, ["photo", "flipped", "mirrored"])


@pytest.mark.parametrize("fmt", ["JPEG", "PNG"])
def test_a_large_shrink_is_antialiased_on_every_path(tmp_path: Path, fmt: str) -> None:
    """A one-pixel checkerboard shrunk 8.5x is flat gray, not the aliased pattern (16..239)
    a plain bilinear resize (Keras's loader) leaves at that size."""
    board = ((np.indices((512, 512)).sum(0) % 2) * 255).astype(np.uint8)
    (tmp_path / "all").mkdir()
    PILImage.fromarray(board).convert("RGB").save(
        tmp_path / "all" / f"board.{fmt.lower()}", fmt, quality=95
    )
    source = tfpipe.from_directory(tmp_path, class_names=["all"])
    pipeline = tfpipe.Pipeline(source, image_size=(60, 60)).batch(1).build()
    shrunk = {
        "Pipeline": next(iter(pipeline))["image"].numpy()[0],
        "SequenceLoader": tfpipe.SequenceLoader(
            source, batch_size=1, image_size=(60, 60), rescale=None, dtype="uint8"
        )[0][0][0],
    }
    for path, pixels in shrunk.items():
        assert np.abs(pixels.astype(int) - 128).max() <= 8, (
            f"{path}: {pixels.min()}..{pixels.max()}"
        )


@pytest.mark.parametrize(
    ("height", "width"),
    [(450, 150), (301, 999), (256, 700), (1200, 300), (640, 641), (2000, 2000), (130, 129)],
)
def test_the_box_reduction_is_pillows_reduce_to_the_pixel(height: int, width: int) -> None:
    """Blocks of 3, 7, 15x15 (counts not a power of two, rounded as Pillow rounds), 2x4,
    left-over pixels cut from both ends, one side only, none: TensorFlow's box reduction, one
    image or a batch, equals Pillow's `reduce` exactly, and the whole resize is within 1."""
    size = (128, 128)
    noise = np.random.default_rng(height * width).integers(0, 256, (height, width, 3), np.uint8)
    pillow = np.asarray(imaging.box_reduce(PILImage.fromarray(noise), size[::-1]))
    one = box_reduce(tf.constant(noise), size).numpy()
    batch = box_reduce(tf.constant(np.stack([noise, noise])), size).numpy()
    assert one.shape == pillow.shape and np.array_equal(one, pillow)
    assert np.array_equal(batch[1], pillow)
    resized = resize_and_scale(tf.constant(noise), size, None).numpy().astype(int)
    expected = np.asarray(imaging.resize(PILImage.fromarray(noise), size[::-1])).astype(int)
    assert np.abs(resized - expected).max() <= 1
