"""Training: `tfpipe.fit`, its input adapters, the report and its measurements, resume."""
