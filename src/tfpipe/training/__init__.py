"""Training: `tfpipe.fit`, its input adapters, the report and its measurements, resume.

What `tfpipe.fit` and `tfpipe.benchmark` return is exported here, and `echo_factor_for`,
the report's rule for data echoing. The entry points keep their
modules (`tfpipe.training.fit`, `tfpipe.training.benchmark`, `tfpipe.training.faults` for
`named_errors`): this package is imported on the first use of any public tfpipe name (to keep
TensorFlow to the data, `tfpipe.training.backend`), so it imports only the light result types.
"""

from tfpipe.training.breakdown import Breakdown, BreakdownPart, InputStages
from tfpipe.training.echoing import echo_factor_for
from tfpipe.training.report import FitReport
from tfpipe.training.source_shares import SourceShare
from tfpipe.training.throughput import Throughput

__all__ = [
    "Breakdown",
    "BreakdownPart",
    "FitReport",
    "InputStages",
    "SourceShare",
    "Throughput",
    "echo_factor_for",
]
