"""The typed features of a `Schema`, one module each: `Image`, `Mask`, `ClassLabel`, `Tensor`,
`Text`.

Importing this package registers every kind, so `Feature.from_json` can rebuild any of them.
"""

from tfpipe.features.base import Feature
from tfpipe.features.class_label import ClassLabel
from tfpipe.features.image import Image
from tfpipe.features.mask import Mask
from tfpipe.features.tensor import Tensor
from tfpipe.features.text import Text

__all__ = ["ClassLabel", "Feature", "Image", "Mask", "Tensor", "Text"]
