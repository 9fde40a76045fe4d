"""C6 AddDLASpecific (latency): the register tile holds enough independent accumulators to
keep the intrinsic's units busy.

A tensorized stage's register tile (its loops below ``R0`` on the written buffer's axes, outside
the intrinsic) is a set of accumulators, each updated once per step of the reduction loop
``R1`` by a chain of dependent intrinsic calls. With ``L`` cycles of latency and ``N`` calls
issued per cycle, fewer than ``L·N`` accumulators leave units idle: at most ``a / (L·N)`` of the
peak (Low et al., "Analytical Modeling Is Enough for High-Performance BLIS", ACM TOMS 43(2),
2016: ``m_r·n_r / N_vec >= L_vfma·N_vfma``). On an Intel Xeon (``vpdpbusd``: ``L`` = 5,
``N`` = 2) a GEMM 1024³ with an 8 × 2 tile (16 accumulators) ran 1.19–1.34× faster than with
4 × 2 (8) and 2.0–2.3× faster than with 2 × 2 (4), everything else the same
(``benchmarks/register_tiles.py``, docs/results.md "Latency-hiding register tiles"). In 16-trial
tunes the bound made no difference (the search already picks large tiles), so the DL Boost
target adds it only when asked (``dlboost -accumulators``).
"""

from __future__ import annotations

from heronlike.csp import Le
from heronlike.errors import InfeasibleSpaceError
from heronlike.sampler import solve_one

from .base import ConstraintRule, RuleContext
from .parallel import extent_values


class HideLatency(ConstraintRule):
    """C6 AddDLASpecific (latency): every tensorized stage's register tile has at least
    ``min(accumulators, possible)`` accumulators, ``possible`` being the most its shape, its
    register file and the other constraints allow (checked with CP-SAT on the CSP so far, so the
    rule never makes a space empty). Adds the derived variable ``<stage>.accumulators`` (the
    product of the tile's extents) and one LE.

    Run it after :class:`~heronlike.rules.mem_limit.AddMemLimit` (the register capacity bounds
    ``possible``). Stages without an intrinsic are left alone.

    Args:
        accumulators: the intrinsic's latency (cycles) times the calls issued per cycle; 0 or 1
            adds nothing.
        below: the tiling level whose loops below it hold the register tile (``"R0"``: the
            micro-kernel order of :mod:`heronlike.rules.tiling`).
    """

    name = "C6.HideLatency"

    def __init__(self, accumulators: int, below: str = "R0") -> None:
        if accumulators < 0:
            raise ValueError(f"accumulators must be >= 0, got {accumulators}")
        self.accumulators = accumulators
        self.below = below

    def constrain(self, ctx: RuleContext) -> None:
        if self.accumulators <= 1:
            return
        for stage, st in ctx.states.items():
            if not st.intrinsic_tile or not any(lp.level == self.below for lp in st.loops):
                continue
            axes = {ax for ax in st.stage.write.axes if ax}
            tile = [
                lp.extent
                for lp in ctx.loops_below(stage, self.below)
                if lp.axis in axes and lp.level != "T"
            ]
            count = ctx.product(f"{stage}.accumulators", tile)
            if isinstance(count, int):
                continue  # a fixed tile: nothing to choose
            self._require(ctx, count)

    def _require(self, ctx: RuleContext, count: str) -> None:
        """Add ``LE(need, count)`` for the largest ``need <= accumulators`` the CSP allows."""
        values = extent_values(ctx.csp, count, ctx.csp.vars[count].hi)
        if values is None:
            return
        needs = [self.accumulators] + sorted(
            (v for v in values if 1 < v < self.accumulators), reverse=True
        )
        for need in needs:
            constraint = Le(need, count)
            try:
                # a deterministic work limit, so a loaded machine cannot change the space
                found = solve_one(
                    ctx.csp,
                    seed=0,
                    extra=[constraint],
                    time_limit_s=600.0,
                    deterministic_time_s=10.0,
                )
            except InfeasibleSpaceError:
                continue
            if found is not None:  # None: CP-SAT ran out of work, feasibility unknown
                ctx.csp.add(constraint)
                return
