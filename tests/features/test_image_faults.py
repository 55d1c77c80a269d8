"""Corrupt JPEGs and decompression bombs end in named, skippable errors on every image path."""

from __future__ import annotations

import io
import re
import warnings
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image as PILImage

import tfpipe
from tfpipe.cli.parser import main
from tfpipe.errors import DecodeError, EncodeError, TfpipeWarning
from tfpipe.features import decoding, imaging
from tfpipe.sources.synthetic import make_image_folder


def _jpeg(seed: int, size: tuple[int, int] = (48, 64)) -> bytes:
    image = tfpipe.sources.synthetic._draw("circle", size, np.random.default_rng(seed))
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=90, progressive=seed % 3 == 0)
    return buffer.getvalue()


def _mutate(data: bytes, rng: np.random.Generator) -> bytes:
    """Damages the entropy-coded body only: the header and the end marker stay intact."""
    body = bytearray(data)
    low, high = data.find(b"\xff\xda") + 20, len(data) - 2
    start = int(rng.integers(low, high - 16))
    kind = rng.integers(3)
    if kind == 0:  # garbage
        end = int(rng.integers(start + 1, high))
        body[start:end] = rng.integers(0, 256, end - start, dtype=np.uint8).tobytes()
    elif kind == 1:  # a few bit flips
        for position in rng.integers(low, high, 3):
            body[position] ^= 1 << int(rng.integers(8))
    else:  # a block of zeros
        body[start : start + 64] = bytes(len(body[start : start + 64]))
    return bytes(body[:high]) + data[-2:]


def _tensorflow_accepts(data: bytes) -> bool:
    try:
        tf.io.decode_jpeg(data, channels=3, dct_method="INTEGER_ACCURATE")
        return True
    except tf.errors.InvalidArgumentError:
        return False


def _pillow_accepts(data: bytes) -> bool:
    try:
        PILImage.open(io.BytesIO(data)).load()
        return True
    except OSError:
        return False


def _check_accepts(data: bytes) -> bool:
    try:
        decoding.check_decodes(data, "jpeg")
        return True
    except EncodeError:
        return False


@pytest.fixture(scope="module")
def mutated() -> list[bytes]:
    rng = np.random.default_rng(0)
    originals = [_jpeg(seed) for seed in range(6)]
    return [_mutate(originals[i % len(originals)], rng) for i in range(240)]


@pytest.fixture
def sneaky(mutated: list[bytes]) -> bytes:
    """A corrupt JPEG Pillow decodes without a word (it ignores libjpeg's "corrupt data"
    warnings) and TensorFlow rejects."""
    return next(d for d in mutated if _pillow_accepts(d) and not _tensorflow_accepts(d))


@pytest.fixture
def noisy(mutated: list[bytes]) -> bytes:
    """A JPEG with a garbage body that TensorFlow and Pillow both decode (to noise), though
    libjpeg reports corrupt data."""
    return next(
        d
        for d in mutated
        if _tensorflow_accepts(d) and _pillow_accepts(d) and decoding.jpeg_warning(d) is not None
    )


def test_the_write_check_rejects_what_tensorflow_rejects_or_libjpeg_warns_of(
    mutated: list[bytes],
) -> None:
    verdicts = [
        (_tensorflow_accepts(d), decoding.jpeg_warning(d) is None, _check_accepts(d))
        for d in mutated
    ]
    assert all(check_ok == (tf_ok and clean) for tf_ok, clean, check_ok in verdicts)
    assert 20 < sum(not tf_ok for tf_ok, *_ in verdicts) < len(mutated)  # both kinds are tried
    assert sum(tf_ok and not clean for tf_ok, clean, _ in verdicts) > 5  # TF decodes to noise


@pytest.mark.fault(
    "JPEG body garbage TensorFlow and Pillow decode (libjpeg: corrupt data)",
    reader="write_tfrecords (copy), then tfpipe.verify",
    outcome="EncodeError naming the file; verify names the record",
)
def test_a_garbage_body_jpeg_tensorflow_decodes_is_refused_and_verify_names_it(
    tmp_path: Path, noisy: bytes
) -> None:
    assert tf.io.decode_jpeg(noisy).shape[:2] == (48, 64)  # TensorFlow would train on noise
    images = make_image_folder(tmp_path / "images", num_classes=2, per_class=2, size=(48, 64))
    bad = images / "circle" / "zz-noise.jpg"
    bad.write_bytes(noisy)
    source = tfpipe.from_directory(images)
    with pytest.raises(EncodeError, match=r"corrupt JPEG: libjpeg reports .*zz-noise\.jpg"):
        tfpipe.write_tfrecords(source, tmp_path / "a" / "train", progress=False)
    prefix = tmp_path / "b" / "train"
    info = tfpipe.write_tfrecords(source, prefix, check_copies=False, shuffle=False, progress=False)
    assert info.num_examples == 5  # check_copies=False skips the check, as asked
    report = tfpipe.verify(prefix, progress=False)
    assert not report.ok and len(report.faults) == 1
    assert re.search(r"record \d+ of .*train-0000\d-of.*'image': corrupt JPEG", str(report))


