"""Every image mode gives the same pixels on the Pillow and TensorFlow paths, or both refuse.

Pillow paths: `Image.load` and a SequenceLoader batch. TensorFlow paths: Pipeline over a folder
(the file decoded in a graph) and write_tfrecords + read_tfrecords (the stored bytes decoded in
a graph). All comparisons are exact, JPEGs included (both use libjpeg's accurate IDCT).
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image as PILImage

import tfpipe
from tfpipe.errors import DecodeError, EncodeError, SchemaError
from tfpipe.features import decoding

SIZE = (6, 5)  # height, width
_RNG = np.random.default_rng(0)


def _save(image: PILImage.Image, fmt: str, **options: object) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **options)
    return buffer.getvalue()


def _pixels(*shape: int, high: int = 256, dtype: type = np.uint8) -> np.ndarray:
    return _RNG.integers(0, high, (*SIZE, *shape), dtype=dtype)


def _palette(**options: object) -> bytes:
    image = PILImage.fromarray(_pixels(high=4), "P")  # 4 colours: stored at 2 bits per pixel
    image.putpalette([255, 0, 0, 0, 255, 0, 0, 0, 255, 10, 20, 30])
    return _save(image, "PNG", **options)


def _animated(fmt: str, **options: object) -> bytes:
    first, second = (PILImage.fromarray(_pixels(3)) for _ in range(2))
    return _save(first, fmt, save_all=True, append_images=[second], **options)


def _sixteen_bit(channels: int) -> bytes:
    if channels == 1:  # Pillow writes mode I;16
        return _save(PILImage.fromarray(_pixels(high=1 << 16, dtype=np.uint16)), "PNG")
    return tf.io.encode_png(_pixels(channels, high=1 << 16, dtype=np.uint16)).numpy()


def _pil(mode: str, fmt: str, *shape: int, **options: object) -> Callable[[], bytes]:
    return lambda: _save(PILImage.fromarray(_pixels(*shape), mode), fmt, **options)


def _rgb_trns() -> bytes:
    image = PILImage.fromarray(_pixels(3, high=2) * 200)
    return _save(image, "PNG", transparency=(200, 0, 200))


def _gif_transparency() -> bytes:
    return _save(PILImage.open(io.BytesIO(_palette())), "GIF", transparency=1)


MODES: dict[str, tuple[str, Callable[[], bytes]]] = {
    "16-bit gray PNG": ("png", lambda: _sixteen_bit(1)),
    "16-bit RGB PNG": ("png", lambda: _sixteen_bit(3)),
    "16-bit RGBA PNG": ("png", lambda: _sixteen_bit(4)),
    "L PNG": ("png", _pil("L", "PNG")),
    "LA PNG": ("png", _pil("LA", "PNG", 2)),
    "1-bit PNG": ("png", lambda: _save(PILImage.fromarray(_pixels(high=2).astype(bool)), "PNG")),
    "P PNG": ("png", _palette),
    "P PNG transparency": ("png", lambda: _palette(transparency=1)),
    "RGB PNG tRNS": ("png", _rgb_trns),
    "RGBA PNG": ("png", _pil("RGBA", "PNG", 4)),
    "animated PNG": ("png", lambda: _animated("PNG")),
    "RGB JPEG": ("jpg", _pil("RGB", "JPEG", 3, quality=90)),
    "gray JPEG": ("jpg", _pil("L", "JPEG", quality=90)),
    "CMYK JPEG": ("jpg", _pil("CMYK", "JPEG", 4, quality=90)),
    "animated GIF": ("gif", lambda: _animated("GIF")),
    "GIF transparency": ("gif", _gif_transparency),
    "RGB BMP": ("bmp", _pil("RGB", "BMP", 3)),
    "32-bit BMP": ("bmp", _pil("RGBA", "BMP", 4)),
}
# Modes that TensorFlow and Pillow cannot decode alike at a channel count: both refuse them.
REFUSED = {1: {"16-bit RGB PNG", "16-bit RGBA PNG", "CMYK JPEG"}}
# TensorFlow cannot decode a GIF to RGBA (InvalidArgumentError); Pillow converts it.
TF_REFUSES = {4: {"animated GIF", "GIF transparency"}}


def _supported(channels: int) -> list[str]:
    skipped = REFUSED.get(channels, set()) | TF_REFUSES.get(channels, set())
    return [name for name in MODES if name not in skipped]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One file per mode, in one class folder; named so that sorted order is MODES order."""
    root = tmp_path_factory.mktemp("modes")
    (root / "all").mkdir()
    paths = {}
    for i, (name, (ext, make)) in enumerate(MODES.items()):
        paths[name] = root / "all" / f"{i:02d}.{ext}"
        paths[name].write_bytes(make())
    return paths


