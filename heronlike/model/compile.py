"""``compile_model``: every PrimFunc of a model replaced by its best schedule, built, callable.

For each task (:mod:`heronlike.model.tasks`) the kernel is, in this order of preference:

1. ``tuned``: the best valid trial in the records that fits today's space
   (:func:`heronlike.library.builder.best_usable_trial`);
2. ``default``: one valid assignment of the task's CSP drawn by CP-SAT (Heron's RandSAT draw,
   ASPLOS'23 §5) — a tiled, parallel, vectorised program, never measured;
3. ``tvm``: TVM's own lowering of the PrimFunc, only for a PrimFunc no rule can schedule (the
   task's ``reason`` says why).

The scheduled PrimFunc replaces the model's under the same ``GlobalVar`` when its signature is
unchanged (MetaSchedule's ``MetaScheduleApplyDatabase`` does the same). When the kernel takes a
parameter pre-packed (a weight in a VNNI or vector-friendly layout), the weight is a constant of
the model: it is packed once here, with :meth:`heronlike.space.Space.prepare_arg`, and the call
site passes the packed constant to the kernel, added under a new name. A packed parameter that
is not a constant keeps the call on TVM's lowering (``fallback`` says so).
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import tvm
from tvm import relax, tirx

from ..errors import LibraryFormatError, ModelInputError
from ..records import Records, current_versions
from ..target import DLATarget
from .pipeline import build
from .profile import ModelProfile, profile_model
from .quantize import QUANTIZE_ATTR
from .tasks import ModelTask, fused_module, tasks_of

__all__ = ["CompiledModel", "KernelChoice", "compile_model", "load"]

MANIFEST_FORMAT = "heronlike-model"
MANIFEST_VERSION = 1
#: the name suffix of a kernel that takes a packed constant (added beside the model's function)
PACKED_SUFFIX = "_packed"


@dataclass
class KernelChoice:
    """Which kernel one task got in a compiled model.

    Attributes:
        task: the task's name; ``functions``: the model's PrimFunc names it covers.
        weight: calls per model run.
        source: ``"tuned"`` (best record), ``"default"`` (an unmeasured valid assignment) or
            ``"tvm"`` (TVM's lowering: no rule schedules it, or a packed non-constant operand).
        latency_s: the recorded latency of a tuned kernel (median, seconds), else None.
        reason: why a task got ``"tvm"``.
    """

    task: str
    functions: list[str]
    weight: int
    source: str
    latency_s: float | None = None
    reason: str | None = None


@dataclass(frozen=True)
class InputSpec:
    """One input of a compiled model: its name, shape and dtype."""

    name: str
    shape: tuple[int, ...]
    dtype: str


class CompiledModel:
    """A model compiled with heronlike's kernels, run by TVM's Relax virtual machine.

    Call it with numpy arrays (one per model input, in order); it returns a numpy array (a
    tuple when the model has several outputs).

    Attributes:
        inputs: :class:`InputSpec` per input.
        choices: :class:`KernelChoice` per task (empty for a model loaded from a library whose
            manifest has none).
        target_key: the heronlike target it was built for.
        executable: the ``relax.VMExecutable``.
        quantization: for a quantized model, the layers turned into integer compute
            (``"integer"``) and those left in float with the reason (``"float"``)
            (:func:`heronlike.model.quantize.rewrite_qdq`); empty otherwise.
    """

    def __init__(
        self,
        executable: Any,
        inputs: Sequence[InputSpec],
        *,
        choices: Sequence[KernelChoice] = (),
        target_key: str = "",
        quantization: Mapping[str, list[str]] | None = None,
    ) -> None:
        self.executable = executable
        self.quantization = dict(quantization or {})
        self.inputs = list(inputs)
        self.choices = list(choices)
        self.target_key = target_key
        self.device = tvm.cpu()
        self._vm = relax.VirtualMachine(executable, self.device)

    def _tensors(self, arrays: Sequence[Any]) -> list[Any]:
        if len(arrays) != len(self.inputs):
            names = ", ".join(i.name for i in self.inputs)
            raise ModelInputError(
                f"the model takes {len(self.inputs)} input(s) ({names}), got {len(arrays)}"
            )
        out = []
        for spec, arr in zip(self.inputs, arrays, strict=True):
            a = np.asarray(arr)
            if a.shape != spec.shape or str(a.dtype) != spec.dtype:
                raise ModelInputError(
                    f"input {spec.name} must be {spec.dtype}{list(spec.shape)}, "
                    f"got {a.dtype}{list(a.shape)}"
                )
            out.append(tvm.runtime.tensor(np.ascontiguousarray(a), self.device))
        return out

    def __call__(self, *arrays: Any) -> np.ndarray | tuple[np.ndarray, ...]:
        """Run the model on ``arrays`` (numpy, one per input).

        Raises:
            ModelInputError: a wrong number of inputs, or an input of the wrong shape or dtype.
        """
        result = self._run(self._tensors(arrays))
        outs = _numpy(result)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _run(self, tensors: Sequence[Any]) -> Any:
        """One run of ``main``; before the first, this process is prepared for the target
        (AMX's tile state; TVM's thread pool sized to the cores the kernels were tuned for)."""
        if self.target_key:
            from ..target import prepare_process_for

            prepare_process_for(self.target_key)
        return self._vm["main"](*tensors)

    def random_inputs(self, seed: int = 0) -> list[np.ndarray]:
        """One array per input: normal floats, small integers for integer inputs."""
        rng = np.random.default_rng(seed)
        out = []
        for spec in self.inputs:
            if spec.dtype.startswith("float"):
                out.append(rng.standard_normal(spec.shape).astype(spec.dtype))
            else:
                out.append(rng.integers(0, 8, spec.shape).astype(spec.dtype))
        return out

    def benchmark(self, *arrays: Any, repeat: int = 30, number: int = 1, warmup: int = 3) -> float:
        """The median latency of one model run over ``repeat`` timed calls, in seconds.

        Inputs default to :meth:`random_inputs`. Each timed call is the mean of ``number``
        back-to-back runs; ``warmup`` untimed runs come first.
        """
        tensors = self._tensors(arrays or self.random_inputs())
        for _ in range(warmup):
            self._run(tensors)
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            for _ in range(number):
                self._run(tensors)
            times.append((time.perf_counter() - t0) / number)
        return statistics.median(times)

    def profile(self, *arrays: Any, runs: int = 10, warmup: int = 3) -> ModelProfile:
        """Every kernel's time inside the model beside its time when tuned alone, and the time
        outside the kernels (:func:`heronlike.model.profile.profile_model`).

        Raises:
            ModelInputError: wrong inputs. ValueError: ``runs`` < 1.
        """
        return profile_model(self, *arrays, runs=runs, warmup=warmup)

    def export_library(self, path: str | Path) -> Path:
        """Write the model as a shared library (``path``, weights included) and a manifest
        beside it (``path`` + ``.json``: inputs, target, kernel choices); load it with
        :func:`load`."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        self.executable.export_library(str(path))
        manifest = {
            "format": MANIFEST_FORMAT,
            "version": MANIFEST_VERSION,
            "target": self.target_key,
            "inputs": [asdict(i) for i in self.inputs],
            "choices": [asdict(c) for c in self.choices],
            "quantization": self.quantization,
            "versions": current_versions(),
        }
        _manifest_path(path).write_text(json.dumps(manifest, indent=1))
        return path

    def summary(self) -> str:
        """One line per task: weight, kernel source and recorded latency."""
        lines = [f"compiled model on {self.target_key}: {len(self.choices)} tasks"]
        for c in self.choices:
            lat = f"{c.latency_s * 1e6:10.1f} us" if c.latency_s is not None else " " * 13
            why = f"  ({c.reason})" if c.reason else ""
            lines.append(f"  {c.source:7s} x{c.weight:<3d}{lat}  {c.task}{why}")
        q = self.quantization
        if q:
            lines.append(
                f"quantized layers: {len(q.get('integer', []))} to integer compute, "
                f"{len(q.get('float', []))} left in float"
            )
            lines += [f"  integer  {r}" for r in q.get("integer", [])]
            lines += [f"  float    {r}" for r in q.get("float", [])]
        return "\n".join(lines)


def load(path: str | Path) -> CompiledModel:
    """Load a model written by :meth:`CompiledModel.export_library` (in any process).

    Raises:
        LibraryFormatError: the library or its manifest is missing or malformed.
    """
    path = Path(path)
    mpath = _manifest_path(path)
    if not path.is_file():
        raise LibraryFormatError(f"{path}: no such compiled model")
    try:
        manifest = json.loads(mpath.read_text())
        if manifest.get("format") != MANIFEST_FORMAT:
            raise ValueError("not a heronlike model manifest")
        if int(manifest.get("version", 0)) > MANIFEST_VERSION:
            raise ValueError(f"manifest version {manifest['version']} is newer than this heronlike")
        inputs = [
            InputSpec(i["name"], tuple(int(d) for d in i["shape"]), str(i["dtype"]))
            for i in manifest["inputs"]
        ]
        choices = [KernelChoice(**c) for c in manifest.get("choices", [])]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise LibraryFormatError(f"{mpath}: cannot read the model manifest ({exc})") from None
    executable = tvm.runtime.load_module(str(path))
    return CompiledModel(
        executable,
        inputs,
        choices=choices,
        target_key=manifest.get("target", ""),
        quantization=manifest.get("quantization"),
    )


def compile_model(
    model: Any,
    target: str | Mapping[str, Any] | DLATarget = "llvm",
    records: str | Path | Records | None = None,
    *,
    shapes: Mapping[str, int] | None = None,
    seed: int = 0,
    fast_math: bool = True,
) -> CompiledModel:
    """Compile ``model`` with the best recorded kernel of every task (a default schedule for
    tasks without a record).

    Args:
        model: a Relax ``IRModule``, an ``.onnx`` path or an ``onnx.ModelProto``.
        target: the heronlike target (``"llvm"``, ``"dlboost"``).
        records: the records of :func:`heronlike.model.tune_model` (None or a missing file:
            every task gets its default schedule).
        shapes: values of symbolic dimensions (``{"batch": 1}``).
        seed: seed of the default assignments' CP-SAT draws.
        fast_math: approximate ``exp`` / ``erf`` / ``tanh`` / ``softmax`` by TVM's
            vectorisable polynomials (:func:`heronlike.model.pipeline.fuse`, default); as
            given to :func:`~heronlike.model.tune_model` (the tasks differ with it).

    Raises:
        SymbolicShapeError: an unbound symbolic dimension. ModelImportError,
            InvalidArgumentError, UnknownTargetError: bad model or target.
        RecordsMismatchError: ``records`` is not a heronlike records file.
    """
    mod, tgt = fused_module(model, target, shapes=shapes, fast_math=fast_math)
    tasks = tasks_of(mod, tgt)
    mod, choices = schedule_module(mod, tasks, records, seed=seed)
    quantization = (
        json.loads(str(mod.attrs[QUANTIZE_ATTR])) if QUANTIZE_ATTR in (mod.attrs or {}) else None
    )
    return CompiledModel(
        build(mod, tgt),
        input_specs(mod),
        choices=choices,
        target_key=tgt.key,
        quantization=quantization,
    )


def input_specs(mod: tvm.IRModule) -> list[InputSpec]:
    """Name, shape and dtype of every parameter of ``main``."""
    out = []
    for p in mod["main"].params:
        ty = p.ty
        shape = tuple(int(d) for d in ty.shape.values)
        out.append(InputSpec(p.name, shape, str(ty.dtype)))
    return out


def schedule_module(
    mod: tvm.IRModule,
    tasks: Sequence[ModelTask],
    records: str | Path | Records | None,
    *,
    seed: int = 0,
) -> tuple[tvm.IRModule, list[KernelChoice]]:
    """Replace every tunable PrimFunc of the fused ``mod`` by its kernel (module docstring)."""
    from ..library.builder import best_usable_trial
    from ..sampler import solve_one

    db = _open(records)
    versions = current_versions()
    choices: list[KernelChoice] = []
    replace: dict[str, tuple[tirx.PrimFunc, Any]] = {}
    try:
        for task in tasks:
            choice = KernelChoice(task.name, list(task.functions), task.weight, "tvm")
            choices.append(choice)
            if not task.tunable:
                choice.reason = task.reason
                continue
            best = best_usable_trial(db, task.space, versions) if db is not None else None
            if best is not None:
                assignment = best.assignment
                choice.source, choice.latency_s = "tuned", best.latency_s
            else:
                assignment = solve_one(task.space.csp, seed=seed, time_limit_s=10.0)
                if assignment is None:
                    choice.reason = "CP-SAT found no assignment in 10 s"
                    continue
                choice.source = "default"
            try:
                kernel = task.space.program(assignment)["main"]
            except Exception as exc:  # noqa: BLE001 - a rule bug must not stop the model
                choice.source, choice.latency_s = "tvm", None
                choice.reason = f"the schedule failed to apply ({type(exc).__name__}: {exc})"
                continue
            for name in task.functions:
                replace[name] = (kernel, task.space)
    finally:
        if db is not None and not isinstance(records, Records):
            db.close()
    mod, fallback = _substitute(mod, replace)
    for choice in choices:
        missed = [f for f in choice.functions if f in fallback]
        if missed:
            choice.source, choice.latency_s = "tvm", None
            choice.reason = fallback[missed[0]]
    return mod, choices


def _open(records: str | Path | Records | None) -> Records | None:
    if records is None or isinstance(records, Records):
        return records
    if not Path(records).is_file():
        return None
    return Records(records)


def _substitute(
    mod: tvm.IRModule, replace: Mapping[str, tuple[tirx.PrimFunc, Any]]
) -> tuple[tvm.IRModule, dict[str, str]]:
    """Put every kernel of ``replace`` (PrimFunc name -> (scheduled kernel, space)) into
    ``mod``; returns the module and, for the names left on TVM's lowering, why."""
    fallback: dict[str, str] = {}
    resigned: dict[str, tuple[tirx.PrimFunc, Any]] = {}
    for name, (kernel, space) in replace.items():
        gv = mod.get_global_var(name)
        orig = mod[gv]
        func = _as_model_func(kernel, orig)
        if _shapes(kernel) == _shapes(orig):
            mod[gv] = func
        else:
            resigned[name] = (func, space)
    if resigned:
        mod, fallback = _rewrite_calls(mod, resigned)
    return mod, fallback


def _as_model_func(kernel: tirx.PrimFunc, orig: tirx.PrimFunc) -> tirx.PrimFunc:
    func = tirx.PrimFunc(kernel.params, kernel.body, kernel.ret_type, attrs=orig.attrs)
    return func.with_attr("tirx.is_scheduled", True)


def _shapes(func: tirx.PrimFunc) -> list[tuple[int, ...]]:
    return [tuple(int(d) for d in p.shape) for p in func.params]


def _rewrite_calls(
    mod: tvm.IRModule, resigned: Mapping[str, tuple[tirx.PrimFunc, Any]]
) -> tuple[tvm.IRModule, dict[str, str]]:
    """Call each re-signed kernel with its packed constants (added as ``<name>_packed``)."""
    builder = relax.BlockBuilder(mod)
    new_gv = {name: builder.add_func(f, name + PACKED_SUFFIX) for name, (f, _) in resigned.items()}
    fallback: dict[str, str] = {}

    @relax.expr_functor.mutator
    class Rewriter(relax.PyExprMutator):
        def visit_call_(self, call: relax.Call) -> relax.Expr:  # noqa: N802 - TVM's name
            call = super().visit_call_(call)
            if getattr(call.op, "name", "") != "relax.call_tir":
                return call
            name = call.args[0].name_hint
            if name not in resigned:
                return call
            func, space = resigned[name]
            args = list(call.args[1].fields)
            new_args = []
            for i, arg in enumerate(args):
                want = tuple(int(d) for d in func.params[i].shape)
                have = tuple(int(d) for d in arg.ty.shape.values)
                if want == have:
                    new_args.append(arg)
                elif isinstance(arg, tvm.ir.expr.Constant):
                    packed = space.prepare_arg(i, arg.value.numpy())
                    new_args.append(relax.const(packed, str(packed.dtype)))
                else:
                    fallback[name] = (
                        f"the kernel takes operand {i} as {list(want)}, and it is not a "
                        "constant that could be packed once"
                    )
                    return call
            outs = [p for p in func.params[len(args) :]]
            if [tuple(int(d) for d in p.shape) for p in outs] != [
                tuple(int(d) for d in s.shape.values) for s in _out_sinfo(call)
            ]:
                fallback[name] = "the kernel's output layout differs from the model's"
                return call
            return relax.call_tir(new_gv[name], relax.Tuple(new_args), _out_sinfo(call))

    rewriter = Rewriter(builder.get())
    for gv, func in builder.get().functions.items():
        if isinstance(func, relax.Function):
            builder.update_func(gv, rewriter.visit_expr(func))
    out = builder.get()
    return relax.transform.DeadCodeElimination()(out), fallback


def _out_sinfo(call: relax.Call) -> list[Any]:
    sinfo = call.ty_args[0]
    return list(sinfo.fields) if isinstance(sinfo, relax.TupleType) else [sinfo]


def _numpy(value: Any) -> list[np.ndarray]:
    if isinstance(value, tvm.runtime.Tensor):
        return [value.numpy()]
    if hasattr(value, "numpy"):
        return [value.numpy()]
    out: list[np.ndarray] = []
    for v in value:
        out += _numpy(v)
    return out


def _manifest_path(path: Path) -> Path:
    return path.with_name(path.name + ".json")
