"""TFRecord shards: the writer, the tf.data reader, and schema inference."""

from tfpipe.records.infer import infer_schema
from tfpipe.records.reader import read_tfrecords
from tfpipe.records.writer import write_tfrecords

__all__ = ["infer_schema", "read_tfrecords", "write_tfrecords"]