def _folder(files: dict[str, Path], names: list[str], root: Path) -> Path:
    (root / "all").mkdir(parents=True)
    for name in names:
        (root / "all" / files[name].name).symlink_to(files[name])
    return root


@pytest.mark.parametrize("channels", [1, 3, 4])
def test_every_path_gives_the_same_pixels(
    files: dict[str, Path], tmp_path: Path, channels: int
) -> None:
    names = _supported(channels)
    root = _folder(files, names, tmp_path / "folder")
    _assert_every_path_agrees(root, [files[name] for name in names], SIZE, channels, tmp_path)


def _assert_every_path_agrees(
    root: Path, paths: list[Path], size: tuple[int, int], channels: int, tmp_path: Path
) -> None:
    """Image.load of each file equals a SequenceLoader batch, Pipeline over the folder and
    write_tfrecords + read_tfrecords; `paths` are the folder's files in sorted order."""
    source = tfpipe.from_directory(root, image_shape=(*size, channels), class_names=["all"])
    feature = tfpipe.Image(shape=(*size, channels), encoding="png")

    loaded = np.stack([feature.load(path) for path in paths])
    loader = tfpipe.SequenceLoader(
        source, batch_size=len(paths), shuffle=False, rescale=None, dtype="uint8"
    )
    sequence = loader[0][0]
    pipeline = next(iter(tfpipe.Pipeline(source).batch(len(paths)).build()))["image"].numpy()
    schema = tfpipe.Schema({"image": feature, "label": source.schema["label"]})
    written = tfpipe.write_tfrecords(
        source, tmp_path / "out" / "train", schema=schema, shuffle=False, progress=False
    )
    read = np.stack([e["image"].numpy() for e in tfpipe.read_tfrecords(written.metadata_path)])

    results = {"SequenceLoader": sequence, "Pipeline": pipeline, "TFRecords": read}
    for reader, pixels in results.items():
        for path, expected, got in zip(paths, loaded, pixels, strict=True):
            np.testing.assert_array_equal(got, expected, err_msg=f"{path.name}: {reader}")


def _oriented(orientation: int, size: tuple[int, int], little_endian: bool = False) -> bytes:
    """A JPEG with an EXIF orientation tag; Pillow writes big-endian EXIF, so the
    little-endian one is built by hand."""
    image = PILImage.fromarray(_RNG.integers(0, 256, (*size, 3), dtype=np.uint8))
    tags = PILImage.Exif()
    tags[0x0112] = orientation
    exif: bytes | PILImage.Exif = tags
    if little_endian:
        entry = (0x0112).to_bytes(2, "little") + (3).to_bytes(2, "little")
        entry += (1).to_bytes(4, "little") + orientation.to_bytes(4, "little")
        ifd = (1).to_bytes(2, "little") + entry + bytes(4)
        exif = b"Exif\0\0II*\0" + (8).to_bytes(4, "little") + ifd
    return _save(image, "JPEG", quality=90, exif=exif)


@pytest.mark.fault(
    "JPEG with EXIF orientation 2-8",
    reader="Pipeline over a folder",
    outcome="turned upright, as Image.load",
)
def test_exif_orientation_is_applied_on_every_path(tmp_path: Path) -> None:
    root = tmp_path / "oriented"
    (root / "all").mkdir(parents=True)
    paths = []
    for orientation in range(1, 9):
        for little_endian in (False, True):
            path = root / "all" / f"{orientation}{'-ii' if little_endian else ''}.jpg"
            path.write_bytes(_oriented(orientation, (8, 8), little_endian))
            paths.append(path)
    _assert_every_path_agrees(root, sorted(paths), (8, 8), 3, tmp_path)


@pytest.mark.fault(
    "JPEG with EXIF orientation 2-8 in records written elsewhere",
    reader="Pipeline with a map (per-example decode)",
    outcome="turned upright, as Image.load",
)
def test_exif_orientation_is_applied_when_a_map_decodes_per_example(tmp_path: Path) -> None:
    """With a map, the orientations are read per batch and the JPEGs decoded one by one."""
    jpegs = [_oriented(o, (8, 8), little) for o in range(1, 9) for little in (False, True)]
    path = tmp_path / "oriented.tfrecord"
    with tf.io.TFRecordWriter(str(path)) as writer:
        for data in jpegs:
            image = tf.train.Feature(bytes_list=tf.train.BytesList(value=[data]))
            writer.write(
                tf.train.Example(
                    features=tf.train.Features(feature={"image": image})
                ).SerializeToString()
            )
    feature = tfpipe.Image(shape=(8, 8, 3))
    pipeline = (
        tfpipe.Pipeline(str(path), schema=tfpipe.Schema({"image": feature}))
        .options(deterministic=True)
        .map(lambda example: example)
        .batch(len(jpegs))
    )
    assert "decode images per example" in pipeline.explain()
    images = next(iter(pipeline.build()))["image"].numpy()
    for orientation, (data, got) in enumerate(zip(jpegs, images, strict=True)):
        np.testing.assert_array_equal(got, feature.load(data), err_msg=f"{orientation // 2 + 1}")


