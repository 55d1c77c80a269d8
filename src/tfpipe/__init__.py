"""tfpipe: get training data into TensorFlow/Keras fast enough that the accelerator never waits.

The data flows one way: schema -> sources -> records -> loaders -> fit.
"""

from tfpipe import augment
from tfpipe.adapters import benchmark, named_errors
from tfpipe.distribute.sharding import DistributedInput
from tfpipe.errors import (
    DataNotFoundError,
    DecodeError,
    EncodeError,
    SchemaError,
    SourceError,
    TfpipeError,
    TfpipeWarning,
)
from tfpipe.features import ClassLabel, Feature, Image, Mask, Tensor, Text
from tfpipe.fit import fit
from tfpipe.info import DatasetInfo, ShardInfo, SkippedExample
from tfpipe.loaders.pipeline import Pipeline
from tfpipe.loaders.sequence import SequenceLoader
from tfpipe.records import (
    Fault,
    VerifyReport,
    infer_schema,
    locate_fault,
    read_tfrecords,
    verify,
    write_tfrecords,
)
from tfpipe.report import FitReport
from tfpipe.schema import Schema
from tfpipe.sources import Source, from_arrays, from_dataframe, from_directory, from_tfrecords

__version__ = "0.1.0"

__all__ = [
    "ClassLabel",
    "DataNotFoundError",
    "DatasetInfo",
    "DecodeError",
    "DistributedInput",
    "EncodeError",
    "Fault",
    "Feature",
    "FitReport",
    "Image",
    "Mask",
    "Pipeline",
    "Schema",
    "SchemaError",
    "SequenceLoader",
    "ShardInfo",
    "SkippedExample",
    "Source",
    "SourceError",
    "Tensor",
    "Text",
    "TfpipeError",
    "TfpipeWarning",
    "VerifyReport",
    "__version__",
    "augment",
    "benchmark",
    "fit",
    "from_arrays",
    "from_dataframe",
    "from_directory",
    "from_tfrecords",
    "infer_schema",
    "locate_fault",
    "named_errors",
    "read_tfrecords",
    "verify",
    "write_tfrecords",
]
