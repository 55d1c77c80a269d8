"""The data of `tfpipe.fit(model, "records/train")` climbs back up the layers at most
`MOST_DATA_CLIMBS` times (issue 40; counted as `tests/flow.py` says)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))

from flow import Flow, fit_flow, holds_data, lines

MOST_DATA_CLIMBS = 12


def test_fits_data_climbs_back_up_the_layers_at_most_12_times() -> None:
    flow = fit_flow()
    assert len(flow.as_data) > 20, "the trace lost the data"  # fit, the adapter, the loaders...
    assert len(flow.data_climbs()) <= MOST_DATA_CLIMBS, "\n".join(lines(flow))


def test_a_climb_is_a_step_up_to_a_higher_layer() -> None:
    steps = [
        ("tfpipe.training.fit", "fit"),
        ("tfpipe.format.resolution", "resolve"),
        ("tfpipe.loaders.pipeline", "__init__"),
        ("tfpipe.loaders.inputs", "__init__"),
        ("tfpipe.training.adapters", "adapt"),
    ]
    assert Flow(steps, steps).data_climbs() == [
        ("tfpipe.format.resolution.resolve", "tfpipe.loaders.pipeline.__init__"),
        ("tfpipe.loaders.inputs.__init__", "tfpipe.training.adapters.adapt"),
    ]


def test_the_data_is_the_path_or_a_tfpipe_object_holding_it() -> None:
    class Holder:
        def __init__(self, inner: object) -> None:
            self.inner = inner

    Holder.__module__ = "tfpipe.test"
    assert holds_data("records/train") and holds_data(["records/train"])
    assert not holds_data("records/validation") and not holds_data(Holder("other"))
    assert holds_data(Holder(Holder("records/train")))
