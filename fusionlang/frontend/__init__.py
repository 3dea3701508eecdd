"""Model import: ONNX models become statically shaped fusionlang Graphs.

``from_onnx`` reads a model (opsets 6 to 21) and returns a verified Graph whose constant
subgraphs are already folded; ``fold_constants`` is that folding as a reusable pass.
"""

from fusionlang.frontend.onnx_import import from_onnx
from fusionlang.ops.evaluate import fold_constants

__all__ = ["fold_constants", "from_onnx"]
