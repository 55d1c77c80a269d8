"""Keras preprocessing layers in `Pipeline.map` on every Keras backend, seeded by the Pipeline;
and what Keras says when given an unbuilt Pipeline."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import keras
import keras_layers_run
import numpy as np
import pytest
import tensorflow as tf

import tfpipe
from tfpipe.errors import SchemaError, TfpipeWarning
from with_backend import other_backends, run_with_backend

RUN = Path(__file__).with_name("keras_layers_run.py")
FIT_FIX = "unbuilt: model.fit takes pipeline.build()"


@pytest.fixture(scope="module")
def on_tensorflow() -> dict[str, Any]:
    """The observations in this process, where Keras runs on TensorFlow."""
    assert keras.backend.backend() == "tensorflow"
    return keras_layers_run.observe()


def check(run: dict[str, Any]) -> None:
    """What the observations of one backend must show."""
    assert run["shape"] == [None, keras_layers_run.CROP, keras_layers_run.CROP, 3]
    assert run["dtype"] == "float32"
    # one draw per example, not per batch: 16 copies of one image come out different
    assert run["distinct"] == {
        "RandomFlip": 2,  # flipped or not
        "RandomCrop": 12,  # of 25 places
        "RandomRotation": 16,
        "all four": 16,
    }
    assert run["same_seed_same"] and run["epochs_differ"] and run["other_seed_differs"]
    assert run["rescaling_equal"]  # Rescaling(1/255) gives Pipeline(rescale=1/255)'s images
    assert run["resumed_as_uninterrupted"]
    assert FIT_FIX in run["fit_error"] and "Unrecognized data type" in run["fit_error"]


def test_keras_layers_on_tensorflow_draw_per_example_from_the_pipeline_seed(
    on_tensorflow: dict[str, Any],
) -> None:
    check(on_tensorflow)


@pytest.mark.slow
@pytest.mark.parametrize("backend", other_backends())
def test_keras_layers_draw_the_same_on_jax_and_torch(
    on_tensorflow: dict[str, Any], backend: str
) -> None:
    result = run_with_backend(RUN, backend)
    assert result.returncode == 0, result.stderr[-3000:]
    run = json.loads(result.stdout.splitlines()[-1])
    assert run["backend"] == backend
    check(run)
    assert run["digest"] == on_tensorflow["digest"]  # the same TensorFlow ops, the same seeds


def images(**features: Any) -> Any:
    return tfpipe.from_arrays(
        {"image": np.zeros((4, 8, 8, 3), np.uint8), "label": np.arange(4), **features}
    )


def stages(pipeline: tfpipe.Pipeline) -> list[str]:
    return [line.split(". ", 1)[1].split(" ")[0] for line in pipeline.explain().splitlines()]


def test_a_layer_that_only_rescales_is_not_random_so_a_cache_may_follow_it() -> None:
    scaled = tfpipe.Pipeline(images()).map(keras.layers.Rescaling(1 / 255)).cache()
    assert stages(scaled)[-4:-2] == ["map(keras", "cache"]
    flipped = tfpipe.Pipeline(images()).map(keras.layers.RandomFlip()).cache()
    with pytest.warns(TfpipeWarning, match="random map.keras random_flip.* before it"):
        assert stages(flipped)[-5:-2] == ["cache", "unbatch", "map(keras"]


def test_keys_choose_the_features_and_each_draws_on_its_own() -> None:
    source = images(other=np.zeros((4, 8, 8, 3), np.uint8))
    p = tfpipe.Pipeline(source).shuffle(seed=0).map(keras.layers.RandomRotation(0.3), keys="other")
    example = next(iter(p.build()))
    assert example["image"].dtype == tf.uint8 and example["other"].dtype == tf.float32
    both = tfpipe.Pipeline(source).shuffle(seed=0).map(keras.layers.RandomCrop(4, 4))
    assert {k: tuple(v.shape) for k, v in both.build().element_spec.items()} == {
        "image": (4, 4, 3),
        "other": (4, 4, 3),  # both Image features by default
        "label": (),
    }


def test_a_random_layer_with_masks_and_no_keys_is_refused() -> None:
    schema = tfpipe.Schema(
        {"image": tfpipe.Image((8, 8, 3), encoding="raw"), "mask": tfpipe.Mask((8, 8, 1))}
    )
    source = tfpipe.from_arrays(
        {"image": np.zeros((4, 8, 8, 3), np.uint8), "mask": np.zeros((4, 8, 8, 1), np.uint8)},
        schema,
    )
    with pytest.raises(ValueError, match=r"masks \['mask'\].*augment.Joint"):
        tfpipe.Pipeline(source).map(keras.layers.RandomFlip())
    tfpipe.Pipeline(source).map(keras.layers.Rescaling(1 / 255))  # not random: images only
    tfpipe.Pipeline(source).map(keras.layers.RandomFlip(), keys="image")  # said so


def test_wrong_layers_and_keys_are_named() -> None:
    p = tfpipe.Pipeline(images())
    with pytest.raises(TypeError, match=r"'noise'.*own keras\.random\.SeedGenerator"):
        p.map(keras.layers.GaussianNoise(0.1, name="noise"))
    with pytest.raises(ValueError, match="keys= names the features a Keras layer"):
        p.map(lambda ex: ex, keys="image")
    with pytest.raises(SchemaError, match="feature 'photo' is not in the examples"):
        p.map(keras.layers.RandomFlip(), keys="photo").build()
    with pytest.raises(ValueError, match="keys must be a feature name"):
        p.map(keras.layers.RandomFlip(), keys=[""])
    table = tfpipe.from_arrays({"x": np.zeros((4, 3), np.float32)})
    with pytest.raises(ValueError, match=r"no Image feature.*keys="):
        tfpipe.Pipeline(table).map(keras.layers.Rescaling(2.0))


def test_a_failing_layer_is_named_with_the_feature() -> None:
    p = tfpipe.Pipeline(images()).map(keras.layers.RandomCrop(16, 16, name="big"), keys="label")
    with pytest.raises(Exception) as info:
        p.build()
    assert "Keras layer 'big' on feature 'label' (Keras backend tensorflow)" in str(
        getattr(info.value, "__notes__", "")
    )


def test_building_a_seeded_pipeline_again_and_again_warns_of_no_retracing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Each build traces its seeded stages in a function of its own, once; TensorFlow took the
    fifth build for excessive retracing (seen under `tfpipe.fit`, which builds several times)."""
    pipeline = tfpipe.Pipeline(images()).shuffle(seed=0).batch(2)
    with caplog.at_level("WARNING", logger="tensorflow"):
        for _ in range(7):
            pipeline.build()
    assert not [r for r in caplog.records if "retracing" in r.getMessage()], caplog.text
