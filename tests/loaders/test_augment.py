"""tfpipe.loaders.augment.Joint: one draw moves an image and its mask together, in Pipeline, in
SequenceLoader and on a plain tf.data.Dataset; masks keep their values; seeds reproduce; named
errors."""

from __future__ import annotations

import contextlib
import io
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import keras
import numpy as np
import pytest
import tensorflow as tf

import tfpipe
from tfpipe.errors import DecodeError, SchemaError, TfpipeWarning
from tfpipe.loaders.augment import Joint

SIDE = 24
COUNT = 16
STEP = 10  # pixel value per row (red) and per column (green)
BLOCK = 6  # the mask labels 6x6 blocks: 16 labels
# 16 mask values no average of two neighbouring blocks' values falls on
SPARSE_VALUES = np.array(
    [0, 3, 7, 12, 20, 31, 45, 60, 80, 101, 126, 150, 177, 200, 229, 254], np.uint8
)


def position_image() -> np.ndarray:
    """A (SIDE, SIDE, 3) uint8 image whose red is 10 x row and green 10 x column."""
    rows, cols = np.meshgrid(np.arange(SIDE), np.arange(SIDE), indexing="ij")
    return np.stack([rows * STEP, cols * STEP, np.zeros_like(rows)], -1).astype(np.uint8)


