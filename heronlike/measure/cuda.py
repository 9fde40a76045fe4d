"""The CUDA build function: TVM codegen, nvcc to a cubin, ``ptxas -v`` resources, launch manifest.

:func:`build_cuda` is a :data:`~heronlike.measure.builder.BuildFunction`, so
``LocalBuilder(build_fn=build_cuda, suffix=".cuda")`` builds CUDA candidates on a machine with
nvcc and no GPU. Each candidate becomes a folder::

    kernel.cu       the CUDA C++ source TVM generated
    kernel.cubin    nvcc -cubin of it for options["arch"]
    kernel.so       executable.export_library (the TVM runtime loads it on a GPU machine)
    manifest.json   launches (grid, block, dynamic shared bytes, argument order), per-kernel
                    ptxas resources, the parameters of ``main``

so a runner can launch the cubin without TVM (e.g. ``cupy.RawModule``) or load ``kernel.so``
through the TVM runtime (:class:`~heronlike.measure.LocalRunner` does when the artifact is a
folder).

TVM 0.27 notes: without a CUDA driver, ``tvm.compile`` keeps CUDA *source* (a fallback module
of kind ``"cuda"``) and never runs nvcc; launch dimensions live only in the host code, as
``tirx.call_ffi_kernel`` calls whose argument order is not always the PrimFunc's.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from typing import Any

from heronlike.measure.builder import import_modules, needed_imports
from heronlike.measure.kinds import ErrorKind
from heronlike.measure.runner import short_error

__all__ = [
    "build_cuda",
    "cuobjdump_path",
    "sass_opcodes",
    "cuda_arch_supported",
    "launch_manifest",
    "nvcc_version",
    "param_table",
    "parse_ptxas",
]

#: nvcc flags: those of TVM's ``tvm.support.nvcc.compile_cuda`` except its ptxas options
#: (``--register-usage-level=10 --warn-on-local-memory-usage``); the register-usage level is
#: chosen per candidate (:data:`PTXAS_LEVELS`). ``options["nvcc_flags"]`` come last.
NVCC_FLAGS = (
    "-O3",
    "-U__CUDA_NO_HALF_OPERATORS__",
    "-U__CUDA_NO_HALF_CONVERSIONS__",
    "-U__CUDA_NO_BFLOAT16_OPERATORS__",
    "-U__CUDA_NO_BFLOAT16_CONVERSIONS__",
    "-U__CUDA_NO_BFLOAT162_OPERATORS__",
    "-U__CUDA_NO_BFLOAT162_CONVERSIONS__",
    "--expt-relaxed-constexpr",
    "--expt-extended-lambda",
    "--use_fast_math",
    "-Xptxas",
    "-v",
)

#: ptxas ``--register-usage-level`` values tried in order until a kernel builds without spills
#: (``options["ptxas_levels"]`` overrides). Neither level spills less in general: at the default
#: 5, WMMA kernels of 40-128 registers were often given 4-16 byte stack spills to save a few
#: registers (of 8 such sampled TensorCore kernels, sm_90, nvcc 13, none spilled at level 10:
#: e.g. 40 registers + 4 bytes spilled -> 55 registers, no spill), while a 512³ WMMA GEMM builds
#: clean at 5 (90 registers) and spills 16 bytes at 10 (72 registers). A kernel that spills at
#: both (the register file really is too small) is a ``spill`` failure. Level 10 is what a TVM
#: runtime that JIT-compiles ``kernel.so`` uses.
PTXAS_LEVELS = (5, 10)

_DYN_SHARED_TAG = "tirx.use_dyn_shared_memory"
_AXES = "xyz"


# ------------------------------------------------------------------------------------------------
# nvcc


def nvcc_version(nvcc: str = "nvcc") -> str | None:
    """The CUDA release of ``nvcc`` (e.g. ``"13.0"``), or ``None`` when it is absent or fails."""
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r"release (\d+\.\d+)", out.stdout)
    return match.group(1) if out.returncode == 0 and match else None


@functools.cache
def cuda_arch_supported(arch: str, nvcc: str = "nvcc") -> bool:
    """Whether ``nvcc`` can compile for ``arch`` (e.g. ``"sm_90"``, ``"sm_90a"``).

    Asks nvcc itself by compiling an empty translation unit (about 0.4 s, cached per
    ``(arch, nvcc)``). False when nvcc is absent. nvcc 13 rejects ``sm_70`` and older.
    """
    if not re.fullmatch(r"sm_\d+[a-z]?", arch):
        return False
    cmd = [nvcc, "-x", "cu", "-cubin", f"-arch={arch}", "-o", os.devnull, os.devnull]
    try:
        return subprocess.run(cmd, capture_output=True, timeout=120).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def parse_ptxas(text: str) -> dict[str, dict[str, int]]:
    """Per-kernel resources from ``ptxas -v`` output (nvcc ``-Xptxas -v``, stdout + stderr).

    Returns:
        ``{kernel: {"registers", "spill_stores_bytes", "spill_loads_bytes",
        "static_shared_bytes", "stack_bytes"}}`` for every entry function (``__global__``)
        ptxas compiled; registers are per thread, the others bytes (spills and stack per
        thread, static shared memory per block). Absent fields are 0. Non-entry device
        functions are left out.
    """
    kernels: dict[str, dict[str, int]] = {}
    props: dict[str, tuple[int, int, int]] = {}
    current: str | None = None
    last_props: str | None = None
    for line in text.splitlines():
        if m := re.search(r"Compiling entry function '([^']+)'", line):
            current = m.group(1)
            kernels[current] = {
                "registers": 0,
                "spill_stores_bytes": 0,
                "spill_loads_bytes": 0,
                "static_shared_bytes": 0,
                "stack_bytes": 0,
            }
        elif m := re.search(r"Function properties for (\S+)", line):
            last_props = m.group(1)
        elif m := re.search(
            r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line
        ):
            if last_props is not None:
                props[last_props] = (int(m.group(1)), int(m.group(2)), int(m.group(3)))
        elif (m := re.search(r"Used (\d+) registers", line)) and current is not None:
            kernels[current]["registers"] = int(m.group(1))
            if s := re.search(r"(\d+) bytes smem", line):
                kernels[current]["static_shared_bytes"] = int(s.group(1))
    for name, info in kernels.items():
        stack, stores, loads = props.get(name, (0, 0, 0))
        info.update(stack_bytes=stack, spill_stores_bytes=stores, spill_loads_bytes=loads)
    return kernels


_LAUNCH_BOUNDS = re.compile(r"__launch_bounds__\((\d+)\)")


def one_block_launch_bounds(source: str) -> tuple[str, bool]:
    """``source`` with every ``__launch_bounds__(T)`` that TVM writes given a minimum of one
    block per SM, ``__launch_bounds__(T, 1)``; and whether anything changed.

    With ``T`` alone, ptxas may aim at several resident blocks and spill to get there: sampled
    ldmatrix + mma.sync kernels (sm_90, nvcc 13) spilled 8-16 bytes at 40-56 registers under
    ``__launch_bounds__(256)`` and ``(64)`` at both register-usage levels, and built without
    spills at 56 and 96 registers under ``(256, 1)`` and ``(64, 1)`` (as without launch
    bounds). A spilled kernel is never kept, so this rewrite is tried only for a candidate that
    spilled at every level; ``kernel.cu`` then holds the rewritten source (what a bundle
    recompiles), while ``kernel.so`` keeps TVM's own.
    """
    out, n = _LAUNCH_BOUNDS.subn(r"__launch_bounds__(\1, 1)", source)
    return out, n > 0


def _compile_cubin(
    src_path: str, cubin_path: str, arch: str, nvcc: str, extra: list[str]
) -> tuple[int, str]:
    """Run nvcc; ``(return code, stdout + stderr)``; code 127 when nvcc cannot be started."""
    cmd = [nvcc, "-cubin", f"-arch={arch}", *NVCC_FLAGS, *extra, "-o", cubin_path, src_path]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as exc:
        return 127, f"cannot run {nvcc}: {exc}"
    return out.returncode, out.stdout + out.stderr


def cuobjdump_path() -> str | None:
    """``cuobjdump`` on ``PATH``, else the one of the ``nvidia-cuda-cuobjdump`` wheel in this
    Python's environment (it needs ``nvdisasm`` beside it: ``nvidia-cuda-nvdisasm``), else
    ``None``."""
    found = shutil.which("cuobjdump")
    if found:
        return found
    import sysconfig

    for sub in ("cu13", "cu12", "cuda_cuobjdump"):
        path = os.path.join(sysconfig.get_paths()["purelib"], "nvidia", sub, "bin", "cuobjdump")
        if os.access(path, os.X_OK):
            return path
    return None


def sass_opcodes(cubin: str | os.PathLike[str]) -> dict[str, int] | None:
    """How many times each SASS opcode occurs in ``cubin`` (``cuobjdump -sass``), by its
    mnemonic without modifiers (``LDGSTS.E.BYPASS.128`` counts as ``LDGSTS``, ``HMMA.16816.F32``
    as ``HMMA``), over every kernel; ``None`` when cuobjdump (or the nvdisasm it runs) is
    missing or fails."""
    tool = cuobjdump_path()
    if tool is None:
        return None
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(tool) + os.pathsep + env.get("PATH", "")
    try:
        out = subprocess.run(
            [tool, "-sass", os.fspath(cubin)], capture_output=True, text=True, env=env, timeout=120
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    counts: dict[str, int] = {}
    pattern = r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)"
    for match in re.finditer(pattern, out.stdout):
        counts[match.group(1)] = counts.get(match.group(1), 0) + 1
    return counts


# ------------------------------------------------------------------------------------------------
# launch manifest (host side of the lowered module)


def _children(obj: Any) -> Iterator[Any]:
    """The sub-objects of a TVM IR node, in field order (TVM 0.27 has no Python TIR visitor)."""
    import tvm
    import tvm_ffi

    if isinstance(obj, str | bytes | int | float | bool) or obj is None:
        return
    if isinstance(obj, tvm_ffi.Array | list | tuple):
        yield from obj
    elif isinstance(obj, tvm_ffi.Map):
        for key, value in obj.items():
            yield key
            yield value
    elif isinstance(obj, tvm_ffi.Object) and not isinstance(obj, tvm.ir.Op):
        info = getattr(type(obj), "__tvm_ffi_type_info__", None)
        while info is not None:
            for field in info.fields:
                if field.name != "span":
                    yield getattr(obj, field.name)
            info = info.parent_type_info


def _walk(root: Any) -> Iterator[Any]:
    """Every node under ``root`` in pre-order (statement order = execution order)."""
    stack = [root]
    seen: set[int] = set()
    while stack:
        obj = stack.pop()
        handle = getattr(obj, "__chandle__", None)
        if callable(handle):
            key = handle()
            if key in seen:
                continue
            seen.add(key)
        yield obj
        stack.extend(reversed(list(_children(obj))))


def _param_index(expr: Any, defs: dict[Any, Any], args_var: Any, depth: int = 0) -> int | None:
    """Which parameter the pointer ``expr`` (a kernel argument) is the data of.

    Follows variable and buffer bindings (``defs``) back to a ``tvm_struct_get(args, i, ...)``
    of the packed-API function (``args_var`` = its ``args`` parameter; packed argument ``i`` is
    ``main``'s parameter ``i``). ``None`` for a scalar or a pointer from no parameter.
    """
    import tvm

    if args_var is None or depth > 32:
        return None
    if depth == 0 and not isinstance(getattr(expr, "ty", None), tvm.ir.PointerType):
        return None  # a scalar argument (it may still be derived from a parameter's shape)
    for node in _walk(expr):
        if (
            isinstance(node, tvm.ir.Call)
            and isinstance(node.op, tvm.ir.Op)
            and node.op.name == "tirx.tvm_struct_get"
            and node.args[0].same_as(args_var)
        ):
            return int(node.args[1])
    for node in _walk(expr):
        if isinstance(node, tvm.tirx.Var) and node in defs:
            found = _param_index(defs[node], defs, args_var, depth + 1)
            if found is not None:
                return found
    return None


def _workspace(expr: Any, buffers: list[tuple[Any, dict[str, Any]]]) -> dict[str, Any] | None:
    """The host-allocated global buffer whose data the kernel argument ``expr`` is, if any."""
    if not buffers:
        return None
    for node in _walk(expr):
        for buf, info in buffers:
            if node.same_as(buf) if hasattr(node, "same_as") else False:
                return dict(info)
    return None


def launch_manifest(mod: Any, target: Any) -> list[dict[str, Any]]:
    """The kernel launches of ``mod``'s host code, in launch order.

    Lowers ``mod`` (an ``IRModule`` or ``PrimFunc`` with a ``main``, before ``tvm.compile``)
    with TVM's default TIR pipeline under the *current* ``PassContext`` (enter the same one
    ``tvm.compile`` used) and reads every ``tirx.call_ffi_kernel`` of the host function.

    Args:
        mod: the scheduled module.
        target: a ``tvm.target.Target`` or its JSON dict, with a host (``{"kind": "llvm"}``
            is used when it has none).

    Returns:
        One dict per launch: ``{"kernel": name, "grid": [x, y, z], "block": [x, y, z],
        "dynamic_shared_bytes": int (bytes per block, 0 if none), "args": [i, ...],
        "workspaces": [w, ...]}``, where ``args[n]`` is the index into ``main``'s parameters
        of the kernel's ``n``-th argument (``None`` for an argument that is no parameter, e.g.
        a scalar or a host-allocated workspace) and ``workspaces[n]`` describes a global
        buffer the host code allocates for the launches (a split-K partial-sum buffer) when
        that argument is one: ``{"name", "shape", "dtype", "bytes"}`` (the same name in every
        launch that takes it), else ``None``. A runner without TVM allocates each named
        workspace once per candidate; no launch relies on its initial contents.

    Raises:
        ValueError: a launch dimension or the dynamic shared memory size is not a constant.
    """
    import tvm
    from tvm.tirx.build import split_host_device_mods

    if isinstance(mod, tvm.tirx.PrimFunc):
        mod = tvm.IRModule({"main": mod})
    target = tvm.target.Target(target)
    host = target.host if target.host is not None else tvm.target.Target({"kind": "llvm"})
    bound = tvm.tirx.transform.BindTarget(target.with_host(host))(mod)
    pipeline, _, _ = tvm.tirx.get_default_tir_pipeline(target)
    host_mod, _ = split_host_device_mods(pipeline(bound))
    funcs = [host_mod["main"]] if "main" in [g.name_hint for g in host_mod.functions] else []
    funcs = funcs or list(host_mod.functions.values())

    launches: list[dict[str, Any]] = []
    for func in funcs:
        args_var = func.params[1] if len(func.params) > 1 else None
        nodes = list(_walk(func.body))
        defs: dict[Any, Any] = {}
        # global buffers the host allocates (TVMBackendAllocWorkspace once lowered)
        buffers: list[tuple[Any, dict[str, Any]]] = []
        for node in nodes:
            if isinstance(node, tvm.tirx.AllocBuffer) and node.buffer.scope() in ("", "global"):
                buf = node.buffer
                shape = [int(d) for d in buf.shape]
                nbytes = math.prod(shape) * tvm.runtime.DataType(str(buf.dtype)).bits // 8
                info = {"name": str(buf.name), "shape": shape, "dtype": str(buf.dtype)}
                buffers.append((buf, {**info, "bytes": nbytes}))
        for node in nodes:
            if isinstance(node, tvm.tirx.Bind | tvm.tirx.LetStmt):
                defs[node.var] = node.value
            elif isinstance(node, tvm.tirx.DeclBuffer) and getattr(node, "data", None) is not None:
                defs[node.buffer] = node.data  # 0.27: a buffer is a Var; .data = buffer_data(buf)
        for node in nodes:
            if not (
                isinstance(node, tvm.ir.Call)
                and isinstance(node.op, tvm.ir.Op)
                and node.op.name == "tirx.call_ffi_kernel"
            ):
                continue
            tags = [str(t) for t in node.attrs.launch_params]
            valued = [t for t in tags if t.startswith(("blockIdx.", "threadIdx.", _DYN_SHARED_TAG))]
            values = list(node.args[len(node.args) - len(valued) :]) if valued else []
            grid, block, dyn = [1, 1, 1], [1, 1, 1], 0
            for tag, value in zip(valued, values, strict=True):
                if not isinstance(value, tvm.tirx.IntImm):
                    raise ValueError(f"launch parameter {tag} = {value} is not a constant")
                if tag == _DYN_SHARED_TAG:
                    dyn = int(value)
                else:
                    scope, axis = tag.split(".")
                    (grid if scope == "blockIdx" else block)[_AXES.index(axis)] = int(value)
            kernel_args = node.args[1 : len(node.args) - len(valued)]
            launches.append(
                {
                    "kernel": str(node.args[0].value),
                    "grid": grid,
                    "block": block,
                    "dynamic_shared_bytes": dyn,
                    "args": [_param_index(a, defs, args_var) for a in kernel_args],
                    "workspaces": [_workspace(a, buffers) for a in kernel_args],
                }
            )
    return launches


def param_table(mod: Any) -> list[dict[str, Any]]:
    """``main``'s parameters in call order: ``[{"name", "shape", "dtype"}]`` (shape in
    elements; ``[]`` and the variable's dtype for a scalar or untyped handle)."""
    import tvm

    func = mod if isinstance(mod, tvm.tirx.PrimFunc) else mod["main"]
    table = []
    for param in func.params:
        shape = getattr(param, "shape", None)
        table.append(
            {
                "name": str(getattr(param, "name", param)),
                "shape": [int(s) for s in shape] if shape is not None else [],
                "dtype": str(param.dtype),
            }
        )
    return table