@pytest.mark.fault(
    "JPEG body garbage, header and end marker intact",
    reader="write_tfrecords (copy)",
    outcome="EncodeError naming the file; skip counts it",
)
def test_writer_refuses_a_corrupt_jpeg_it_would_copy_byte_for_byte(
    tmp_path: Path, sneaky: bytes
) -> None:
    assert imaging.copyable(sneaky, "jpeg", (None, None), 3)  # the header looks fine
    images = make_image_folder(tmp_path / "images", num_classes=2, per_class=2, size=(48, 64))
    bad = images / "circle" / "zz-bad.jpg"
    bad.write_bytes(sneaky)
    source = tfpipe.from_directory(images)
    with pytest.raises(EncodeError, match=r"corrupt JPEG.*zz-bad\.jpg") as raised:
        tfpipe.write_tfrecords(source, tmp_path / "a" / "train", progress=False)
    assert isinstance(raised.value.__cause__, EncodeError)
    with pytest.warns(TfpipeWarning, match="skipped 1 of 5"):
        info = tfpipe.write_tfrecords(
            source, tmp_path / "b" / "train", on_error="skip", progress=False
        )
    assert [s.origin for s in info.skipped] == [str(bad)]
    assert len(list(tfpipe.read_tfrecords(info.metadata_path))) == info.num_examples == 4


@pytest.mark.fault(
    "corrupt JPEG written with check_copies=False",
    reader="write_tfrecords, then tfpipe.verify and Pipeline",
    outcome="stored as asked; verify and named_errors name the record",
)
def test_check_copies_false_stores_a_corrupt_jpeg_that_verify_and_training_name(
    tmp_path: Path, sneaky: bytes
) -> None:
    images = make_image_folder(tmp_path / "images", num_classes=2, per_class=2, size=(48, 64))
    (images / "circle" / "zz-bad.jpg").write_bytes(sneaky)
    source = tfpipe.from_directory(images)
    prefix = tmp_path / "out" / "train"
    info = tfpipe.write_tfrecords(source, prefix, check_copies=False, progress=False)
    assert info.num_examples == 5  # not checked, so not refused: the caller said so
    report = tfpipe.verify(prefix, progress=False)
    assert not report.ok and "train-0000" in str(report)
    pipeline = tfpipe.Pipeline(prefix, image_size=(48, 64)).batch(5)
    named = pytest.raises(DecodeError, match=r"train-0000\d-of-0000\d\.tfrecord")
    with named, tfpipe.named_errors(pipeline):
        list(pipeline.build().unbatch())  # a derived dataset: named_errors names it
    with pytest.raises(DecodeError, match=r"record \d of .*train-0000\d-of-0000\d\.tfrecord"):
        for _ in pipeline.build():  # the built dataset's own loop names it
            pass
    assert main(["write", str(images), str(tmp_path / "cli" / "train")]) == 2
    assert main(["write", str(images), str(tmp_path / "cli" / "train"), "--no-check-copies"]) == 0
    with pytest.raises(TypeError, match="check_copies must be True or False"):
        tfpipe.write_tfrecords(source, prefix, check_copies="no", progress=False)  # type: ignore[arg-type]


class _Files:
    """A source of image files in a given order, one class."""

    def __init__(self, paths: list[Path]) -> None:
        self.paths = paths
        self.schema = tfpipe.Schema(
            {"image": tfpipe.Image(), "label": tfpipe.ClassLabel(names=["circle"])}
        )

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> dict[str, object]:
        return {"image": str(self.paths[index]), "label": 0}

    def origin(self, index: int) -> str:
        return str(self.paths[index])


def test_one_graph_call_checks_a_chunk_and_fails_on_any_bad_image(mutated: list[bytes]) -> None:
    bad = next(d for d in mutated if not _tensorflow_accepts(d))
    good = [_jpeg(seed) for seed in range(31)]
    assert decoding.all_decode([(d, "jpeg") for d in good])
    assert not decoding.all_decode([(d, "jpeg") for d in [*good[:20], bad, *good[20:]]])
    assert decoding.all_decode([])
    png = _encoded("PNG", (40, 30))
    damaged = bytearray(png)
    damaged[damaged.find(b"IDAT") + 20] ^= 0xFF
    assert decoding.all_decode([(good[0], "jpeg"), (png, "png")] * 20)  # two groups, padded
    assert not decoding.all_decode([(good[0], "jpeg")] * 40 + [(bytes(damaged), "png")])


