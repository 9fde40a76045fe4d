"""Load a kernel library and call its kernels on numpy arrays: the dispatcher.

This module needs only numpy and the TVM runtime (``tvm.runtime.load_module``): no rules, no
CP-SAT, no records. ``load(path)`` reads ``manifest.json`` and the shared library beside it;
:class:`Library` picks the kernel by operator, input shapes, dtypes and attributes::

    lib = heronlike.library.load("resnet50_lib")
    y = lib.conv2d(x, w, stride=1, padding=1)   # x uint8 (N,H,W,CI), w int8 (CO,KH,KW,CI)
    c = lib.gemm(a, b)                           # a uint8 (M,K), b int8 (N,K): a @ b.T, int32

A shape the library lacks raises :class:`KernelNotFoundError` naming what it holds.
"""

from __future__ import annotations

import json
import math
import threading
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import (
    InvalidArgumentError,
    KernelNotFoundError,
    LibraryFormatError,
)

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "KernelInfo",
    "KernelNotFoundError",
    "Library",
    "LibraryFormatError",
    "load",
]

FORMAT = "heronlike-library"
#: the newest manifest format this reads: 1 is a TVM shared library (``runtime`` ``"tvm"``),
#: 2 a CUDA library of cubins launched through CuPy (``runtime`` ``"cupy"``)
FORMAT_VERSION = 2
#: the manifest version and ``runtime`` of a TVM shared library and of a CUDA library
TVM_FORMAT_VERSION, TVM_RUNTIME = 1, "tvm"
CUDA_FORMAT_VERSION, CUDA_RUNTIME = 2, "cupy"
MANIFEST = "manifest.json"


@dataclass(frozen=True)
class ParamInfo:
    """One parameter of a kernel, as the manifest describes it.

    Attributes:
        name: the compute's parameter name (``X``, ``W``, ``Y`` ...).
        role: ``"input"`` or ``"output"``.
        dtype: numpy dtype name.
        shape: the logical shape the caller passes or gets back.
        kernel_shape: the shape of the kernel's buffer before packing (equal to ``shape``, a
            row-major reshape of it, or ``shape`` zero-padded at the end of each dimension).
        pack: name of the library function that re-lays a ``kernel_shape`` array out into the
            kernel's packed layout (``pack(src, dst)``), or None.
        packed_shape: the shape the kernel takes (``kernel_shape`` when not packed).
    """

    name: str
    role: str
    dtype: str
    shape: tuple[int, ...]
    kernel_shape: tuple[int, ...]
    pack: str | None
    packed_shape: tuple[int, ...]

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> ParamInfo:
        return cls(
            str(d["name"]),
            str(d["role"]),
            str(d["dtype"]),
            tuple(int(x) for x in d["shape"]),
            tuple(int(x) for x in d["kernel_shape"]),
            d.get("pack"),
            tuple(int(x) for x in d.get("packed_shape", d["kernel_shape"])),
        )


@dataclass(frozen=True)
class KernelInfo:
    """One kernel of a library (a manifest entry).

    Attributes:
        function: its symbol in the shared library (call it with the packed parameters).
        op: operator name (``conv2d``, ``gemm`` ...); ``attrs``: the operator's arguments
            (extents, stride, pad, dilation); ``dtype``: :data:`heronlike.ops.DTYPES` name.
        params: the parameters in call order (:class:`ParamInfo`).
        latency_s: its best measured latency on the build machine (median, seconds).
        entry: the whole manifest entry.
    """

    function: str
    op: str
    attrs: dict[str, int]
    dtype: str
    params: tuple[ParamInfo, ...]
    latency_s: float | None
    entry: dict[str, Any]

    @property
    def inputs(self) -> tuple[ParamInfo, ...]:
        return tuple(p for p in self.params if p.role == "input")

    @property
    def outputs(self) -> tuple[ParamInfo, ...]:
        return tuple(p for p in self.params if p.role == "output")

    def signature(self) -> str:
        ins = ", ".join(f"{p.name} {p.dtype}{list(p.shape)}" for p in self.inputs)
        extra = ", ".join(f"{k}={v}" for k, v in self.attrs.items() if k in _ATTRS)
        return f"{self.op}({ins}{', ' + extra if extra else ''})"


#: operator arguments that input shapes do not determine; a call names them (or gets defaults)
_ATTRS = ("stride", "pad", "dilation", "groups", "output_padding")


def to_logical(array: Any, shape: tuple[int, ...], xp: Any = np) -> Any:
    """A kernel-shaped output ``array`` in its logical ``shape``: a row-major reshape (another
    rank) or the leading corner (zero-padded dimensions). ``xp``: numpy or cupy."""
    if array.shape == shape:
        return array
    if array.ndim != len(shape):
        return array.reshape(shape)
    return xp.ascontiguousarray(array[tuple(slice(0, d) for d in shape)])


