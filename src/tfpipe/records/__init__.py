"""TFRecord shards: the writer, the tf.data reader, schema inference and verification."""

from tfpipe.records.infer import infer_schema
from tfpipe.records.reader import read_tfrecords
from tfpipe.records.verification import Fault, VerifyReport, locate_fault, verify
from tfpipe.records.writer import write_tfrecords

__all__ = [
    "Fault",
    "VerifyReport",
    "infer_schema",
    "locate_fault",
    "read_tfrecords",
    "verify",
    "write_tfrecords",
]
