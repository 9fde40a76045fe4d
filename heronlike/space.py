"""A schedule space: the template and CSP that the rules generate for one compute and target.

:func:`generate_space` runs the target's rules over the compute DAG (Heron Algorithm 1);
:meth:`Space.apply` instantiates one candidate program from an assignment of the CSP.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import tvm
from tvm import s_tir

from .csp import CSP
from .dag import ComputeDAG
from .errors import InfeasibleSpaceError, UnsupportedComputeError
from .intrinsic import IntrinsicMatch
from .postproc import postprocess
from .target import DLATarget, get_target
from .template import PackedLayout, Template


@dataclass
class Space:
    """Template + CSP of one compute on one target.

    Attributes:
        dag: the compute analysis the rules scheduled (the target's
            :meth:`~heronlike.target.DLATarget.normalize` form of the compute).
        logical: the user's compute (the same object unless the target normalized it): its
            parameters' shapes are what callers pass and get back, and its key identifies the
            workload in the records.
        target: the DLA target.
        template: the replayable schedule template.
        csp: its constraint satisfaction problem; knobs are the tunable parameters.
        packed: function parameters the kernel takes in a packed layout (name -> layout); see
            :meth:`prepare_args`.
        matches: the stages mapped onto intrinsics.
        nests: the final loop nest of every scheduled stage, outer to inner
            (:class:`heronlike.rules.base.Loop`: symbol, axis, extent variable, tiling level);
            read by :class:`heronlike.features.ScheduleFeatures`.
    """

    dag: ComputeDAG
    target: DLATarget
    template: Template
    csp: CSP
    packed: dict[str, PackedLayout] = field(default_factory=dict)
    matches: dict[str, IntrinsicMatch] = field(default_factory=dict)
    nests: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    logical: ComputeDAG = None  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if self.logical is None:
            self.logical = self.dag

    @property
    def workload_key(self) -> str:
        return self.logical.workload_key

    @property
    def legacy_workload_key(self) -> str:
        return self.logical.legacy_workload_key

    def misfits(self, assignment: Mapping[str, int]) -> list[str]:
        """Why ``assignment`` (e.g. a stored record's) is not a valid point of this space, as
        text: variables it lacks or has beyond the CSP's, and every range or constraint it
        breaks; empty when it fits (:meth:`fit`). A record of an older space (other rules,
        other limits) must be checked with this before it is rebuilt."""
        if self.fit(assignment) is not None:
            return []
        missing = sorted(set(self.csp.vars) - set(assignment))
        extra = sorted(set(assignment) - set(self.csp.vars))
        out = [f"missing variable {v}" for v in missing[:5]]
        out += [f"unknown variable {v}" for v in extra[:5]]
        if not missing:
            out += self.csp.violations(assignment)
        elif not extra and not set(missing) & set(self.csp.knobs):
            out.append("its knobs are no point of this space")
        return out

    def fit(self, assignment: Mapping[str, int]) -> dict[str, int] | None:
        """``assignment`` as a point of this space, or None when it is none: itself when it
        names exactly the CSP's variables and breaks nothing; when it lacks only derived
        variables (a space whose rules added some, e.g. a new constraint's), the point its
        knobs complete to (:meth:`CSP.complete`), provided every variable it has keeps its
        value there. A finish knob it lacks (:attr:`heronlike.csp.Var.finish`, added to the
        rules after it was recorded) is taken at its ``lo``, the value the search holds
        (:meth:`CSP.complete`): the program it was measured as. What a stored record is
        rebuilt, replayed or ranked with."""
        names, have = set(self.csp.vars), set(assignment)
        if have - names:
            return None
        if have == names:
            return None if self.csp.violations(assignment) else dict(assignment)
        if (names - have - set(self.csp.finish_knobs)) & set(self.csp.knobs):
            return None
        point = self.csp.complete({k: int(assignment[k]) for k in self.csp.knobs if k in have})
        if point is None or any(point[k] != assignment[k] for k in have):
            return None
        return point

    def apply(self, assignment: Mapping[str, int]) -> s_tir.Schedule:
        """The candidate program for ``assignment`` as a TVM schedule.

        Raises:
            RuntimeError: when TVM rejects the schedule (recorded as a failed candidate
                by the tune loop; a valid CSP assignment should never cause it).
        """
        for m in self.matches.values():
            for intrin in self.target.intrinsics:  # every shape of a group the space chooses
                if intrin.signature == m.intrinsic.signature:
                    intrin.register()
        return self.template.apply(assignment)

    def program(self, assignment: Mapping[str, int]) -> tvm.IRModule:
        """The program that is built for ``assignment``: :meth:`apply`'s module after
        :func:`heronlike.postproc.postprocess` (e.g. the zero-padding reads skipped).

        Raises:
            RuntimeError: as :meth:`apply`.
        """
        return postprocess(self.apply(assignment).mod)

    def prepare_args(self, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Turn logical arrays (one per PrimFunc parameter, call order) into what the built
        kernel takes: parameters in :attr:`packed` are re-laid out (one-time weight
        pre-packing; not part of the measured kernel time). A packed weight whose extents the
        intrinsic tile does not divide is first zero-padded to the tile multiples, as part of
        the same one-time pre-packing (the kernel's parameter has the padded shape; see
        :mod:`heronlike.rules.pad`)."""
        if len(arrays) != len(self.logical.params):
            raise ValueError(f"expected {len(self.logical.params)} arrays, got {len(arrays)}")
        return [self.prepare_arg(i, arr) for i, arr in enumerate(arrays)]

    def prepare_arg(self, index: int, arr: np.ndarray) -> np.ndarray:
        """:meth:`prepare_args` for parameter ``index`` alone (a model's constant weight)."""
        param = self.logical.params[index]
        shape = tuple(int(d) for d in self.template.func.params[index].shape)
        normal = tuple(self.dag.params[index].shape)  # the normalized shape, before padding
        if arr.shape != normal and arr.size == int(np.prod(normal)):
            arr = np.ascontiguousarray(arr).reshape(normal)  # a normalized (reshaped) view
        if arr.shape != shape and layout_may_pad(arr.shape, shape):
            arr = np.pad(arr, [(0, k - d) for d, k in zip(arr.shape, shape)])
        layout = self.packed.get(param.name)
        return layout.pack(arr) if layout is not None else arr

    def describe(self) -> str:
        """The compute's stages, the template and the CSP, as text."""
        return "\n".join(
            [
                f"# compute {self.workload_key} on {self.target.key}",
                self.dag.describe(),
                "# template",
                str(self.template),
                str(self.csp),
            ]
        )


def layout_may_pad(shape: Sequence[int], kernel_shape: Sequence[int]) -> bool:
    """Whether a logical array of ``shape`` is zero-padded to the kernel parameter's
    ``kernel_shape`` (same rank, no dimension smaller)."""
    return len(shape) == len(kernel_shape) and all(
        k >= d for d, k in zip(shape, kernel_shape, strict=True)
    )


def generate_space(compute: Any, target: str | DLATarget | Mapping[str, Any]) -> Space:
    """Run the target's schedule and constraint rules over ``compute``.

    Args:
        compute: a list of ``te.Tensor`` (inputs, then outputs), a ``tirx.PrimFunc`` or a
            :class:`~heronlike.dag.ComputeDAG`.
        target: a target name/string/dict or object (:func:`heronlike.target.get_target`).

    Raises:
        InvalidComputeError, UnsupportedDtypeError, UnsupportedShapeError,
        NoTensorizableStageError, UnknownTargetError: see :mod:`heronlike.errors`.
        InfeasibleSpaceError: if the rules produce a space without knobs on a tiled stage.
        UnsupportedComputeError: every stage is a scalar (nothing to schedule).
    """
    from heronlike.rules.base import RuleContext, generate

    logical = compute if isinstance(compute, ComputeDAG) else ComputeDAG.from_compute(compute)
    tgt = get_target(target)
    if all(a.extent == 1 for st in logical.stages for a in st.axes):
        raise UnsupportedComputeError(
            "every stage computes a scalar (no loop to schedule); TVM's lowering is all it needs"
        )
    normal = tgt.normalize(logical)
    dag = logical if normal is None else ComputeDAG(normal, logical.outputs)
    ctx = RuleContext(dag, tgt)
    generate(ctx, tgt.schedule_rules(), tgt.constraint_rules())
    if not ctx.template.steps:
        raise InfeasibleSpaceError(f"no rule of target {tgt.key} applies to the compute")
    nests = {n: tuple(st.loops) for n, st in ctx.states.items() if st.loops and not st.inlined}
    return Space(
        dag, tgt, ctx.template, ctx.csp, dict(ctx.packed), dict(ctx.matches), nests, logical
    )