def to_kernel_shape(arr: Any, p: ParamInfo, xp: Any = np) -> Any:
    """A logical-shaped input ``arr`` in parameter ``p``'s kernel shape: contiguous, reshaped
    row-major (another rank) or zero-padded at the end of each dimension. ``xp``: numpy or
    cupy."""
    if arr.shape == p.kernel_shape:
        return xp.ascontiguousarray(arr)
    if arr.size == math.prod(p.kernel_shape) and arr.ndim != len(p.kernel_shape):
        return xp.ascontiguousarray(arr).reshape(p.kernel_shape)
    return xp.pad(arr, [(0, k - d) for d, k in zip(arr.shape, p.kernel_shape, strict=True)])


def _dtype_name(array: Any) -> str:
    """The dtype of a numpy or CuPy array (CuPy refuses ``np.asarray``), or of array-likes."""
    dtype = getattr(array, "dtype", None)
    return str(dtype) if dtype is not None else str(np.asarray(array).dtype)


class Library:
    """A loaded kernel library (use :func:`load`).

    Attributes:
        path: the library folder; ``manifest``: its parsed ``manifest.json``;
        kernels: every :class:`KernelInfo`; ``module``: the loaded ``tvm.runtime.Module``.
    """

    def __init__(self, path: Path, manifest: dict[str, Any], module: Any) -> None:
        self.path = path
        self.manifest = manifest
        self.module = module
        self.kernels = [
            KernelInfo(
                str(k["function"]),
                str(k["op"]),
                {str(a): int(v) for a, v in k["shape"].items()},
                str(k["dtype"]),
                tuple(ParamInfo.from_json(p) for p in k["params"]),
                k.get("latency_s"),
                dict(k),
            )
            for k in manifest["kernels"]
        ]
        self._lock = threading.Lock()
        self._functions: dict[str, Any] = {}

    @property
    def target(self) -> str:
        """The target key the kernels were tuned and compiled for."""
        return str(self.manifest["target"])

    def __repr__(self) -> str:
        return f"<heronlike Library {self.path} ({len(self.kernels)} kernels, {self.target})>"

    def __dir__(self) -> list[str]:
        return sorted({*super().__dir__(), *(k.op for k in self.kernels)})

    def __getattr__(self, op: str) -> Any:
        if op.startswith("_") or op not in {k.op for k in self.__dict__.get("kernels", ())}:
            raise AttributeError(f"library has no operator {op!r}")
        return lambda *inputs, **attrs: self.call(op, *inputs, **attrs)

    # -- dispatch -------------------------------------------------------------------------------

    def find(self, op: str, *inputs: np.ndarray, **attrs: int) -> KernelInfo:
        """The kernel for ``op`` on ``inputs`` (numpy arrays, the operator's input order) with
        ``attrs`` (e.g. ``stride=2, pad=1``; an attribute not given must not tell two kernels
        apart).

        Raises:
            KernelNotFoundError: no kernel of ``op`` has these input shapes and dtypes and
                attributes, or several match (name the attribute that tells them apart).
        """
        given = tuple((_dtype_name(a), tuple(np.shape(a))) for a in inputs)
        candidates = [k for k in self.kernels if k.op == op]
        found = [
            k
            for k in candidates
            if len(k.inputs) == len(given)
            and all((p.dtype, p.shape) == g for p, g in zip(k.inputs, given, strict=True))
            and all(k.attrs.get(a) == v for a, v in attrs.items())
        ]
        if len(found) == 1:
            return found[0]
        want = ", ".join(f"{d}{list(s)}" for d, s in given)
        extra = "".join(f", {a}={v}" for a, v in attrs.items())
        have = tuple(k.signature() for k in candidates)
        if found:
            raise KernelNotFoundError(
                f"{op}({want}{extra}) matches {len(found)} kernels of {self.path}; name the "
                f"attribute that tells them apart: " + "; ".join(k.signature() for k in found),
                op=op,
                inputs=given,
                attrs=attrs,
                available=have,
            )
        holds = (
            f"it holds {op} for: " + "; ".join(have)
            if have
            else f"it holds no {op} kernel (operators: "
            + ", ".join(sorted({k.op for k in self.kernels}))
            + ")"
        )
        raise KernelNotFoundError(
            f"library {self.path} has no kernel for {op}({want}{extra}); {holds}. Add the shape "
            "to the model's operator list and rebuild (earlier tuning is reused)",
            op=op,
            inputs=given,
            attrs=attrs,
            available=have,
        )

    def _function(self, name: str) -> Any:
        with self._lock:
            if name not in self._functions:
                self._functions[name] = self.module[name]
            return self._functions[name]

    def run(self, kernel: KernelInfo, *inputs: np.ndarray) -> np.ndarray | tuple[np.ndarray, ...]:
        """Run ``kernel`` on ``inputs`` (logical shapes): pad/reshape and pack them as the
        kernel takes them, allocate the outputs, call, and return the outputs in their logical
        shapes (one array, or a tuple for several outputs)."""
        import tvm

        from ..target import prepare_process_for

        prepare_process_for(self.target)  # e.g. AMX's tile state, TVM's thread pool
        dev = tvm.cpu()
        given = iter(inputs)
        tensors, outs = [], []
        for p in kernel.params:
            if p.role == "output":
                arr = np.zeros(p.kernel_shape, p.dtype)
            else:
                arr = to_kernel_shape(np.asarray(next(given)), p)
            t = tvm.runtime.tensor(arr, dev)
            if p.pack:
                packed = tvm.runtime.tensor(np.zeros(p.packed_shape, p.dtype), dev)
                self._function(p.pack)(t, packed)
                t = packed
            tensors.append(t)
            if p.role == "output":
                outs.append((p, t))
        self._function(kernel.function)(*tensors)
        result = tuple(to_logical(t.numpy(), p.shape) for p, t in outs)
        return result[0] if len(result) == 1 else result

    def call(
        self, op: str, *inputs: np.ndarray, **attrs: int
    ) -> np.ndarray | tuple[np.ndarray, ...]:
        """``find`` the kernel, then ``run`` it.

        Raises:
            KernelNotFoundError: see :meth:`find`.
        """
        return self.run(self.find(op, *inputs, **attrs), *inputs)

    def conv2d(
        self,
        x: np.ndarray,
        w: np.ndarray,
        *,
        stride: int = 1,
        padding: int = 0,
        dilation: int = 1,
    ) -> np.ndarray:
        """2-D convolution, NHWC: ``x (N, H, W, CI)``, ``w (CO, KH, KW, CI)`` ->
        ``(N, HO, WO, CO)`` (:func:`heronlike.ops.c2d`; ``int8``: ``x`` uint8, ``w`` int8,
        output int32, exact).

        Raises:
            KernelNotFoundError: no kernel for these shapes, dtypes, stride, padding, dilation.
        """
        out = self.call("conv2d", x, w, stride=stride, pad=padding, dilation=dilation)
        assert isinstance(out, np.ndarray)
        return out

    def gemm(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """``a @ b.T``: ``a (M, K)``, ``b (N, K)`` (a ``torch.nn.Linear`` weight) -> ``(M, N)``
        (:func:`heronlike.ops.gemm`; ``int8``: ``a`` uint8, ``b`` int8, output int32, exact).

        Raises:
            KernelNotFoundError: no kernel for these shapes and dtypes.
        """
        out = self.call("gemm", a, b)
        assert isinstance(out, np.ndarray)
        return out

    def bmm(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Batched ``a @ b.transpose(0, 2, 1)``: ``a (B, M, K)``, ``b (B, N, K)`` ->
        ``(B, M, N)`` (:func:`heronlike.ops.bmm`).

        Raises:
            KernelNotFoundError: no kernel for these shapes and dtypes.
        """
        out = self.call("bmm", a, b)
        assert isinstance(out, np.ndarray)
        return out


def read_manifest(path: str | Path) -> dict[str, Any]:
    """The parsed manifest of library folder ``path`` (or of the manifest file itself).

    Raises:
        LibraryFormatError: missing, not JSON, another format or a newer version.
    """
    p = Path(path)
    file = p / MANIFEST if p.is_dir() else p
    try:
        manifest = json.loads(file.read_text())
    except FileNotFoundError:
        raise LibraryFormatError(f"{file}: no library manifest here") from None
    except (OSError, json.JSONDecodeError) as exc:
        raise LibraryFormatError(f"{file}: unreadable library manifest ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise LibraryFormatError(f"{file}: not a heronlike library manifest")
    if int(manifest.get("format_version", 0)) > FORMAT_VERSION:
        raise LibraryFormatError(
            f"{file}: library format {manifest['format_version']} is newer than this "
            f"heronlike reads ({FORMAT_VERSION}); upgrade heronlike"
        )
    return manifest


def load(path: str | Path) -> Library:
    """Load the library in folder ``path`` (``manifest.json`` plus the shared library it names,
    or, for a CUDA library, its cubins: a :class:`heronlike.library.cuda.CudaLibrary`, which
    needs CuPy to run kernels and no TVM).

    Warns (UserWarning) when the installed TVM differs from the one that built the library.

    Raises:
        LibraryFormatError: see :func:`read_manifest`; or the shared library or a cubin is
            missing.
        InvalidArgumentError: ``path`` is not a str or path.
    """
    if not isinstance(path, str | Path):
        raise InvalidArgumentError(f"path must be a folder path, got {type(path).__name__}")
    folder = Path(path)
    if folder.is_file():
        folder = folder.parent
    manifest = read_manifest(folder)
    if manifest.get("runtime") == CUDA_RUNTIME:
        from .cuda import CudaLibrary

        return CudaLibrary(folder, manifest)
    so = folder / str(manifest["library"])
    if not so.is_file():
        raise LibraryFormatError(f"{so}: the library's shared object is missing")
    import tvm

    built_with = manifest.get("versions", {}).get("tvm")
    if built_with and built_with != tvm.__version__:
        warnings.warn(
            f"{folder}: built with TVM {built_with}, loading with TVM {tvm.__version__}",
            stacklevel=2,
        )
    module = tvm.runtime.load_module(str(so))
    return Library(folder, manifest, module)


def describe(kernels: Sequence[KernelInfo]) -> list[str]:
    """One line per kernel: function, signature, latency."""
    return [
        f"{k.function}: {k.signature()}" + (f" {k.latency_s * 1e3:.4f} ms" if k.latency_s else "")
        for k in kernels
    ]
