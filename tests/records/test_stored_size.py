"""Images the writer noted to be all of one size ("size" in the metadata's "stored_images"):
a reader picks their JPEG's DCT scale when tracing (no switch of scales), and leaves out the
block means and the resize that would not change a pixel. The pixels are those of the full
decode (the same records read with the size left out of the metadata), for every kind of
size: landing on the target at a DCT scale, needing the bilinear resize after it, the block
means, enlarging, gray."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from matplotlib import cbook
from PIL import Image as PILImage

import tfpipe
from tfpipe.errors import DecodeError
from tfpipe.features.decoding import StoredImages, jpeg_ratio

# (stored height, width, channels) -> target (height, width); the comment: what the decode does
CASES = [
    ((256, 256, 3), (128, 128)),  # 1/2 scale lands on the target: no resize
    ((1024, 1024, 3), (100, 100)),  # 1/8 scale (128), then bilinear
    ((257, 257, 3), (128, 128)),  # 1/2 scale rounds up to 129, then bilinear
    ((300, 200, 3), (64, 64)),  # 1/2 scale (150 x 100), then bilinear
    ((255, 257, 3), (128, 128)),  # full scale, the block means on one side
    ((2048, 2048, 3), (64, 64)),  # 1/8 scale, then the block means
    ((250, 250, 3), (500, 500)),  # enlarged
    ((256, 256, 1), (128, 128)),  # gray
]


def _photo(height: int, width: int, channels: int) -> np.ndarray:
    with cbook.get_sample_data("grace_hopper.jpg") as f:  # a real photograph, 512x600
        photo = PILImage.open(f).convert("RGB" if channels == 3 else "L")
    pixels = np.asarray(photo.resize((width, height), PILImage.Resampling.BICUBIC))
    return pixels if channels == 3 else pixels[..., np.newaxis]


def _write(prefix: Path, shape: tuple[int, int, int]) -> None:
    """Records of 3 JPEGs of `shape` (the photo, flipped and mirrored)."""
    photo = _photo(*shape)
    images = np.stack([photo, photo[::-1], photo[:, ::-1]])
    schema = tfpipe.Schema({"image": tfpipe.Image(shape=shape, encoding="jpeg")})
    source = tfpipe.from_arrays({"image": images}, schema)
    tfpipe.write_tfrecords(source, prefix, shuffle=False, progress=False)


def _metadata(prefix: Path) -> dict:
    return json.loads(prefix.with_suffix(".json").read_text())


def _set_size(prefix: Path, size: list[int] | None) -> None:
    data = _metadata(prefix)
    if size is None:
        del data["stored_images"]["image"]["size"]
    else:
        data["stored_images"]["image"]["size"] = size
    prefix.with_suffix(".json").write_text(json.dumps(data))


def _read(prefix: Path, size: tuple[int, int], rescale: float | None) -> np.ndarray:
    pipeline = tfpipe.Pipeline(prefix, image_size=size, rescale=rescale)
    batch = next(iter(pipeline.options(deterministic=True).batch(8).build()))
    return batch["image"].numpy()


@pytest.mark.parametrize(("shape", "size"), CASES, ids=[f"{s}->{t}" for s, t in CASES])
def test_one_stored_size_decodes_the_pixels_of_the_full_decode(
    tmp_path: Path, shape: tuple[int, int, int], size: tuple[int, int]
) -> None:
    prefix = tmp_path / "train"
    _write(prefix, shape)
    assert _metadata(prefix)["stored_images"]["image"]["size"] == list(shape[:2])
    ratio = jpeg_ratio(shape[:2], size)
    assert f"all {shape[0]}x{shape[1]}, says the metadata: 1/{ratio} scale" in (
        tfpipe.Pipeline(prefix, image_size=size).explain()
    )
    fixed = {rescale: _read(prefix, size, rescale) for rescale in (None, 1 / 255)}
    _set_size(prefix, None)
    for rescale, images in fixed.items():
        full = _read(prefix, size, rescale)
        assert images.shape == full.shape == (3, *size, shape[2])
        np.testing.assert_array_equal(images, full)


def _traced_ops(feature: tfpipe.Image, size: tuple[int, int]) -> set[str]:
    fn = tf.function(lambda data: feature.decode_tensor(data, size, rescale=1 / 255))
    graph = fn.get_concrete_function(tf.TensorSpec([], tf.string)).graph
    functions = graph.as_graph_def().library.function
    return {n.op for n in graph.as_graph_def().node} | {n.op for f in functions for n in f.node_def}


def test_one_stored_size_traces_one_decode_and_no_resize_when_the_scale_lands_on_the_target():
    """256x256 JPEGs to 128x128: one `decode_jpeg` at 1/2 scale, no switch of scales, no
    conditional, no resize; without the size, the switch and the resize are there."""
    known = tfpipe.Image().as_written({"jpeg"}, (256, 256))
    ops = _traced_ops(known, (128, 128))
    assert ops.isdisjoint({"Case", "StatelessCase", "If", "StatelessIf", "ResizeBilinear"}), ops
    assert "DecodeJpeg" in ops
    unknown = _traced_ops(tfpipe.Image().as_written({"jpeg"}), (128, 128))
    assert {"ResizeBilinear", "DecodeJpeg"} <= unknown
    assert not unknown.isdisjoint({"Case", "StatelessCase"})
    assert jpeg_ratio((256, 256), (128, 128)) == 2


def test_images_of_several_sizes_record_no_size(tmp_path: Path) -> None:
    root = tmp_path / "folder"
    (root / "all").mkdir(parents=True)
    PILImage.new("RGB", (16, 16)).save(root / "all" / "a.jpg")
    PILImage.new("RGB", (16, 12)).save(root / "all" / "b.jpg")
    tfpipe.write_tfrecords(
        tfpipe.from_directory(root, class_names=["all"]), tmp_path / "t", progress=False
    )
    assert _metadata(tmp_path / "t")["stored_images"]["image"] == {
        "formats": ["jpeg"],
        "upright": True,
    }
    with pytest.raises(tfpipe.errors.SchemaError, match="size"):
        StoredImages(("jpeg",), True, size=(16, 0))


@pytest.mark.fault(
    'a JPEG of another size than the metadata\'s "stored_images" size',
    reader="Pipeline over records",
    outcome="DecodeError naming the record and the size",
)
def test_a_jpeg_of_another_size_than_the_metadata_says_is_named(tmp_path: Path) -> None:
    prefix = tmp_path / "train"
    _write(prefix, (64, 64, 3))
    _set_size(prefix, [64, 48])
    with pytest.raises(DecodeError, match=r"record 0 .*stored_images\).*64, 48"):
        _read(prefix, (32, 32), None)
