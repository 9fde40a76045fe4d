"""Converters for PyTorch's quantized operators, for TVM's exported-program frontend.

A model quantized by PyTorch 2 Export quantization (PT2E: ``prepare_pt2e`` / ``convert_pt2e``,
in ``torchao.quantization.pt2e`` since PyTorch 2.6) exports as ``quantized_decomposed``
operators around float ``conv2d`` / ``linear``; ``torch._int_mm`` is the s8 x s8 -> s32
matrix product. apache-tvm 0.27's frontend converts none of them (it asserts "Unsupported
function types"). The converters here give the same Relax operators the ONNX frontend gives
for ``QuantizeLinear`` / ``DequantizeLinear`` / ``MatMulInteger``, so that
:func:`heronlike.model.quantize.rewrite_qdq` turns both kinds of model into integer compute.

Semantics (``torch/ao/quantization/fx/_decomposed.py``, now ``torchao``): quantize is
``clamp(round(x / scale) + zero_point, quant_min, quant_max)`` (PyTorch multiplies by
``1 / scale``, which rounds a value lying exactly on a .5 tie now and then the other way;
that is within the agreement rule of ``tests/test_quantize.py``), dequantize is
``(q - zero_point) * scale``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from tvm import relax

from ..errors import UnsupportedDtypeError

__all__ = ["CONVERTERS"]

_DTYPES = {"torch.uint8": "uint8", "torch.int8": "int8", "torch.int32": "int32"}


def _dtype(value: Any) -> str:
    name = _DTYPES.get(str(value))
    if name is None:
        raise UnsupportedDtypeError(f"quantized dtype {value} (heronlike takes uint8 and int8)")
    return name


def _operand(importer: Any, value: Any, dtype: str) -> relax.Expr:
    """A scale or zero point: a graph value (a tensor) or a Python number (a constant)."""
    if hasattr(value, "op"):  # an fx.Node
        expr = importer.env[value]
        return expr if str(expr.ty.dtype) == dtype else relax.op.astype(expr, dtype)
    return relax.const(np.asarray(value, dtype=dtype), dtype)


def _range_clip(expr: relax.Expr, lo: int, hi: int, dtype: str) -> relax.Expr:
    info = np.iinfo(dtype)
    if (lo, hi) == (info.min, info.max):
        return expr
    return relax.op.clip(expr, relax.PrimValue(int(lo)), relax.PrimValue(int(hi)))


def _quantize(per_channel: bool) -> Callable[[Any, Any], relax.Expr]:
    def convert(node: Any, importer: Any) -> relax.Expr:
        x = importer.env[node.args[0]]
        if per_channel:
            scale, zp, axis, lo, hi, dtype = node.args[1:7]
        else:
            (scale, zp, lo, hi, dtype), axis = node.args[1:6], -1
        out = _dtype(dtype)
        q = importer.block_builder.emit(
            relax.op.quantize(
                x,
                _operand(importer, scale, "float32"),
                _operand(importer, zp, out),
                axis=int(axis),
                out_dtype=out,
            )
        )
        return importer.block_builder.emit(_range_clip(q, int(lo), int(hi), out))

    return convert


def _dequantize(per_channel: bool) -> Callable[[Any, Any], relax.Expr]:
    def convert(node: Any, importer: Any) -> relax.Expr:
        q = importer.env[node.args[0]]
        if per_channel:
            scale, zp, axis = node.args[1:4]
        else:
            (scale, zp), axis = node.args[1:3], -1
        dtype = str(q.ty.dtype)
        if zp is None:
            zp = 0
        return importer.block_builder.emit(
            relax.op.dequantize(
                q,
                _operand(importer, scale, "float32"),
                _operand(importer, zp, dtype),
                axis=int(axis),
                out_dtype="float32",
            )
        )

    return convert


def _int_mm(node: Any, importer: Any) -> relax.Expr:
    a, b = (importer.env[x] for x in node.args[:2])
    return importer.block_builder.emit(relax.op.matmul(a, b, out_dtype="int32"))


#: ``custom_convert_map`` entries for ``tvm.relax.frontend.torch.from_exported_program``
CONVERTERS: dict[str, Callable[[Any, Any], relax.Expr]] = {
    "quantize_per_tensor.default": _quantize(per_channel=False),
    "quantize_per_tensor.tensor": _quantize(per_channel=False),
    "dequantize_per_tensor.default": _dequantize(per_channel=False),
    "dequantize_per_tensor.tensor": _dequantize(per_channel=False),
    "quantize_per_channel.default": _quantize(per_channel=True),
    "dequantize_per_channel.default": _dequantize(per_channel=True),
    "_int_mm.default": _int_mm,
}