@pytest.mark.fault(
    "one corrupt JPEG among good ones in a write chunk",
    reader="write_tfrecords (copy)",
    outcome="EncodeError naming only it; skip counts only it",
)
def test_a_chunk_with_one_corrupt_jpeg_names_exactly_that_file(
    tmp_path: Path, sneaky: bytes
) -> None:
    images = make_image_folder(tmp_path / "images", num_classes=1, per_class=40, size=(48, 64))
    paths = sorted(images.glob("*/*.jpg"))
    bad = images / "circle" / "bad.jpg"
    bad.write_bytes(sneaky)
    missing = images / "circle" / "missing.jpg"
    # Both in the first chunk of 32, among good files; the corrupt one comes first, as its
    # error must (the check is deferred to the end of the chunk, the missing file is not).
    source = _Files([*paths[:10], bad, *paths[10:20], missing, *paths[20:]])
    with pytest.raises(EncodeError, match=r"corrupt JPEG") as raised:
        tfpipe.write_tfrecords(source, tmp_path / "a" / "train", shuffle=False, progress=False)
    assert "bad.jpg" in str(raised.value) and "missing" not in str(raised.value)

    with pytest.warns(TfpipeWarning, match="skipped 2 of 42"):
        info = tfpipe.write_tfrecords(
            source, tmp_path / "b" / "train", on_error="skip", progress=False
        )
    assert [s.origin for s in info.skipped] == [str(bad), str(missing)]
    assert "corrupt JPEG" in info.skipped[0].error
    records = tf.data.TFRecordDataset([str(f) for f in info.files]).as_numpy_iterator()
    stored = [info.schema.stored(record)["image"] for record in records]
    assert sorted(stored) == sorted(p.read_bytes() for p in paths)  # every good one, unchanged


@pytest.mark.fault(
    "PNG body damaged, header and IEND intact",
    reader="write_tfrecords (copy)",
    outcome="EncodeError naming the file",
)
def test_writer_refuses_a_corrupt_png_it_would_copy(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    tfpipe.sources.synthetic._draw("circle", (32, 32), np.random.default_rng(0)).save(buffer, "PNG")
    damaged = bytearray(buffer.getvalue())
    damaged[damaged.find(b"IDAT") + 100] ^= 0xFF
    (tmp_path / "images" / "circle").mkdir(parents=True)
    (tmp_path / "images" / "circle" / "bad.png").write_bytes(bytes(damaged))
    assert imaging.copyable(bytes(damaged), "png", (None, None), 3)  # the header looks fine
    schema = tfpipe.Schema(
        {"image": tfpipe.Image(encoding="png"), "label": tfpipe.ClassLabel(names=["circle"])}
    )
    with pytest.raises(EncodeError, match=r"corrupt PNG.*bad\.png"):
        tfpipe.write_tfrecords(
            tfpipe.from_directory(tmp_path / "images", class_names=["circle"]),
            tmp_path / "out",
            schema=schema,
            progress=False,
        )


def _encoded(fmt: str, size: tuple[int, int]) -> bytes:
    buffer = io.BytesIO()
    PILImage.new("RGB", size, (10, 20, 30)).save(buffer, format=fmt)
    return buffer.getvalue()


@pytest.fixture
def limit(monkeypatch: pytest.MonkeyPatch) -> int:
    """Pillow's decompression-bomb limit, lowered to 1000 pixels for the test."""
    monkeypatch.setattr(PILImage, "MAX_IMAGE_PIXELS", 1000)
    return 1000


@pytest.mark.fault(
    "decompression bomb (> PIL.Image.MAX_IMAGE_PIXELS)",
    reader="Image.load",
    outcome="DecodeError, no Pillow warning",
)
@pytest.mark.parametrize(
    ("fmt", "side"),
    # 40x40 is in Pillow's warning band (1-2x the limit), 50x50 in its error band (> 2x);
    # TIFF headers are not read ahead of Pillow, which warns in the first band.
    [(f, s) for f in ("JPEG", "PNG", "GIF", "BMP") for s in (40, 50)] + [("TIFF", 50)],
)
def test_bomb_is_a_decode_error_in_every_format(limit: int, fmt: str, side: int) -> None:
    data = _encoded(fmt, (side, side))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(DecodeError, match=r"decompression.bomb.*MAX_IMAGE_PIXELS"):
            tfpipe.Image().load(data)


@pytest.mark.fault(
    "decompression bomb in a folder",
    reader="write_tfrecords, SequenceLoader, tfpipe write",
    outcome="named error; skip counts it; CLI exit 2",
)
@pytest.mark.parametrize("fmt", ["PNG", "JPEG"])  # a JPEG would be copied without Pillow
def test_bomb_is_named_and_skippable_on_every_pillow_path(
    tmp_path: Path, limit: int, capsys: pytest.CaptureFixture[str], fmt: str
) -> None:
    images = make_image_folder(tmp_path / "images", num_classes=2, per_class=2, size=(16, 16))
    bomb = images / "circle" / f"zz-bomb.{fmt.lower()}"
    bomb.write_bytes(_encoded(fmt, (50, 50)))
    source = tfpipe.from_directory(images)

    with pytest.raises(EncodeError, match=rf"decompression-bomb limit.*{bomb.name}"):
        tfpipe.write_tfrecords(source, tmp_path / "a" / "train", progress=False)
    with pytest.warns(TfpipeWarning, match="skipped 1 of 5"):
        info = tfpipe.write_tfrecords(
            source, tmp_path / "b" / "train", on_error="skip", progress=False
        )
    assert [s.origin for s in info.skipped] == [str(bomb)]

    loader = tfpipe.SequenceLoader(source, batch_size=5, image_size=(16, 16), shuffle=False)
    with pytest.raises(DecodeError, match=rf"decompression-bomb limit.*{bomb.name}"):
        loader[0]

    assert main(["write", str(images), str(tmp_path / "c" / "train")]) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("tfpipe")]
    assert len(lines) == 1 and "Traceback" not in err
    assert lines[0].startswith("tfpipe write: error: ") and bomb.name in lines[0]


