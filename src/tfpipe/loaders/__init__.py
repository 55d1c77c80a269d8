"""Loaders that feed Keras: the PyDataset loader, the tf.data pipeline builder, and the decoded
examples by index that Grain and PyTorch read."""

from tfpipe.loaders.decoded import DecodedExamples
from tfpipe.loaders.mixture import Mixture
from tfpipe.loaders.pipeline import Pipeline
from tfpipe.loaders.position import Identity
from tfpipe.loaders.sequence import SequenceLoader
from tfpipe.loaders.service import DataService
from tfpipe.loaders.workers import WatchedPool

__all__ = [
    "DataService",
    "DecodedExamples",
    "Identity",
    "Mixture",
    "Pipeline",
    "SequenceLoader",
    "WatchedPool",
]
