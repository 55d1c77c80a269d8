"""Which Keras backend trains, and TensorFlow kept to the data under the others.

tfpipe reads data with tf.data whatever the backend. Keras 3 trains on TensorFlow, JAX or
PyTorch (`KERAS_BACKEND`). Under JAX or PyTorch, TensorFlow must not take the accelerators'
memory (it maps nearly all of each visible GPU's memory when it starts), so its GPUs are
hidden before it starts, as the Keras docs advise; `tf.distribute` strategies and prefetching
to a TensorFlow device do not apply there. What each backend's trainer can do is asked here:
Keras's PyTorch trainer runs one train step per call (it refuses `steps_per_execution` > 1),
and JAX compiles the train step again for each new batch shape.
"""

from __future__ import annotations

import warnings

import keras
import tensorflow as tf

from tfpipe.errors import TfpipeWarning

_hidden = False


def keras_backend() -> str:
    """The backend Keras trains on: "tensorflow", "jax", "torch" or "numpy"."""
    return str(keras.backend.backend())


def trains_with_tensorflow() -> bool:
    """True when Keras trains on TensorFlow, whose strategies and devices tfpipe then uses."""
    return keras_backend() == "tensorflow"


def one_step_per_execution() -> bool:
    """True when Keras's trainer runs a single train step per call: its PyTorch trainer
    refuses `steps_per_execution` > 1, so tfpipe neither chooses nor advises a larger value."""
    return keras_backend() == "torch"


ONE_STEP_NOTE = (
    "steps_per_execution stays 1 although steps are short: Keras's PyTorch backend runs one "
    "train step per call (it refuses steps_per_execution > 1); more work per step (a larger "
    "batch) spreads the overhead between steps, or the JAX or TensorFlow backend runs "
    "several steps per call"
)


def check_steps_per_execution(model: keras.Model) -> None:
    """Refuses a model compiled with `steps_per_execution` > 1 where Keras's trainer runs one
    step per call (PyTorch): Keras would fail inside the model probe's `fit`, where the
    error would read as batches that do not fit the model."""
    if one_step_per_execution() and model.steps_per_execution != 1:
        raise ValueError(
            f"model was compiled with steps_per_execution={model.steps_per_execution}, but "
            f"Keras trains on {keras_backend()}, whose trainer runs one step per call: "
            "compile it with steps_per_execution=1 (the default)"
        )


def compiles_each_batch_shape(model: keras.Model) -> bool:
    """True when the train step is compiled again for a batch of a new shape (a short last
    batch): on JAX (jit, unless `run_eagerly`) and on PyTorch with `jit_compile=True`
    (torch.compile); PyTorch's default runs eagerly, and on TensorFlow this is left False."""
    backend = keras_backend()
    if backend == "jax":
        return not model.run_eagerly
    return backend == "torch" and bool(model.jit_compile)


def data_only() -> None:
    """Hides TensorFlow's GPUs when Keras trains on another backend (once per process).

    Called on the first use of a public tfpipe name. When TensorFlow already started (a
    TensorFlow op ran before) and holds a GPU, it cannot let it go: a `TfpipeWarning` says how
    to hide it earlier.
    """
    global _hidden
    if _hidden or trains_with_tensorflow():
        return
    _hidden = True
    try:
        tf.config.set_visible_devices([], "GPU")
    except RuntimeError:  # TensorFlow started already: it can no longer change its devices
        held = tf.config.get_visible_devices("GPU")
        if held:
            warnings.warn(
                f"Keras trains on {keras_backend()}, but TensorFlow, which tfpipe uses for the "
                f"data, started before tfpipe and holds {len(held)} GPU(s) and their memory. "
                'Call tf.config.set_visible_devices([], "GPU") before any TensorFlow op, or '
                "use tfpipe before them",
                TfpipeWarning,
                stacklevel=3,
            )


def strategy_of(model: keras.Model) -> tf.distribute.Strategy:
    """The `tf.distribute` strategy `model` trains under: its own on the TensorFlow backend;
    TensorFlow's default (one replica) on the others, which have no TensorFlow strategy."""
    if trains_with_tensorflow():
        return model.distribute_strategy
    return tf.distribute.get_strategy()


def notes() -> tuple[str, ...]:
    """What the report says about the backend: nothing on TensorFlow, else what tfpipe skips."""
    if trains_with_tensorflow():
        return ()
    return (
        f"Keras trains on {keras_backend()}: TensorFlow reads the data only (on the CPU, its "
        "GPUs hidden), so batches are not prefetched to a TensorFlow device and tf.distribute "
        f"strategies do not apply ({keras_backend()} copies each batch to its device itself)",
    )
