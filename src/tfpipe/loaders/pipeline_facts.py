"""What a `Pipeline` says about itself without reading its data: its settings, its counts,
its plan (`explain`), its identity for a resume and its first damaged record.

    Pipeline ──inherits──▶ PipelineFacts: schema, batch_size, seed, supervised, service,
        mixture, mixed_sources, examples_per_epoch, batches_per_epoch, truncated, identity, explain,
        locate_fault (each read from the Pipeline's `Recipe`)
"""

from __future__ import annotations

import copy
from typing import Self, cast

from tfpipe.loaders.assembly import explain, locate_fault
from tfpipe.loaders.mixture import Mixture, MixtureInput
from tfpipe.loaders.position import Identity
from tfpipe.loaders.recipe import Recipe
from tfpipe.loaders.service import DataService
from tfpipe.loaders.supervised import Names
from tfpipe.records.verification import Fault
from tfpipe.schema import Schema


class PipelineFacts:
    """The questions a `tfpipe.Pipeline` answers from its recipe (see `Pipeline`)."""

    _recipe: Recipe

    @property
    def seed(self) -> int | None:
        """The seed given to `shuffle()`; None without one (or without a shuffle).

        Examples:
            >>> tfpipe.Pipeline("out/train").shuffle(seed=3).seed
            3
        """
        return self._recipe.seed

    @property
    def position(self) -> tuple[int, int] | None:
        """The `(epoch, batch)` given to `start_at`; None without one.

        Examples:
            >>> tfpipe.Pipeline("out/train").shuffle(seed=0).batch(8).start_at(1, 2).position
            (1, 2)
        """
        return self._recipe.start

    def identity(self) -> Identity:
        """What a position of this pipeline (see `start_at`) is valid for: its data (the
        files, their sizes and the example count; or the examples of a source), its batch
        size, its seed and its `echo()` (factor, unit and window).

        Examples:
            >>> tfpipe.Pipeline("out/train").shuffle(seed=0).batch(64).identity().batch_size
            64
        """
        return self._recipe.identity()

    @property
    def service(self) -> DataService | None:
        """The tf.data service `distribute()` set (`address`, `mode`, `job_name`); else None.

        Examples:
            >>> tfpipe.Pipeline("out/train").distribute("10.0.0.5:5050").service.address
            'grpc://10.0.0.5:5050'
        """
        return self._recipe.service

    @property
    def supervised(self) -> tuple[Names, Names] | None:
        """The `(x, y)` given to `as_supervised`; None when the pipeline yields example dicts.

        Examples:
            >>> tfpipe.Pipeline("out/train").as_supervised("image", "label").supervised
            ('image', 'label')
        """
        return self._recipe.supervised

    @property
    def schema(self) -> Schema | None:
        """The schema of what the pipeline reads; None for a `keras.utils.PyDataset` source.

        Examples:
            >>> tfpipe.Pipeline("out/train").schema["image"].encoding  # as from_directory's
            'auto'
        """
        return self._recipe.schema

    @property
    def mixture(self) -> Mixture | None:
        """What a Pipeline made by `Pipeline.sample_from` mixes: its sources' names, weights
        and examples per epoch; None for another Pipeline.

        Examples:
            >>> mixed = tfpipe.Pipeline.sample_from(["out/train", "out/train"], [3, 1])
            >>> mixed.mixture.weights, mixed.mixture.counts
            ((0.75, 0.25), (24, 8))
        """
        return self._recipe.input.mixture

    def mixed_sources(self) -> tuple[Self, ...]:
        """The Pipelines a mixture made by `Pipeline.sample_from` reads, as it reads them
        (unbatched; a source shuffled without a seed has the seed the mixture gave it), in
        the order of `mixture.names`; empty for another Pipeline. `tfpipe.fit`'s report times
        each alone, to find the source that costs the most input time.

        Examples:
            >>> few = tfpipe.Pipeline("out/train").take(8)
            >>> mixed = tfpipe.Pipeline.sample_from(["out/train", few])
            >>> [source.examples_per_epoch() for source in mixed.mixed_sources()]
            [24, 8]
            >>> len(next(iter(mixed.mixed_sources()[0].batch(8).build()))["label"])
            8
        """
        if self.mixture is None:
            return ()
        sources = []
        for recipe in cast(MixtureInput, self._recipe.input).sources:
            source = copy.copy(self)
            source._recipe = recipe
            sources.append(source)
        return tuple(sources)

    @property
    def batch_size(self) -> int | None:
        """The size of the batches `batch()` asked for; None without a `batch()`.

        The last batch of an epoch may be smaller (unless `drop_remainder=True`); every other
        batch has this size, whatever order a non-deterministic pipeline yields them in.

        Examples:
            >>> tfpipe.Pipeline("out/train").batch(64).batch_size
            64
        """
        return None if self._recipe.batch is None else self._recipe.batch[0]

    def examples_per_epoch(self) -> int | None:
        """Examples in one pass over the data (ignoring `repeat()`), known from the metadata.

        None when it cannot be known without reading the data: a filter(), a shard(), a
        source of unknown size, or `distribute(mode="off")`. With `distribute()` in the
        default dynamic mode, it is the count while no service worker fails. Examples dropped
        with a partial last batch do not count.

        Examples:
            >>> tfpipe.Pipeline("out/train").batch(5, drop_remainder=True).examples_per_epoch()
            20
        """
        return self._recipe.examples_per_epoch()

    def locate_fault(self) -> Fault | None:
        """The first damaged record or image file of the source; None when all are sound.

        tf.data reports damaged data with TensorFlow's errors, which name no file and no
        record. This reads the source again, checking what `tfpipe.verify` checks (frames,
        Examples, features and images decoded as this pipeline decodes them), until the first
        fault. `tfpipe.named_errors` calls it to turn such an error into a `DecodeError`.

        Examples:
            >>> fault = tfpipe.Pipeline("out/damaged").locate_fault()
            >>> print(fault)
            record 5 of out/damaged-00001-of-00002.tfrecord: damaged or truncated frame: ...
        """
        return locate_fault(self._recipe)

    def truncated(self) -> dict[str, int]:
        """How many values `truncate=True` cut to their pad length so far, per feature.

        Counted as examples are read (one read twice counts twice), by this pipeline and every
        variant built from the same `Pipeline(...)`; empty without `truncate=True`.

        Examples:
            >>> src = tfpipe.from_arrays({"tokens": [[1, 2, 3], [4, 5, 6, 7, 8], [9]]})
            >>> p = tfpipe.Pipeline(src, pad={"tokens": 4}, truncate=True).batch(3)
            >>> batches = list(p.build())
            >>> p.truncated()
            {'tokens': 1}
        """
        return self._recipe.padding.truncated()

    def batches_per_epoch(self) -> int | None:
        """Batches in one pass over the data (ignoring `repeat()`), known from the metadata.

        None when it cannot be known without reading the data: no batch(), a filter(), a
        shard(), or a source of unknown size. `tfpipe.fit` uses it to size repeated epochs.

        Examples:
            >>> tfpipe.Pipeline("out/train").batch(10).batches_per_epoch()  # 24 examples
            3
        """
        return self._recipe.batches_per_epoch()

    def explain(self) -> str:
        """The plan `build()` runs, one stage per line, in order.

        Examples:
            >>> print(tfpipe.Pipeline("out/train").batch(64).shuffle(seed=0).explain())
             1. list 2 TFRecord file(s) of out/train
             2. shuffle file list (seed=0, reshuffled each epoch)
             3. interleave reads of 2 file(s) at a time (parallel, AUTOTUNE)
             4. shuffle records (buffer 24, seed=0, reshuffled each epoch)
             5. batch 64 records
             6. parse_example (vectorised), images and masks kept as stored bytes
             7. no EXIF orientations to read (JPEGs stored upright, says the metadata)
             8. unbatch
             9. decode images per example (parallel, AUTOTUNE)
            10. batch 64
            11. declare 1 batches per epoch (from the example count)
            12. prefetch AUTOTUNE
            13. options: deterministic=True
        """
        return explain(self._recipe)

    @property
    def echo_factor(self) -> int:
        """The factor of `echo()`; 1 without one.

        Examples:
            >>> tfpipe.Pipeline("out/train").echo(3, unit="batch").echo_factor
            3
        """
        return 1 if self._recipe.echo is None else self._recipe.echo.factor

    @property
    def echo_unit(self) -> str | None:
        """What `echo()` repeats, "example" or "batch"; None without one.

        Examples:
            >>> tfpipe.Pipeline("out/train").echo(3, unit="batch").echo_unit
            'batch'
        """
        return None if self._recipe.echo is None else self._recipe.echo.unit
