"""`SourceShare`: each source of a mixed Pipeline, by its share of the examples and of the
input time, for the fit report.

    mixture.counts ──count_i / Σ counts──▶ share of the examples
    each source's own Pipeline, batched as the mixture, timed alone ──▶ rate_i (examples/s)
        ──(count_i / rate_i) / Σ_j (count_j / rate_j)──▶ share of the input time
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

SLOW_TIME_SHARE = 0.5
"""A source gets advice when it takes at least this share of the input time..."""
SLOW_RATIO = 2.0
"""...and at least this many times its share of the examples."""


@dataclasses.dataclass(frozen=True)
class SourceShare:
    """One source of a mixed Pipeline (`Pipeline.sample_from`) in `FitReport.sources`.

    Attributes:
        index: its place among the mixture's sources.
        name: what it reads (`Pipeline.mixture.names`).
        examples: its examples in one epoch of the mixture (`Pipeline.mixture.counts`).
        examples_share: its share of an epoch's examples.
        examples_per_s: its examples/s read alone (its own Pipeline, batched as the mixture,
            over a short probe).
        input_time_share: its share of the time reading an epoch takes: its examples over
            its rate, over the sum of that for every source.
    """

    index: int
    name: str
    examples: int
    examples_share: float
    examples_per_s: float
    input_time_share: float

    @property
    def label(self) -> str:
        """The source as messages name it: "source 1 (out/raw)"."""
        return f"source {self.index} ({self.name})"

    @property
    def slow(self) -> bool:
        """Whether it takes far more of the input time than of the examples: at least half of
        the time, and at least twice its share of the examples."""
        return (
            self.input_time_share >= SLOW_TIME_SHARE
            and self.input_time_share >= SLOW_RATIO * self.examples_share
        )


def source_shares(
    names: Sequence[str], counts: Sequence[int], examples_per_s: Sequence[float]
) -> tuple[SourceShare, ...]:
    """Each source's share of the examples and of the input time, from its examples per
    epoch (`counts`) and its examples/s read alone.

    Examples:
        >>> from tfpipe.training.source_shares import source_shares
        >>> fast, raw = source_shares(["out/train", "out/raw"], [80, 20], [4000.0, 200.0])
        >>> raw.label, raw.examples_share, round(raw.input_time_share, 2), raw.slow
        ('source 1 (out/raw)', 0.2, 0.83, True)
    """
    total = sum(counts)
    seconds = [count / max(rate, 1e-9) for count, rate in zip(counts, examples_per_s, strict=True)]
    all_seconds = sum(seconds) or 1.0
    return tuple(
        SourceShare(
            index=i,
            name=name,
            examples=count,
            examples_share=count / total,
            examples_per_s=rate,
            input_time_share=time / all_seconds,
        )
        for i, (name, count, rate, time) in enumerate(
            zip(names, counts, examples_per_s, seconds, strict=True)
        )
    )


def table(shares: Sequence[SourceShare]) -> list[str]:
    """The report's table of the sources: one line each, under a header."""
    if not shares:
        return []
    lines = ["mixed sources    examples  input time       read alone"]
    for share in shares:
        lines.append(
            f"  source {share.index:<7} {share.examples_share:>8.0%} "
            f"{share.input_time_share:>11.0%} {share.examples_per_s:>12,.1f} examples/s  "
            f"{share.name}"
        )
    return lines


def slow_source_advice(shares: Sequence[SourceShare]) -> list[str]:
    """The advice line naming each source that takes far more of the input time than of the
    examples (`SourceShare.slow`)."""
    fastest = max((share.examples_per_s for share in shares), default=0.0)
    return [
        f"{share.label}: {share.examples_share:.0%} of the examples, "
        f"{share.input_time_share:.0%} of the input time (it reads {share.examples_per_s:,.0f} "
        f"examples/s alone, the fastest source {fastest:,.0f}): what makes it slow is what to "
        f"fix first when the input is the limit (`mixed_sources()[{share.index}]` of the "
        "mixture is its Pipeline: its explain() lists its stages, tfpipe.benchmark of it "
        "batched times it alone)"
        for share in shares
        if share.slow
    ]
