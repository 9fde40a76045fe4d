"""Compute analysis: a TE compute as a DAG of stages (networkx).

Input is what a TVM user has: a list of ``te.Tensor`` (inputs first, then outputs) or a
``tvm.tirx.PrimFunc``. Each stage is one block of the PrimFunc that ``te.create_prim_func``
builds; for each we record its spatial ("S") and reduce ("R") axes with their extents, the
buffers it reads and writes and which axis indexes each buffer dimension, and whether its body is
a multiply-accumulate ``C[...] += cast(A[...]) * cast(B[...])`` (the pattern of Heron §4,
Rule-S1, matched onto an intrinsic in :mod:`heronlike.intrinsic`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import networkx as nx
import tvm
from tvm import s_tir, te, tirx

from .errors import TVM_ERRORS, InvalidComputeError, SymbolicShapeError, UnsupportedComputeError

AxisKind = Literal["S", "R"]


@dataclass(frozen=True)
class Axis:
    """A block iterator: ``kind`` "S" (spatial) or "R" (reduce), ``extent`` iterations."""

    name: str
    extent: int
    kind: AxisKind


@dataclass(frozen=True)
class AffineIndex:
    """An index expression ``const + sum(coeff * axis)`` over stage axes.

    A convolution reads its input at ``h * stride + rh * dilation``: ``terms`` is then
    ``(("h", stride), ("rh", dilation))``; a transposed convolution's flipped kernel index
    ``KH - 1 - rh`` is ``(("rh", -1),)`` with ``const = KH - 1``.
    """

    terms: tuple[tuple[str, int], ...]
    const: int = 0

    @property
    def axes(self) -> tuple[str, ...]:
        return tuple(ax for ax, _ in self.terms)

    def footprint(self, tiles: dict[str, int]) -> int:
        """Distinct values taken while each axis runs over ``tiles[axis]`` consecutive values:
        at most ``sum(|coeff| * (tile - 1)) + 1`` (exact for one term)."""
        return sum(abs(c) * (tiles.get(ax, 1) - 1) for ax, c in self.terms) + 1


@dataclass(frozen=True)
class Access:
    """One buffer access of a stage.

    ``axes[d]`` names the stage axis that indexes dimension ``d`` of the buffer, or is ``None``
    when that index is not a plain axis (e.g. ``h + r`` in a convolution). ``index[d]`` is the
    index of dimension ``d`` as an :class:`AffineIndex`, or ``None`` when it is not affine in
    the stage axes (e.g. ``h // 2``); empty when not recorded. ``blocks[d]`` is ``(axis, c)``
    when that index is ``axis`` (``c = 1``) or ``axis // c`` for a constant ``c > 0`` (it picks
    the block of ``c`` consecutive values of the axis that ``axis`` lies in), else ``None``.
    """

    buffer: str
    dtype: str
    shape: tuple[int, ...]
    axes: tuple[str | None, ...]
    index: tuple[AffineIndex | None, ...] = ()
    blocks: tuple[tuple[str, int] | None, ...] = ()

    @property
    def used_axes(self) -> set[str]:
        """Every stage axis that occurs in some index of the access (plain or compound)."""
        out = {a for a in self.axes if a is not None}
        for idx in self.index:
            if idx is not None:
                out.update(idx.axes)
        return out

    @property
    def is_plain(self) -> bool:
        """Every dimension is indexed by exactly one axis."""
        return all(a is not None for a in self.axes)

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        return tvm.DataType(self.dtype).bits // 8


@dataclass(frozen=True)
class MacPattern:
    """``out[...] = out[...] + cast(a[...]) * cast(b[...])`` with the reduction init elsewhere."""

    out: Access
    a: Access
    b: Access


@dataclass(frozen=True)
class Stage:
    """One block of the compute."""

    name: str
    axes: tuple[Axis, ...]
    write: Access
    reads: tuple[Access, ...]
    mac: MacPattern | None
    is_output: bool
    #: the value is only loads, casts, constants and selects (padding, layout copies)
    is_data_movement: bool = False
    #: the operators the value calls (``"tirx.exp"``, ``"tirx.rsqrt"`` ...), sorted
    calls: tuple[str, ...] = ()

    @property
    def is_reduction(self) -> bool:
        return any(a.kind == "R" for a in self.axes)

    @property
    def is_injective(self) -> bool:
        """No reduction: each output element depends on a fixed set of input elements."""
        return not self.is_reduction

    @property
    def has_data_reuse(self) -> bool:
        """Ansor's test for multi-level tiling: a reduction reading some buffer that is not
        indexed by every spatial axis (so its elements are reused across the missing axes)."""
        spatial = {a.name for a in self.axes if a.kind == "S"}
        return self.is_reduction and any(not spatial <= set(r.axes) for r in self.reads)

    @property
    def streamed_reads(self) -> tuple[str, ...]:
        """The buffers this reduction reads each element of only once: indexed by every
        spatial axis of extent > 1 (the matrix of a matrix-vector product), so no tile of the
        output reuses them and a schedule can only stream them. Empty for an injective stage."""
        if not self.is_reduction:
            return ()
        spatial = {a.name for a in self.axes if a.kind == "S" and a.extent > 1}
        return tuple(r.buffer for r in self.reads if spatial <= set(r.axes))

    def axis(self, name: str) -> Axis:
        for a in self.axes:
            if a.name == name:
                return a
        raise KeyError(name)


@dataclass(frozen=True)
class Tensor:
    """A parameter of the compute (input or output): name, shape, dtype."""

    name: str
    shape: tuple[int, ...]
    dtype: str


class ComputeDAG:
    """Stages of a compute as a ``networkx.DiGraph`` (edge producer → consumer).

    Attributes:
        func: the ``tvm.tirx.PrimFunc``.
        graph: nodes are stage names with attribute ``stage`` (:class:`Stage`).
        params: the PrimFunc's parameters in call order (inputs, then outputs).
        outputs: names of the output parameters.

    Raises:
        InvalidComputeError: for an empty or mistyped compute, symbolic or non-positive extents.
    """

    def __init__(self, func: tirx.PrimFunc, outputs: Sequence[str]) -> None:
        self.func = func
        self.params = tuple(_param(p) for p in func.params)
        for p in self.params:
            if any(d <= 0 for d in p.shape):
                raise InvalidComputeError(f"tensor {p.name} has a non-positive extent: {p.shape}")
        self.outputs = tuple(outputs)
        self.graph: nx.DiGraph = nx.DiGraph()
        sch = s_tir.Schedule(func)
        try:
            blocks = sch.get_child_blocks(sch.get_sblock("root"))
        except s_tir.ScheduleError:
            raise UnsupportedComputeError(
                "the compute is not TE stages under one root block (an extern call or a "
                "hand-written opaque block?): no rule can schedule it"
            ) from None
        if not blocks:
            raise InvalidComputeError("the compute has no stage")
        for rv in blocks:
            stage = _stage(sch.get(rv), self.outputs)
            self.graph.add_node(stage.name, stage=stage)
        writers = {self.stage(n).write.buffer: n for n in self.graph.nodes}
        for n in list(self.graph.nodes):
            for r in self.stage(n).reads:
                if r.buffer in writers:
                    self.graph.add_edge(writers[r.buffer], n)

    @classmethod
    def from_compute(cls, compute: Any) -> ComputeDAG:
        """Analyse ``compute``: a list of ``te.Tensor`` (inputs then outputs) or a PrimFunc.

        With a tensor list, the outputs are the tensors that are not placeholders; with a
        PrimFunc, the parameters written by some stage.
        """
        if isinstance(compute, tvm.IRModule):
            compute = compute["main"]
        if isinstance(compute, tirx.PrimFunc):
            func = _public(compute)
            _check_static(func)
            sch = s_tir.Schedule(func)
            root = sch.get_sblock("root")
            if _duplicate_buffer_names(func, sch.get(root)):
                func = _renamed(func)
                sch = s_tir.Schedule(func)
                root = sch.get_sblock("root")
            written = set()
            for rv in sch.get_child_blocks(root):
                written.add(sch.get(rv).body.buffer.name)
            outputs = [p.name for p in func.params if p.name in written]
            return cls(func, outputs)
        if not isinstance(compute, list | tuple) or not compute:
            raise InvalidComputeError(
                "compute must be a non-empty list of te.Tensor (inputs, then outputs) or a "
                f"tirx.PrimFunc; got {type(compute).__name__}"
            )
        for t in compute:
            if not isinstance(t, te.Tensor):
                raise InvalidComputeError(f"compute element {t!r} is not a te.Tensor")
            for d in t.shape:
                if not isinstance(d, tirx.IntImm | int):
                    raise SymbolicShapeError(
                        f"tensor {t.name} has a symbolic extent {d}: heronlike tunes concrete "
                        "shapes only",
                        dimension=str(d),
                    )
                if int(d) <= 0:
                    raise InvalidComputeError(
                        f"tensor {t.name} has a non-positive extent: {[int(x) for x in t.shape]}"
                    )
        outputs = [t.name for t in compute if not isinstance(t.op, te.PlaceholderOp)]
        if not outputs:
            raise InvalidComputeError("compute has no output tensor (all are placeholders)")
        try:
            func = te.create_prim_func(list(compute))
        except TVM_ERRORS as err:  # pragma: no cover - TVM's own message is kept
            raise InvalidComputeError(f"te.create_prim_func failed: {_short(err)}") from None
        return cls(func, outputs)

    def stage(self, name: str) -> Stage:
        return self.graph.nodes[name]["stage"]

    @property
    def stages(self) -> list[Stage]:
        return [self.stage(n) for n in self.graph.nodes]

    def post_order(self) -> list[str]:
        """Stage names output-first: every consumer before its producers (Heron Algorithm 1)."""
        return list(reversed(list(nx.lexicographical_topological_sort(self.graph))))

    def producers(self, name: str) -> list[str]:
        return sorted(self.graph.predecessors(name))

    def consumers(self, name: str) -> list[str]:
        return sorted(self.graph.successors(name))

    @property
    def text(self) -> str:
        """The PrimFunc as TVMScript (stable text; the basis of :attr:`workload_key`)."""
        return self.func.script()

    @property
    def workload_key(self) -> str:
        """16 hex digits of the compute's structural hash (``tvm_ffi.structural_hash`` of the
        PrimFunc without its attributes): the same compute gives the same key however its
        parameters and buffers are named (a model imported with bound constants or with
        parameters, a ``te`` compute built twice). Stable across processes for one TVM
        version (the records also store that version)."""
        import tvm_ffi

        f = self.func
        bare = tirx.PrimFunc(f.params, f.body, f.ret_type)
        return f"{tvm_ffi.structural_hash(bare) & (2**64 - 1):016x}"

    @property
    def legacy_workload_key(self) -> str:
        """The key records files written before structural keys used: 16 hex digits of the
        SHA-256 of the TVMScript text (:meth:`heronlike.records.Records.adopt` renames it)."""
        return hashlib.sha256(self.text.encode()).hexdigest()[:16]

    def describe(self) -> str:
        """One line per stage: ``name[axes] <- reads`` with extents."""
        lines = []
        for s in self.stages:
            axes = ", ".join(f"{a.name}:{a.kind}{a.extent}" for a in s.axes)
            reads = ", ".join(r.buffer for r in s.reads)
            mac = "  (multiply-accumulate)" if s.mac else ""
            lines.append(f"{s.name}[{axes}] <- {reads}{mac}")
        return "\n".join(lines)

    def flop(self) -> float:
        """Operations of the compute: 2 per multiply-accumulate, 1 per other output element;
        data-movement stages (zero padding, a generated constant matrix) count nothing, unless
        the compute is nothing else (a transpose): then 1 per element of its outputs."""
        total = 0.0
        for s in self.stages:
            if s.is_data_movement:
                continue
            n = 1.0
            for a in s.axes:
                n *= a.extent
            total += 2 * n if s.mac else n
        if total == 0:  # only data movement (a transpose, a copy): one per output element
            total = float(sum(_size(p.shape) for p in self.params if p.name in self.outputs))
        return total


def _public(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """``func`` with ``global_symbol = "main"`` when it has none: the private PrimFuncs of a
    Relax module (FuseTIR's ``fused_conv2d_add_relu`` ...) cannot be compiled on their own."""
    attrs = func.attrs
    if attrs is None or "global_symbol" not in attrs:
        func = func.with_attr("global_symbol", "main")
    return func


def _duplicate_buffer_names(func: tirx.PrimFunc, root: Any) -> bool:
    """Whether two buffers share a name (Relax's FuseTIR keeps the names of the fused
    functions' buffers, e.g. two ``T_multiply``): stages are identified by buffer name here."""
    names = [p.name for p in func.params] + [b.name for b in root.alloc_buffers]
    return len(set(names)) != len(names)


def _renamed(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """``func`` with unique buffer names: TVMScript's printer renames duplicates
    (``T_multiply``, ``T_multiply_1``) and the parser keeps the printed names; the result is
    structurally equal to ``func``."""
    import tvm.script

    try:
        out = tvm.script.from_source(func.script())
    except Exception as exc:  # noqa: BLE001 - the parser raises many kinds
        raise UnsupportedComputeError(
            f"the PrimFunc has buffers of the same name and could not be renamed ({_short(exc)})"
        ) from None
    if isinstance(out, tvm.IRModule):
        out = out["main"]
    return out


def _check_static(func: tirx.PrimFunc) -> None:
    """Raise :class:`SymbolicShapeError` naming the first symbolic dimension of a parameter."""
    for p in func.params:
        shape = getattr(p, "shape", None)
        if shape is None:
            raise InvalidComputeError(
                f"parameter {p.name} of the PrimFunc is a scalar, not a tensor: heronlike "
                "tunes functions of tensors only"
            )
        for i, d in enumerate(shape):
            if not isinstance(d, tirx.IntImm | int):
                raise SymbolicShapeError(
                    f"dimension {i} of parameter {p.name} is symbolic ({d}): heronlike tunes "
                    f"concrete shapes only; bind it (e.g. shapes={{{str(d)!r}: 1}})",
                    dimension=str(d),
                )


def _size(shape: Sequence[int]) -> int:
    out = 1
    for d in shape:
        out *= d
    return out


def _short(err: Exception, lines: int = 3) -> str:
    text = str(err).strip().splitlines()
    return " | ".join(text[-lines:]) if text else type(err).__name__


def _param(p: Any) -> Tensor:
    return Tensor(p.name, tuple(int(d) for d in p.shape), str(p.dtype))


def _access(source: Any, indices: Sequence[Any], axis_of: dict[Any, str]) -> Access:
    axes = tuple(axis_of.get(_var_key(i)) for i in indices)
    index = tuple(_affine(i, axis_of) for i in indices)
    blocks = tuple(_block_index(i, axis_of) for i in indices)
    shape = tuple(int(d) for d in source.shape)
    return Access(source.name, str(source.dtype), shape, axes, index, blocks)


def _block_index(expr: Any, axis_of: dict[Any, str]) -> tuple[str, int] | None:
    """``(axis, c)`` when ``expr`` is ``axis`` (``c = 1``) or ``axis // c`` (``c > 0``)."""
    if isinstance(expr, tirx.Var):
        name = axis_of.get(expr.name)
        return (name, 1) if name is not None else None
    if type(expr).__name__ == "FloorDiv" and isinstance(expr.b, tirx.IntImm):
        inner = _block_index(expr.a, axis_of)
        if inner is not None and inner[1] == 1 and int(expr.b.value) > 0:
            return inner[0], int(expr.b.value)
    return None


def _affine(expr: Any, axis_of: dict[Any, str]) -> AffineIndex | None:
    """``expr`` as ``const + sum(coeff * axis)``, or None when it is not affine in the axes."""
    coeffs: dict[str, int] = {}
    const = 0

    def walk(e: Any, scale: int) -> bool:
        nonlocal const
        kind = type(e).__name__
        if isinstance(e, tirx.IntImm):
            const += scale * int(e.value)
            return True
        if isinstance(e, tirx.Var):
            name = axis_of.get(e.name)
            if name is None:
                return False
            coeffs[name] = coeffs.get(name, 0) + scale
            return True
        if kind == "Add":
            return walk(e.a, scale) and walk(e.b, scale)
        if kind == "Sub":
            return walk(e.a, scale) and walk(e.b, -scale)
        if kind == "Mul":
            if isinstance(e.b, tirx.IntImm):
                return walk(e.a, scale * int(e.b.value))
            if isinstance(e.a, tirx.IntImm):
                return walk(e.b, scale * int(e.a.value))
        if kind == "Cast":
            return walk(e.value, scale)
        return False

    if not walk(expr, 1):
        return None
    return AffineIndex(tuple((ax, c) for ax, c in coeffs.items() if c != 0), const)


def _is_data_movement(value: Any) -> bool:
    """Only loads, casts, constants and ``if_then_else``/``select`` (conditions may compute)."""
    kind = type(value).__name__
    if kind in ("TensorLoad", "IntImm", "FloatImm"):
        return True
    if kind == "Cast":
        return _is_data_movement(value.value)
    if kind == "Select":
        return _is_data_movement(value.true_value) and _is_data_movement(value.false_value)
    if kind == "Call" and str(getattr(value.op, "name", "")).endswith("if_then_else"):
        return all(_is_data_movement(a) for a in value.args[1:])
    return False


def _var_key(expr: Any) -> Any:
    return expr.name if isinstance(expr, tirx.Var) else None


def _loads(expr: Any, out: list[Any]) -> None:
    """Collect every tensor load in ``expr`` (depth-first, left to right)."""
    if type(expr).__name__ == "TensorLoad":
        out.append(expr)
        for i in expr.indices:
            _loads(i, out)
        return
    for field in ("a", "b", "value", "condition", "true_value", "false_value"):
        child = getattr(expr, field, None)
        if child is not None and not isinstance(child, str | int | float):
            _loads(child, out)
    for arg in getattr(expr, "args", None) or ():
        _loads(arg, out)


def _stage(block: Any, outputs: Sequence[str]) -> Stage:
    axis_of: dict[Any, str] = {}
    axes = []
    for iv in block.iter_vars:
        extent = iv.dom.extent
        if not isinstance(extent, tirx.IntImm):
            raise InvalidComputeError(f"stage {block.name_hint} has a symbolic extent {extent}")
        if int(extent) <= 0:
            raise InvalidComputeError(f"stage {block.name_hint} has a non-positive extent")
        kind: AxisKind = "R" if int(iv.iter_type) == 2 else "S"
        axes.append(Axis(iv.var.name, int(extent), kind))
        axis_of[iv.var.name] = iv.var.name
    store = block.body
    if type(store).__name__ != "BufferStore":
        what = (
            "writes several buffers (a tuple reduction such as argmax)"
            if type(store).__name__ == "SeqStmt"
            else f"is a {type(store).__name__}, not one buffer store (an extern call?)"
        )
        raise UnsupportedComputeError(
            f"stage {block.name_hint} {what}: heronlike's rules schedule stages that compute "
            "one element of one buffer per iteration"
        )
    write = _access(store.buffer, store.indices, axis_of)
    loads: list[Any] = []
    _loads(store.value, loads)
    for ld in loads:
        inner: list[Any] = []
        for index in ld.indices:
            _loads(index, inner)
        if inner:
            raise UnsupportedComputeError(
                f"stage {block.name_hint} indexes {ld.source.name} with values loaded from "
                f"{inner[0].source.name} (a gather): every candidate is checked on random "
                "inputs, which cannot keep an index tensor's values in bounds"
            )
    reads: dict[str, Access] = {}
    for ld in loads:
        acc = _access(ld.source, ld.indices, axis_of)
        if acc.buffer != write.buffer:  # a reduction's own accumulator is not an input
            reads.setdefault(acc.buffer, acc)
    mac = _mac(store.value, write, axis_of) if block.init is not None else None
    movement = block.init is None and _is_data_movement(store.value)
    return Stage(
        block.name_hint,
        tuple(axes),
        write,
        tuple(reads.values()),
        mac,
        write.buffer in outputs,
        movement,
        tuple(sorted(_calls(store.value))),
    )


def _calls(expr: Any) -> set[str]:
    """Names of the operators ``expr`` calls (``tirx.exp`` ...), loads' indices excluded."""
    out: set[str] = set()
    if type(expr).__name__ == "TensorLoad":
        return out
    if type(expr).__name__ == "Call":
        out.add(str(getattr(expr.op, "name", expr.op)))
    for field in ("a", "b", "value", "condition", "true_value", "false_value"):
        child = getattr(expr, field, None)
        if child is not None and not isinstance(child, str | int | float):
            out |= _calls(child)
    for arg in getattr(expr, "args", None) or ():
        out |= _calls(arg)
    return out


def _mac(value: Any, write: Access, axis_of: dict[Any, str]) -> MacPattern | None:
    """Match ``out + cast(a) * cast(b)`` (casts optional) where the first load is ``out``."""
    if type(value).__name__ != "Add":
        return None
    acc, prod = value.a, value.b
    if type(acc).__name__ != "TensorLoad" or acc.source.name != write.buffer:
        return None
    if type(prod).__name__ != "Mul":
        return None
    operands = []
    for side in (prod.a, prod.b):
        while type(side).__name__ == "Cast":
            side = side.value
        if type(side).__name__ != "TensorLoad":
            return None
        operands.append(_access(side.source, side.indices, axis_of))
    return MacPattern(write, operands[0], operands[1])