@pytest.mark.parametrize("orientation", [3, 6, 8])
def test_a_turned_jpeg_has_the_upright_shape(orientation: int) -> None:
    data = _oriented(orientation, SIZE)
    feature = tfpipe.Image(shape=(None, None, 3))
    upright = feature.load(data)
    assert upright.shape[:2] == (SIZE if orientation == 3 else SIZE[::-1])
    np.testing.assert_array_equal(feature.decode_tensor(tf.constant(data)).numpy(), upright)


@pytest.mark.fault(
    "16-bit grayscale PNG", reader="Image.load, SequenceLoader", outcome="high byte, as tf.data"
)
def test_sixteen_bit_png_keeps_the_high_byte_instead_of_clipping_to_white() -> None:
    data = _save(PILImage.fromarray(np.full(SIZE, 0x1234, np.uint16)), "PNG")
    feature = tfpipe.Image(shape=(None, None, 3), encoding="png")
    assert (feature.load(data) == 0x12).all()
    assert (feature.decode_tensor(tf.constant(data)).numpy() == 0x12).all()


@pytest.mark.fault(
    "2-bit palette PNG read as RGBA", reader="Pipeline, read_tfrecords", outcome="alpha 255"
)
def test_low_bit_depth_png_gets_an_opaque_alpha_on_the_tensorflow_path(
    files: dict[str, Path],
) -> None:
    # TensorFlow's own channels=4 sets the alpha of a 2-bit PNG to 3 (and of a 1-bit one to 1).
    data = files["P PNG"].read_bytes()
    assert (tf.io.decode_png(data, channels=4).numpy()[..., 3] == 3).all()
    feature = tfpipe.Image(shape=(None, None, 4), encoding="png")
    assert (feature.decode_tensor(tf.constant(data)).numpy()[..., 3] == 255).all()


@pytest.mark.fault(
    "CMYK JPEG / 16-bit colour PNG to 1 channel",
    reader="Image.load, write_tfrecords",
    outcome="both paths refuse: SchemaError / EncodeError naming the file",
)
@pytest.mark.parametrize("name", sorted(REFUSED[1]))
def test_modes_tensorflow_decodes_differently_are_refused_by_both_paths(
    files: dict[str, Path], tmp_path: Path, name: str
) -> None:
    feature = tfpipe.Image(shape=(None, None, 1), encoding="png")
    with pytest.raises(SchemaError, match="declare 3 channels"):
        feature.load(files[name])
    if name == "CMYK JPEG":
        with pytest.raises(tf.errors.InvalidArgumentError):
            feature.decode_tensor(tf.constant(files[name].read_bytes()))
    root = _folder(files, [name], tmp_path / "one")
    with pytest.raises(EncodeError, match=files[name].name):
        tfpipe.write_tfrecords(
            tfpipe.from_directory(root, image_shape=(None, None, 1), class_names=["all"]),
            tmp_path / "out",
            progress=False,
        )


@pytest.mark.fault(
    "palette BMP (TensorFlow ignores the palette)",
    reader="Pipeline over a folder",
    outcome="named_errors: DecodeError naming the file, not wrong colours",
)
def test_palette_bmp_is_refused_on_the_tensorflow_path(tmp_path: Path) -> None:
    image = PILImage.open(io.BytesIO(_palette())).convert("P")
    data = tf.constant(_save(image, "BMP"))
    for channels in (1, 3, 4):
        with pytest.raises(tf.errors.InvalidArgumentError, match="ignores its palette"):
            tfpipe.Image(shape=(None, None, channels), encoding="png").decode_tensor(data)
    (tmp_path / "a").mkdir()
    path = tmp_path / "a" / "palette.bmp"
    path.write_bytes(data.numpy())
    pipeline = tfpipe.Pipeline(
        tfpipe.from_directory(tmp_path, class_names=["a"]), image_size=(8, 8)
    ).batch(1)
    named = pytest.raises(DecodeError, match=rf"{re.escape(str(path))}.*ignores its palette")
    with named, tfpipe.named_errors(pipeline):
        list(pipeline.build())


