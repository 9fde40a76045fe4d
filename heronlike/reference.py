"""Inputs and reference outputs for checking candidates.

Inputs are drawn once per tune from the seed (integers over their dtype's full range, floats
in ``[-1, 1)``). The reference output is computed independently of any heronlike schedule:
with ``numpy.einsum`` in float64 for a single multiply-accumulate stage (exact for integer
products up to 2**53), otherwise by TVM from the *unscheduled* PrimFunc.
"""

from __future__ import annotations

import string
from pathlib import Path
from typing import Any

import numpy as np
import tvm

from .dag import ComputeDAG
from .exact import exact_einsum


def random_inputs(dag: ComputeDAG, rng: np.random.Generator) -> list[np.ndarray]:
    """One array per PrimFunc parameter, call order; outputs are zero-filled.

    Integer inputs of up to 16 bits span their whole range; wider ones (an int32 bias, an
    int32 addend) are drawn from the int16 range, the scale of an int8 GEMM's accumulator, so
    that an epilogue's shift and clip see values that do not all saturate (a full-range int32
    bias would make nearly every requantised output ±127 and the correctness check weak).
    Floating-point inputs are uniform in [-1, 1).
    """
    arrays = []
    for p in dag.params:
        if p.name in dag.outputs:
            arrays.append(np.zeros(p.shape, p.dtype))
        elif np.issubdtype(np.dtype(p.dtype), np.integer):
            info = np.iinfo(p.dtype)
            lo, hi = (info.min, info.max) if info.bits <= 16 else (-(2**15), 2**15 - 1)
            lo, hi = max(lo, info.min), min(hi, info.max)
            arrays.append(rng.integers(lo, hi, p.shape, dtype=p.dtype, endpoint=True))
        else:
            arrays.append(rng.uniform(-1, 1, p.shape).astype(p.dtype))
    return arrays


def reference_outputs(dag: ComputeDAG, arrays: list[np.ndarray]) -> dict[int, np.ndarray]:
    """Expected value of each output parameter, keyed by its call position."""
    einsum = _einsum_reference(dag, arrays)
    if einsum is not None:
        return einsum
    ex = tvm.compile(tvm.IRModule({"main": dag.func}), target="llvm")
    dev = tvm.cpu()
    tensors = [tvm.runtime.tensor(a, dev) for a in arrays]
    ex["main"](*tensors)
    return {i: tensors[i].numpy() for i, p in enumerate(dag.params) if p.name in dag.outputs}


def _einsum_reference(dag: ComputeDAG, arrays: list[np.ndarray]) -> dict[int, np.ndarray] | None:
    spec = _einsum_spec(dag)
    if spec is None:
        return None
    (ia, ib), io = spec["operands"], spec["output"]
    out_dtype = np.dtype(dag.params[io].dtype)
    return {io: exact_einsum(str(spec["spec"]), arrays[ia], arrays[ib], out_dtype)}


def _einsum_spec(dag: ComputeDAG) -> dict[str, Any] | None:
    """A single multiply-accumulate stage over plain indices as an einsum over parameters."""
    stages = dag.stages
    if len(stages) != 1 or stages[0].mac is None:
        return None
    mac = stages[0].mac
    accesses = (mac.a, mac.b, mac.out)
    if not all(acc.is_plain for acc in accesses):
        return None
    position = {p.name: i for i, p in enumerate(dag.params)}
    if any(acc.buffer not in position for acc in accesses):
        return None
    letters = {ax.name: string.ascii_letters[i] for i, ax in enumerate(stages[0].axes)}
    spec = "{},{}->{}".format(*("".join(letters[a] for a in acc.axes) for acc in accesses))  # type: ignore[index]
    return {
        "kind": "einsum",
        "spec": spec,
        "operands": [position[mac.a.buffer], position[mac.b.buffer]],
        "output": position[mac.out.buffer],
    }


def reference_spec(dag: ComputeDAG) -> dict[str, object] | None:
    """How a machine without heronlike or TVM computes the reference output of ``dag``
    (an offline bundle's ``reference``), or None when it is not one it knows.

    A single multiply-accumulate stage over plain indices (GEMM, BMM, GEMV) is an einsum:
    ``{"kind": "einsum", "spec": "mk,nk->mn", "operands": [a, b], "output": c}`` with
    parameter positions; a channels-last 2-D convolution (:func:`heronlike.ops.c2d`, with its
    zero-padding stage) is ``{"kind": "conv2d_nhwc", "input", "weight", "output", "stride",
    "padding", "dilation"}``.
    """
    conv = _conv2d_spec(dag)
    return conv if conv is not None else _einsum_spec(dag)


