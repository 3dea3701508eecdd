"""How a fusion plan leaves fusionlang as another tool's file.

    from fusionlang.export import save_fused_onnx
    save_fused_onnx("model.onnx", plan, "model.fused.onnx")   # one ONNX function per fused group

The exporter reads both the model (the frontend's input) and the plan (the engine's
output), so it sits below both in the data flow: neither frontend nor engine imports it.
"""

from fusionlang.export.onnx_fused import FUSED_DOMAIN, FusedOnnx, fused_onnx, save_fused_onnx

__all__ = ["FUSED_DOMAIN", "FusedOnnx", "fused_onnx", "save_fused_onnx"]
