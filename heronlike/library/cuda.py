"""CUDA kernel libraries: cubins written at export, launched through CuPy by the dispatcher.

PyPI's ``apache-tvm`` has no CUDA runtime, so a library of ``cuda -tensorcore`` kernels is no
TVM shared library. Instead :func:`write_cubins` (called by
:func:`heronlike.library.builder.export`) builds each kernel with nvcc into
``kernels/<function>.cubin`` beside its CUDA source ``kernels/<function>.cu`` and stores the
kernel's launch manifest (kernels in order, grid, block, dynamic shared bytes, arguments, the
split-K workspaces) in the library's ``manifest.json``. Exporting needs nvcc, not a GPU.

:class:`CudaLibrary` (what :func:`heronlike.library.load` returns for such a library) is the
dispatcher. It needs numpy and CuPy (``pip install "heronlike[cuda]"``), neither TVM nor the
rest of heronlike: it loads each cubin with ``cupy.RawModule`` on first use and runs the launch
manifest with the same code the offline-bundle and CuPy runners measure with
(:func:`heronlike.measure.run_bundle.kernel_calls`), so a library kernel is launched exactly
as it was timed::

    lib = heronlike.library.load("gemm_lib")
    c = lib.gemm(a, b)          # numpy in -> numpy out; cupy in -> cupy out (no copies back)
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import CUPY_INSTALL_HINT, HostFeatureError, LibraryFormatError
from ..measure.run_bundle import kernel_calls, launch_calls, load_kernels
from .runtime import (
    CUDA_FORMAT_VERSION,
    CUDA_RUNTIME,
    KernelInfo,
    Library,
    to_kernel_shape,
    to_logical,
)

__all__ = ["CUDA_FORMAT_VERSION", "CUDA_RUNTIME", "CudaLibrary", "write_cubins"]

#: the folder of the cubins and CUDA sources, inside the library folder
KERNELS_DIR = "kernels"


def write_cubins(
    kernels: Sequence[dict[str, Any]], modules: dict[str, Any], out: Path, target: Any
) -> None:
    """Build each kernel entry's scheduled module (``modules[entry["function"]]``, a TVM
    ``IRModule``) for ``target`` with nvcc (:func:`heronlike.measure.cuda.build_cuda`, with
    the target's build options) into ``out/kernels/<function>.cubin`` and ``.cu``, and add to
    the entry ``cubin``, ``source`` (paths relative to ``out``), ``arch``, ``launches`` and
    ``kernels`` (registers, spills and shared bytes per CUDA kernel, from ptxas).

    Raises:
        RuntimeError: a kernel failed to build (TVM, nvcc), spills or exceeds the target's
            register or shared-memory limits; the message names the kernel and the reason.
    """
    import tvm

    from ..measure.cuda import build_cuda  # (it imports what the lowering needs, once)

    folder = out / KERNELS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    options = target.build_options()
    for entry in kernels:
        name = str(entry["function"])
        mod_json = tvm.ir.save_json(modules[name])
        work = folder / f".{name}.build"
        path, kind, msg, info = build_cuda(mod_json, target.tvm_target(), str(work), options)
        if path is None:
            raise RuntimeError(f"{entry['name']}: the CUDA kernel did not build ({kind}): {msg}")
        os.replace(work / "kernel.cubin", folder / f"{name}.cubin")
        os.replace(work / "kernel.cu", folder / f"{name}.cu")
        shutil.rmtree(work, ignore_errors=True)
        entry.update(
            cubin=f"{KERNELS_DIR}/{name}.cubin",
            source=f"{KERNELS_DIR}/{name}.cu",
            arch=info["arch"],
            launches=info["launches"],
            kernels=info["kernels"],
        )


def _cupy() -> Any:
    try:
        import cupy
    except ImportError:
        raise HostFeatureError(
            f"this library holds CUDA kernels; running them needs CuPy: {CUPY_INSTALL_HINT}"
        ) from None
    return cupy


class CudaLibrary(Library):
    """A loaded CUDA kernel library (use :func:`heronlike.library.load`): the dispatcher of
    :class:`~heronlike.library.runtime.Library` (``find``, ``call``, ``gemm``, ``conv2d`` ...)
    running each kernel's cubin on the current CuPy device.

    Inputs may be numpy or CuPy arrays of the kernel's dtypes and logical shapes; the outputs
    are CuPy arrays when any input is one (nothing is copied back to the host, and the launch
    is asynchronous on CuPy's current stream), else numpy arrays. CUDA is initialised on the
    first call, not at load. The calls of one split-K kernel share its partial-sum workspace:
    issue them on one stream.
    """

    def __init__(self, path: Path, manifest: dict[str, Any]) -> None:
        super().__init__(path, manifest, None)
        for k in self.kernels:
            for key in ("cubin", "launches"):
                if key not in k.entry:
                    raise LibraryFormatError(f"{path}: kernel {k.function} has no {key!r}")
            cubin = path / str(k.entry["cubin"])
            if not cubin.is_file():
                raise LibraryFormatError(f"{cubin}: the kernel's cubin is missing")
        self._loaded: dict[str, tuple[Any, dict[str, Any], dict[str, Any]]] = {}
        self._load_lock = threading.Lock()

    def _kernels(self, cp: Any, kernel: KernelInfo) -> tuple[dict[str, Any], dict[str, Any]]:
        """The loaded CUDA kernels of ``kernel`` by name and its workspaces (loaded once)."""
        with self._load_lock:
            if kernel.function not in self._loaded:
                launches = kernel.entry["launches"]
                names = list(dict.fromkeys(str(launch["kernel"]) for launch in launches))
                cubin = self.path / str(kernel.entry["cubin"])
                try:
                    module, funcs = load_kernels(cp, cubin, names)
                except Exception as exc:  # the driver's verdict, named
                    cc = cp.cuda.Device().compute_capability
                    raise HostFeatureError(
                        f"{cubin} (built for {kernel.entry.get('arch')}) does not load on this "
                        f"GPU (compute capability {cc}): {exc}. Rebuild the library with the "
                        f'target "cuda -tensorcore -arch=sm_{cc}"'
                    ) from exc
                self._loaded[kernel.function] = (module, funcs, {})
            _, funcs, workspaces = self._loaded[kernel.function]
            return funcs, workspaces

    def run(self, kernel: KernelInfo, *inputs: Any) -> Any:
        """Run ``kernel`` on ``inputs`` (logical shapes, numpy or CuPy): copy them to the GPU,
        zero-pad or reshape them to the kernel's shapes, launch, and return the outputs in
        their logical shapes (one array or a tuple; CuPy when any input is CuPy).

        Raises:
            HostFeatureError: CuPy is not installed, or the cubin does not load on this GPU.
        """
        cp = _cupy()
        on_device = any(isinstance(a, cp.ndarray) for a in inputs)
        funcs, workspaces = self._kernels(cp, kernel)
        given = iter(inputs)
        buffers, outs = [], []
        for p in kernel.params:
            if p.role == "output":
                arr = cp.zeros(p.kernel_shape, p.dtype)
                outs.append((p, arr))
            else:
                arr = to_kernel_shape(cp.asarray(next(given)), p, cp)
            buffers.append(arr)
        launch_calls(kernel_calls(cp, funcs, kernel.entry["launches"], buffers, workspaces))
        result = tuple(to_logical(t, p.shape, cp) for p, t in outs)
        if not on_device:
            result = tuple(np.asarray(cp.asnumpy(r)) for r in result)
        return result[0] if len(result) == 1 else result