def _conv2d_spec(dag: ComputeDAG) -> dict[str, object] | None:
    """The conv2d_nhwc reference of ``Y[n,oh,ow,co] += Xp[n, oh·s + kh·d, ow·s + kw·d, ci] ·
    W[co,kh,kw,ci]`` with ``Xp`` the zero padding of a parameter ``X`` (or ``X`` itself)."""
    macs = [st for st in dag.stages if st.mac is not None]
    if len(macs) != 1 or len(dag.stages) > 2:
        return None
    stage = macs[0]
    mac = stage.mac
    position = {p.name: i for i, p in enumerate(dag.params)}
    out, a, w = mac.out, mac.a, mac.b
    if out.buffer not in position:  # an epilogue stage (requantisation) follows the product
        return None
    if len(out.axes) != 4 or len(a.axes) != 4 or len(w.axes) != 4 or not a.index:
        return None
    if not (out.is_plain and w.is_plain) or None in (a.axes[0], a.axes[3]):
        return None
    n, oh, ow, co = out.axes
    if w.axes[0] != co or a.axes[0] != n or w.axes[3] != a.axes[3]:
        return None
    kh, kw = w.axes[1], w.axes[2]
    stride, dilation = [], []
    for idx, (o, k) in zip(a.index[1:3], ((oh, kh), (ow, kw)), strict=True):
        coeffs = dict(idx.terms) if idx is not None else {}
        if idx is None or idx.const != 0 or set(coeffs) - {o, k} or o not in coeffs:
            return None
        stride.append(coeffs[o])
        dilation.append(coeffs.get(k, 1))
    padding = [0, 0]
    source = a.buffer
    if source not in position:  # a zero-padding stage
        (pad_stage,) = [st for st in dag.stages if st.write.buffer == source]
        (read,) = pad_stage.reads
        if read.buffer not in position or not read.index:
            return None
        offsets = [idx.const if idx is not None else 0 for idx in read.index]
        if offsets[0] != 0 or offsets[3] != 0:
            return None
        padding = [-offsets[1], -offsets[2]]
        source = read.buffer
    return {
        "kind": "conv2d_nhwc",
        "input": position[source],
        "weight": position[w.buffer],
        "output": position[out.buffer],
        "stride": stride,
        "padding": padding,
        "dilation": dilation,
    }


def tolerance(dag: ComputeDAG) -> tuple[float, float]:
    """``(rtol, atol)`` for checking a float output against a float32/float64 reference of
    the same inputs: float32 accumulation 1e-3 with ``atol = 1e-3·√K`` (K: the reduction
    length; inputs in [-1, 1) make outputs of size about √K/3); float16 accumulation 5e-2 and
    ``5e-2·√K`` (each of K additions rounds at 2^-11 of a partial sum); integers exact."""
    import math

    outs = [p for p in dag.params if p.name in dag.outputs]
    if all(np.issubdtype(np.dtype(p.dtype), np.integer) for p in outs):
        return 0.0, 0.0
    k = 1
    for stage in dag.stages:
        reduce = [ax.extent for ax in stage.axes if ax.kind == "R"]
        k = max(k, math.prod(reduce) if reduce else 1)
    rtol = 5e-2 if any(p.dtype == "float16" for p in outs) else 1e-3
    return rtol, rtol * math.sqrt(k)


#: the ``.npz`` entry naming the arrays stored as bfloat16 bit patterns (see :func:`save_npz`)
BFLOAT16_NAMES = "__bfloat16__"


def save_npz(path: Path, arrays: dict[str, np.ndarray]) -> Path:
    """Write ``arrays`` uncompressed to ``path`` (atomic rename) and return it. ``.npz`` has no
    bfloat16 (``ml_dtypes``'s arrays come back as raw 2-byte voids), so such arrays are stored
    as their uint16 bit patterns and named in the entry :data:`BFLOAT16_NAMES`;
    :func:`load_npz` restores them."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.npz")
    bf16 = [name for name, a in arrays.items() if a.dtype.name == "bfloat16"]
    stored = {name: a.view(np.uint16) if name in bf16 else a for name, a in arrays.items()}
    if bf16:
        stored[BFLOAT16_NAMES] = np.array(bf16)
    np.savez(tmp, **stored)
    tmp.replace(path)
    return path


def load_npz(path: str | Path) -> dict[str, np.ndarray]:
    """The arrays :func:`save_npz` wrote, bfloat16 ones as bfloat16 again."""
    with np.load(path, allow_pickle=False) as npz:
        arrays = {name: npz[name] for name in npz.files}
    names = arrays.pop(BFLOAT16_NAMES, None)
    if names is not None:
        import ml_dtypes

        for name in names.tolist():
            arrays[name] = arrays[name].view(ml_dtypes.bfloat16)
    return arrays
