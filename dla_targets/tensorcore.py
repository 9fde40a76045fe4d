"""NVIDIA TensorCore through WMMA and ``ldmatrix`` + ``mma.sync``, written only against
:class:`heronlike.target.DLATarget`.

Target strings: ``"cuda -tensorcore"`` (also ``"tensorcore"``), with options

* ``-arch=sm_90`` (default; ``sm_75``, ``sm_80``, ``sm_86``, ``sm_89``, ``sm_90`` … accepted;
  an arch without TensorCores, below ``sm_75`` (nvcc 13 has no ``sm_70``), is an
  :class:`~heronlike.errors.UnknownTargetError`; one this host's nvcc rejects is a
  :class:`~heronlike.errors.HostFeatureError` when building);
* ``-max-shared-memory=<KB>``: shared memory per block the CSP may use, 48 KB by default
  (what every launch gets without opting in); up to 227 KB on ``sm_90`` (the opt-in
  maximum; the runner opts in);
* ``-sms=<n>``: streaming multiprocessors (132 on an H100 SXM): peak figures and the bound
  on split-K factors (at most ``n``; a split grid within two waves).

Knobs beside tiling (:mod:`heronlike.rules.gpu`): ``intrinsic`` (the group: a WMMA shape, or
ldmatrix + mma.sync), ``stages`` (1–4; > 1 pipelines the shared-memory fetches with
``cp.async`` on sm_80+, built with ``tirx.use_async_copy``), ``swizzle`` (XOR-permuted shared
tiles, with the ldmatrix group) and ``split_k`` (the reduction split across ``blockIdx.y``,
partial sums in a workspace summed by a second kernel).

Intrinsics: WMMA groups (fill, load A, load B, ``mma_sync``, store) for 16×16×16, 32×8×16 and
8×32×16 tiles, for ``float16 × float16 → float32``, ``float16 → float16``,
``bfloat16 → float32`` and ``int8 × int8 → int32`` (signed × signed, unlike VNNI). TVM 0.27
registers only 16×16×16 and no bfloat16; the rest come from its ``get_wmma_*_intrin``
generators, registered under heronlike's own names. ``B`` is the plain ``W[n, k]`` operand
loaded as a column-major fragment: no weight packing. From sm_80 on, each fp16 family also
holds TVM's 16×16×16 ``ldmatrix`` + ``mma.sync.m16n8k16`` group (:data:`MMA_INTRINSICS`),
whose fragments are warp registers laid out by :func:`_ldmatrix_16x16`.

Memory: 255 registers per thread, 64 K registers per block and per SM, shared memory as
above. Kernels are compiled to cubins by nvcc on this host (no GPU needed) and measured by a
runner that can reach a GPU: the TVM runtime on a local GPU, CuPy on a local GPU (PyPI's TVM
has no CUDA runtime; :mod:`heronlike.measure.cupy_runner`), TVM RPC, or an offline bundle run
on a GPU machine without TVM (:mod:`heronlike.measure.bundle`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import Any

from heronlike.errors import HostFeatureError, UnknownTargetError
from heronlike.intrinsic import Intrinsic, import_tvmscript_module
from heronlike.rules.base import ConstraintRule, Rule
from heronlike.rules.gpu import ApplyTensorCore, TensorCoreTiling, implicit_gemm, pad_gemm_n
from heronlike.rules.inline import AlwaysInline
from heronlike.rules.tensorize import Tensorize
from heronlike.target import DLATarget, MemoryLevel

#: WMMA tile shapes (m, n, k); Heron's constraint m·n·k = 4096, k = 16, m, n ∈ {8, 16, 32}
WMMA_SHAPES = ((16, 16, 16), (32, 8, 16), (8, 32, 16))
#: (A, B, accumulator) dtypes and their short names
WMMA_DTYPES = (
    ("float16", "float16", "float32", "f16f32"),
    ("float16", "float16", "float16", "f16f16"),
    ("bfloat16", "bfloat16", "float32", "bf16f32"),
    ("int8", "int8", "int32", "s8s32"),
)
STAGING_SCOPE = "shared.dyn"
DEFAULT_SHARED_KB = 48
#: the largest dynamic shared memory per block each arch can opt in to (KB)
_MAX_SHARED_KB = {75: 64, 80: 163, 86: 99, 87: 163, 89: 99, 90: 227}
REGISTERS_PER_THREAD = 255
REGISTERS_PER_BLOCK = 65536


def _intrinsic_name(m: int, n: int, k: int, tag: str, role: str) -> str:
    return f"heronlike_wmma_{m}x{n}x{k}_{tag}_{role}"


@functools.cache
def register_wmma(m: int, n: int, k: int, a_dtype: str, c_dtype: str, tag: str) -> None:
    """Register the five members of one WMMA group with TVM under heronlike's names
    (idempotent). Imports ``tvm.s_tir.tensor_intrin.cuda`` (about 6 s, once per process)."""
    from tvm.s_tir import TensorIntrin

    gen = import_tvmscript_module("tvm.s_tir.tensor_intrin.cuda")

    members = {
        "load_a": gen.get_wmma_load_intrin(m, n, k, a_dtype, STAGING_SCOPE, False, False),
        "load_b": gen.get_wmma_load_intrin(m, n, k, a_dtype, STAGING_SCOPE, True, True),
        "compute": gen.get_wmma_sync_intrin(m, n, k, a_dtype, c_dtype, True),
        "fill": gen.get_wmma_fill_intrin(m, n, k, c_dtype),
        "store": gen.get_wmma_store_intrin(m, n, k, c_dtype, "global"),
    }
    for role, (desc, impl) in members.items():
        TensorIntrin.register(_intrinsic_name(m, n, k, tag, role), desc, impl, override=True)


def wmma_intrinsic(m: int, n: int, k: int, a: str, b: str, c: str, tag: str) -> Intrinsic:
    """The WMMA group of one shape and dtype combination, as an :class:`Intrinsic`."""
    roles = ("fill", "load_a", "load_b", "compute", "store")
    return Intrinsic(
        name=_intrinsic_name(m, n, k, tag, "compute"),
        m=m,
        n=n,
        k=k,
        a_dtype=a,
        b_dtype=b,
        c_dtype=c,
        register=functools.partial(register_wmma, m, n, k, a, c, tag),
        group={role: _intrinsic_name(m, n, k, tag, role) for role in roles},
        scopes={
            "a": "wmma.matrix_a",
            "b": "wmma.matrix_b",
            "c": "wmma.accumulator",
            "staging": STAGING_SCOPE,
        },
    )


WMMA_INTRINSICS = tuple(
    wmma_intrinsic(m, n, k, a, b, c, tag) for a, b, c, tag in WMMA_DTYPES for m, n, k in WMMA_SHAPES
)

#: (A, B, accumulator) dtypes with a 16×16×16 ``ldmatrix`` + ``mma.sync`` group in TVM 0.27
#: (``int8`` has one of k = 32, which the family's common k cannot hold; no ``bfloat16``)
MMA_DTYPES = (
    ("float16", "float16", "float32", "f32"),
    ("float16", "float16", "float16", "f16"),
)


def _ldmatrix_16x16(row: Any, col: Any) -> tuple[Any, Any]:
    """Where element ``(row, col)`` of a 16×16 fp16 fragment lives in a warp: ``(thread,
    element)``, the register layout ``ldmatrix`` loads and ``mma.sync.m16n8k16`` reads (TVM's
    ``shared_16x16_to_ldmatrix_32x8_layout``)."""
    return 4 * (row % 8) + (col % 8) // 2, 4 * (col // 8) + (row // 8) * 2 + col % 2


@functools.cache
def register_mma() -> None:
    """Import TVM's registered ``ldmatrix`` / ``mma.sync`` groups (``mma_ldmatrix_*``,
    ``mma_f16f16*``, ``mma_fill_16x16_*``, ``mma_store_16x16_*_global_``)."""
    import_tvmscript_module("tvm.s_tir.tensor_intrin.cuda")  # registers them on import


def mma_intrinsic(a: str, b: str, c: str, tag: str) -> Intrinsic:
    """The 16×16×16 ``ldmatrix`` + ``mma.sync`` group (two ``m16n8k16`` per tile) of TVM's
    ``get_mma_intrin_group``: fragments are ``"warp"``-scope registers laid out by
    :func:`_ldmatrix_16x16`; ``B`` is the plain ``W[n, k]`` operand (``_trans_b``)."""
    group = {
        "fill": f"mma_fill_16x16_{tag}",
        "load_a": "mma_ldmatrix_f16_a_dyn",
        "load_b": "mma_ldmatrix_f16_b_trans_dyn",
        "compute": f"mma_f16f16{tag}_trans_b",
        "store": f"mma_store_16x16_{tag}_global_",
    }
    return Intrinsic(
        name=group["compute"],
        m=16,
        n=16,
        k=16,
        a_dtype=a,
        b_dtype=b,
        c_dtype=c,
        register=register_mma,
        group=group,
        scopes={"a": "warp", "b": "warp", "c": "warp", "staging": STAGING_SCOPE},
        fragment_layout=_ldmatrix_16x16,
    )


MMA_INTRINSICS = tuple(mma_intrinsic(a, b, c, tag) for a, b, c, tag in MMA_DTYPES)


def parse_arch(text: str | bool) -> int:
    """``"sm_90"``, ``"sm_80"``, ``"90"`` -> 90.

    Raises:
        UnknownTargetError: for a malformed arch or one without TensorCores heronlike builds
            for (below ``sm_75``).
    """
    match = re.fullmatch(r"(?:sm_)?(\d{2,3})a?", str(text).strip().lower())
    if not match:
        raise UnknownTargetError(f"-arch={text!r} is not an NVIDIA arch such as sm_90 or sm_80")
    sm = int(match.group(1))
    if sm < 75:
        raise UnknownTargetError(
            f"-arch={text}: heronlike's TensorCore target needs sm_75 or newer (Turing, "
            "Ampere, Ada, Hopper); sm_70 (Volta) has TensorCores but nvcc 13 cannot build for it"
        )
    return sm


def _local_gpu() -> bool:
    """Whether TVM's runtime sees a CUDA device here (False without a driver)."""
    import tvm

    try:
        return bool(tvm.cuda(0).exist)
    except Exception:  # noqa: BLE001 - a runtime built without CUDA
        return False


