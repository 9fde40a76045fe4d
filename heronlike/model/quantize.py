"""Quantized models onto integer compute: QDQ patterns rewritten into u8 x s8 -> s32 stages.

An ONNX model quantized by ONNX Runtime's ``quantize_static`` (QDQ format), or any Relax module
in that form, reaches Relax as ``dequantize`` -> float ``conv2d`` / ``matmul`` (+ bias) ->
``quantize``: float32 compute, which no integer intrinsic can take. :func:`rewrite_qdq` turns each
such group into one integer stage, the standard integer-arithmetic-only form of a quantized
layer (Jacob et al., "Quantization and Training of Neural Networks for Efficient
Integer-Arithmetic-Only Inference", CVPR 2018, §2.2-2.4):

* ``acc = conv2d / matmul(x_q, w_q, out_dtype="int32")``: u8 activations times s8 weights,
  accumulated in int32 (what ``vpdpbusd`` computes on DL Boost); a padded convolution pads
  ``x_q`` with its zero point, which is what zero padding of the dequantized float input means;
* ``acc + (b_q - z_x * sum_k w_q)``: the activation zero point through a compensation term
  precomputed per output channel from the constant weights, folded with the int32 bias
  (ONNX Runtime quantizes the bias with scale ``s_x * s_w``);
* the requantise epilogue ``quantize(float(acc') * (s_x * s_w / s_y), 1, z_y)``: round to nearest,
  add the output zero point, clip, cast; a ReLU or clip between the layer and its ``quantize``
  is applied to the scaled value.

s8 activations (symmetric quantization, PyTorch PT2E) take the usual +128 shift to u8, with the
zero point moved by 128, which is exact. Weights must be constants with a zero point of 0 (ONNX
Runtime's s8 weights are symmetric); the activation scale and zero point must be per tensor.
Grouped (and depthwise) convolutions take the same form, group by group. Groups that do not
match (a u8 x u8 product of two activations, weights with a zero point ...) stay float and
are named in the :class:`QuantizeReport`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import tvm
from tvm import relax

__all__ = ["QUANTIZE_ATTR", "QuantizeReport", "describe", "lift_scalar_scales", "rewrite_qdq"]

#: the fused module's attribute holding :func:`describe` of the report, as JSON
QUANTIZE_ATTR = "heronlike.quantized"


@dataclass
class QuantizeReport:
    """What :func:`rewrite_qdq` did.

    Attributes:
        rewritten: one line per layer turned into integer compute (operator, shapes).
        kept_float: one line per quantized-looking layer left in float, with the reason.
    """

    rewritten: list[str] = field(default_factory=list)
    kept_float: list[str] = field(default_factory=list)

    def summary(self) -> str:
        """A few human-readable lines."""
        lines = [f"{len(self.rewritten)} quantized layers to integer compute"]
        lines += [f"  integer: {r}" for r in self.rewritten]
        lines += [f"  float:   {r}" for r in self.kept_float]
        return "\n".join(lines)


class _NoMatch(Exception):
    """A group is not the QDQ pattern; the message says why (for the report)."""


def _op(expr: Any) -> str:
    return getattr(getattr(expr, "op", None), "name", "")


def _const(expr: Any) -> np.ndarray | None:
    return expr.value.numpy() if isinstance(expr, tvm.ir.expr.Constant) else None


def _shape(expr: Any) -> tuple[int, ...]:
    return tuple(int(d) for d in expr.ty.shape.values)


def _dtype(expr: Any) -> str:
    return str(expr.ty.dtype)


@dataclass
class _Dequantize:
    """``dequantize(data, scale, zero_point, axis)`` with constant scale and zero point."""

    data: Any
    scale: np.ndarray
    zero_point: np.ndarray
    axis: int


@dataclass
class _Layer:
    """A conv2d / matmul whose operands matched: the activation, the weight and its s8 values
    (``[O, I, kh, kw]`` for a convolution, ``[K, N]`` for a matmul)."""

    expr: Any
    where: str
    x: _Dequantize
    w: _Dequantize
    w_q: np.ndarray

    @property
    def channels(self) -> int:
        """Output channels."""
        return int(self.w_q.shape[0] if _op(self.expr) == "relax.nn.conv2d" else self.w_q.shape[1])

    @property
    def scale_in(self) -> np.ndarray:
        """``s_x * s_w`` per output channel (float64): the scale of the int32 product."""
        s_w = np.broadcast_to(self.w.scale.reshape(-1), (self.channels,)).astype(np.float64)
        return float(self.x.scale.reshape(())) * s_w


def rewrite_qdq(mod: tvm.IRModule) -> tuple[tvm.IRModule, QuantizeReport]:
    """Rewrite every ``dequantize -> conv2d / matmul (+ bias) (+ ReLU / clip) -> quantize`` group
    of ``mod``'s Relax functions into integer compute (see the module docstring).

    Args:
        mod: a Relax ``IRModule`` as imported (before constant folding, so the weights'
            ``dequantize`` of constants is still there).

    Returns:
        ``(module, report)``: the rewritten module (unchanged when nothing matched; the float
        originals of rewritten groups are removed by dead-code elimination) and what was done.
    """
    report = QuantizeReport()
    lowered: list[str] = []  # quantize / dequantize spelt out element-wise
    builder = relax.BlockBuilder(mod)

    @relax.expr_functor.mutator
    class Rewriter(relax.PyExprMutator):
        def __init__(self, m: tvm.IRModule) -> None:
            super().__init__(m)
            self.defs: dict[Any, Any] = {}
            self.requantized: list[Any] = []

        def visit_var_binding_(self, binding: relax.VarBinding) -> None:  # noqa: N802
            self.defs[binding.var] = binding.value
            super().visit_var_binding_(binding)

        def resolve(self, expr: Any) -> Any:
            while isinstance(expr, relax.Var) and expr in self.defs:
                expr = self.defs[expr]
            return expr

        def visit_call_(self, call: relax.Call) -> relax.Expr:  # noqa: N802 - TVM's name
            if _op(call) == "relax.quantize":
                try:
                    return self.integer_layer(call)
                except _NoMatch as why:
                    if str(why):
                        report.kept_float.append(str(why))
            if _op(call) == "relax.matmul" and str(call.attrs.out_dtype) == "int32":
                try:
                    return self.integer_matmul(call)
                except _NoMatch as why:
                    if str(why):
                        report.kept_float.append(str(why))
            elif _op(call) in ("relax.nn.conv2d", "relax.matmul"):
                try:
                    return self.float_output_layer(call)
                except _NoMatch as why:  # said once, where its quantize was tried first
                    if str(why) and report.kept_float[-1:] != [str(why)]:
                        report.kept_float.append(str(why))
            call = super().visit_call_(call)
            return self.elementwise(call)

        def constant(self, expr: Any) -> np.ndarray | None:
            """The value of ``expr`` where it is a constant, through variables and casts
            (PyTorch's int64 zero points arrive cast to the quantized dtype)."""
            expr = self.resolve(expr)
            if _op(expr) == "relax.astype":
                value = self.constant(expr.args[0])
                return None if value is None else value.astype(_dtype(expr))
            return _const(expr)

        def widened(self, expr: Any) -> tuple[Any, Any]:
            """``subtract(astype(q, int32), astype(z, int32))`` (ONNX ``MatMulInteger`` as
            imported) -> ``(q, z)``; an int8/uint8 ``q`` itself -> ``(q, None)``."""
            e = self.resolve(expr)
            if _op(e) == "relax.subtract":
                q, z = (self.resolve(a) for a in e.args)
                if _op(q) == "relax.astype" and _op(z) == "relax.astype":
                    q_in, z_in = q.args[0], z.args[0]
                    if _dtype(q_in) in ("uint8", "int8"):
                        return q_in, z_in
            if _op(e) == "relax.astype" and _dtype(e.args[0]) in ("uint8", "int8"):
                return e.args[0], None  # widened without a zero point
            if _dtype(e) in ("uint8", "int8"):
                return expr, None
            raise _NoMatch("")

        def integer_matmul(self, call: relax.Call) -> relax.Expr:
            """An integer matmul in 8-bit operands -> u8 x s8 -> s32 with its compensation:
            ``MatMulInteger`` (both operands widened to int32 minus their zero points, which
            gives int32 x int32), and s8 x s8 (``torch._int_mm``), whose left operand takes the
            +128 shift. Exact in int32."""
            where = f"matmul {list(_shape(call))}"
            (x, z_x), (w, z_w) = (self.widened(a) for a in call.args)
            if z_w is not None:
                zw = self.constant(z_w)
                if zw is None or np.any(zw != 0):
                    raise _NoMatch(f"{where}: the right operand's zero point is not 0")
            if _dtype(w) != "int8":
                raise _NoMatch(f"{where}: the right operand is {_dtype(w)}, not int8")
            if z_x is None and _dtype(x) == "uint8" and call.args[0] is x:
                raise _NoMatch("")  # already u8 x s8
            bb = self.builder_
            x_new, w_new = self.visit_expr(x), self.visit_expr(w)
            shift = 0
            if _dtype(x) == "int8":
                wide = bb.emit(
                    relax.op.add(relax.op.astype(x_new, "int16"), relax.const(128, "int16"))
                )
                x_new, shift = bb.emit(relax.op.astype(wide, "uint8")), 128
            acc = bb.emit(relax.op.matmul(x_new, w_new, out_dtype="int32"))
            # sum_k w[k, n], from the constant at compile time when it is one
            w_const = self.constant(w)
            if w_const is not None:
                colsum = relax.const(w_const.astype(np.int64).sum(axis=-2).astype(np.int32))
            else:
                colsum = bb.emit(relax.op.sum(relax.op.astype(w_new, "int32"), axis=[-2]))
            zero = relax.const(np.int32(shift), "int32")
            if z_x is not None:
                zero = bb.emit(relax.op.add(relax.op.astype(self.visit_expr(z_x), "int32"), zero))
            elif shift == 0:
                return acc
            report.rewritten.append(f"{where}: {_dtype(x)} x s8 -> s32 (integer matmul)")
            return relax.op.subtract(acc, bb.emit(relax.op.multiply(zero, colsum)))

        def elementwise(self, call: relax.Call) -> relax.Expr:
            """A per-tensor ``quantize`` / ``dequantize`` left (residual adds, pooling ...)
            spelt out in element-wise operators, which ConvertLayout passes through (it stops
            at quantize and dequantize with transposes) and FuseOps fuses."""
            kind = _op(call)
            if kind not in ("relax.quantize", "relax.dequantize"):
                return call
            scale, zp = self.constant(call.args[1]), self.constant(call.args[2])
            if scale is None or zp is None or scale.size != 1 or zp.size != 1:
                return call
            bb, x = self.builder_, call.args[0]
            lowered.append(kind)
            s, z = (_layer_constant(v, "float32", x) for v in (scale, zp))
            out_dtype = str(call.attrs.out_dtype)
            if kind == "relax.dequantize":
                x = bb.emit(relax.op.astype(x, "float32"))
                x = bb.emit(relax.op.subtract(x, z))
                return relax.op.astype(relax.op.multiply(x, s), out_dtype)
            if "int" not in out_dtype:
                return call
            x = bb.emit(relax.op.round(bb.emit(relax.op.divide(x, s))))
            return _saturate(bb, bb.emit(relax.op.add(x, z)), out_dtype)

        # -- matching --------------------------------------------------------------------

        def dequantize(self, expr: Any) -> _Dequantize | None:
            expr = self.resolve(expr)
            if _op(expr) != "relax.dequantize":
                return None
            scale, zp = self.constant(expr.args[1]), self.constant(expr.args[2])
            if scale is None or zp is None:
                return None
            # the data stays a variable (an activation) unless it is bound to a constant
            data = expr.args[0]
            if isinstance(self.resolve(data), tvm.ir.expr.Constant):
                data = self.resolve(data)
            return _Dequantize(data, scale, zp, int(expr.attrs.axis))

        def integer_layer(self, q: relax.Call) -> relax.Expr:
            out_scale = self.constant(q.args[1])
            out_zp = self.constant(q.args[2])
            if out_scale is None or out_zp is None or out_scale.size != 1:
                raise _NoMatch("")
            expr, clip, bias = self.layer_under(q)
            kind = _op(expr)
            if kind not in ("relax.nn.conv2d", "relax.matmul"):
                raise _NoMatch("")
            layer = self.operands(expr)
            b_q, fb = self.bias_of(bias, layer.channels, layer.scale_in, layer.where)
            acc, correction, scale_in, channel_shape = self.accumulate(layer)
            return self.requantize(
                acc,
                b_q + correction,
                fb,
                scale_in,
                out_scale,
                out_zp,
                clip,
                channel_shape,
                str(q.attrs.out_dtype),
            )

        def layer_under(self, q: relax.Call) -> tuple[Any, tuple[float, float] | None, Any]:
            """What a ``quantize`` ``q`` takes: ``(layer, clip, bias)``, where ``layer`` is
            the conv2d / matmul call under an optional ReLU / clip and bias add (or whatever
            expression is there), ``clip`` the bounds of that ReLU / clip and ``bias`` the
            other operand of the add."""
            expr = self.resolve(q.args[0])
            clip: tuple[float, float] | None = None
            if _op(expr) == "relax.nn.relu":
                clip, expr = (0.0, float("inf")), self.resolve(expr.args[0])
            elif _op(expr) == "relax.clip":
                lo, hi = (float(_scalar(self.resolve(a))) for a in expr.args[1:3])
                clip, expr = (lo, hi), self.resolve(expr.args[0])
            bias = None
            if _op(expr) == "relax.add":
                a, b = (self.resolve(x) for x in expr.args)
                if _op(a) not in ("relax.nn.conv2d", "relax.matmul"):
                    a, b = b, a
                expr, bias = a, b
            return expr, clip, bias

        def scan(self, func: relax.Function) -> None:
            """Learn every binding of ``func`` before rewriting, and which layers feed a
            ``quantize`` (rewritten there, with their requantise epilogue, not alone)."""
            for block in getattr(func.body, "blocks", ()):
                for binding in block.bindings:
                    if isinstance(binding, relax.VarBinding):
                        self.defs[binding.var] = binding.value
            for value in list(self.defs.values()):
                if _op(value) == "relax.quantize":
                    try:
                        layer = self.layer_under(value)[0]
                    except _NoMatch:
                        continue
                    if _op(layer) in ("relax.nn.conv2d", "relax.matmul"):
                        self.requantized.append(layer)

        def float_output_layer(self, call: relax.Call) -> relax.Expr:
            """``dequantize`` -> conv2d / matmul with no ``quantize`` after it (PT2E's x86
            recipe, a model's last layer): the integer product, then ``float(acc + c) *
            s_x * s_w``, exact up to the one float rounding of that product."""
            if any(call.same_as(r) for r in self.requantized):
                raise _NoMatch("")  # rewritten at its quantize, or kept float there
            layer = self.operands(call)
            acc, correction, scale_in, channel_shape = self.accumulate(layer)
            bb = self.builder_
            if np.any(correction):
                c = relax.const(correction.astype(np.int32).reshape(channel_shape), "int32")
                acc = bb.emit(relax.op.add(acc, c))
            y = bb.emit(relax.op.astype(acc, "float32"))
            s = relax.const(scale_in.astype(np.float32).reshape(channel_shape), "float32")
            return relax.op.multiply(y, s)

        def operands(self, expr: relax.Call) -> _Layer:
            """The dequantized operands of a conv2d / matmul ``expr``, checked (else
            :class:`_NoMatch` naming the reason, or with no message where ``expr`` is not a
            quantized layer at all)."""
            kind = _op(expr)
            where = f"{kind.removeprefix('relax.').removeprefix('nn.')} {list(_shape(expr))}"
            x = self.dequantize(expr.args[0])
            w_expr = self.resolve(expr.args[1])
            transpose = False
            if kind == "relax.matmul" and _op(w_expr) == "relax.permute_dims":
                axes = w_expr.attrs.axes
                if axes is None or [int(i) for i in axes] != [1, 0]:
                    raise _NoMatch(f"{where}: the weight is permuted other than a transpose")
                transpose, w_expr = True, self.resolve(w_expr.args[0])
            w = self.dequantize(w_expr)
            if x is None or w is None:
                raise (
                    _NoMatch(f"{where}: an operand is not dequantized") if x or w else _NoMatch("")
                )
            w_q = _const(w.data)
            if w_q is None:
                raise _NoMatch(f"{where}: both operands are activations (no constant weight)")
            if w_q.dtype != np.int8 or np.any(w.zero_point != 0):
                raise _NoMatch(f"{where}: the weight is not s8 with zero point 0")
            if x.scale.size != 1 or x.zero_point.size != 1:
                raise _NoMatch(f"{where}: the activation is quantized per channel")
            if _dtype(x.data) not in ("uint8", "int8"):
                raise _NoMatch(f"{where}: the activation is {_dtype(x.data)}")
            if kind == "relax.nn.conv2d":
                attrs = expr.attrs
                if str(attrs.data_layout) != "NCHW" or str(attrs.kernel_layout) != "OIHW":
                    raise _NoMatch(f"{where}: layout {attrs.data_layout}/{attrs.kernel_layout}")
                return _Layer(expr, where, x, w, w_q)
            if w_q.ndim != 2:
                raise _NoMatch(f"{where}: the weight is not a matrix")
            w_kn = w_q.T if transpose else w_q
            w_axis = 1 if (w.axis in (0, -2) and transpose) or w.axis in (1, -1) else 0
            if w.scale.size > 1 and w_axis != 1:
                raise _NoMatch(f"{where}: the weight is quantized along its reduction axis")
            return _Layer(expr, where, x, w, np.ascontiguousarray(w_kn))

        # -- emitting --------------------------------------------------------------------

        def activation(self, x: _Dequantize) -> tuple[relax.Expr, int]:
            """The activation as u8 and its zero point (s8 shifted by +128)."""
            data, zp = self.visit_expr(x.data), int(x.zero_point.reshape(()))
            if _dtype(x.data) == "int8":
                wide = self.builder_.emit(relax.op.astype(data, "int16"))
                wide = self.builder_.emit(relax.op.add(wide, relax.const(128, "int16")))
                data, zp = self.builder_.emit(relax.op.astype(wide, "uint8")), zp + 128
            return data, zp

        def bias_of(self, bias: Any, channels: int, scale_in: np.ndarray, where: str):
            """(int32 bias added to the accumulator, float bias added after scaling)."""
            if bias is None:
                return np.zeros(channels, np.int64), None
            dq = self.dequantize(bias)
            if dq is None and _op(bias) == "relax.reshape":
                dq = self.dequantize(bias.args[0])
            if dq is not None and _const(dq.data) is not None and not np.any(dq.zero_point):
                b_q = _const(dq.data).reshape(-1).astype(np.int64)
                if b_q.size == channels and np.allclose(
                    np.broadcast_to(dq.scale.reshape(-1), (channels,)), scale_in, rtol=1e-5
                ):
                    return b_q, None
                return np.zeros(channels, np.int64), (b_q * dq.scale.reshape(-1)).astype(np.float32)
            b = _const(bias)
            if b is None and _op(bias) == "relax.reshape":
                b = self.constant(bias.args[0])
            if b is None or b.size != channels:
                raise _NoMatch(f"{where}: the bias is not a constant per output channel")
            return np.zeros(channels, np.int64), b.reshape(-1).astype(np.float32)

        def requantize(
            self,
            acc: relax.Expr,
            correction: np.ndarray,
            float_bias: np.ndarray | None,
            scale_in: np.ndarray,
            out_scale: np.ndarray,
            out_zp: np.ndarray,
            clip: tuple[float, float] | None,
            channel_shape: tuple[int, ...],
            out_dtype: str,
        ) -> relax.Expr:
            bb = self.builder_
            if np.any(correction):
                c = correction.astype(np.int32).reshape(channel_shape)
                acc = bb.emit(relax.op.add(acc, relax.const(c, "int32")))
            y = bb.emit(relax.op.astype(acc, "float32"))
            s_y = float(out_scale.reshape(()))
            mult = (scale_in.astype(np.float64) / s_y).astype(np.float32).reshape(channel_shape)
            y = bb.emit(relax.op.multiply(y, relax.const(mult, "float32")))
            if float_bias is not None:
                fb = (float_bias / s_y).astype(np.float32).reshape(channel_shape)
                y = bb.emit(relax.op.add(y, relax.const(fb, "float32")))
            if clip is not None:  # monotone: before rounding, as the float model does
                lo, hi = clip[0] / s_y, clip[1] / s_y
                y = bb.emit(relax.op.maximum(y, _layer_constant(lo, "float32", y)))
                if np.isfinite(hi):
                    y = bb.emit(relax.op.minimum(y, _layer_constant(hi, "float32", y)))
            # quantize(y, 1, z_y) spelt out in element-wise operators (round half to even,
            # as TVM's quantize and ONNX's QuantizeLinear), which ConvertLayout passes through
            # and FuseOps fuses into the layer's stage
            y = bb.emit(relax.op.round(y))
            y = bb.emit(relax.op.add(y, _layer_constant(out_zp, "float32", y)))
            return _saturate(bb, y, out_dtype)

        def accumulate(
            self, layer: _Layer
        ) -> tuple[relax.Expr, np.ndarray, np.ndarray, tuple[int, ...]]:
            """The int32 product of ``layer``: ``(acc, correction, scale_in, channel_shape)``,
            where ``acc + correction`` (int32, per output channel: ``-z_x * sum_k w``) is the
            exact product of the dequantized operands divided by ``scale_in = s_x * s_w``."""
            x, w_q, channels, scale_in = layer.x, layer.w_q, layer.channels, layer.scale_in
            data, z_x = self.activation(x)
            bb = self.builder_
            if _op(layer.expr) == "relax.matmul":
                acc = bb.emit(relax.op.matmul(data, relax.const(w_q, "int8"), out_dtype="int32"))
                comp = z_x * w_q.astype(np.int64).sum(axis=0)
                report.rewritten.append(f"{layer.where}: u8 x s8 -> s32, zero point {z_x}")
                return acc, -comp, scale_in, (channels,)
            attrs = layer.expr.attrs
            padding = [int(p) for p in attrs.padding]
            if any(padding) and z_x != 0:  # zero padding of the float input is z_x here
                top, left, bottom, right = padding
                data = bb.emit(
                    relax.op.nn.pad(
                        data, [0, 0, 0, 0, top, bottom, left, right], "constant", float(z_x)
                    )
                )
                padding = [0, 0, 0, 0]
            acc = bb.emit(
                relax.op.nn.conv2d(
                    data,
                    relax.const(w_q, "int8"),
                    strides=[int(s) for s in attrs.strides],
                    padding=padding,
                    dilation=[int(d) for d in attrs.dilation],
                    groups=int(attrs.groups),
                    out_dtype="int32",
                )
            )
            # each output channel sums over its own group's inputs: the weights' row sums
            comp = z_x * w_q.reshape(channels, -1).astype(np.int64).sum(axis=1)
            report.rewritten.append(f"{layer.where}: u8 x s8 -> s32, zero point {z_x}")
            return acc, -comp, scale_in, (1, channels, 1, 1)

    for gv, func in list(mod.functions.items()):
        if isinstance(func, relax.Function):
            rewriter = Rewriter(builder.get())
            rewriter.scan(func)
            builder.update_func(gv, rewriter.visit_expr(func))
    if not report.rewritten and not lowered:
        return mod, report  # not a quantized model
    return lift_scalar_scales(relax.transform.DeadCodeElimination()(builder.get())), report


def lift_scalar_scales(mod: tvm.IRModule) -> tvm.IRModule:
    """Scalar float constants of ``multiply`` / ``divide`` in ``mod``'s Relax functions become
    one-element tensors ``(1, ..., 1)`` of the other operand's rank (a scalar result is reshaped
    back to a scalar), values and result shapes unchanged.

    What it is for: a dynamically quantized model (ONNX Runtime's ``quantize_dynamic``) scales
    each ``MatMulInteger`` product by ``x_scale · w_scale``, its per-tensor weight scale a
    scalar constant. Relax's legalization inlines a scalar constant into the kernel as an
    immediate, so the layers of one shape, which differ only in that scale, become
    structurally different kernels, each a task of its own (BERT-base: 91 tasks, its 72
    GEMMs tuned one by one). As a tensor the scale is a kernel parameter and those layers share
    one task, as :func:`_layer_constant` does for the QDQ scales.
    """

    @relax.expr_functor.mutator
    class Lifter(relax.PyExprMutator):
        def visit_call_(self, call: relax.Call) -> relax.Expr:  # noqa: N802 - TVM's name
            call = super().visit_call_(call)
            if _op(call) not in ("relax.multiply", "relax.divide"):
                return call
            args = list(call.args)
            scalars = [
                i
                for i, a in enumerate(args)
                if _const(a) is not None and a.ty.ndim == 0 and "float" in _dtype(a)
            ]
            if len(scalars) != 1 or _const(args[1 - scalars[0]]) is not None:
                return call
            i = scalars[0]
            ndim = int(args[1 - i].ty.ndim)
            if ndim < 0:  # unknown rank
                return call
            args[i] = _layer_constant(_const(args[i]), _dtype(args[i]), args[1 - i], min_rank=1)
            op = relax.op.multiply if _op(call) == "relax.multiply" else relax.op.divide
            lifted = op(*args)
            if ndim == 0:  # (1,): back to the scalar its consumers take
                return relax.op.reshape(self.builder_.emit(lifted), relax.ShapeExpr([]))
            return lifted

    builder = relax.BlockBuilder(mod)
    for gv, func in list(mod.functions.items()):
        if isinstance(func, relax.Function):
            builder.update_func(gv, Lifter(builder.get()).visit_expr(func))
    return builder.get()


def _layer_constant(
    value: Any, dtype: str, like: relax.Expr, *, min_rank: int = 0
) -> relax.Constant:
    """A per-tensor scale, zero point or bound (one number) as a constant of ``like``'s rank
    (at least ``min_rank``) and shape ``(1, ..., 1)``, not a scalar: Relax's legalization
    inlines a scalar constant into the kernel as an immediate, so layers that differ only in
    their scales would become structurally different kernels, each a task of its own
    (BERT-base: 173 tasks, not 14); as a tensor it is a parameter of the fused kernel and those
    layers share one task."""
    ndim = max(int(like.ty.ndim), min_rank)
    array = np.asarray(value, dtype=dtype).reshape((1,) * ndim)
    return relax.const(array, dtype)


def _saturate(bb: relax.BlockBuilder, y: relax.Expr, dtype: str) -> relax.Expr:
    """``y`` (float, already rounded) clipped to ``dtype``'s range and cast to it."""
    info = np.iinfo(dtype)
    y = bb.emit(relax.op.maximum(y, relax.const(np.float32(info.min), "float32")))
    y = bb.emit(relax.op.minimum(y, relax.const(np.float32(info.max), "float32")))
    return relax.op.astype(y, dtype)


def _scalar(expr: Any) -> float:
    value = _const(expr)
    if value is None:
        prim = getattr(expr, "value", None)
        if prim is None:
            raise _NoMatch("")
        return float(prim)
    return float(value.reshape(()))


def describe(report: QuantizeReport) -> Mapping[str, list[str]]:
    """The report as a JSON-ready mapping (for a compiled model's manifest)."""
    return {"integer": list(report.rewritten), "float": list(report.kept_float)}