@pytest.mark.fault(
    "pixel limit lowered after a loader's first batch",
    reader="SequenceLoader (batch decode graph), Pipeline (built again)",
    outcome="DecodeError naming the file and the limit",
)
def test_a_limit_lowered_after_a_first_batch_still_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    images = make_image_folder(tmp_path / "images", num_classes=2, per_class=2, size=(16, 16))
    (images / "circle" / "zz-bomb.png").write_bytes(_encoded("PNG", (50, 50)))  # 2500 pixels
    source = tfpipe.from_directory(images)
    loader = tfpipe.SequenceLoader(source, batch_size=5, image_size=(16, 16), shuffle=False)
    pipeline = tfpipe.Pipeline(source, image_size=(16, 16)).batch(5)
    assert loader[0][0].shape == (5, 16, 16, 3)  # under Pillow's own limit: decoded (traced)
    assert [len(b["image"]) for b in pipeline.build()] == [5]
    monkeypatch.setattr(PILImage, "MAX_IMAGE_PIXELS", 1000)
    with pytest.raises(DecodeError, match=r"decompression-bomb limit.*zz-bomb\.png"):
        loader[0]
    with pytest.raises(DecodeError, match=r"zz-bomb\.png.*decompression-bomb limit"):
        for _ in pipeline.build():
            pass


@pytest.mark.fault(
    "image above the decompression-bomb limit in a folder and in records",
    reader="Pipeline (tf.data decode)",
    outcome="DecodeError naming the file / record and the limit",
)
def test_pipeline_refuses_an_image_above_the_pixel_limit(tmp_path: Path, limit: int) -> None:
    images = make_image_folder(tmp_path / "images", num_classes=2, per_class=2, size=(16, 16))
    bomb = images / "circle" / "zz-bomb.png"
    bomb.write_bytes(_encoded("PNG", (50, 50)))  # 2500 pixels, the limit 1000
    pipeline = tfpipe.Pipeline(tfpipe.from_directory(images), image_size=(16, 16)).batch(5)
    with pytest.raises(DecodeError, match=r"zz-bomb\.png.*decompression-bomb limit"):
        for _ in pipeline.build():
            pass
    prefix = tmp_path / "train"
    schema = tfpipe.Schema(
        {"image": tfpipe.Image(encoding="png"), "label": tfpipe.ClassLabel(names=["a"])}
    )
    with tf.io.TFRecordWriter(f"{prefix}-00000-of-00001.tfrecord") as writer:
        for size in [(16, 16), (50, 50), (16, 16)]:
            feature = {
                "image": tf.train.Feature(
                    bytes_list=tf.train.BytesList(value=[_encoded("PNG", size)])
                ),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[0])),
            }  # not schema.encode, which refuses the bomb
            example = tf.train.Example(features=tf.train.Features(feature=feature))
            writer.write(example.SerializeToString())
    named = pytest.raises(DecodeError, match=r"record 1 of .*decompression-bomb limit")
    with named, pytest.warns(TfpipeWarning, match="sizes and checksums cannot be checked"):
        records = tfpipe.Pipeline(f"{prefix}-*", schema=schema, image_size=(16, 16))
        for _ in records.batch(3).build():
            pass
