"""Faults of the image files themselves: names that are not UTF-8, files that cannot be read."""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image as PILImage

import tfpipe
from tfpipe.errors import DecodeError, EncodeError, TfpipeWarning
from tfpipe.format.metadata import DatasetInfo

SIZE = (8, 8)


def _folder(root: Path, names: dict[str, list[bytes]]) -> Path:
    """Class folders of 16x16 JPEGs whose file names are the given raw bytes."""
    for label, files in names.items():
        os.makedirs(os.fsencode(root / label), exist_ok=True)
        for k, name in enumerate(files):
            path = os.fsdecode(os.fsencode(root / label) + b"/" + name)
            PILImage.fromarray(np.full((16, 16, 3), 30 * k, np.uint8)).save(path, format="JPEG")
    return root


def _pixel_sums(batches: list[np.ndarray]) -> list[int]:
    return sorted(int(image.sum()) for batch in batches for image in batch)


@pytest.mark.fault(
    "image file names that are not UTF-8 (Latin-1 bytes)",
    reader="from_directory: write_tfrecords, Pipeline, SequenceLoader",
    outcome="every image read, the same pixels on every path",
)
def test_file_names_that_are_not_utf8_are_read_on_every_path(tmp_path: Path) -> None:
    names = [b"caf\xe9-%d.jpg" % k for k in range(3)] + [b"plain.jpg"]
    src = tfpipe.from_directory(_folder(tmp_path / "images", {"a": names, "b": names}))
    assert len(src) == 8
    pipeline = tfpipe.Pipeline(src, image_size=SIZE).batch(4).build()
    from_pipeline = _pixel_sums([batch["image"].numpy() for batch in pipeline])
    loader = tfpipe.SequenceLoader(src, batch_size=4, image_size=SIZE, rescale=None, dtype="uint8")
    from_loader = _pixel_sums([loader[i][0] for i in range(len(loader))])
    info = tfpipe.write_tfrecords(src, tmp_path / "out" / "t", progress=False)
    assert info.num_examples == 8
    records = tfpipe.Pipeline(tmp_path / "out" / "t", image_size=SIZE).batch(4).build()
    from_records = _pixel_sums([batch["image"].numpy() for batch in records])
    assert len(from_pipeline) == 8
    assert from_pipeline == from_loader == from_records


def _with_dangling_link(root: Path) -> Path:
    _folder(root, {"a": [b"0.jpg", b"1.jpg"], "b": [b"0.jpg", b"1.jpg"]})
    dangling = root / "a" / "2.jpg"
    dangling.symlink_to(root / "gone.jpg")
    return dangling


@pytest.mark.fault(
    "image file that cannot be read (dangling link)",
    reader="write_tfrecords",
    outcome="EncodeError naming the file; with on_error='skip' counted in the metadata",
)
def test_an_unreadable_file_is_named_by_the_writer_or_counted(tmp_path: Path) -> None:
    dangling = _with_dangling_link(tmp_path / "images")
    src = tfpipe.from_directory(tmp_path / "images")
    with pytest.raises(EncodeError, match=re.escape(str(dangling))):
        tfpipe.write_tfrecords(src, tmp_path / "out" / "t", progress=False)
    with pytest.warns(TfpipeWarning, match="skipped 1 of 5"):
        info = tfpipe.write_tfrecords(src, tmp_path / "out" / "t", on_error="skip", progress=False)
    assert info.num_examples == 4
    assert [s.origin for s in DatasetInfo.load(tmp_path / "out" / "t").skipped] == [str(dangling)]


@pytest.mark.fault(
    "image file that cannot be read (dangling link)",
    reader="SequenceLoader, Pipeline + named_errors",
    outcome="DecodeError naming the file",
)
def test_an_unreadable_file_is_named_by_the_loaders(tmp_path: Path) -> None:
    dangling = _with_dangling_link(tmp_path / "images")
    src = tfpipe.from_directory(tmp_path / "images")
    loader = tfpipe.SequenceLoader(src, batch_size=5, image_size=SIZE, shuffle=False)
    with pytest.raises(DecodeError, match=re.escape(str(dangling))):
        loader[0]
    pipeline = tfpipe.Pipeline(src, image_size=SIZE).batch(5)
    named = pytest.raises(DecodeError, match=re.escape(str(dangling)))
    with named as error, tfpipe.named_errors(pipeline):
        list(pipeline.build())
    assert isinstance(error.value.__cause__, tf.errors.OpError)
