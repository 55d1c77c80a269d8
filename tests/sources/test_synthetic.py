"""The generated datasets the examples, tests and benchmarks use are what they say they are."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image as PILImage

from tfpipe.sources.synthetic import SHAPES, make_segmentation_folder, make_tagged_images


def test_segmentation_masks_hold_class_ids_and_pair_with_their_images(tmp_path: Path) -> None:
    root = make_segmentation_folder(tmp_path, count=6, num_classes=3, size=(48, 40))
    images = sorted(p.stem for p in (root / "images").glob("*.jpg"))
    masks = sorted(p.stem for p in (root / "masks").glob("*.png"))
    assert images == masks and len(images) == 6
    seen = set()
    for stem in masks:
        with PILImage.open(root / "masks" / f"{stem}.png") as mask:
            assert mask.mode == "L" and mask.size == (40, 48)
            values = set(np.unique(np.asarray(mask)).tolist())
        assert 0 in values and values - {0} and values <= {0, 1, 2, 3}
        seen |= values
    assert seen == {0, 1, 2, 3}  # every class appears somewhere in six scenes


def test_tags_name_the_shapes_drawn_and_names_have_no_extension(tmp_path: Path) -> None:
    df = make_tagged_images(tmp_path, count=8, num_classes=4, seed=1)
    assert list(df["image_name"]) == [f"train_{i}" for i in range(8)]
    for name, tags in zip(df["image_name"], df["tags"], strict=True):
        assert (tmp_path / "train-jpg" / f"{name}.jpg").is_file()
        words = tags.split(" ")
        assert words and set(words) <= set(SHAPES[:4]) and len(set(words)) == len(words)
    assert df["tags"].nunique() > 1


@pytest.mark.parametrize("maker", [make_segmentation_folder, make_tagged_images])
def test_scene_makers_refuse_bad_arguments(tmp_path: Path, maker: object) -> None:
    with pytest.raises(ValueError, match=r"num_classes must be in 1\.\.6"):
        maker(tmp_path, num_classes=7)  # type: ignore[operator]
    with pytest.raises(ValueError, match="count must be >= 1"):
        maker(tmp_path, count=0)  # type: ignore[operator]
