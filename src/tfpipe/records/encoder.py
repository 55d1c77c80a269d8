"""`Encoder`: a source's examples encoded to serialized records, chunk by chunk, on the
writer's threads (or a Beam or Spark worker), with the images it copies checked in batched
graph calls, and the formats and sizes it stores noted for the metadata."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from tfpipe.errors import EncodeError
from tfpipe.features import Image, decoding
from tfpipe.format.metadata import SkippedExample
from tfpipe.labels import Relabeling
from tfpipe.schema import Schema

_SOURCE_ERRORS = (OSError, ValueError, TypeError, LookupError)


class Encoder:
    """Encodes examples of a source, naming them in errors; skips failures when asked.

    It notes the formats its images are stored in (`stored_formats`) and their size when they
    all have one (`stored_sizes`), on whichever thread encodes them, for the metadata
    (`Schema.as_written`).
    """

    def __init__(self, source: Any, schema: Schema, skip: bool, check_copies: bool) -> None:
        self.source = source
        self.schema = schema
        self.skip = skip
        self.check_copies = check_copies
        self._formats: dict[int, decoding.Noted] = {}  # id of an Image feature -> its images
        self.origin = getattr(source, "origin", None)
        own = getattr(source, "schema", None)
        self.relabel = Relabeling(own, schema) if isinstance(own, Schema) else None

    def origin_of(self, index: int) -> str:
        """Where an example comes from, e.g. "cats/017.jpg" (else "example 17")."""
        return str(self.origin(index)) if callable(self.origin) else f"example {index}"

    def describe(self, index: int) -> str:
        """How errors name an example, e.g. "example 17 (cats/017.jpg)"."""
        plain, origin = f"example {index}", self.origin_of(index)
        return plain if origin == plain else f"{plain} ({origin})"

    def __call__(self, indices: np.ndarray) -> list[bytes | SkippedExample]:
        return self.timed(indices)[0]

    def timed(self, indices: np.ndarray) -> tuple[list[bytes | SkippedExample], list[float], float]:
        """Encodes a chunk on this thread: the results, the seconds each example took to encode,
        and the seconds per example of the chunk's image check.

        The images the chunk copies are checked at the end, in graph calls that release the GIL
        (`decoding.all_decode`). A failure ends as checks one by one would end it: an example
        with a rejected image is encoded again, checked at once (its EncodeError, or its skip).
        With `check_copies=False` copied images are not decoded at all.
        """
        with decoding.noting_formats(self._formats):
            if not self.check_copies:
                with decoding.unchecked_copies():
                    return self._timed(indices)
            return self._timed(indices)

    def stored_formats(self) -> dict[str, set[str]]:
        """Image name -> the formats its images were stored in by this encoder so far."""
        return {name: noted.formats for name, noted in self._noted().items()}

    def stored_sizes(self) -> dict[str, tuple[int, int]]:
        """Image name -> the one size (height, width) of every image this encoder stored for
        it so far; images stored in several sizes are left out."""
        return {name: n.size for name, n in self._noted().items() if n.size is not None}

    def _noted(self) -> dict[str, decoding.Noted]:
        images = self.schema.of(Image).items()
        return {name: self._formats[id(f)] for name, f in images if id(f) in self._formats}

    def _timed(
        self, indices: np.ndarray
    ) -> tuple[list[bytes | SkippedExample], list[float], float]:
        done: list[bytes | SkippedExample] = []
        waiting: list[tuple[int, bytes | SkippedExample, list[decoding.Check]]] = []
        seconds = []
        for index in map(int, indices):
            started = time.perf_counter()
            result: bytes | SkippedExample | None
            try:
                with decoding.deferred_checks() as pending:
                    result = self.encode(index)
            except Exception:  # raised again below, after the checks that come first
                result = None
            if result is None:
                # Checked one by one, the images before it, then its own, would fail first.
                done += self._confirm(waiting)
                waiting = []
                done.append(self.encode(index))
            else:
                waiting.append((index, result, pending))
            seconds.append(time.perf_counter() - started)
        if not any(pending for *_, pending in waiting):
            return done + [result for _, result, _ in waiting], seconds, 0.0
        decoding.warm_up()  # not timed: once per process
        started = time.perf_counter()
        done += self._confirm(waiting)
        return done, seconds, (time.perf_counter() - started) / len(seconds)

    def _confirm(
        self, waiting: list[tuple[int, bytes | SkippedExample, list[decoding.Check]]]
    ) -> list[bytes | SkippedExample]:
        """The results, once their deferred image checks pass; an example with an image
        TensorFlow rejects is encoded again, checked at once (its EncodeError, or its skip)."""
        if decoding.all_decode([check for *_, pending in waiting for check in pending]):
            return [result for _, result, _ in waiting]
        return [
            result if all(decoding.decodes(*check) for check in pending) else self.encode(index)
            for index, result, pending in waiting
        ]

    def read(self, index: int) -> Any:
        """Example `index` of the source, its class indices matched to the schema's by name."""
        try:
            example = self.source[index]
        except _SOURCE_ERRORS as e:
            raise EncodeError(f"cannot read {self.describe(index)} from the source: {e}") from e
        if self.relabel and isinstance(example, Mapping):
            example = self.relabel(example, where=lambda: self.describe(index))
        return example

    def encode(self, index: int) -> bytes | SkippedExample:
        try:
            return self.schema.encode(self.read(index), where=lambda: self.describe(index))
        except EncodeError as e:
            if not self.skip:
                raise
            return SkippedExample(index=index, origin=self.origin_of(index), error=str(e))
