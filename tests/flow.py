"""Follows the data of one `tfpipe.fit(model, "records/train")` call through tfpipe's layers.

Every call of a tfpipe function during the call is traced (`sys.setprofile`, also in the
threads Keras and tf.data start; imports and the foundation layer of errors, checks, fs and logs
left out: they are leaves every layer calls). Two sequences are kept, each with repeats of the
same module in a row collapsed into one step:

- **as data**: the calls that receive the data, i.e. one of whose arguments is the path
  `"records/train"` or holds it (a `ResolvedData` whose origin it is, the Pipeline input
  reading it, the Pipeline, the training feed, fit's prepared call: an attribute chain of at
  most `DEPTH` tfpipe objects). A **climb** is a step of this sequence to a module of a
  higher layer (`test_layout.LAYERS`) than the one before it: the data went down to a lower
  layer and was picked up again above it, e.g. a path inspected by the format package, then by
  fit's adapter, then by the format package again through the loaders.
- **every call**: all traced calls; a climb is a step up to another module, counted once per
  pair of modules (per-batch repeats count once).

Run `python tests/flow.py` to print both, step by step.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

sys.path.insert(0, str(Path(__file__).parent / "project"))

from test_layout import layer

PATH = "records/train"
DEPTH = 6
FOUNDATION = {"tfpipe.errors", "tfpipe.checks", "tfpipe.fs", "tfpipe.logs"}


@dataclasses.dataclass(frozen=True)
class Flow:
    """The two collapsed sequences of (module, function) steps of a traced call."""

    as_data: list[tuple[str, str]]
    every_call: list[tuple[str, str]]

    def data_climbs(self) -> list[tuple[str, str]]:
        """The steps of `as_data` to a higher layer, as (from "module.function", to ...)."""
        return [
            (f"{a[0]}.{a[1]}", f"{b[0]}.{b[1]}")
            for a, b in itertools.pairwise(self.as_data)
            if layer(b[0]) > layer(a[0])
        ]

    def call_climbs(self) -> set[tuple[str, str]]:
        """The distinct (from module, to module) steps of `every_call` to a higher layer."""
        pairs = itertools.pairwise(self.every_call)
        return {(a[0], b[0]) for a, b in pairs if layer(b[0]) > layer(a[0])}


def holds_data(value: Any, depth: int = DEPTH) -> bool:
    """Whether `value` is the path, or a tfpipe object (or a short list) that holds it."""
    if isinstance(value, str):
        return value == PATH
    if depth == 0 or value is None or isinstance(value, int | float | bytes):
        return False
    if isinstance(value, list | tuple):
        return any(holds_data(v, depth - 1) for v in value[:8])
    if not type(value).__module__.startswith("tfpipe"):
        return False
    return any(holds_data(v, depth - 1) for v in list(attributes(value).values())[:30])


def attributes(value: Any) -> dict[str, Any]:
    """The attributes of a tfpipe object: its `__dict__`, dataclass fields or slots."""
    found = getattr(value, "__dict__", None)
    if found:
        return dict(found)
    names = [*getattr(value, "__dataclass_fields__", ()), *getattr(value, "__slots__", ())]
    return {name: getattr(value, name, None) for name in names}


def collapsed(steps: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [s for i, s in enumerate(steps) if i == 0 or steps[i - 1][0] != s[0]]


def trace(run: Any) -> Flow:
    """The flow of `run()`, a call made with the data at `PATH` in the working folder."""
    package = Path(__import__("tfpipe").__file__).parent
    as_data: list[tuple[str, str]] = []
    every_call: list[tuple[str, str]] = []

    def module_of(frame: FrameType) -> str | None:
        file = frame.f_code.co_filename
        if not file.startswith(str(package)) or frame.f_code.co_name == "<module>":
            return None
        parts = Path(file).relative_to(package.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        return None if name in FOUNDATION else name

    def profile(frame: FrameType, event: str, _: Any) -> None:
        if event != "call" or (module := module_of(frame)) is None:
            return
        code = frame.f_code
        step = (module, code.co_name)
        every_call.append(step)
        arguments = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
        if any(holds_data(frame.f_locals.get(name)) for name in arguments):
            as_data.append(step)

    threading.setprofile(profile)
    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
    return Flow(collapsed(as_data), collapsed(every_call))


def fit_flow() -> Flow:
    """The flow of `tfpipe.fit(model, "records/train")` over 32 images written by tfpipe,
    made in a temporary folder (the working folder is restored)."""
    import keras

    import tfpipe
    from tfpipe.sources.synthetic import make_image_folder

    here = os.getcwd()
    with tempfile.TemporaryDirectory() as folder:
        os.chdir(folder)
        try:
            make_image_folder("images", num_classes=2, per_class=16, size=(32, 32))
            tfpipe.write_tfrecords(tfpipe.from_directory("images"), PATH, num_shards=2)
            model = keras.Sequential(
                [keras.Input((32, 32, 3)), keras.layers.Flatten(), keras.layers.Dense(2)]
            )
            model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
            return trace(lambda: tfpipe.fit(model, PATH, epochs=2, verbose=0))
        finally:
            os.chdir(here)


def lines(flow: Flow) -> Iterator[str]:
    yield f"as data: {len(flow.as_data)} steps, {len(flow.data_climbs())} climbs"
    for a, b in itertools.pairwise(flow.as_data):
        mark = "UP" if layer(b[0]) > layer(a[0]) else "  "
        yield f"  {mark} {a[0]}.{a[1]} -> {b[0]}.{b[1]}"
    yield f"every call: {len(flow.call_climbs())} distinct climbs"
    for a, b in sorted(flow.call_climbs()):
        yield f"  {a} -> {b}"


if __name__ == "__main__":
    print("\n".join(lines(fit_flow())))