def test_tensorflow_decodes_like_pillow_not_with_its_default_fast_idct() -> None:
    image = tfpipe.sources.synthetic._draw("circle", (64, 64), np.random.default_rng(1))
    data = _save(image, "JPEG", quality=95)
    pillow = np.asarray(PILImage.open(io.BytesIO(data)))
    fast = tf.io.decode_jpeg(data).numpy()
    assert np.abs(fast.astype(int) - pillow).max() > 2  # what tfpipe used to give
    decoded = decoding.decode(tf.constant(data), 3).numpy()
    np.testing.assert_array_equal(decoded, pillow)


def test_infer_schema_reads_channels_from_every_mode(
    files: dict[str, Path], tmp_path: Path
) -> None:
    expected = {"16-bit gray PNG": 1, "1-bit PNG": 1, "P PNG": 3, "P PNG transparency": 4}
    for name, channels in expected.items():
        path = tmp_path / f"{channels}-{files[name].stem}.tfrecord"
        image = tf.train.Feature(bytes_list=tf.train.BytesList(value=[files[name].read_bytes()]))
        example = tf.train.Example(features=tf.train.Features(feature={"image": image}))
        with tf.io.TFRecordWriter(str(path)) as writer:
            writer.write(example.SerializeToString())
        assert tfpipe.infer_schema(path)["image"].channels == channels, name


def test_threads_asking_for_a_new_batch_decoder_together_trace_it_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Grain's and the SequenceLoader's threads call `load_batch` at once for a size not
    decoded before: each traced the graph, and TensorFlow warned of excessive retracing."""
    from concurrent.futures import ThreadPoolExecutor

    data = _save(PILImage.fromarray(_RNG.integers(0, 256, (24, 20, 3), np.uint8)), "PNG")
    image = tfpipe.Image(shape=(None, None, 3))
    with caplog.at_level("WARNING", logger="tensorflow"), ThreadPoolExecutor(8) as pool:
        batches = list(pool.map(lambda _: image.load_batch([data], (11, 7)), range(8)))
    assert all(batch is not None and batch.shape == (1, 11, 7, 3) for batch in batches)
    assert not [r for r in caplog.records if "retracing" in r.getMessage()], caplog.text


def test_a_batch_decode_runs_each_image_on_one_thread_with_its_own_pixels() -> None:
    """`decode_batch` (the SequenceLoader's and Grain's graph, `load_batch`) starts every
    image's decode at once, each on one thread, as the Pipeline's parallel map runs them: a
    `tf.map_fn` spread each image's resize and casts over TensorFlow's intra-op threads too,
    whose hand-offs and spinning cost photos up to 0.4 ms of CPU each (docs/performance.md). The
    images of a batch differ in size, format and EXIF orientation, and each is decoded as
    `decode_tensor` decodes it alone."""
    rotated = io.BytesIO()
    exif = PILImage.Exif()
    exif[0x0112] = 6  # turned 90 degrees: stored as (width, height)
    PILImage.fromarray(_RNG.integers(0, 256, (40, 64, 3), np.uint8)).save(
        rotated, format="JPEG", exif=exif
    )
    stored = [
        rotated.getvalue(),
        _save(PILImage.fromarray(_RNG.integers(0, 256, (90, 70, 3), np.uint8)), "JPEG"),
        _save(PILImage.fromarray(_RNG.integers(0, 256, (30, 33), np.uint8)), "JPEG"),
        _save(PILImage.fromarray(_RNG.integers(0, 256, (25, 41, 3), np.uint8)), "PNG"),
    ]
    image = tfpipe.Image()
    batch = tf.function(lambda data: image.decode_batch(data, (12, 10), rescale=1 / 255))
    graph = batch.get_concrete_function(tf.TensorSpec([None], tf.string)).graph
    kinds = {op.type: op for op in graph.get_operations()}
    assert "While" not in kinds and "StatelessWhile" not in kinds  # no tf.map_fn loop
    assert kinds["MapDefun"].get_attr("max_intra_op_parallelism") == 1
    decoded = batch(tf.constant(stored)).numpy()
    assert decoded.shape == (4, 12, 10, 3) and decoded.dtype == np.float32
    for one, data in zip(decoded, stored, strict=True):
        alone = image.decode_tensor(tf.constant(data), (12, 10), rescale=1 / 255).numpy()
        np.testing.assert_array_equal(one, alone)
