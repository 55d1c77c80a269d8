"""Loaders that feed Keras: the PyDataset loader and the tf.data pipeline builder."""

from tfpipe.loaders.pipeline import Pipeline
from tfpipe.loaders.position import Identity
from tfpipe.loaders.sequence import SequenceLoader
from tfpipe.loaders.service import DataService
from tfpipe.loaders.workers import WatchedPool

__all__ = ["DataService", "Identity", "Pipeline", "SequenceLoader", "WatchedPool"]
