"""Where examples come from: folders, DataFrames, arrays (and TFRecords, indexed)."""

from tfpipe.sources.arrays import ArraySource, from_arrays
from tfpipe.sources.base import Source, SourceBase, Subset, split
from tfpipe.sources.dataframe import DataFrameSource, from_dataframe
from tfpipe.sources.directory import DirectorySource, from_directory
from tfpipe.sources.tfrecords import TFRecordSource, from_tfrecords

__all__ = [
    "ArraySource",
    "DataFrameSource",
    "DirectorySource",
    "Source",
    "SourceBase",
    "Subset",
    "TFRecordSource",
    "from_arrays",
    "from_dataframe",
    "from_directory",
    "from_tfrecords",
    "split",
]
