"""CUDA kernel libraries (``cuda -tensorcore``): cubins and launch manifests written at export
without a GPU, the dispatcher's TVM-free loading and kernel lookup, and the launch plan it
shares with the bundle runner. No GPU here: running a library kernel is checked by
``heronlike.library.check_library`` on a GPU machine."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
import warnings
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import heronlike.library as hl
from heronlike.errors import HostFeatureError, KernelNotFoundError, LibraryFormatError
from heronlike.measure.cuda import sass_opcodes
from heronlike.measure.run_bundle import DEFAULT_SHARED_LIMIT, kernel_calls

FIXTURE = Path(__file__).parent / "data" / "tensorcore_gemm256"
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
GEMM = {"op": "gemm", "shape": {"M": 256, "N": 256, "K": 256}, "dtype": "float16"}


class _Kernel:
    """What ``kernel_calls`` needs of a ``cupy.RawKernel``: a settable shared-memory limit."""

    max_dynamic_shared_size_bytes = 0


def test_kernel_calls_plan_shares_workspaces_and_raises_the_shared_limit() -> None:
    """The plan the CuPy dispatcher and the bundle runner launch: parameters by index, a
    split-K workspace allocated once by name and passed to both launches, the dynamic shared
    limit raised past 48 KiB only where needed."""
    cp = SimpleNamespace(empty=np.empty, uint8=np.uint8)
    funcs = {"main_kernel": _Kernel(), "main_kernel_1": _Kernel()}
    ws = {"name": "C.rf", "shape": [64], "dtype": "float32", "bytes": 256}
    launches = [
        {
            "kernel": "main_kernel",
            "grid": [4, 2, 1],
            "block": [32, 4, 1],
            "dynamic_shared_bytes": DEFAULT_SHARED_LIMIT + 1024,
            "args": [None, 1, 0],
            "workspaces": [ws, None, None],
        },
        {
            "kernel": "main_kernel_1",
            "grid": [8, 1, 1],
            "block": [128, 1, 1],
            "dynamic_shared_bytes": 0,
            "args": [2, None],
            "workspaces": [None, ws],
        },
    ]
    params = ["X", "W", "C"]
    workspaces: dict = {}
    calls = kernel_calls(cp, funcs, launches, params, workspaces)
    (fn0, grid0, block0, args0, shared0), (fn1, grid1, block1, args1, shared1) = calls
    assert fn0 is funcs["main_kernel"] and fn1 is funcs["main_kernel_1"]
    assert (grid0, block0, grid1, block1) == ((4, 2, 1), (32, 4, 1), (8, 1, 1), (128, 1, 1))
    assert args0[1:] == ("W", "X") and args1[0] == "C"
    assert args0[0] is args1[1] is workspaces["C.rf"] and workspaces["C.rf"].nbytes == 256
    assert shared0 == DEFAULT_SHARED_LIMIT + 1024 and shared1 == 0
    assert funcs["main_kernel"].max_dynamic_shared_size_bytes == DEFAULT_SHARED_LIMIT + 1024
    assert funcs["main_kernel_1"].max_dynamic_shared_size_bytes == 0


@pytest.fixture(scope="module")
def cuda_library(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """A CUDA library exported from the committed fixture's records (synthetic latencies from
    ``tests/data/tensorcore_gemm256``): no tuning, no GPU. Returns its folder and the
    warnings the build gave."""
    from heronlike.measure.bundle import import_results

    tmp = tmp_path_factory.mktemp("cuda_lib")
    records = tmp / "records.sqlite"
    assert import_results(FIXTURE, records).imported == 24
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = hl.build([GEMM], "cuda -tensorcore", trials=0, out_dir=tmp / "lib", records=records)
    assert res.missing == [] and res.path == tmp / "lib"
    return res.path, [str(w.message) for w in caught]


@needs_nvcc
def test_cuda_library_export_writes_cubins_and_launches(
    cuda_library: tuple[Path, list[str]],
) -> None:
    path, said = cuda_library
    manifest = json.loads((path / "manifest.json").read_text())
    assert manifest["runtime"] == "cupy" and manifest["format_version"] == 2
    assert manifest["library"] is None and not (path / "kernels.so").exists()
    assert manifest["target"].startswith("cuda -tensorcore")
    (kernel,) = manifest["kernels"]
    cubin = path / kernel["cubin"]
    assert cubin.is_file() and (path / kernel["source"]).is_file()
    assert kernel["arch"] == "sm_90"
    # every parameter is some launch's argument; the others are named workspaces
    used = {a for launch in kernel["launches"] for a in launch["args"] if a is not None}
    assert used == set(range(len(kernel["params"])))
    for launch in kernel["launches"]:
        spaces = launch.get("workspaces") or [None] * len(launch["args"])
        assert all((a is None) == (w is not None) for a, w in zip(launch["args"], spaces))
    assert all(not k["spill_stores_bytes"] for k in kernel["kernels"].values())
    assert kernel["records"]["trial_index"] is not None and kernel["latency_s"] > 0
    if importlib.util.find_spec("cupy") is None:  # no GPU to check on: said, not hidden
        assert manifest.get("checked") is None
        assert any("not checked" in s for s in said)
    opcodes = sass_opcodes(cubin)
    if opcodes is not None:
        assert opcodes.get("HMMA", 0) > 0


@needs_nvcc
def test_cuda_library_loads_without_tvm_and_dispatches(
    cuda_library: tuple[Path, list[str]],
) -> None:
    """Loading a CUDA library and finding its kernels needs numpy only (a fresh interpreter
    imports no TVM); a shape the library lacks is a KernelNotFoundError; running without
    CuPy is a HostFeatureError that names ``heronlike[cuda]``."""
    path, _ = cuda_library
    code = (
        "import sys, numpy as np, heronlike.library as hl\n"
        f"lib = hl.load({str(path)!r})\n"
        "a = np.zeros((256, 256), np.float16)\n"
        "print(type(lib).__name__, lib.find('gemm', a, a).op, 'tvm' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["CudaLibrary", "gemm", "False"]
    lib = hl.load(path)
    a = np.zeros((256, 256), np.float16)
    with pytest.raises(KernelNotFoundError, match="256"):
        lib.gemm(np.zeros((128, 256), np.float16), a)
    if importlib.util.find_spec("cupy") is None:
        with pytest.raises(HostFeatureError, match=r"heronlike\[cuda\]"):
            lib.gemm(a, a)


NO_TVM = """
import importlib.abc, sys
class NoTVM(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in ("tvm", "tvm_ffi"):
            raise ModuleNotFoundError(f"No module named {name!r}")
sys.meta_path.insert(0, NoTVM())
"""


def test_a_library_check_needs_no_tvm() -> None:
    """``check_library``'s reference for GEMM and conv2d runs on numpy alone: in a fresh
    interpreter where importing TVM fails, as on a GPU machine with CuPy and no TVM (an H200
    found ``check_library`` importing ``heronlike.ops``, hence TVM, for the output dtype)."""
    code = NO_TVM + (
        "import numpy as np\n"
        "from heronlike.library.builder import numpy_reference\n"
        "from heronlike.library.workloads import Workload\n"
        "rng = np.random.default_rng(0)\n"
        "x, w = rng.uniform(-1, 1, (8, 32)).astype(np.float16), rng.uniform(-1, 1, (16, 32))\n"
        "w = w.astype(np.float16)\n"
        "g = Workload('gemm', (('M', 8), ('N', 16), ('K', 32)), 'float16')\n"
        "y = numpy_reference(g, [x, w], 'float32')\n"
        "print(y.dtype, np.allclose(y, x.astype(float) @ w.astype(float).T, rtol=1e-6))\n"
        "shape = (('N', 1), ('H', 5), ('W', 5), ('CI', 3), ('CO', 4), ('KH', 3), ('KW', 3),\n"
        "         ('stride', 1), ('pad', 1), ('dilation', 1))\n"
        "a = rng.integers(-128, 128, (1, 5, 5, 3), dtype=np.int8)\n"
        "k = rng.integers(-128, 128, (4, 3, 3, 3), dtype=np.int8)\n"
        "c = numpy_reference(Workload('conv2d', shape, 'int8'), [a, k], 'int32')\n"
        "print(c.dtype, c.shape, int(c[0, 2, 2, 1]) == int((a[0, 1:4, 1:4, :].astype(int)\n"
        "      * k[1].astype(int)).sum()), 'tvm' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [
        "float32",
        "True",
        "int32",
        "(1,",
        "5,",
        "5,",
        "4)",
        "True",
        "False",
    ]


@needs_nvcc
def test_cuda_library_with_a_missing_cubin_is_a_format_error(
    cuda_library: tuple[Path, list[str]], tmp_path: Path
) -> None:
    path, _ = cuda_library
    copy = tmp_path / "lib"
    shutil.copytree(path, copy)
    for cubin in (copy / "kernels").glob("*.cubin"):
        cubin.unlink()
    with pytest.raises(LibraryFormatError, match="cubin is missing"):
        hl.load(copy)