# ------------------------------------------------------------------------------------------------
# the build function


def _check_limits(
    launches: list[dict[str, Any]], kernels: dict[str, dict[str, int]], options: dict[str, Any]
) -> tuple[str, str] | None:
    """The first violated limit as ``(error_kind, message)``, else ``None``."""
    for name, k in kernels.items():
        if k["spill_stores_bytes"] > 0 or k["spill_loads_bytes"] > 0:
            return ErrorKind.SPILL, (
                f"{name} spills: {k['spill_stores_bytes']} bytes stores, "
                f"{k['spill_loads_bytes']} bytes loads"
            )
    max_regs = int(options.get("max_registers_per_thread", 255))
    regs_per_block = int(options.get("registers_per_block", 65536))
    max_shared = int(options.get("max_shared_bytes", 49152))
    for name, k in kernels.items():
        if k["registers"] > max_regs:
            return ErrorKind.REGISTERS, (
                f"{name} uses {k['registers']} registers per thread > {max_regs}"
            )
    for launch in launches:
        k = kernels.get(launch["kernel"], {})
        threads = launch["block"][0] * launch["block"][1] * launch["block"][2]
        if k.get("registers", 0) * threads > regs_per_block:
            return ErrorKind.REGISTERS, (
                f"{launch['kernel']}: {k['registers']} registers x {threads} threads "
                f"> {regs_per_block} registers per block"
            )
        shared = k.get("static_shared_bytes", 0) + launch["dynamic_shared_bytes"]
        if shared > max_shared:
            return ErrorKind.SHARED_MEMORY, (
                f"{launch['kernel']} uses {shared} bytes of shared memory per block > {max_shared}"
            )
    return None


