"""Which source of a mixed `Pipeline` costs the input's time: each timed alone.

a mixture (`Pipeline.sample_from`) ──mixed_sources()──▶ each source's own Pipeline, batched
    as the mixture ──measure()──▶ its examples/s ──with mixture.counts──▶ SourceShares
"""

from __future__ import annotations

from tfpipe.loaders.pipeline import Pipeline
from tfpipe.training.source_shares import SourceShare, source_shares
from tfpipe.training.throughput import measure

MAX_BATCHES = 20


def time_sources(
    pipeline: Pipeline | None, batch_size: int, max_seconds: float
) -> tuple[SourceShare, ...]:
    """Each source of the mixture `pipeline` timed alone (its own Pipeline in batches of
    `batch_size`, for at most `max_seconds` each), and its shares of the examples and of
    the input time; empty when `pipeline` is None or not a mixture.

    Examples:
        >>> mixed = tfpipe.Pipeline.sample_from(["out/train", "out/train"], [3, 1]).batch(8)
        >>> [share.examples_share for share in time_sources(mixed, 8, 0.2)]
        [0.75, 0.25]
    """
    mixture = None if pipeline is None else pipeline.mixture
    if pipeline is None or mixture is None:
        return ()
    rates = [
        measure(
            iter(source.repeat().batch(batch_size).build()),
            num_batches=MAX_BATCHES,
            warmup=1,
            max_seconds=max_seconds,
        ).examples_per_s
        for source in pipeline.mixed_sources()
    ]
    return source_shares(mixture.names, mixture.counts, rates)
