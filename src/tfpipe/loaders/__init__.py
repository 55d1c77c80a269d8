"""Loaders that feed Keras: the PyDataset loader and the tf.data pipeline builder."""