def mask_of(image: np.ndarray) -> np.ndarray:
    """The mask as a function of the image pixels: the label of the 6x6 block of the pixel."""
    rows, cols = image[..., 0].astype(np.int32) // STEP, image[..., 1].astype(np.int32) // STEP
    return (rows // BLOCK) * (SIDE // BLOCK) + cols // BLOCK


def source() -> tfpipe.sources.ArraySource:
    """16 copies of the position image, each with its mask (int32, a Tensor feature)."""
    image = position_image()
    return tfpipe.from_arrays(
        {
            "image": np.stack([image] * COUNT),
            "mask": np.stack([mask_of(image)] * COUNT).astype(np.int32),
            "label": np.arange(COUNT) % 2,
        }
    )


def placement(image: np.ndarray) -> tuple[int, int, bool, bool]:
    """(top, left, flipped left-right, flipped up-down) of an unresized crop of the image."""
    rows, cols = image[..., 0].astype(int) // STEP, image[..., 1].astype(int) // STEP
    return (
        int(rows.min()),
        int(cols.min()),
        bool(cols[0, 0] > cols[0, -1]),
        bool(rows[0, 0] > rows[-1, 0]),
    )


def check_moved_together(images: np.ndarray, masks: np.ndarray) -> set[tuple[int, ...]]:
    """Asserts mask == f(image) pixel by pixel; returns the placements seen."""
    assert images.dtype == np.uint8 and masks.dtype == np.int32
    for image, mask in zip(images, masks, strict=True):
        np.testing.assert_array_equal(mask, mask_of(image))
    return {placement(image) for image in images}


def of_unknown_size(example: dict[str, np.ndarray]) -> tf.data.Dataset:
    """A dataset of one example whose heights and widths the graph does not know."""
    spec = {
        key: tf.TensorSpec((None, None, *array.shape[2:]), tf.as_dtype(array.dtype))
        for key, array in example.items()
    }
    return tf.data.Dataset.from_generator(lambda: iter([example]), output_signature=spec)


JOINT = Joint("image", "mask", flip="horizontal_and_vertical", crop=(16, 12), seed=3)


def pipeline_epochs(joint: Joint, epochs: int = 1) -> list[dict[str, np.ndarray]]:
    ds = tfpipe.Pipeline(source()).shuffle(seed=0).map(joint).batch(COUNT).build()
    return [next(iter(ds.as_numpy_iterator())) for _ in range(epochs)]


def loader_epochs(joint: Joint, epochs: int = 1, seed: int = 0) -> list[tuple[Any, ...]]:
    loader = tfpipe.SequenceLoader(
        source(), batch_size=COUNT, x="image", y="mask", seed=seed, transform=joint,
        dtype="uint8", rescale=None,
    )  # fmt: skip
    batches = []
    for _ in range(epochs):
        batches.append(loader[0])
        loader.on_epoch_end()
    return batches


def test_a_flip_and_crop_move_image_and_mask_together_in_a_pipeline() -> None:
    (batch,) = pipeline_epochs(JOINT)
    assert batch["image"].shape == (COUNT, 16, 12, 3) and batch["mask"].shape == (COUNT, 16, 12)
    seen = check_moved_together(batch["image"], batch["mask"])
    assert len(seen) > COUNT // 2  # different examples, different draws
    assert {flip for *_, flip, _ in seen} == {True, False}
    assert {flip for *_, flip in seen} == {True, False}
    assert {top for top, *_ in seen} != {0} and {left for _, left, *_ in seen} != {0}


def test_a_pipeline_over_written_records_moves_them_together(tmp_path: Path) -> None:
    tfpipe.write_tfrecords(source(), tmp_path / "train", num_shards=2, progress=False)
    ds = tfpipe.Pipeline(str(tmp_path / "train")).shuffle(seed=0).map(JOINT).batch(COUNT)
    batch = next(iter(ds.as_supervised("image", "mask").build().as_numpy_iterator()))
    assert len(check_moved_together(*batch)) > COUNT // 2


def test_a_flip_and_crop_move_image_and_mask_together_in_a_sequence_loader() -> None:
    ((images, masks),) = loader_epochs(JOINT)
    assert images.shape == (COUNT, 16, 12, 3) and masks.shape == (COUNT, 16, 12)
    seen = check_moved_together(images, masks)
    assert len(seen) > COUNT // 2
    assert {flip for *_, flip, _ in seen} == {True, False}


@pytest.mark.slow
def test_a_segmentation_model_trains_on_a_joint_pipeline() -> None:
    pipeline = (
        tfpipe.Pipeline(source(), rescale=1 / 255).shuffle(seed=0).map(JOINT).batch(8)
        .as_supervised("image", "mask")
    )  # fmt: skip
    ds = pipeline.build()
    assert int(ds.cardinality()) == pipeline.batches_per_epoch() == 2
    model = keras.Sequential(
        [keras.Input((16, 12, 3)), keras.layers.Conv2D(16, 3, padding="same")]
    )  # 16 labels per pixel
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(ds, epochs=2, verbose=0, shuffle=False)  # the pipeline shuffles
    assert len(history.history["loss"]) == 2 and np.all(np.isfinite(history.history["loss"]))


def test_a_plain_dataset_maps_with_map_dataset() -> None:
    src = source()
    ds = tf.data.Dataset.from_tensor_slices(
        {"image": src.arrays["image"], "mask": src.arrays["mask"]}
    )
    batch = next(iter(ds.apply(JOINT.map_dataset).batch(COUNT).as_numpy_iterator()))
    assert len(check_moved_together(batch["image"], batch["mask"])) > COUNT // 2
    assert set(batch) == {"image", "mask"}


def test_the_same_seed_repeats_the_draws_and_another_seed_changes_them() -> None:
    one, again = pipeline_epochs(JOINT), pipeline_epochs(JOINT)
    np.testing.assert_array_equal(one[0]["image"], again[0]["image"])
    other = pipeline_epochs(
        Joint("image", "mask", flip="horizontal_and_vertical", crop=(16, 12), seed=4)
    )
    assert not np.array_equal(one[0]["image"], other[0]["image"])
    first, second = loader_epochs(JOINT), loader_epochs(JOINT)
    np.testing.assert_array_equal(first[0][0], second[0][0])
    other_loader = loader_epochs(Joint("image", "mask", crop=(16, 12), seed=4))
    assert not np.array_equal(first[0][0], other_loader[0][0])


def test_every_epoch_draws_anew() -> None:
    epochs = pipeline_epochs(JOINT, epochs=2)
    assert not np.array_equal(epochs[0]["image"], epochs[1]["image"])
    assert not np.array_equal(epochs[0]["label"], epochs[1]["label"])  # the order too
    loader = loader_epochs(JOINT, epochs=2)
    assert not np.array_equal(loader[0][0], loader[1][0])


@pytest.mark.fault(
    "a Joint map after start_at (each epoch of fit(backup_dir=...), a resumed epoch)",
    reader="Pipeline.start_at + augment.Joint",
    outcome="new draws every epoch, the uninterrupted run's draws on resume (was: the same "
    "draws by place every epoch, other draws after a resume)",
)
def test_start_at_draws_anew_every_epoch_and_resumes_with_the_same_draws() -> None:
    pipeline = tfpipe.Pipeline(source()).shuffle(seed=0).map(JOINT).batch(4).repeat(2)
    run = [batch["image"] for batch in pipeline.start_at(0, 0).build().as_numpy_iterator()]
    first, second = np.concatenate(run[:4]), np.concatenate(run[4:])
    placements = [[placement(image) for image in epoch] for epoch in (first, second)]
    assert placements[0] != placements[1]  # was: the same draws, by place, every epoch
    resumed = [batch["image"] for batch in pipeline.start_at(0, 2).build().as_numpy_iterator()]
    assert len(resumed) == len(run) - 2
    for batch, expected in zip(resumed, run[2:], strict=True):  # was: other draws
        np.testing.assert_array_equal(batch, expected)


def test_a_joint_is_random_so_a_cache_goes_before_it() -> None:
    pipeline = tfpipe.Pipeline(source()).map(JOINT)
    with pytest.warns(TfpipeWarning, match=r"after the random map\(Joint\)"):
        plan = pipeline.cache().explain()
    assert plan.index("cache") < plan.index("map(Joint)")
    assert not Joint("image", "mask", flip=None, size=(8, 8)).random


@pytest.mark.parametrize("path", ["tf.data", "numpy"])
@pytest.mark.parametrize(
    "joint",
    [
        Joint("image", "mask", crop_area=(0.2, 0.9), size=(37, 29), seed=1),
        Joint("image", "mask", crop_area=(0.2, 0.9), crop_aspect=(0.5, 2.0), seed=2),
        Joint("image", "mask", flip="vertical", size=(11, 13), seed=3),
    ],
    ids=["random-size-crop-to-37x29", "random-size-crop-back-to-24x24", "resize-to-11x13"],
)
def test_resizes_keep_mask_values_and_stay_aligned(joint: Joint, path: str) -> None:
    """Masks are resized with nearest neighbour (values stay in the original, sparse set: a
    bilinear mix of two labels would leave it) and images bilinearly (uint8 stays uint8), from
    the same crop box: an image painting the mask's blocks agrees with the resized mask except
    along the block edges."""
    labels = mask_of(position_image())
    example = {
        "image": np.repeat((labels * 15)[..., None], 3, axis=-1).astype(np.uint8),
        "mask": SPARSE_VALUES[labels][..., None],
    }
    if path == "numpy":
        outputs = [joint(example, np.random.default_rng(i)) for i in range(COUNT)]
    else:
        ds = tf.data.Dataset.from_tensors(example).repeat(COUNT)
        outputs = list(ds.apply(joint.map_dataset).as_numpy_iterator())
    height, width = joint.output_shape("mask", (SIDE, SIDE, 1))[:2]
    for out in outputs:
        out_image, out_mask = out["image"], out["mask"]
        assert out_image.dtype == np.uint8 and out_mask.dtype == np.uint8
        assert out_mask.shape == (height, width, 1) and out_image.shape == (height, width, 3)
        assert set(np.unique(out_mask)) <= set(SPARSE_VALUES)
        out_labels = np.searchsorted(SPARSE_VALUES, out_mask[..., 0])
        agree = np.mean(np.abs(out_image[..., 0].astype(int) - out_labels * 15) < 8)
        assert agree > 0.75, agree
    draws = {out["image"].tobytes() for out in outputs}
    assert len(draws) > (COUNT // 2 if joint.crop_area else 1)  # crops differ, flips happen


def test_numpy_examples_keep_mask_rank_dtype_and_other_keys() -> None:
    image = position_image()
    mask = mask_of(image).astype(np.int64)
    joint = Joint(masks="mask", crop=(10, 10), seed=0)
    out = joint({"image": image, "mask": mask, "id": 7}, np.random.default_rng(0))
    assert out["id"] == 7 and out["mask"].dtype == np.int64 and out["mask"].shape == (10, 10)
    np.testing.assert_array_equal(out["mask"], mask_of(out["image"]))
    again = joint({"image": image, "mask": mask}, np.random.default_rng(0))
    np.testing.assert_array_equal(out["image"], again["image"])


def test_tensor_examples_take_a_scalar_or_a_stateless_seed() -> None:
    image = tf.constant(position_image())
    example = {"image": image, "mask": tf.constant(mask_of(position_image()))}
    for seed in (tf.constant(5, tf.int64), tf.constant([1, 2], tf.int32)):
        out = JOINT(example, seed)
        assert isinstance(out["image"], tf.Tensor) and out["image"].shape == (16, 12, 3)
        np.testing.assert_array_equal(out["mask"], mask_of(out["image"].numpy()))
        np.testing.assert_array_equal(JOINT(example, seed)["image"], out["image"])
    draws = {JOINT(example, tf.constant(i, tf.int64))["image"].numpy().tobytes() for i in range(8)}
    assert len(draws) > 4


def test_two_images_and_two_masks_share_one_draw() -> None:
    image = position_image()
    mask = mask_of(image).astype(np.int32)
    joint = Joint(["image", "other"], ["mask", "edges"], crop=(12, 12), seed=0)
    for index in range(6):
        out = joint(
            {"image": image, "other": image, "mask": mask, "edges": mask[..., None]},
            np.random.default_rng(index),
        )
        np.testing.assert_array_equal(out["image"], out["other"])
        np.testing.assert_array_equal(out["mask"], out["edges"][..., 0])
        np.testing.assert_array_equal(out["mask"], mask_of(out["image"]))


BLOCK_BOXES = (
    np.array(  # the 6x6 blocks of labels 0, 5, 10 and 15, as fractions of the image
        [[0, 0, 6, 6], [6, 6, 12, 12], [12, 12, 18, 18], [18, 18, 24, 24]], np.float32
    )
    / SIDE
)


@pytest.mark.parametrize("path", ["tf.data", "numpy"])
def test_boxes_follow_the_crop_and_flips(path: str) -> None:
    """Each box ends where its block's pixels end up in the augmented mask; a block cropped
    away leaves a zero-area box."""
    image = position_image()
    example = {"image": image, "mask": mask_of(image), "boxes": BLOCK_BOXES}
    joint = Joint("image", "mask", boxes="boxes", flip="horizontal_and_vertical", crop=(14, 10))
    if path == "numpy":
        outputs = [joint(example, np.random.default_rng(i)) for i in range(COUNT)]
    else:
        ds = tf.data.Dataset.from_tensors(example).repeat(COUNT).apply(joint.map_dataset)
        outputs = list(ds.as_numpy_iterator())
    cropped_away = 0
    for out in outputs:
        assert out["boxes"].dtype == np.float32 and out["boxes"].shape == (4, 4)
        for label, box in zip((0, 5, 10, 15), out["boxes"], strict=True):
            rows, cols = np.nonzero(out["mask"] == label)
            if not len(rows):
                assert box[2] <= box[0] or box[3] <= box[1], box
                cropped_away += 1
                continue
            expected = [
                rows.min() / 14,
                cols.min() / 10,
                (rows.max() + 1) / 14,
                (cols.max() + 1) / 10,
            ]
            np.testing.assert_allclose(box, expected, atol=1e-6)
    assert 0 < cropped_away < 4 * COUNT


def test_output_shape_follows_crop_and_size() -> None:
    assert JOINT.output_shape("image", (24, 24, 3)) == (16, 12, 3)
    assert JOINT.output_shape("label", ()) == ()
    joint = Joint(masks="mask", crop=(16, 16), size=(8, 8))
    assert joint.output_shape("mask", (24, 24)) == (8, 8)
    assert Joint(crop_area=(0.5, 1)).output_shape("image", (24, 20, 3)) == (24, 20, 3)


@pytest.mark.fault(
    "a mask key the example does not have",
    reader="augment.Joint",
    outcome="SchemaError naming the key",
)
def test_a_missing_key_is_named_in_a_pipeline_and_a_loader(tmp_path: Path) -> None:
    joint = Joint("image", "segmentation", seed=0)
    with pytest.raises(
        SchemaError,
        match=r"key 'segmentation' is not in the example; it has \['image', 'label', 'mask'\]",
    ):
        tfpipe.Pipeline(source()).map(joint).build()
    loader = tfpipe.SequenceLoader(source(), x="image", y="mask", transform=joint)
    with pytest.raises(
        DecodeError,
        match=r"transform failed on example \d+: SchemaError: .*'segmentation' is not in",
    ):
        loader[0]


@pytest.mark.fault(
    "image and mask of different height x width",
    reader="augment.Joint",
    outcome="SchemaError naming both keys and sizes (unknown sizes in tf.data: "
    "InvalidArgumentError naming both keys)",
)
def test_misaligned_image_and_mask_are_named() -> None:
    joint = Joint("image", "mask", crop=(8, 8), seed=0)
    small = np.zeros((12, 12), np.int32)
    with pytest.raises(
        SchemaError,
        match=r"image 'image' is 24x24 but mask 'mask' is 12x12: a joint crop needs them aligned",
    ):
        joint({"image": position_image(), "mask": small}, np.random.default_rng(0))

    ds = of_unknown_size({"image": position_image(), "mask": small}).apply(joint.map_dataset)
    with pytest.raises(
        tf.errors.InvalidArgumentError,
        match=r"image `image` and mask `mask` differ in height x width",
    ):
        next(iter(ds))


@pytest.mark.fault(
    "a crop larger than the image",
    reader="augment.Joint",
    outcome="SchemaError naming the crop, the key and its size (unknown sizes in tf.data: "
    "InvalidArgumentError naming them)",
)
def test_a_crop_larger_than_the_image_is_named() -> None:
    joint = Joint("image", "mask", crop=(30, 8), seed=0)
    with pytest.raises(SchemaError, match=r"crop 30x8 is larger than 'image' of 24x24"):
        tfpipe.Pipeline(source()).map(joint).build()

    ds = of_unknown_size({"image": position_image()})
    with pytest.raises(
        tf.errors.InvalidArgumentError, match=r"crop 30x8 is larger than `image` of a smaller"
    ):
        next(iter(ds.apply(Joint(crop=(30, 8)).map_dataset)))


@pytest.mark.fault(
    "a float mask, a batched image, pixel or malformed boxes",
    reader="augment.Joint",
    outcome="SchemaError naming the key and the fix",
)
def test_a_float_mask_or_a_batch_is_named() -> None:
    image = position_image()
    with pytest.raises(SchemaError, match=r"mask 'mask' has dtype float32; masks must be integer"):
        JOINT(
            {"image": image, "mask": np.zeros((SIDE, SIDE), np.float32)}, np.random.default_rng(0)
        )
    with pytest.raises(
        SchemaError,
        match=r"image 'image' must be \(height, width, channels\); got shape \(2, 24, 24, 3\)"
        r". Augment examples before batching",
    ):
        Joint()({"image": np.stack([image] * 2)}, np.random.default_rng(0))
    with pytest.raises(SchemaError, match=r"got shape \(24, 24\). Give it a channel axis"):
        Joint()({"image": image[..., 0]}, np.random.default_rng(0))
    with pytest.raises(SchemaError, match=r"boxes 'boxes' must be floats of shape \(\.\.\., 4\)"):
        Joint(boxes="boxes")(
            {"image": image, "boxes": np.zeros((2, 4), int)}, np.random.default_rng(0)
        )
    with pytest.raises(SchemaError, match=r"got float32 of shape \(2, 3\). Divide pixel"):
        Joint(boxes="b")(
            {"image": image, "b": np.zeros((2, 3), np.float32)}, np.random.default_rng(0)
        )
    with pytest.raises(SchemaError, match=r"example dicts .* got ndarray"):
        Joint()(image, np.random.default_rng(0))  # type: ignore[arg-type]


@pytest.mark.fault(
    "a bad Joint argument (crop, crop_area, flip, seed, keys)",
    reader="augment.Joint",
    outcome="ValueError naming the argument and the value",
)
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"crop": (0, 8)},
            r"crop must be \(height, width\), two positive ints. Received: crop=\(0, 8\)",
        ),
        ({"size": 8}, r"size must be \(height, width\).*Received: size=8"),
        (
            {"crop_area": (0.5, 1.5)},
            r"crop_area must be \(low, high\) with 0 < low <= high and at most 1",
        ),
        ({"crop_area": (0.9, 0.5)}, r"Received: crop_area=\(0.9, 0.5\)"),
        ({"crop_aspect": (0, 1)}, r"crop_aspect must be .*Received: crop_aspect=\(0, 1\)"),
        (
            {"crop": (8, 8), "crop_area": (0.5, 1)},
            r"crop \(a fixed size\) and crop_area \(a random size\) exclude each other",
        ),
        ({"flip": "left_right"}, r"flip must be 'horizontal', .*Received: flip='left_right'"),
        ({"seed": -1}, r"seed must be a non-negative int or None. Received: seed=-1"),
        ({"masks": "image"}, r"each key must be named once.*masks='image'"),
        ({"masks": [""]}, r"masks must be a feature name or a list of names"),
        ({"images": ()}, r"at least one image or mask key"),
        ({"images": (), "boxes": "boxes"}, r"at least one image or mask key .*boxes are cropped"),
        ({"boxes": "image"}, r"each key must be named once.*boxes='image'"),
    ],
)
def test_bad_arguments_are_named(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Joint(**kwargs)


def test_a_seed_is_drawn_once_when_none_is_given_and_kept_through_pickle() -> None:
    joint = Joint(crop=(8, 8))
    assert isinstance(joint.seed, int) and joint.seed >= 0
    assert f"seed={joint.seed}" in repr(joint)
    assert pickle.loads(pickle.dumps(joint)) == joint  # for SequenceLoader worker processes


DIGESTS = """
import hashlib
import numpy as np, tensorflow as tf
import tfpipe
from tfpipe.loaders.augment import Joint
def digest(*arrays):
    print(hashlib.sha256(b"".join(np.asarray(a).tobytes() for a in arrays)).hexdigest())
images = np.arange(16 * 24 * 24 * 3).reshape(16, 24, 24, 3).astype(np.uint8)
masks = np.arange(16 * 24 * 24).reshape(16, 24, 24).astype(np.int32) % 5
ds = tf.data.Dataset.from_tensor_slices({"image": images, "mask": masks})
joint = Joint("image", "mask", flip="horizontal_and_vertical", crop_area=(0.3, 1), seed=3)
epochs = ds.apply(joint.map_dataset).batch(16)
for epoch in range(2):  # each iteration of the dataset is an epoch
    batch = next(iter(epochs))
    digest(batch["image"], batch["mask"])
source = tfpipe.from_arrays({"image": images, "mask": masks[..., None]})
loader = tfpipe.SequenceLoader(source, x="image", y="mask", batch_size=16, seed=0,
                               transform=joint, dtype="uint8", rescale=None)
for epoch in range(2):
    digest(*loader[0])
    loader.on_epoch_end()
"""


def digests_here() -> list[str]:
    """The digests of DIGESTS (two epochs of a dataset, two of a loader), in this process."""
    with contextlib.redirect_stdout(io.StringIO()) as here:
        exec(DIGESTS, {})
    return here.getvalue().split()[-4:]


@pytest.fixture(scope="module")
def digests_of_a_fresh_process() -> list[str]:
    """The digests of DIGESTS in a new process, where no global seed is set."""
    return subprocess.run(
        [sys.executable, "-c", DIGESTS], capture_output=True, text=True, timeout=120, check=True
    ).stdout.split()[-4:]


@pytest.mark.slow
def test_the_same_seed_gives_the_same_draws_in_another_process(
    digests_of_a_fresh_process: list[str],
) -> None:
    assert digests_here() == digests_of_a_fresh_process
    dataset_0, dataset_1, loader_0, loader_1 = digests_of_a_fresh_process
    assert dataset_0 != dataset_1 and loader_0 != loader_1  # every epoch draws anew


@pytest.mark.slow
@pytest.mark.fault(
    "a global seed set before a seeded Joint (tf.random.set_seed, keras.utils.set_random_seed)",
    reader="augment.Joint.map_dataset, SequenceLoader(transform=joint)",
    outcome="the same draws as without it (the Joint's seed alone decides them)",
)
@pytest.mark.parametrize("set_seed", [tf.random.set_seed, keras.utils.set_random_seed])
def test_a_global_seed_does_not_change_the_draws_of_a_seeded_joint(
    set_seed: Any, digests_of_a_fresh_process: list[str], global_seeds: None
) -> None:
    set_seed(123)
    assert digests_here() == digests_of_a_fresh_process
