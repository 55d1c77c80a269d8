"""Training: `tfpipe.fit`, its input adapters, the report and its measurements, resume.

`tfpipe.fit` and `tfpipe.benchmark` keep their modules' names (`tfpipe.training.fit`,
`tfpipe.training.benchmark`); what they return is exported here.
"""

from tfpipe.training.bench import Throughput
from tfpipe.training.breakdown import Breakdown, BreakdownPart, InputStages
from tfpipe.training.faults import named_errors
from tfpipe.training.report import FitReport

__all__ = ["Breakdown", "BreakdownPart", "FitReport", "InputStages", "Throughput", "named_errors"]