class TensorCoreTarget(DLATarget):
    """NVIDIA TensorCore (WMMA) on ``sm_75`` and newer; ``sm_90`` (H100/H200) by default."""

    names = ("tensorcore", "cuda")
    option_names = ("tensorcore", "arch", "max-shared-memory", "sms")
    #: shapes are made to fit in :meth:`normalize` (n padded); anything else is an error
    pads_shapes = False
    device = "cuda"
    runs_in_process = False
    #: ``"int8"`` means signed × signed on TensorCores (``heronlike.ops`` dtype names)
    dtype_names = {"int8": "int8-int8"}

    def __init__(self, **options: str | bool) -> None:
        super().__init__(**options)
        self.sm = parse_arch(self.options.get("arch", "sm_90"))
        kb = self.options.get("max-shared-memory", DEFAULT_SHARED_KB)
        try:
            self.shared_kb = int(str(kb).lower().rstrip("kb"))
        except ValueError:
            raise UnknownTargetError(f"-max-shared-memory={kb!r} is not a number of KB") from None
        limit = _MAX_SHARED_KB.get(
            self.sm, max(v for s, v in _MAX_SHARED_KB.items() if s <= self.sm)
        )
        if not 1 <= self.shared_kb <= limit:
            raise UnknownTargetError(
                f"-max-shared-memory={kb}: sm_{self.sm} allows 1 to {limit} KB per block"
            )

    @classmethod
    def accepts(cls, name: str, options: Any) -> bool:
        if name == "cuda" and not options.get("tensorcore"):
            raise UnknownTargetError(
                'heronlike\'s CUDA target is the TensorCore one: use "cuda -tensorcore" '
                "(computes that TensorCores cannot run are not supported on CUDA)"
            )
        return name in cls.names

    @property
    def arch(self) -> str:
        return f"sm_{self.sm}"

    def resolved_options(self) -> dict[str, str | bool]:
        out: dict[str, str | bool] = {"arch": self.arch}
        if self.shared_kb != DEFAULT_SHARED_KB:
            out["max-shared-memory"] = str(self.shared_kb)
        return out

    @property
    def key(self) -> str:
        opts = " ".join(f"-{k}={v}" for k, v in sorted(self.resolved_options().items()))
        return f"cuda -tensorcore {opts}".strip()

    @property
    def intrinsics(self) -> tuple[Intrinsic, ...]:
        # WMMA first (what a stage is matched on); ldmatrix + mma.sync joins each fp16
        # family as one more choice of the ``intrinsic`` knob (sm_80+: m16n8k16)
        return WMMA_INTRINSICS + (MMA_INTRINSICS if self.sm >= 80 else ())

    @property
    def memory(self) -> tuple[MemoryLevel, ...]:
        return (
            MemoryLevel("register", REGISTERS_PER_THREAD * 4),
            MemoryLevel("shared", self.shared_kb * 1024, STAGING_SCOPE),
        )

    @property
    def cores(self) -> int:
        return int(self.options.get("sms", 132))

    def tvm_target(self) -> dict[str, Any]:
        return {
            "kind": "cuda",
            "arch": self.arch,
            "max_shared_memory_per_block": self.shared_kb * 1024,
            "max_threads_per_block": 1024,
            "thread_warp_size": 32,
            "registers_per_block": REGISTERS_PER_BLOCK,
            "host": {"kind": "llvm"},
        }

    def normalize(self, dag: Any) -> Any:
        """Channels-last convolutions become implicit GEMMs
        (:func:`heronlike.rules.gpu.implicit_gemm`): WMMA tiles need each operand's intrinsic
        axes to be its last two dimensions. A GEMM whose ``n`` the tiles do not divide gets a
        zero-padded weight and output (:func:`heronlike.rules.gpu.pad_gemm_n`)."""
        from heronlike.intrinsic import match_intrinsic

        for stage in dag.stages:
            for intrin in self.intrinsics:
                m = match_intrinsic(stage, intrin)
                if m is None:
                    continue
                func = implicit_gemm(m, dag.func)
                if func is None and len(dag.stages) == 1:
                    func = pad_gemm_n(m, dag.func)
                return func
        return None

    def schedule_rules(self) -> Sequence[Rule]:
        return (
            AlwaysInline(),
            Tensorize(),
            TensorCoreTiling(),
            ApplyTensorCore(),
        )

    def constraint_rules(self) -> Sequence[ConstraintRule]:
        return ()

    def build_options(self) -> dict[str, Any]:
        return {
            # cp.async for the pipelined shared-memory fetches (``stages`` > 1; sm_80+): TVM's
            # InjectPTXAsyncCopy rewrites the copies of a loop's async stage only.
            # StorageRewrite stays on: ldmatrix / mma.sync need it (LowerWarpMemory finds no
            # warp index without it), and WMMA no longer stages its accumulator in shared
            # memory, where it could alias an fp32 tile into an fp16 buffer
            "pass_config": {"tirx.use_async_copy": self.sm >= 80},
            # lowering ldmatrix / mma.sync looks up index maps (``tirx.index_map.*``) that
            # importing TVM's CUDA tensor intrinsics registers: a build worker imports it
            # once, before the candidates that need it
            "imports_when": {"ldmatrix": "tvm.s_tir.tensor_intrin.cuda"},
            "arch": self.arch,
            "max_registers_per_thread": REGISTERS_PER_THREAD,
            "registers_per_block": REGISTERS_PER_BLOCK,
            "max_shared_bytes": self.shared_kb * 1024,
        }

    def check_host(self) -> None:
        """Raises HostFeatureError when nvcc is missing or rejects the arch (building needs
        nvcc; measuring needs a runner that reaches a GPU, chosen separately)."""
        from heronlike.measure.cuda import cuda_arch_supported, nvcc_version

        if nvcc_version() is None:
            raise HostFeatureError(
                "the TensorCore target compiles kernels with nvcc, which is not on PATH"
            )
        if not cuda_arch_supported(self.arch):
            raise HostFeatureError(f"this host's nvcc ({nvcc_version()}) rejects -arch={self.arch}")

    def make_builder(self, *, timeout_s: float = 60.0) -> Any:
        from heronlike.measure import LocalBuilder
        from heronlike.measure.cuda import build_cuda

        return LocalBuilder(timeout_s=timeout_s, build_fn=build_cuda, suffix=".cuda")

    def make_runner(self, *, timeout_s: float = 30.0, **evaluator: Any) -> Any:
        """The runner that times this target's candidates, first that applies:

        1. the one ``HERONLIKE_RUNNER`` names (``rpc://host:port/key``, ``cupy``,
           ``cupy+standin``; :func:`heronlike.measure.rpc.runner_from_spec`);
        2. the TVM runtime on this machine's GPU, when TVM is built with CUDA and sees one;
        3. this machine's GPU through CuPy (:class:`~heronlike.measure.cupy_runner.CupyRunner`:
           each batch is a bundle run by ``run_bundle.py``), when a subprocess finds CuPy
           importable and a GPU visible (:func:`~heronlike.measure.cupy_runner.gpu_probe`;
           this process never initialises CUDA).

        ``timeout_s`` is the seconds one candidate may run; ``evaluator`` the timing settings
        (``number``, ``repeat``, ``min_repeat_ms``).

        Raises:
            HostFeatureError: none applies; the message names ``pip install
                "heronlike[cuda]"``, remote runners and offline bundles.
            RunnerSpecError: ``HERONLIKE_RUNNER`` is malformed.
        """
        from heronlike.measure import LocalRunner
        from heronlike.measure import cupy_runner as cupy
        from heronlike.measure.rpc import runner_from_spec, runner_spec_from_env

        spec = runner_spec_from_env()
        if spec:
            return runner_from_spec(spec, timeout_s=timeout_s, **evaluator)
        if _local_gpu():
            return LocalRunner(num_threads=1, timeout_s=timeout_s, **evaluator)
        probe = cupy.gpu_probe()
        if probe.devices > 0:
            return cupy.CupyRunner(timeout_s=timeout_s, **evaluator)
        raise HostFeatureError(
            f"no CUDA GPU to measure on: TVM's runtime sees none here (PyPI's apache-tvm has no "
            f"CUDA runtime) and {probe.reason}. "
            f"On a GPU machine: {cupy.INSTALL_HINT}; or measure remotely with "
            "--runner rpc://HOST:PORT/KEY (or HERONLIKE_RUNNER), or tune round by round "
            "through offline bundles with --bundle DIR (see docs/tensorcore.md)"
        )

    def peak_ops_per_s(self) -> float | None:
        return None