def build_cuda(
    mod_json: str, target: dict[str, Any], path: str, options: dict[str, Any]
) -> tuple[str | None, str | None, str | None, dict[str, Any]]:
    """Build one CUDA candidate into the folder ``path`` (a :data:`BuildFunction`).

    Args:
        mod_json: ``tvm.ir.save_json`` of the scheduled module (function ``main``).
        target: TVM CUDA target dict, e.g. ``{"kind": "cuda", "arch": "sm_90",
            "max_shared_memory_per_block": 49152, "max_threads_per_block": 1024,
            "thread_warp_size": 32, "registers_per_block": 65536, "host": {"kind": "llvm"}}``.
        path: the folder to create (``kernel.cu``, ``kernel.cubin``, ``kernel.so``,
            ``manifest.json``).
        options: ``arch`` (nvcc ``-arch``; default ``target["arch"]``), ``nvcc`` (binary,
            default ``"nvcc"``), ``nvcc_flags`` (extra flags, list), ``pass_config`` (TVM
            ``PassContext`` config, e.g. ``{"tirx.disable_storage_rewrite": True}``),
            ``max_registers_per_thread`` (255), ``registers_per_block`` (65536),
            ``max_shared_bytes`` (static + dynamic bytes per block, 49152), ``ptxas_levels``
            (register-usage levels tried in order until no kernel spills, default
            :data:`PTXAS_LEVELS`; ignored when ``nvcc_flags`` set a level). When every level
            spills, the levels are tried once more on the source with one block per SM in
            its launch bounds (:func:`one_block_launch_bounds`; the manifest's
            ``min_blocks_per_sm`` is then 1).

    Returns:
        ``(path, None, None, manifest)`` on success, else ``(None, kind, message, info)`` with
        ``kind`` one of ``"build"`` (TVM raised), ``"nvcc"`` (nvcc/ptxas failed; the message
        is the end of its output), ``"spill"``, ``"registers"``, ``"shared_memory"``; the
        folder is then removed and ``info`` holds what was gathered so far (same keys as the
        manifest). Never raises.

        The manifest (also written to ``manifest.json``) is ``{"arch", "ptxas_level" (the
        register-usage level used, None for the caller's own), "launches": [{"kernel", "grid":
        [x, y, z], "block": [x, y, z], "dynamic_shared_bytes", "args": [param index]}],
        "kernels": {name: {"registers", "spill_stores_bytes", "spill_loads_bytes",
        "static_shared_bytes", "stack_bytes"}}, "params": [{"name", "shape", "dtype"}],
        "shared_bytes_per_block": {name: static + dynamic bytes}}``.
    """
    arch = str(options.get("arch") or target.get("arch") or "")
    info: dict[str, Any] = {"arch": arch}

    def fail(kind: str, msg: str) -> tuple[None, str, str, dict[str, Any]]:
        shutil.rmtree(path, ignore_errors=True)
        return None, kind, msg, info

    try:
        import tvm

        import_modules(needed_imports(mod_json, options))  # done already in a LocalBuilder
        mod = tvm.ir.load_json(mod_json)
        if isinstance(mod, tvm.tirx.PrimFunc):
            mod = tvm.IRModule({"main": mod})
        tvm_target = tvm.target.Target(target)
        with tvm.transform.PassContext(config=dict(options.get("pass_config", {}))):
            executable = tvm.compile(mod, target=tvm_target)
            info["launches"] = launch_manifest(mod, tvm_target)
        info["params"] = param_table(mod)
        cuda_mods = [m for m in executable.mod.imports if m.kind == "cuda"]
        if len(cuda_mods) != 1:
            return fail(ErrorKind.BUILD, f"expected one CUDA module, got {len(cuda_mods)}")
        source = cuda_mods[0].inspect_source("cuda")
        os.makedirs(path, exist_ok=True)
        with open(os.path.join(path, "kernel.cu"), "w") as f:
            f.write(source)
        executable.export_library(os.path.join(path, "kernel.so"))
    except Exception as exc:  # noqa: BLE001 - failures are data
        return fail(ErrorKind.BUILD, short_error(exc))

    if not arch:
        return fail(ErrorKind.NVCC, "no arch: pass options['arch'] or target['arch']")
    user_flags = [str(x) for x in options.get("nvcc_flags", [])]
    levels: tuple[int | None, ...] = tuple(options.get("ptxas_levels", PTXAS_LEVELS))
    if any("register-usage-level" in f for f in user_flags) or not levels:
        levels = (None,)  # the caller's own level
    # the register-usage levels first; then, if every level spilled, once more with the launch
    # bounds' minimum of one block per SM (:func:`one_block_launch_bounds`)
    attempts = [(level, False) for level in levels] + [(level, True) for level in levels]
    for level, one_block in attempts:
        if one_block and not info.get("min_blocks_per_sm"):
            source, changed = one_block_launch_bounds(source)
            if not changed:
                break
            with open(os.path.join(path, "kernel.cu"), "w") as f:
                f.write(source)
            info["min_blocks_per_sm"] = 1
        extra = [] if level is None else ["-Xptxas", f"--register-usage-level={level}"]
        code, output = _compile_cubin(
            os.path.join(path, "kernel.cu"),
            os.path.join(path, "kernel.cubin"),
            arch,
            str(options.get("nvcc", "nvcc")),
            extra + user_flags,
        )
        if code != 0:
            tail = [ln for ln in output.splitlines() if ln.strip()][-8:]
            return fail(ErrorKind.NVCC, f"nvcc exit {code}: " + "\n".join(tail))
        kernels = parse_ptxas(output)
        info["kernels"] = kernels
        info["ptxas_level"] = level
        if not any(k["spill_stores_bytes"] or k["spill_loads_bytes"] for k in kernels.values()):
            break
    shared: dict[str, int] = {}
    for launch in info["launches"]:
        static = kernels.get(launch["kernel"], {}).get("static_shared_bytes", 0)
        total = static + launch["dynamic_shared_bytes"]
        shared[launch["kernel"]] = max(shared.get(launch["kernel"], 0), total)
    info["shared_bytes_per_block"] = shared
    violation = _check_limits(info["launches"], kernels, options)
    if violation is not None:
        return fail(*violation)
    with open(os.path.join(path, "manifest.json"), "w") as f:
        json.dump(info, f, indent=1)
    return path, None, None, info
