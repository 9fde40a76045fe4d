#!/usr/bin/env python3
"""Run a heronlike offline bundle on a CUDA GPU and write ``results.json``.

This file is a standalone script: it is copied into every bundle made by
:func:`heronlike.measure.bundle.write_bundle` and runs on a GPU machine that has Python >= 3.10,
numpy and CuPy (PyTorch optional, for the baselines; nvcc optional), and neither heronlike nor
TVM. Usage::

    python run_bundle.py BUNDLE_DIR [--out results.json] [--repeat N] [--warmup N]
                         [--candidates ID,... | --finalists K [--ranked-by RESULTS]]
                         [--no-baselines] [--timeout S] [--standin]

``--finalists K`` re-times, beside the baselines, the K fastest correct candidates of each
workload in an earlier run's results (``--ranked-by``, default ``BUNDLE_DIR/results.json``): a
search round and the re-measure of its best can then share one session on a GPU machine.

What it does, per workload of ``bundle.json``:

1. Draw the inputs from the workload's seed (``numpy.random.default_rng(seed)``, parameters in
   order: floats uniform in [-1, 1) cast to the dtype, integers over the dtype's full range),
   each at its *logical* shape, then zero-pad it to the kernel's shape. bfloat16 travels as its
   16-bit pattern (numpy has no bfloat16).
2. Compute the reference (``einsum`` or ``conv2d_nhwc``; float32 for float inputs, exact
   integers otherwise) with CuPy.
3. For each candidate: load ``kernel.cubin`` (``cupy.RawModule``), raise each kernel's dynamic
   shared memory limit past 48 KiB when needed, fill the outputs with NaN (floats) or a random
   pattern (integers), run the manifest's launches in order on the parameter buffers, check every
   output on its logical shape (``rtol``/``atol``; integers exact), then time it: ``warmup``
   calls, then ``repeat`` measurements, each = write the L2 flush buffer (``cudaMemsetAsync`` of
   ``flush_l2_bytes``) then ``number`` calls between two CUDA events; the latency is the median.
   If the driver rejects the cubin and ``nvcc`` is on PATH, ``kernel.cu`` is recompiled for the
   local GPU and loaded once more.
4. Baselines (PyTorch, unless ``--no-baselines``): the same workload on the same inputs with the
   same protocol (``torch.matmul``/``torch._int_mm``/``torch.einsum``, or
   ``torch.nn.functional.conv2d`` on channels_last tensors).
   A float16/bfloat16 GEMM or BMM with a float32 output is also timed as
   ``torch.mm``/``torch.bmm`` with ``out_dtype=torch.float32`` (the kernel's own output dtype;
   ``torch.matmul`` writes float16, half the output bytes), under the baseline's ``variants``.

Isolation: every workload runs in a worker subprocess (this script with ``--worker``) that
reports each candidate's start and result as a JSON line. A hung kernel is killed after
``--timeout`` seconds (``run_timeout``); a worker that dies, or whose CUDA context is lost after
an illegal-address or launch failure, costs only the candidate it was running (``crash``); a
fresh worker then takes the remaining candidates. Failures are data: ``run`` (the driver rejects
the cubin, a launch fails), ``wrong_result``, ``run_timeout``, ``crash``.

``--standin`` is a CPU stand-in for tests on machines without a GPU: it launches nothing. It goes
through the same worker plumbing and validates every candidate (files present, manifest
consistent with the workload, launch arguments covering all parameters), then records the
error kind ``"standin"`` and a fake, deterministic latency derived from the candidate id;
results.json says ``"standin": true``. Never mistake its numbers for measurements.

results.json::

    {"format": 1, "standin": false, "bundle_id": ..., "device": "NVIDIA H100 80GB HBM3",
     "compute_capability": "9.0", "driver": "580.159.04", "cuda_runtime": "13.0", ...,
     "date": ISO-8601, "policy": {"repeat", "warmup", "number", "flush_l2_bytes", "timeout_s",
     "baselines"},
     "candidates": {id: {"workload_key", "latency_s", "latencies_s", "error_kind", "error_msg",
                         "max_abs_err", "run_s", "notes"}},
     "baselines": {workload_key: {"name": "torch.matmul", "latency_s", "latencies_s",
                                  "correct", "error_msg", "max_abs_err", "out_dtype",
                                  "torch", "cuda", "cudnn", ...,
                                  "variants": [{"name", "latency_s", ...}] (optional)}}}
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

BUNDLE_FORMAT = 1
RESULTS_FORMAT = 1
BUNDLE_FILE = "bundle.json"
RESULTS_FILE = "results.json"
CANDIDATES_DIR = "cands"
CUBIN = "kernel.cubin"
SOURCE = "kernel.cu"
MANIFEST = "manifest.json"

#: error kind of every candidate of a ``--standin`` run
STANDIN = "standin"
#: worker exit status after a candidate left the CUDA context unusable
EXIT_CONTEXT_LOST = 3
#: dynamic shared memory a kernel may use without opting in (cudaFuncSetAttribute)
DEFAULT_SHARED_LIMIT = 48 * 1024
#: a test hook: ``crash:ID`` makes the worker die, ``hang:ID`` makes it hang, at candidate ID
FAULT_ENV = "RUN_BUNDLE_FAULT"

_FLOATS = ("float16", "bfloat16", "float32", "float64")
_INTS = ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64")
_BF16_NAN = 0x7FC0
_DRIVER_REJECTS = (
    "NO_BINARY_FOR_GPU",
    "INVALID_PTX",
    "INVALID_IMAGE",
    "UNSUPPORTED_PTX_VERSION",
    "INVALID_SOURCE",
    "JIT_COMPILER_NOT_FOUND",
    "no kernel image",
)
_WORKER_START_S = 900.0  # drawing inputs and computing the reference


# ------------------------------------------------------------------------------------------------
# dtypes and data


def is_float(dtype: str) -> bool:
    """True for the float dtypes the bundle supports."""
    return dtype in _FLOATS


def storage_dtype(dtype: str) -> np.dtype:
    """The numpy dtype holding a parameter's bytes (bfloat16: its 16-bit pattern as uint16).

    Raises:
        ValueError: for a dtype the bundle does not support.
    """
    if dtype == "bfloat16":
        return np.dtype(np.uint16)
    if dtype in _FLOATS or dtype in _INTS:
        return np.dtype(dtype)
    raise ValueError(f"unsupported dtype {dtype!r} (supported: {', '.join(_FLOATS + _INTS)})")


def bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bit patterns (uint16), rounding to nearest even."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def decode(arr: np.ndarray, dtype: str) -> np.ndarray:
    """A parameter's stored array as numbers: bfloat16 bit patterns become float32."""
    if dtype == "bfloat16":
        return (np.asarray(arr, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)
    return np.asarray(arr)


def _draw(rng: np.random.Generator, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    if is_float(dtype):
        x = rng.uniform(-1.0, 1.0, size=shape)
        return bf16_bits(x) if dtype == "bfloat16" else x.astype(dtype)
    info = np.iinfo(storage_dtype(dtype))
    return rng.integers(info.min, info.max, size=shape, dtype=storage_dtype(dtype), endpoint=True)


def logical_shape(param: dict[str, Any]) -> tuple[int, ...]:
    """The shape the computation is defined on (``logical_shape``, else the kernel's shape)."""
    return tuple(int(d) for d in param.get("logical_shape") or param["shape"])


def draw_inputs(workload: dict[str, Any]) -> list[np.ndarray | None]:
    """The workload's inputs, at their logical shapes, drawn from ``workload["seed"]``.

    One ``numpy.random.default_rng(seed)`` draws the inputs in parameter order: floats uniform in
    [-1, 1) cast to the dtype, integers uniform over the dtype's whole range. Entries of
    non-input parameters are ``None``. bfloat16 arrays hold bit patterns (uint16).
    """
    rng = np.random.default_rng(int(workload["seed"]))
    return [
        _draw(rng, p["dtype"], logical_shape(p)) if p.get("role") == "input" else None
        for p in workload["params"]
    ]


def pad_to(arr: np.ndarray, shape: tuple[int, ...] | list[int]) -> np.ndarray:
    """``arr`` zero-padded at the end of each axis to ``shape`` (C-contiguous); an array of
    another rank with as many elements is reshaped (a kernel parameter that is a row-major view
    of the logical one, e.g. an implicit GEMM's ``[N·OH·OW, CO]`` output).

    Raises:
        ValueError: when ranks differ or ``arr`` is larger than ``shape`` on some axis.
    """
    shape = tuple(int(d) for d in shape)
    if arr.ndim != len(shape) and arr.size == math.prod(shape):
        return np.ascontiguousarray(arr).reshape(shape)  # a row-major view of another rank
    if arr.ndim != len(shape) or any(a > s for a, s in zip(arr.shape, shape)):
        raise ValueError(f"cannot pad an array of shape {arr.shape} to {shape}")
    if arr.shape == shape:
        return np.ascontiguousarray(arr)
    out = np.zeros(shape, dtype=arr.dtype)
    out[tuple(slice(0, n) for n in arr.shape)] = arr
    return out


def output_fill(workload: dict[str, Any], index: int) -> np.ndarray:
    """What output ``index`` holds before a checked call: NaN (floats) or a random pattern."""
    p = workload["params"][index]
    shape = tuple(int(d) for d in p["shape"])
    if p["dtype"] == "bfloat16":
        return np.full(shape, _BF16_NAN, dtype=np.uint16)
    if is_float(p["dtype"]):
        return np.full(shape, np.nan, dtype=p["dtype"])
    return _draw(np.random.default_rng([int(workload["seed"]), 1, index]), p["dtype"], shape)


# ------------------------------------------------------------------------------------------------
# references


def gemm_plan(spec: str) -> tuple[list[str], list[str], list[str], list[str]] | None:
    """Split a two-operand einsum into (batch, m, n, k) index letters, or ``None`` when it is not
    a (batched) matrix product (a letter summed in one operand only, a repeated letter...)."""
    lhs, arrow, out = spec.replace(" ", "").partition("->")
    ins = lhs.split(",")
    if not arrow or len(ins) != 2:
        return None
    a, b = ins
    if any(len(set(s)) != len(s) for s in (a, b, out)) or not set(out) <= set(a) | set(b):
        return None
    batch = [c for c in out if c in a and c in b]
    m = [c for c in out if c in a and c not in b]
    n = [c for c in out if c in b and c not in a]
    k = [c for c in a if c in b and c not in out]
    if set(a) != set(batch + m + k) or set(b) != set(batch + k + n):
        return None
    return batch, m, n, k


def _matmul_einsum(spec: str, x: Any, y: Any, xp: Any) -> Any:
    lhs, _, out = spec.replace(" ", "").partition("->")
    a, b = lhs.split(",")
    plan = gemm_plan(spec)
    assert plan is not None
    batch, m, n, k = plan
    size: dict[str, int] = {}
    for letters, arr in ((a, x), (b, y)):
        if len(letters) != arr.ndim:
            raise ValueError(f"einsum {spec!r}: operand {letters!r} has shape {arr.shape}")
        for c, d in zip(letters, arr.shape):
            if size.setdefault(c, int(d)) != int(d):
                raise ValueError(f"einsum {spec!r}: extent of {c!r} differs between operands")

    def prod(cs: list[str]) -> int:
        return math.prod(size[c] for c in cs)

    x2 = xp.transpose(x, [a.index(c) for c in batch + m + k])
    y2 = xp.transpose(y, [b.index(c) for c in batch + k + n])
    x2 = x2.reshape(prod(batch), prod(m), prod(k))
    y2 = y2.reshape(prod(batch), prod(k), prod(n))
    z = xp.matmul(x2, y2).reshape([size[c] for c in batch + m + n])
    return xp.transpose(z, [(batch + m + n).index(c) for c in out])


def einsum_reference(spec: str, operands: list[Any], xp: Any = np) -> Any:
    """``xp.einsum(spec, *operands)``, as a batched matrix product when it is one (BLAS fast)."""
    if len(operands) == 2 and gemm_plan(spec) is not None:
        return _matmul_einsum(spec, operands[0], operands[1], xp)
    return xp.einsum(spec, *operands)


def conv2d_output_hw(
    h: int, w: int, kh: int, kw: int, stride: list[int], padding: list[int], dilation: list[int]
) -> tuple[int, int]:
    """Output height and width of a 2-D convolution."""
    ho = (h + 2 * padding[0] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    wo = (w + 2 * padding[1] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    return ho, wo


def conv2d_nhwc_reference(
    x: Any,
    weight: Any,
    stride: list[int],
    padding: list[int],
    dilation: list[int],
    xp: Any = np,
) -> Any:
    """2-D convolution, input ``N,H,W,CI``, weight ``CO,KH,KW,CI`` -> output ``N,HO,WO,CO``.

    Zero padding of ``padding = [ph, pw]`` on both sides; one tensordot per kernel tap.
    """
    n, h, w, ci = x.shape
    co, kh, kw, ci2 = weight.shape
    if ci != ci2:
        raise ValueError(f"conv2d_nhwc: input has {ci} channels, weight {ci2}")
    sh, sw = (int(s) for s in stride)
    ph, pw = (int(p) for p in padding)
    dh, dw = (int(d) for d in dilation)
    ho, wo = conv2d_output_hw(h, w, kh, kw, [sh, sw], [ph, pw], [dh, dw])
    if ho < 1 or wo < 1:
        raise ValueError("conv2d_nhwc: empty output")
    xpad = xp.pad(x, ((0, 0), (ph, ph), (pw, pw), (0, 0)))
    out = xp.zeros((n, ho, wo, co), dtype=x.dtype)
    for i in range(kh):
        for j in range(kw):
            patch = xpad[
                :,
                i * dh : i * dh + sh * (ho - 1) + 1 : sh,
                j * dw : j * dw + sw * (wo - 1) + 1 : sw,
                :,
            ]
            out += xp.tensordot(patch, weight[:, i, j, :], axes=([3], [1]))
    return out


def _reference_parts(workload: dict[str, Any]) -> tuple[list[int], int, int]:
    """(operand indices, output index, reduction size) of the workload's reference."""
    ref = workload["reference"]
    params = workload["params"]
    if ref.get("kind") == "einsum":
        ops = [int(i) for i in ref["operands"]]
        lhs, _, out = str(ref["spec"]).replace(" ", "").partition("->")
        size: dict[str, int] = {}
        for letters, i in zip(lhs.split(","), ops):
            size.update(zip(letters, logical_shape(params[i])))
        red = math.prod(d for c, d in size.items() if c not in out)
        return ops, int(ref["output"]), red
    if ref.get("kind") == "conv2d_nhwc":
        ops = [int(ref["input"]), int(ref["weight"])]
        _, kh, kw, ci = logical_shape(params[ops[1]])
        return ops, int(ref["output"]), kh * kw * ci
    raise ValueError(f"unknown reference kind {ref.get('kind')!r} (einsum, conv2d_nhwc)")


def compute_reference(
    workload: dict[str, Any], inputs: list[np.ndarray | None], xp: Any = np
) -> dict[int, np.ndarray]:
    """The expected value of the workload's output, as ``{param index: numpy array}``.

    ``inputs`` are the logical-shape inputs of :func:`draw_inputs`. Float workloads compute in
    float32 and return float32; integer ones compute exactly (in float64 when every partial sum
    fits in its 53-bit mantissa, which lets BLAS do it, else in int64) and return the output's
    dtype (wrapping like the kernel's integer arithmetic). ``xp`` is numpy or cupy.

    Raises:
        ValueError: an unknown reference kind, or a result whose shape is not the output's
            logical shape.
    """
    ref = workload["reference"]
    params = workload["params"]
    ops, out_index, reduction = _reference_parts(workload)
    dtypes = [params[i]["dtype"] for i in ops]
    floats = any(is_float(d) for d in dtypes)
    if floats:
        cdtype: Any = np.float32
    else:
        bound = reduction * math.prod(
            max(abs(int(np.iinfo(storage_dtype(d)).min)), int(np.iinfo(storage_dtype(d)).max))
            for d in dtypes
        )
        cdtype = np.float64 if bound < 2**53 else np.int64
    host = []
    for i in ops:
        arr = inputs[i]
        if arr is None:
            raise ValueError(f"reference operand {i} is not an input parameter")
        host.append(decode(arr, params[i]["dtype"]).astype(cdtype))
    args = [xp.asarray(a) for a in host]
    if ref["kind"] == "einsum":
        res = einsum_reference(str(ref["spec"]), args, xp)
    else:
        res = conv2d_nhwc_reference(
            args[0], args[1], ref["stride"], ref["padding"], ref["dilation"], xp
        )
    res = xp.asnumpy(res) if hasattr(xp, "asnumpy") else np.asarray(res)
    out = params[out_index]
    if tuple(res.shape) != logical_shape(out):
        raise ValueError(
            f"reference result has shape {tuple(res.shape)}, output {out.get('name', out_index)!r}"
            f" has logical shape {logical_shape(out)}"
        )
    if floats:
        expected = res.astype(np.float32)
    elif cdtype is np.float64:
        expected = np.rint(res).astype(np.int64).astype(storage_dtype(out["dtype"]))
    else:
        expected = res.astype(storage_dtype(out["dtype"]))
    return {out_index: expected}


def check_output(
    actual: np.ndarray, expected: np.ndarray, dtype: str, rtol: float, atol: float
) -> tuple[str | None, float | None]:
    """Compare an output (stored as ``dtype``, cut to its logical shape) with the reference.

    Floats: ``np.isclose(actual, expected, rtol, atol)`` element-wise, NaN never matches;
    integers: exact. Returns ``(message or None when it matches, max abs error or None when it
    is not finite)``.
    """
    got = decode(actual, dtype)
    if got.shape != expected.shape:
        return f"shape mismatch: got {got.shape}, expected {expected.shape}", None
    if got.size == 0:
        return None, 0.0
    if is_float(dtype):
        a = got.astype(np.float64)
        e = expected.astype(np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            diff = np.abs(a - e)
            bad = ~np.isclose(a, e, rtol=rtol, atol=atol, equal_nan=False)
        what = f"rtol={rtol:g}, atol={atol:g}"
    else:
        a = got.astype(np.int64)
        e = expected.astype(np.int64)
        diff = np.abs(a - e).astype(np.float64)
        bad = a != e
        what = "exact"
    finite = bool(np.isfinite(diff).all())
    max_err = float(diff.max()) if finite else None
    n_bad = int(np.count_nonzero(bad))
    if n_bad == 0:
        return None, max_err
    first = tuple(int(i) for i in np.argwhere(bad)[0])
    msg = f"{n_bad}/{got.size} elements differ ({what})"
    n_nan = int(np.count_nonzero(np.isnan(a))) if is_float(dtype) else 0
    if n_nan:
        msg += f", {n_nan} NaN"
    if max_err is not None:
        msg += f"; max abs error {max_err:.6g}"
    return (
        msg + f"; first at {first}: got {got[first].item()!r}, expected {e[first].item()!r}",
        max_err,
    )


# ------------------------------------------------------------------------------------------------
# bundle reading and validation


def load_bundle(bundle_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """Read ``bundle.json``.

    Raises:
        ValueError: missing, unreadable, or of a format this script does not know.
    """
    path = Path(bundle_dir) / BUNDLE_FILE
    try:
        bundle = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: cannot read the bundle ({exc})") from None
    if not isinstance(bundle, dict) or bundle.get("format") != BUNDLE_FORMAT:
        raise ValueError(f"{path}: not a bundle of format {BUNDLE_FORMAT}")
    for w in bundle.get("workloads", []):
        problem = check_workload(w)
        if problem:
            raise ValueError(f"{path}: workload {w.get('workload_key')!r}: {problem}")
    return bundle


def check_workload(workload: dict[str, Any]) -> str | None:
    """What is wrong with a workload entry, or ``None``."""
    for key in ("workload_key", "target_key", "params", "reference", "seed", "rtol", "atol"):
        if key not in workload:
            return f"missing {key!r}"
    params = workload["params"]
    if not isinstance(params, list) or not params:
        return "params must be a non-empty list"
    for i, p in enumerate(params):
        try:
            storage_dtype(p["dtype"])
            shape = [int(d) for d in p["shape"]]
            logical = logical_shape(p)
        except (KeyError, TypeError, ValueError) as exc:
            return f"param {i}: {exc}"
        if p.get("role") not in ("input", "output", "scratch"):
            return f"param {i}: role must be 'input', 'output' or 'scratch', got {p.get('role')!r}"
        if len(logical) != len(shape):
            if math.prod(logical) != math.prod(shape):  # else a row-major reshape (a view)
                return f"param {i}: logical shape {list(logical)} is no reshape of {shape}"
        elif any(a > s or a < 1 for a, s in zip(logical, shape)):
            return f"param {i}: logical shape {list(logical)} does not fit in shape {shape}"
    try:
        ops, out, _ = _reference_parts(workload)
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        return f"reference: {type(exc).__name__}: {exc}"
    if any(not 0 <= i < len(params) or params[i]["role"] != "input" for i in ops):
        return f"reference operands {ops} must be indices of input parameters"
    if not 0 <= out < len(params) or params[out]["role"] != "output":
        return f"reference output {out} must be the index of an output parameter"
    return None


def validate_candidate(
    cand_dir: str | os.PathLike[str], workload: dict[str, Any]
) -> tuple[dict[str, Any] | None, str | None]:
    """Read and check a candidate folder: ``(manifest, None)`` or ``(manifest or None, why)``.

    Checks that ``kernel.cubin`` and ``manifest.json`` exist, that the manifest's parameters
    have the workload's shapes and dtypes, that every launch has a 3-D grid and block, a known
    parameter index for each argument and a non-negative dynamic shared size, and that the
    launches' arguments together cover every parameter.
    """
    cand_dir = Path(cand_dir)
    cubin = cand_dir / CUBIN
    if not cubin.is_file() or cubin.stat().st_size == 0:
        return None, f"{CUBIN} missing or empty"
    try:
        manifest = json.loads((cand_dir / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return None, f"{MANIFEST} unreadable: {exc}"
    return manifest, check_manifest(manifest, workload)


def check_manifest(manifest: dict[str, Any], workload: dict[str, Any]) -> str | None:
    """What is wrong with a launch manifest for this workload, or ``None``."""
    try:
        params = manifest["params"]
        launches = manifest["launches"]
        wparams = workload["params"]
        if len(params) != len(wparams):
            return f"manifest has {len(params)} params, the workload {len(wparams)}"
        for i, (p, w) in enumerate(zip(params, wparams)):
            if [int(d) for d in p["shape"]] != [int(d) for d in w["shape"]]:
                return f"param {i}: shape {p['shape']} != workload's {w['shape']}"
            if p["dtype"] != w["dtype"]:
                return f"param {i}: dtype {p['dtype']} != workload's {w['dtype']}"
        if not launches:
            return "manifest has no launches"
        used: set[int] = set()
        for j, launch in enumerate(launches):
            if not isinstance(launch.get("kernel"), str) or not launch["kernel"]:
                return f"launch {j}: no kernel name"
            for key in ("grid", "block"):
                dims = [int(d) for d in launch[key]]
                if len(dims) != 3 or min(dims) < 1:
                    return f"launch {j}: {key} must be 3 positive extents, got {launch[key]}"
            if math.prod(int(d) for d in launch["block"]) > 1024:
                return f"launch {j}: more than 1024 threads per block"
            if int(launch.get("dynamic_shared_bytes", 0)) < 0:
                return f"launch {j}: negative dynamic_shared_bytes"
            spaces = launch.get("workspaces") or [None] * len(launch["args"])
            if len(spaces) != len(launch["args"]):
                return f"launch {j}: {len(spaces)} workspace entries for {len(launch['args'])} args"
            for a, ws in zip(launch["args"], spaces):
                if a is None and ws is not None:
                    why = check_workspace(ws)
                    if why:
                        return f"launch {j}: workspace argument: {why}"
                    continue
                if not isinstance(a, int) or not 0 <= a < len(params):
                    return f"launch {j}: argument {a!r} is not a parameter index"
                used.add(a)
        missing = sorted(set(range(len(params))) - used)
        if missing:
            return f"no launch takes parameter(s) {missing}"
    except (KeyError, TypeError, ValueError) as exc:
        return f"malformed manifest: {type(exc).__name__}: {exc}"
    return None


def check_workspace(ws: Any) -> str | None:
    """What is wrong with a launch's workspace entry (``{"name", "shape", "dtype", "bytes"}``:
    a global buffer the launches share, e.g. split-K partial sums), or ``None``."""
    try:
        if not isinstance(ws["name"], str) or not ws["name"]:
            return "no name"
        shape = [int(d) for d in ws["shape"]]
        nbytes = int(ws["bytes"])
        itemsize = storage_dtype(str(ws["dtype"])).itemsize
    except (KeyError, TypeError, ValueError) as exc:
        return f"malformed: {type(exc).__name__}: {exc}"
    if min(shape, default=1) < 0 or nbytes != math.prod(shape) * itemsize:
        return f"{ws['name']}: {nbytes} bytes for shape {shape} of {ws['dtype']}"
    return None


def short_error(exc: BaseException, max_chars: int = 500) -> str:
    """``Type: last lines of the message``, at most ``max_chars`` characters."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    text = " | ".join(lines[-4:])
    if len(text) > max_chars:
        text = "..." + text[-max_chars:]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def fake_latency(candidate_id: str) -> float:
    """The stand-in's latency: a deterministic number in [10, 20) microseconds from the id."""
    h = int(hashlib.sha256(candidate_id.encode()).hexdigest()[:12], 16)
    return 1e-5 * (1.0 + (h % 1_000_000) / 1_000_000)


def failure(kind: str, msg: str, max_abs_err: float | None = None) -> dict[str, Any]:
    """A candidate result that failed with ``kind``."""
    return {
        "latency_s": None,
        "latencies_s": [],
        "error_kind": kind,
        "error_msg": msg,
        "max_abs_err": max_abs_err,
    }


# ------------------------------------------------------------------------------------------------
# timing


def time_calls(
    call: Callable[[], None],
    *,
    flush: Callable[[int], None] | None,
    event: Callable[[], Any],
    elapsed_ms: Callable[[Any, Any], float],
    synchronize: Callable[[], None],
    warmup: int,
    repeat: int,
    number: int = 1,
) -> list[float]:
    """The timing protocol shared by candidates and baselines: ``warmup`` calls, then ``repeat``
    measurements, each = ``flush(r)`` then ``number`` calls between two events (``event()``
    makes one with ``record()`` and ``synchronize()``); returns seconds per call."""
    for _ in range(warmup):
        call()
    synchronize()
    out = []
    for r in range(repeat):
        if flush is not None:
            flush(r)
        start, end = event(), event()
        start.record()
        for _ in range(number):
            call()
        end.record()
        end.synchronize()
        out.append(elapsed_ms(start, end) / 1e3 / number)
    return out


def _ok_result(lats: list[float], max_abs_err: float | None, notes: list[str]) -> dict[str, Any]:
    return {
        "latency_s": statistics.median(lats),
        "latencies_s": lats,
        "error_kind": None,
        "error_msg": None,
        "max_abs_err": max_abs_err,
        "notes": notes,
    }


# ------------------------------------------------------------------------------------------------
# backends: what a worker does with one workload


def load_kernels(cp: Any, cubin: str | os.PathLike[str], names: list[str]) -> tuple[Any, dict]:
    """Load ``cubin`` with ``cupy.RawModule`` (``cp`` is the ``cupy`` module): the module and
    ``{name: cupy.RawKernel}`` for each kernel name. The driver's errors propagate."""
    module = cp.RawModule(path=str(cubin))
    return module, {name: module.get_function(name) for name in names}


def kernel_calls(
    cp: Any,
    funcs: dict[str, Any],
    launches: list[dict[str, Any]],
    buffers: list[Any],
    workspaces: dict[str, Any],
) -> list[tuple[Any, tuple[int, ...], tuple[int, ...], tuple[Any, ...], int]]:
    """The calls of a launch manifest (``build_cuda``'s ``launches``), in order: ``(kernel,
    grid, block, args, dynamic shared bytes)``, for :func:`launch_calls`.

    ``buffers`` are the device arrays of the kernel's parameters (a launch's ``args`` are
    parameter indices). A launch argument that is no parameter is a global workspace (split-K
    partial sums), allocated in ``workspaces`` by name on first use and shared by the
    launches: each launch that reads one runs after the one that writes all of it, so it
    starts uninitialised. A kernel that needs more than 48 KiB of dynamic shared memory gets
    its limit raised (``cudaFuncSetAttribute``)."""
    calls = []
    for launch in launches:
        fn = funcs[str(launch["kernel"])]
        shared = int(launch.get("dynamic_shared_bytes", 0))
        if shared > DEFAULT_SHARED_LIMIT:
            fn.max_dynamic_shared_size_bytes = shared
        spaces = launch.get("workspaces") or [None] * len(launch["args"])
        argv: list[Any] = []
        for a, ws in zip(launch["args"], spaces):
            if a is None:
                name = str(ws["name"])
                if name not in workspaces:
                    workspaces[name] = cp.empty(max(1, int(ws["bytes"])), dtype=cp.uint8)
                argv.append(workspaces[name])
            else:
                argv.append(buffers[int(a)])
        grid = tuple(int(d) for d in launch["grid"])
        block = tuple(int(d) for d in launch["block"])
        calls.append((fn, grid, block, tuple(argv), shared))
    return calls


def launch_calls(calls: list[tuple[Any, ...]]) -> None:
    """Launch :func:`kernel_calls`' calls in order on the current stream (asynchronous)."""
    for fn, grid, block, args, shared in calls:
        fn(grid, block, args, shared_mem=shared)


class StandinBackend:
    """Launches nothing: every (valid) candidate gets error kind ``"standin"`` and a fake,
    deterministic latency."""

    def __init__(self, workload: dict[str, Any], policy: dict[str, Any], tmp: Path) -> None:
        self.workload = workload

    def device_info(self) -> dict[str, Any]:
        return {
            "device": "stand-in (no GPU; nothing was launched)",
            "compute_capability": None,
            "driver": None,
            "cuda_runtime": None,
            "numpy": np.__version__,
            "python": platform.python_version(),
        }

    def run_candidate(self, cid: str, cand_dir: Path, manifest: dict[str, Any]) -> dict[str, Any]:
        lat = fake_latency(cid)
        res = failure(
            STANDIN, "stand-in: nothing was launched; the latency is a fake number from the id"
        )
        res.update(latency_s=lat, latencies_s=[lat])
        return res

    def run_baseline(self) -> dict[str, Any]:
        return {"name": None, "latency_s": None, "correct": None, "error_msg": "stand-in"}


class GpuBackend:
    """CuPy on the first CUDA device: inputs, reference and parameter buffers of one workload."""

    def __init__(self, workload: dict[str, Any], policy: dict[str, Any], tmp: Path) -> None:
        import cupy as cp

        self.cp = cp
        self.workload = workload
        self.policy = policy
        self.tmp = tmp
        self.params = workload["params"]
        self.inputs = draw_inputs(workload)
        self.expected = compute_reference(workload, self.inputs, xp=cp)
        self._buffers: list[Any] | None = None
        self._pristine: dict[int, Any] = {}
        self._fills: dict[int, Any] = {}
        self._flush: Any = None
        self.heartbeat: Callable[[], None] = lambda: None
        cp.cuda.runtime.deviceSynchronize()

    # -- device facts --

    def device_info(self) -> dict[str, Any]:
        cp = self.cp
        dev = cp.cuda.Device()
        props = cp.cuda.runtime.getDeviceProperties(dev.id)
        name = props["name"]
        name = name.decode() if isinstance(name, bytes) else str(name)
        drv = cp.cuda.runtime.driverGetVersion()
        rt = cp.cuda.runtime.runtimeGetVersion()
        return {
            "device": name,
            "compute_capability": f"{props['major']}.{props['minor']}",
            "driver": _nvidia_smi_driver() or f"CUDA {drv // 1000}.{drv % 1000 // 10}",
            "cuda_driver_api": f"{drv // 1000}.{drv % 1000 // 10}",
            "cuda_runtime": f"{rt // 1000}.{rt % 1000 // 10}",
            "sm_count": int(props["multiProcessorCount"]),
            "l2_bytes": int(props["l2CacheSize"]),
            "cupy": cp.__version__,
            "numpy": np.__version__,
            "python": platform.python_version(),
            "nvcc": shutil.which("nvcc"),
        }

    def _alive(self) -> bool:
        """Whether the CUDA context still works (an illegal address poisons it for good)."""
        try:
            self.cp.cuda.runtime.deviceSynchronize()
            probe = self.cp.zeros(8, dtype=self.cp.float32) + 1
            return float(probe.sum()) == 8.0
        except Exception:  # noqa: BLE001
            return False

    def _after(self, exc: BaseException, what: str) -> dict[str, Any]:
        if self._alive():
            return failure("run", f"{what}: {short_error(exc)}")
        res = failure("crash", f"{what}: {short_error(exc)} (CUDA context lost)")
        res["_context_lost"] = True
        return res

    # -- buffers --

    def _setup_buffers(self) -> list[Any]:
        if self._buffers is None:
            cp = self.cp
            bufs = []
            for i, p in enumerate(self.params):
                arr = self.inputs[i]
                if arr is not None:
                    self._pristine[i] = cp.asarray(pad_to(arr, p["shape"]))
                    bufs.append(self._pristine[i].copy())
                elif p["role"] == "scratch":
                    self._fills[i] = cp.zeros(tuple(p["shape"]), dtype=storage_dtype(p["dtype"]))
                    bufs.append(self._fills[i].copy())
                else:
                    self._fills[i] = cp.asarray(output_fill(self.workload, i))
                    bufs.append(self._fills[i].copy())
            flush_bytes = int(self.policy.get("flush_l2_bytes", 0))
            if flush_bytes > 0:
                self._flush = cp.empty(flush_bytes, dtype=cp.uint8)
            self._buffers = bufs
        return self._buffers

    def flush(self, r: int) -> None:
        """Overwrite the L2 cache: a memset of ``flush_l2_bytes`` on the current stream."""
        cp = self.cp
        stream = cp.cuda.get_current_stream().ptr
        cp.cuda.runtime.memsetAsync(self._flush.data.ptr, r % 256, self._flush.nbytes, stream)

    def _reset(self, bufs: list[Any]) -> None:
        for i, src in (*self._pristine.items(), *self._fills.items()):
            self.cp.copyto(bufs[i], src)

    def _check(self, bufs: list[Any]) -> tuple[str | None, float | None]:
        worst: float | None = 0.0
        for i, expected in self.expected.items():
            p = self.params[i]
            got = self.cp.asnumpy(bufs[i])
            if got.ndim != len(logical_shape(p)):
                got = got.reshape(logical_shape(p))  # a row-major view of another rank
            else:
                got = got[tuple(slice(0, n) for n in logical_shape(p))]
            msg, err = check_output(
                got,
                expected,
                p["dtype"],
                float(self.workload["rtol"]),
                float(self.workload["atol"]),
            )
            worst = None if err is None or worst is None else max(worst, err)
            if msg:
                return f"output {p.get('name', i)!r}: {msg}", worst
        return None, worst

    # -- a candidate --

    def _recompile(self, cand_dir: Path, manifest: dict[str, Any], cid: str) -> tuple[Path, str]:
        cc = str(self.cp.cuda.Device().compute_capability)  # "90", "100"
        arch = f"sm_{cc}"
        if str(manifest.get("arch", "")).endswith("a") and int(cc) >= 90:
            arch += "a"  # arch-specific instructions (wgmma, setmaxnreg)
        self.heartbeat()  # nvcc may take a while: not a hang
        out = self.tmp / f"{cid}.cubin"
        cmd = ["nvcc", "-cubin", "-O3", f"-arch={arch}", *manifest.get("nvcc_flags", [])]
        cmd += ["-o", str(out), str(cand_dir / SOURCE)]
        limit = max(10.0, float(self.policy.get("timeout_s", 120.0)) - 5.0)
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=limit)
        self.heartbeat()
        if proc.returncode != 0:
            tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-4:])
            raise RuntimeError(f"nvcc -arch={arch} failed: {tail[-400:]}")
        return out, arch

    def run_candidate(self, cid: str, cand_dir: Path, manifest: dict[str, Any]) -> dict[str, Any]:
        cp = self.cp
        notes: list[str] = []
        launches = manifest["launches"]
        names = list(dict.fromkeys(str(launch["kernel"]) for launch in launches))
        try:
            module, funcs = load_kernels(cp, cand_dir / CUBIN, names)
        except Exception as exc:  # noqa: BLE001 - the driver's verdict is data
            err = short_error(exc)
            if not self._alive():
                return self._after(exc, "load")
            rejected = any(m.lower() in err.lower() for m in _DRIVER_REJECTS)
            if not (rejected and (cand_dir / SOURCE).is_file() and shutil.which("nvcc")):
                return failure("run", f"load: {err}")
            try:
                cubin, arch = self._recompile(cand_dir, manifest, cid)
                module, funcs = load_kernels(cp, cubin, names)
            except Exception as exc2:  # noqa: BLE001
                return failure(
                    "run", f"load: {err}; recompiling {SOURCE} failed: {short_error(exc2)}"
                )
            notes.append(f"the driver rejected {CUBIN} ({err}); ran {SOURCE} rebuilt for {arch}")
        try:
            bufs = self._setup_buffers()
            calls = kernel_calls(cp, funcs, launches, bufs, {})
        except Exception as exc:  # noqa: BLE001
            return self._after(exc, "setup")

        def call() -> None:
            launch_calls(calls)

        try:
            self._reset(bufs)
            call()
            cp.cuda.runtime.deviceSynchronize()
        except Exception as exc:  # noqa: BLE001
            return self._after(exc, "launch")
        msg, max_err = self._check(bufs)
        if msg:
            res = failure("wrong_result", msg, max_err)
            res["notes"] = notes
            return res
        try:
            lats = time_calls(
                call,
                flush=self.flush if self._flush is not None else None,
                event=cp.cuda.Event,
                elapsed_ms=cp.cuda.get_elapsed_time,
                synchronize=cp.cuda.runtime.deviceSynchronize,
                warmup=int(self.policy["warmup"]),
                repeat=int(self.policy["repeat"]),
                number=int(self.policy.get("number", 1)),
            )
        except Exception as exc:  # noqa: BLE001
            return self._after(exc, "timing")
        del module
        return _ok_result(lats, max_err, notes)

    # -- the PyTorch baseline --

    def run_baseline(self) -> dict[str, Any]:
        import torch

        if not torch.cuda.is_available():  # a CPU-only PyTorch build
            return {
                "torch": torch.__version__,
                "name": None,
                "latency_s": None,
                "correct": None,
                "error_msg": f"torch {torch.__version__} has no CUDA device",
            }
        torch.backends.cudnn.benchmark = True
        info: dict[str, Any] = {
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version(),
            "cudnn_benchmark": True,
            "allow_tf32": bool(torch.backends.cuda.matmul.allow_tf32),
            "device": torch.cuda.get_device_name(),
        }
        try:
            name, fn, to_output = self._torch_call(torch)
        except Exception as exc:  # noqa: BLE001
            return {
                **info,
                "name": None,
                "latency_s": None,
                "correct": None,
                "error_msg": short_error(exc),
            }
        entry = {**info, **self._time_torch(torch, name, fn, to_output)}
        variants = [self._time_torch(torch, *call) for call in self._torch_variants(torch)]
        if variants:
            entry["variants"] = variants
        return entry

    def _time_torch(
        self, torch: Any, name: str, fn: Callable[[], Any], to_output: Callable[[Any], Any]
    ) -> dict[str, Any]:
        """Check one PyTorch call against the reference and time it with the bundle's policy:
        ``{"name", "latency_s", "latencies_s", "correct", "error_msg", "max_abs_err"}``."""
        out_index = next(iter(self.expected))
        p = self.params[out_index]
        try:
            got = to_output(fn())
            torch.cuda.synchronize()
            out_dtype = str(got.dtype).replace("torch.", "")
            if got.dtype in (torch.float16, torch.bfloat16):
                got = got.float()
            host = got.cpu().numpy()
            dtype = "float32" if is_float(p["dtype"]) else str(host.dtype)
            msg, max_err = check_output(
                host,
                self.expected[out_index],
                dtype,
                float(self.workload["rtol"]),
                float(self.workload["atol"]),
            )
            flush_bytes = int(self.policy.get("flush_l2_bytes", 0))
            buf = (
                torch.empty(flush_bytes, dtype=torch.uint8, device="cuda") if flush_bytes else None
            )
            lats = time_calls(
                fn,
                flush=(lambda r: buf.zero_()) if buf is not None else None,
                event=lambda: torch.cuda.Event(enable_timing=True),
                elapsed_ms=lambda s, e: s.elapsed_time(e),
                synchronize=torch.cuda.synchronize,
                warmup=int(self.policy["warmup"]),
                repeat=int(self.policy["repeat"]),
                number=int(self.policy.get("number", 1)),
            )
        except Exception as exc:  # noqa: BLE001
            return {"name": name, "latency_s": None, "correct": None, "error_msg": short_error(exc)}
        return {
            "name": name,
            "out_dtype": out_dtype,
            "latency_s": statistics.median(lats),
            "latencies_s": lats,
            "correct": msg is None,
            "error_msg": msg,
            "max_abs_err": max_err,
        }

    def _tensor(self, torch: Any, i: int) -> Any:
        arr = self.inputs[i]
        if self.params[i]["dtype"] == "bfloat16":
            return torch.from_numpy(arr.view(np.int16)).cuda().view(torch.bfloat16)
        return torch.from_numpy(np.ascontiguousarray(arr)).cuda()

    def _torch_call(self, torch: Any) -> tuple[str, Callable[[], Any], Callable[[Any], Any]]:
        """(name, a call computing the workload, output -> reference layout)."""
        ref = self.workload["reference"]
        if ref["kind"] == "conv2d_nhwc":
            x = self._tensor(torch, int(ref["input"])).permute(0, 3, 1, 2)  # NCHW, channels_last
            w = self._tensor(torch, int(ref["weight"])).permute(0, 3, 1, 2)
            if not x.is_floating_point():
                raise ValueError("torch has no integer conv2d on CUDA")
            conv = torch.nn.functional.conv2d
            kw = {k: tuple(int(v) for v in ref[k]) for k in ("stride", "padding", "dilation")}
            return (
                "torch.nn.functional.conv2d (channels_last)",
                lambda: conv(x, w, **kw),
                lambda y: y.permute(0, 2, 3, 1),
            )
        spec = str(ref["spec"]).replace(" ", "")
        gemm = self._gemm_operands(torch)
        if gemm is not None:
            batch, x, y, perm = gemm
            if x.is_floating_point():
                return "torch.matmul", lambda: torch.matmul(x, y), lambda z: z.permute(perm)
            if not batch and x.dtype == torch.int8:
                return "torch._int_mm", lambda: torch._int_mm(x, y), lambda z: z.permute(perm)
            raise ValueError(f"no torch baseline for integer {spec!r} ({x.dtype})")
        ops = [self._tensor(torch, int(i)) for i in ref["operands"]]
        if not ops[0].is_floating_point():
            raise ValueError(f"no torch baseline for integer einsum {spec!r}")
        return "torch.einsum", lambda: torch.einsum(spec, *ops), lambda z: z

    def _gemm_operands(self, torch: Any) -> tuple[str, Any, Any, list[int]] | None:
        """``(batch axes, x, y, perm)`` when the einsum reference is a (batched) matrix product
        with one batch axis at most: ``x`` is ``[batch,] m, k``, ``y`` is ``[batch,] k, n`` (views)
        and ``z.permute(perm)`` takes a ``[batch,] m, n`` product to the output layout."""
        ref = self.workload["reference"]
        if ref["kind"] != "einsum":
            return None
        spec = str(ref["spec"]).replace(" ", "")
        plan = gemm_plan(spec)
        if plan is None or not all(len(g) == 1 for g in plan[1:]) or len(plan[0]) > 1:
            return None
        ops = [self._tensor(torch, int(i)) for i in ref["operands"]]
        lhs, _, out = spec.partition("->")
        batch, m, n, k = plan
        a, b = lhs.split(",")
        x = ops[0].permute([a.index(c) for c in batch + m + k])
        y = ops[1].permute([b.index(c) for c in batch + k + n])
        return batch, x, y, [(batch + m + n).index(c) for c in out]

    def _torch_variants(
        self, torch: Any
    ) -> list[tuple[str, Callable[[], Any], Callable[[Any], Any]]]:
        """Extra baselines timed beside the main one: for a float16/bfloat16 GEMM or BMM whose
        output is float32, ``torch.mm``/``torch.bmm`` with ``out_dtype=torch.float32`` (the same
        output dtype and bytes as the kernel; ``torch.matmul`` writes float16). Empty otherwise,
        or when this PyTorch has no ``out_dtype`` (the error is then the variant's)."""
        ref = self.workload["reference"]
        if "output" not in ref or self.params[int(ref["output"])]["dtype"] != "float32":
            return []
        gemm = self._gemm_operands(torch)
        if gemm is None or gemm[1].dtype not in (torch.float16, torch.bfloat16):
            return []
        batch, x, y, perm = gemm
        mm = torch.bmm if batch else torch.mm
        name = f"torch.{'bmm' if batch else 'mm'}(out_dtype=float32)"
        return [(name, lambda: mm(x, y, out_dtype=torch.float32), lambda z: z.permute(perm))]


def _nvidia_smi_driver() -> str | None:
    try:
        proc = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    lines = proc.stdout.strip().splitlines()
    return lines[0].strip() if proc.returncode == 0 and lines else None


# ------------------------------------------------------------------------------------------------
# the worker process


def worker_main(job_path: str) -> int:
    """Run one job (one workload's candidates, or its baseline) and report JSON lines."""
    job = json.loads(Path(job_path).read_text(encoding="utf-8"))
    bundle_dir = Path(job["bundle_dir"])
    bundle = load_bundle(bundle_dir)
    workload = next(w for w in bundle["workloads"] if w["workload_key"] == job["workload_key"])
    tmp = Path(job["tmp"])
    fault_kind, _, fault_id = os.environ.get(FAULT_ENV, "").partition(":")
    with open(job["progress"], "a", encoding="utf-8") as progress:

        def emit(**event: Any) -> None:
            progress.write(json.dumps(event, default=_json_default) + "\n")
            progress.flush()

        try:
            backend_cls = StandinBackend if job["standin"] else GpuBackend
            backend = backend_cls(workload, job["policy"], tmp)
            info = backend.device_info()
            current = {"id": None}
            backend.heartbeat = lambda: emit(event="heartbeat", id=current["id"])
        except Exception as exc:  # noqa: BLE001 - no CuPy, no GPU, a bad reference...
            emit(event="fatal", msg=short_error(exc))
            return 2
        emit(event="ready", info=info)
        if job.get("baseline"):
            emit(event="baseline", result=backend.run_baseline())
            return 0
        for cid in job["ids"]:
            emit(event="start", id=cid)
            current["id"] = cid
            t0 = time.perf_counter()
            if fault_id == cid and fault_kind == "crash":
                os._exit(77)
            if fault_id == cid and fault_kind == "hang":
                time.sleep(3600)
            cand_dir = bundle_dir / CANDIDATES_DIR / cid
            manifest, problem = validate_candidate(cand_dir, workload)
            if problem or manifest is None:
                res = failure("run", f"invalid candidate: {problem}")
            else:
                try:
                    res = backend.run_candidate(cid, cand_dir, manifest)
                except Exception as exc:  # noqa: BLE001 - a bug here must not lose the rest
                    res = failure("run", short_error(exc))
            lost = bool(res.pop("_context_lost", False))
            res["run_s"] = time.perf_counter() - t0
            emit(event="result", id=cid, result=res)
            if lost:
                return EXIT_CONTEXT_LOST
    return 0


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


# ------------------------------------------------------------------------------------------------
# the parent: workers, timeouts, crashes


def _watch_worker(
    job: dict[str, Any],
    tmp: Path,
    timeout_s: float,
    on_event: Callable[[dict[str, Any]], None],
) -> tuple[int | None, bool, str]:
    """Run a worker on ``job`` until it exits or stalls: ``(exit status, timed out, log tail)``.

    Every event the worker reports is passed to ``on_event`` as it arrives. The worker is
    killed (its whole process group) when one candidate runs past ``timeout_s``, or when
    start-up (inputs and reference) runs past 900 s.
    """
    n = len(list(tmp.glob("job*.json")))
    job_path = tmp / f"job{n}.json"
    job["progress"] = str(tmp / f"progress{n}.jsonl")
    log_path = tmp / f"worker{n}.log"
    job_path.write_text(json.dumps(job), encoding="utf-8")
    Path(job["progress"]).touch()
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", str(job_path)]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    pos = 0
    pending = b""
    last = time.monotonic()
    limit = _WORKER_START_S
    timed_out = False
    with open(job["progress"], "rb") as fh:
        while True:
            rc = proc.poll()
            fh.seek(pos)
            chunk = fh.read()
            pos += len(chunk)
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                if line.strip():
                    event = json.loads(line)
                    last = time.monotonic()
                    limit = timeout_s
                    on_event(event)
            if rc is not None:
                break
            if time.monotonic() - last > limit:
                timed_out = True
                _kill_group(proc)
                rc = proc.wait()
                break
            time.sleep(0.02)
    tail = log_path.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-6:]
    return rc, timed_out, " | ".join(tail)[-600:]


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


def _exit_text(rc: int | None) -> str:
    if rc is not None and rc < 0:
        try:
            return f"killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"killed by signal {-rc}"
    return f"exit status {rc}"


def run_workload_candidates(
    bundle_dir: Path,
    workload: dict[str, Any],
    ids: list[str],
    policy: dict[str, Any],
    *,
    standin: bool,
    tmp: Path,
    on_result: Callable[[str, dict[str, Any]], None],
) -> dict[str, Any] | None:
    """Run ``ids`` (candidates of ``workload``) in as many workers as crashes require.

    Calls ``on_result(id, result)`` once for every id; returns the device info the first
    worker reported (``None`` when none started).
    """
    remaining = list(ids)
    device: dict[str, Any] | None = None
    while remaining:
        state: dict[str, Any] = {"current": None, "fatal": None, "done": 0}

        def on_event(
            event: dict[str, Any], state: dict[str, Any] = state, remaining: list[str] = remaining
        ) -> None:
            nonlocal device
            kind = event.get("event")
            if kind == "ready" and device is None:
                device = event["info"]
            elif kind == "fatal":
                state["fatal"] = event["msg"]
            elif kind == "start":
                state["current"] = event["id"]
            elif kind == "result":
                state["current"] = None
                state["done"] += 1
                remaining.remove(event["id"])
                on_result(event["id"], event["result"])

        job = {
            "bundle_dir": str(bundle_dir),
            "workload_key": workload["workload_key"],
            "ids": list(remaining),
            "policy": policy,
            "standin": standin,
            "tmp": str(tmp),
        }
        rc, timed_out, tail = _watch_worker(job, tmp, float(policy["timeout_s"]), on_event)
        current = state["current"]
        if current is not None:
            remaining.remove(current)
            if timed_out:
                res = failure("run_timeout", f"exceeded {policy['timeout_s']:g} s; worker killed")
            else:
                res = failure("crash", f"worker died ({_exit_text(rc)}) while running: {tail}")
            res["run_s"] = None
            on_result(current, res)
        elif state["fatal"] or timed_out or (remaining and state["done"] == 0):
            why = state["fatal"] or (
                f"workload set-up exceeded {_WORKER_START_S:g} s"
                if timed_out
                else f"worker ended ({_exit_text(rc)}) before any candidate: {tail}"
            )
            for cid in remaining:
                on_result(cid, failure("run", f"workload set-up failed: {why}"))
            remaining.clear()
    return device


def run_workload_baseline(
    bundle_dir: Path, workload: dict[str, Any], policy: dict[str, Any], tmp: Path
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Time the PyTorch baseline of ``workload`` in its own worker: ``(result, device info)``."""
    got: dict[str, Any] = {}

    def on_event(event: dict[str, Any]) -> None:
        got[event["event"]] = event

    job = {
        "bundle_dir": str(bundle_dir),
        "workload_key": workload["workload_key"],
        "ids": [],
        "baseline": True,
        "policy": policy,
        "standin": False,
        "tmp": str(tmp),
    }
    limit = float(policy["timeout_s"])
    rc, timed_out, tail = _watch_worker(job, tmp, limit, on_event)
    device = got["ready"]["info"] if "ready" in got else None
    if "baseline" in got:
        return got["baseline"]["result"], device
    why = (
        got["fatal"]["msg"]
        if "fatal" in got
        else (f"exceeded {limit:g} s" if timed_out else f"worker died ({_exit_text(rc)}): {tail}")
    )
    return {"name": None, "latency_s": None, "correct": None, "error_msg": why}, device


def _finite(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_finite(v) for v in x]
    return x


def write_json_atomic(path: Path, obj: Any) -> None:
    """Write ``obj`` as JSON (non-finite floats as null) through a temporary file + rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(_finite(obj), indent=1, default=_json_default), encoding="utf-8")
    os.replace(tmp, path)


def run_bundle(
    bundle_dir: str | os.PathLike[str],
    out: str | os.PathLike[str] | None = None,
    *,
    repeat: int | None = None,
    warmup: int | None = None,
    timeout_s: float | None = None,
    ids: list[str] | None = None,
    baselines: bool = True,
    standin: bool = False,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run (or, with ``standin``, validate) a bundle; write and return the results dict.

    ``repeat``/``warmup``/``timeout_s`` override the bundle's policy; ``ids`` restricts the
    run to those candidates. The results file is rewritten after every workload, so a run
    killed midway keeps what it measured.

    Raises:
        ValueError: an unreadable bundle, or an id it does not hold.
    """
    bundle_dir = Path(bundle_dir).resolve()
    bundle = load_bundle(bundle_dir)
    out_path = Path(out) if out else bundle_dir / RESULTS_FILE
    policy = dict(bundle.get("policy", {}))
    policy.setdefault("number", 1)
    policy.setdefault("timeout_s", 120.0)
    policy.setdefault("warmup", 5)
    policy.setdefault("repeat", 20)
    policy.setdefault("flush_l2_bytes", 256 << 20)
    for key, value in (("repeat", repeat), ("warmup", warmup), ("timeout_s", timeout_s)):
        if value is not None:
            policy[key] = value
    policy["baselines"] = bool(baselines and policy.get("baselines", True) and not standin)
    cands = bundle["candidates"]
    known = {c["id"] for c in cands}
    if ids is not None:
        unknown = sorted(set(ids) - known)
        if unknown:
            raise ValueError(f"the bundle has no candidate {', '.join(unknown)}")
        cands = [c for c in cands if c["id"] in set(ids)]
    results: dict[str, Any] = {
        "format": RESULTS_FORMAT,
        "standin": bool(standin),
        "bundle_id": bundle.get("id"),
        "device": None,
        "compute_capability": None,
        "driver": None,
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),  # noqa: UP017
        "policy": policy,
        "host": platform.node(),
        "candidates": {},
        "baselines": {},
    }
    if standin:
        results["note"] = (
            "STAND-IN: no GPU was used and nothing was launched; latencies are fake numbers "
            "derived from the candidate ids. Do not import them as measurements."
        )
    log = log or (lambda s: None)
    total = len(cands)
    torch_ok = _have_module("torch")
    tmp = Path(tempfile.mkdtemp(prefix="run_bundle_"))
    try:
        for workload in bundle["workloads"]:
            wk = workload["workload_key"]
            w_ids = [c["id"] for c in cands if c["workload_key"] == wk]
            if not w_ids:
                continue

            def on_result(cid: str, res: dict[str, Any], wk: str = wk) -> None:
                res["workload_key"] = wk
                results["candidates"][cid] = res
                log(f"[{len(results['candidates'])}/{total}] {cid}: {_status(res)}")

            device = run_workload_candidates(
                bundle_dir, workload, w_ids, policy, standin=standin, tmp=tmp, on_result=on_result
            )
            if device and results["device"] is None:
                results.update(device)
            if policy["baselines"]:
                if torch_ok:
                    base, device = run_workload_baseline(bundle_dir, workload, policy, tmp)
                    if device and results["device"] is None:
                        results.update(device)
                else:
                    base = {
                        "name": None,
                        "latency_s": None,
                        "correct": None,
                        "error_msg": "torch is not importable",
                    }
                results["baselines"][wk] = base
                log(f"baseline {base.get('name') or '-'}: {_status(base)}")
            write_json_atomic(out_path, _ordered(results))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if results["device"] is None and standin:
        results.update(StandinBackend({}, {}, tmp).device_info())
    results = _ordered(results)
    write_json_atomic(out_path, results)
    return results


def fastest_ids(results: dict[str, Any], k: int) -> list[str]:
    """The ids of the ``k`` fastest correct candidates of each workload in ``results`` (a
    results.json dict), fastest first within a workload; stand-in results count as none.

    Raises:
        ValueError: ``k`` < 1, or ``results`` is not a results dict.
    """
    if k < 1:
        raise ValueError(f"--finalists must be at least 1, got {k}")
    if not isinstance(results, dict) or not isinstance(results.get("candidates"), dict):
        raise ValueError("not a results.json: it has no 'candidates' table")
    if results.get("standin"):
        return []
    by_workload: dict[str, list[tuple[float, str]]] = {}
    for cid, res in results["candidates"].items():
        lat = res.get("latency_s")
        if res.get("error_kind") is None and lat is not None and math.isfinite(lat):
            by_workload.setdefault(res.get("workload_key"), []).append((float(lat), cid))
    return [cid for timed in by_workload.values() for _, cid in sorted(timed)[:k]]


def _ordered(results: dict[str, Any]) -> dict[str, Any]:
    """``results`` with the per-candidate and baseline tables last (easier to read)."""
    tables = ("candidates", "baselines")
    head = {k: v for k, v in results.items() if k not in tables}
    return {**head, **{k: results[k] for k in tables}}


def _have_module(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


def _status(res: dict[str, Any]) -> str:
    lat = res.get("latency_s")
    kind = res.get("error_kind")
    text = f"{lat * 1e3:.4f} ms" if lat is not None else "-"
    if kind or res.get("error_msg"):
        text += f" [{kind or 'error'}] {str(res.get('error_msg'))[:80]}"
    return text


def format_table(bundle: dict[str, Any], results: dict[str, Any]) -> str:
    """The short text table the script prints: one row per candidate, then the baselines."""
    labels = {
        w["workload_key"]: w.get("label") or w["workload_key"][:12] for w in bundle["workloads"]
    }
    flops = {w["workload_key"]: w.get("flop") for w in bundle["workloads"]}
    rows = [("candidate", "workload", "latency ms", "TFLOP/s", "status")]
    for cid, res in results["candidates"].items():
        wk = res.get("workload_key")
        lat = res.get("latency_s")
        flop = flops.get(wk)
        rows.append(
            (
                cid,
                labels.get(wk, str(wk))[:28],
                f"{lat * 1e3:.4f}" if lat is not None else "-",
                f"{flop / lat / 1e12:.4g}" if lat and flop else "-",
                "ok"
                if res.get("error_kind") is None
                else f"{res['error_kind']}: {str(res.get('error_msg'))[:60]}",
            )
        )
    for wk, base in results.get("baselines", {}).items():
        lat = base.get("latency_s")
        flop = flops.get(wk)
        ok = {True: "ok", False: "WRONG", None: "-"}[base.get("correct")]
        rows.append(
            (
                str(base.get("name") or "baseline"),
                labels.get(wk, wk)[:28],
                f"{lat * 1e3:.4f}" if lat is not None else "-",
                f"{flop / lat / 1e12:.4g}" if lat and flop else "-",
                ok if not base.get("error_msg") else f"{ok}: {str(base['error_msg'])[:60]}",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r[:4], widths)) + "  " + r[4] for r in rows]
    head = f"device: {results.get('device')}"
    if results.get("standin"):
        head = "STAND-IN RESULTS (nothing was launched; latencies are fake)\n" + head
    return head + "\n" + "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Run a heronlike bundle's candidates on the local CUDA GPU."
    )
    parser.add_argument("bundle_dir", nargs="?", help="the bundle folder (holds bundle.json)")
    parser.add_argument("--out", help="results file [default: BUNDLE_DIR/results.json]")
    parser.add_argument("--repeat", type=int, help="timed measurements per candidate")
    parser.add_argument("--warmup", type=int, help="untimed calls before timing")
    parser.add_argument("--timeout", type=float, help="seconds one candidate may take")
    parser.add_argument("--candidates", help="comma-separated candidate ids to run")
    parser.add_argument(
        "--finalists",
        type=int,
        metavar="K",
        help="run only the K fastest correct candidates of each workload of --ranked-by",
    )
    parser.add_argument(
        "--ranked-by",
        metavar="RESULTS",
        help="the results.json that --finalists ranks [default: BUNDLE_DIR/results.json]",
    )
    parser.add_argument("--no-baselines", action="store_true", help="skip the PyTorch baselines")
    parser.add_argument(
        "--standin", action="store_true", help="CPU stand-in for tests: validate, launch nothing"
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker_main(args.worker)
    if not args.bundle_dir:
        parser.error("BUNDLE_DIR is required")
    ids = [s for s in args.candidates.split(",") if s] if args.candidates else None
    if args.finalists is not None:
        if ids is not None:
            parser.error("--candidates and --finalists exclude each other")
        ranked = Path(args.ranked_by or Path(args.bundle_dir) / RESULTS_FILE)
        out = Path(args.out or Path(args.bundle_dir) / RESULTS_FILE)
        if out.resolve() == ranked.resolve():
            parser.error(f"--out must differ from the ranked results {ranked}")
        try:
            ids = fastest_ids(json.loads(ranked.read_text()), args.finalists)
        except (OSError, ValueError) as exc:
            parser.error(f"--ranked-by {ranked}: {exc}")
        if not ids:
            parser.error(f"--ranked-by {ranked}: no correct measured candidate to re-time")
    for name in ("repeat", "warmup", "timeout"):
        value = getattr(args, name)
        if value is not None and value < (1 if name == "repeat" else 0):
            parser.error(f"--{name} is out of range: {value}")
    try:
        results = run_bundle(
            args.bundle_dir,
            args.out,
            repeat=args.repeat,
            warmup=args.warmup,
            timeout_s=args.timeout,
            ids=ids,
            baselines=not args.no_baselines,
            standin=args.standin,
            log=lambda s: print(s, file=sys.stderr, flush=True),
        )
    except ValueError as exc:
        print(f"run_bundle: error: {exc}", file=sys.stderr)
        return 2
    print(format_table(load_bundle(args.bundle_dir), results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
