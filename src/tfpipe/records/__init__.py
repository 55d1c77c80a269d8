"""TFRecord shards: the writer, the tf.data reader, and schema inference."""
