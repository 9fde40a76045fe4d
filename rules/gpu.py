"""TensorCore rules: Heron's GPU rules (ASPLOS'23 Table 6 S1–S3 on TensorCore; the original's
``addCacheTensorCore``, ``tileBlock``/``tileThread``/``tileWarp``, ``generalTile``,
``defaultSharedLoadSched``, ``storage_align``, ``unrollPragma``, ``tensorcoreLoad/Compute/Store``)
written against :class:`~heronlike.rules.base.RuleContext`.

For a stage matched to an intrinsic *group* (:attr:`heronlike.intrinsic.Intrinsic.group`):

* the intrinsic is a knob over the target's groups of the stage's dtypes (its *family*;
  ``m·n·k = 4096``, ``k = 16``, ``m, n ∈ {8, 16, 32}``: WMMA 16×16×16, 32×8×16, 8×32×16,
  and on sm_80+ for fp16 the 16×16×16 ``ldmatrix`` + ``mma.sync`` group), and every member
  (fill, load A, load B, multiply-accumulate, store) and fragment scope is the chosen group's
  (``Choice``); a group whose fragments are warp registers
  (:attr:`~heronlike.intrinsic.Intrinsic.fragment_layout`) has its fragment buffers re-laid
  tile by tile onto ``(thread, element)`` before tensorizing;
* the accumulator is a ``wmma.accumulator`` cache (``cache_write``), stored straight to global
  memory per warp; A and B are staged in ``shared.dyn`` at the outer reduction loop and in
  ``wmma.matrix_a/b`` fragments at the inner one (S2 Add Multi-Level SPM);
* loops are tiled ``S0 S1 R0 R1 S2 T`` (the m axis ``SR S0 …``): ``SR``/``S0`` fused and
  bound to ``blockIdx.x`` in a rasterised order (groups of ``S0`` m tiles, each group
  walking every n tile with its m tiles innermost: L2 reuse of both operands), ``S1``
  fused and bound to ``threadIdx.y`` (one warp each), ``S2`` the fragments one warp holds,
  ``R0`` the shared-memory step, ``R1`` the fragment step, ``T`` the intrinsic;
* shared loads are cooperative: all ``32 × warps`` threads fetch vectors of 1–8 elements
  (at most 16 bytes), and rows are padded by a ``storage_align`` offset from a candidate set;
* ``pragma_auto_unroll_max_step`` on the block loop is a categorical knob;
* a ``stages`` knob (1–4) pipelines the outer reduction loop (TVM's
  ``software_pipeline_stage``/``order``/``async_stages`` annotations): the shared tiles of the
  next ``stages - 1`` steps are fetched into their own buffers with ``cp.async`` (sm_80+;
  ``tirx.use_async_copy`` at build time) while this step's fragments are multiplied; 1 is a
  single synchronous buffer, and before sm_80 only 2 (a synchronous double buffer) is offered
  beside it;
* a ``swizzle`` knob (with an ldmatrix group only) XOR-permutes the staged tiles (TVM's
  ``permuted_layout``) instead of padding their rows; the ldmatrix loads read them permuted;
* a ``split_k`` knob splits the reduction across ``blockIdx.y`` (``rfactor``): each block
  writes the partial sums of its slice of K to a global workspace in the accumulator's dtype
  and a second kernel adds them in a fixed order (deterministic; no atomics). Offered for a
  GEMM/BMM stage whose operands are parameters and whose K has at least two intrinsic steps.

Constraints (C1–C6 plus the GPU limits): threads per block ``32 · warps ≤ 1024``; shared
memory per block summed over both staged operands, dtype-aware, padding included, times the
pipeline's stages, ``≤`` the target's ``shared`` capacity; with ``stages > 1`` on sm_80+ every
fetch vector is 4, 8 or 16 bytes (what ``cp.async`` copies); accumulator and operand-fragment
registers per thread, and per block, bounded; the cooperative fetch divides each staged tile
exactly; row padding a multiple of the vector and smaller than the row; a split-K factor
divides K into whole intrinsic steps, is at most the SM count, and (when above 1) keeps
``blocks · split_k`` within two waves of the SMs.
The shared bytes the CSP computes are exactly what the built kernel allocates.

With ``swizzle = 1``: no row padding and staged rows of a multiple of 32 elements.

Not done: split-K for convolutions (an operand gathered by another stage), larger warp tiles
with register double-buffering.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from heronlike.csp import In, Le, Operand, Prod, Select, Sum
from heronlike.dag import Access
from heronlike.errors import UnsupportedShapeError
from heronlike.intrinsic import Intrinsic, IntrinsicMatch, shape_family
from heronlike.template import Choice, Ref, Sym

from .base import Loop, Rule, RuleContext
from .constraints import add_candidates, divisors
from .tensorize import shape_knob
from .tiling import ROLE_ORDER

WARP_SIZE = 32
#: the warp-level members of an intrinsic group, in the order ApplyTensorCore uses them
GROUP_ROLES = ("fill", "load_a", "load_b", "compute", "store")


def intrinsic_family(ctx: RuleContext, intrinsic: Intrinsic) -> list[Intrinsic]:
    """The target's intrinsic groups of the same dtypes as ``intrinsic``: one per shape."""
    return shape_family(ctx.target.intrinsics, intrinsic)


class TensorCoreTiling(Rule):
    """Condition: a stage mapped onto an intrinsic group that is not tiled yet.

    Args:
        unroll_steps: candidates of ``pragma_auto_unroll_max_step`` on the block loop. 512 and
            1024 (MetaSchedule's GPU set goes that far) are left out: they unroll the
            cooperative fetch loops into registers, and in a measured sample 9 of 10 spilling
            candidates had them.
        gather_unroll_steps: the candidates instead when an operand is gathered through a
            zero-padding condition (a padded convolution's implicit GEMM): each unrolled fetch
            iteration recomputes the im2col indices and bounds checks, and ptxas keeps them
            live across the reduction loop. Of 270 sampled C1/C3 schedules (sm_90, nvcc 13,
            ptxas level 5) 13 spilled, 11 of them with step 64, and those still spill at
            ptxas's register-usage level 10; the padded cases drop step 64.
        vector_bytes: the widest cooperative-fetch vector (16 bytes: ``ld.global.v4``).
        align_offsets: candidate row paddings (elements) of staged tiles (Heron's
            ``storage_align`` set); an offset must be a multiple of the fetch vector.
        accumulator_registers: registers per thread the accumulator fragments may take.
        stages: candidate pipeline depths of the shared-memory fetch along the outer
            reduction loop (1: synchronous, one buffer; ``s > 1``: ``s`` buffers, filled by
            ``cp.async`` on sm_80+; before sm_80 only 1 and 2, a synchronous double buffer).
        split_k: candidate split-K factors: the reduction is split across that many thread
            blocks (``blockIdx.y``) writing partial sums in the accumulator's dtype (fp32 for
            fp16 inputs) to a workspace, and a second kernel adds them in a fixed order. A
            factor must divide the reduction into whole intrinsic steps and be at most the
            target's SM count;
            offered only for a GEMM/BMM stage whose operands are parameters.
        split_k_waves: a split (factor > 1) keeps the grid within this many waves of one
            block per SM (``blocks · split_k ≤ waves · SMs``): split-K is for grids too small
            to fill the GPU.
        fragment_stages: candidate pipeline depths of the operand fragments along the inner
            reduction loop (``R1``): 2 loads the next step's fragments while this step's are
            multiplied (register double buffering, twice the operand fragment registers);
            offered where ``R1`` takes two steps at least.
        swizzle: offer the ``swizzle`` knob (XOR-permuted shared tiles instead of row
            padding) where the family has an ``ldmatrix`` group.
        raster: split the m axis's block tiles into groups (level ``SR``, a knob) ordered
            ``(SR, n, m)`` in ``blockIdx.x``: a rasterised block order for L2 reuse.
        register_reserve: registers per thread assumed beside the accumulator and operand
            fragments (addresses, indices, fetch vectors); the sum is at most
            ``registers_per_thread`` and, times the block's threads, ``registers_per_block``.
    """

    name = "TensorCore.MultiLevelTiling"

    def __init__(
        self,
        unroll_steps: Sequence[int] = (0, 16, 64),
        gather_unroll_steps: Sequence[int] = (0, 16),
        vector_bytes: int = 16,
        align_offsets: Sequence[int] = (0, 8, 16, 24, 32, 48),
        accumulator_registers: int = 128,
        stages: Sequence[int] = (1, 2, 3, 4),
        split_k: Sequence[int] = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32),
        split_k_waves: int = 2,
        fragment_stages: Sequence[int] = (1, 2),
        swizzle: bool = True,
        raster: bool = True,
        register_reserve: int = 64,
        registers_per_block: int = 65536,
        registers_per_thread: int = 255,
    ) -> None:
        self.unroll_steps = tuple(unroll_steps)
        self.gather_unroll_steps = tuple(gather_unroll_steps)
        self.vector_bytes = vector_bytes
        self.align_offsets = tuple(align_offsets)
        self.accumulator_registers = accumulator_registers
        self.stages = tuple(stages)
        self.split_k = tuple(split_k)
        self.split_k_waves = split_k_waves
        self.fragment_stages = tuple(fragment_stages)
        self.swizzle = swizzle
        self.raster = raster
        self.register_reserve = register_reserve
        self.registers_per_block = registers_per_block
        self.registers_per_thread = registers_per_thread

    def condition(self, ctx: RuleContext, stage: str) -> bool:
        st = ctx.states[stage]
        return (
            st.match is not None
            and bool(st.match.intrinsic.group)
            and not any(lp.level for lp in st.loops)
        )

    def apply(self, ctx: RuleContext, stage: str) -> None:
        st = ctx.states[stage]
        match = st.match
        assert match is not None
        _check_trailing_tiles(stage, match)
        family = intrinsic_family(ctx, match.intrinsic)
        csp = ctx.csp
        shape = shape_knob(ctx, stage, family)
        wm, wn = f"{stage}.intrin_m", f"{stage}.intrin_n"
        k = match.intrinsic.k
        csp.add(Prod(match.intrinsic.m * match.intrinsic.n * k, (wm, wn, k)))
        st.extra["intrinsic_choice"] = (shape, family)

        # split-K (before the caches: they then stage the partial-sum stage's accesses)
        split = self._split_reduction(ctx, stage, match)

        # S2 Add Multi-Level SPM: accumulator, staged operands, fragments
        # (a family mixes groups whose fragments live in different scopes: WMMA's opaque
        # fragments, or the ``warp`` registers of ldmatrix + mma.sync)
        def scope(role: str) -> Choice:
            return Choice(shape, tuple(i.scopes[role] for i in family))

        block = ctx.block(stage)
        (st.write_back,) = ctx.step(
            "cache_write", block, 0, scope("c"), outs=[f"b_{stage}.accumulator_store"]
        )
        reads = [r.buffer for r in st.stage.reads]
        staged: list[tuple[Access, Sym, Sym]] = []
        for role, acc in (("a", match.a), ("b", match.b)):
            index = reads.index(acc.buffer)
            (shared,) = ctx.step(
                "cache_read", block, index, scope("staging"), outs=[f"b_{stage}.{role}.shared"]
            )
            staged.append((acc, shared, Sym("")))
        # a producer of an operand (an implicit GEMM's im2col gather, zero padding) is
        # computed inside the shared-memory fetch, never materialised
        for producer in ctx.dag.producers(stage):
            pst = ctx.states[producer]
            if pst.stage.write.buffer in (match.a.buffer, match.b.buffer) and not pst.inlined:
                ctx.step("compute_inline", ctx.block(producer))
                pst.inlined = True
        for i, (role, acc) in enumerate((("a", match.a), ("b", match.b))):
            index = reads.index(acc.buffer)
            (frag,) = ctx.step(
                "cache_read", block, index, scope(role), outs=[f"b_{stage}.{role}.fragment"]
            )
            staged[i] = (staged[i][0], staged[i][1], frag)

        # multi-level tiling S0 S1 R0 R1 S2 T
        tile = {match.n_axis: wn, match.k_axis: k}
        if match.m_axis is not None:
            tile[match.m_axis] = wm
        for loop in list(ctx.loops(stage)):
            levels: tuple[str, ...] = ("S0", "S1", "S2") if loop.kind == "S" else ("R0", "R1")
            if self.raster and loop.axis == match.m_axis:
                levels = ("SR", *levels)  # the block order's group of m tiles (below)
            fixed: dict[str, Operand] = {}
            if loop.axis in tile:
                levels += ("T",)
                fixed = {"T": tile[loop.axis]}
            parts = ctx.split(stage, loop, levels, fixed)
            if not isinstance(loop.extent, int) and "split_k_divisors" in st.extra:
                for part in parts:  # a split-K remainder: the levels still divide K
                    if part.level not in fixed:
                        add_candidates(csp, str(part.extent), st.extra["split_k_divisors"])
        # the block order (rasterised): batch tiles, then groups of m tiles (SR), within a
        # group every n tile (S0), and within that the group's m tiles (S0) innermost:
        # consecutive blocks share an n tile of B and revisit one group's A rows, as
        # Triton's grouped ordering; SR = 1 is column-major, S0 = 1 row-major
        s0 = st.level("S0")
        blocks = [lp for lp in s0 if lp.axis not in (match.m_axis, match.n_axis)]
        blocks += st.level("SR") + [lp for lp in s0 if lp.axis == match.n_axis]
        blocks += [lp for lp in s0 if lp.axis == match.m_axis]
        ordered: list[Loop] = list(blocks)
        for level in ("S1", "R0", "R1", "S2", "T"):
            group = st.level(level)
            if level == "T":
                roles = {match.m_axis: "m", match.n_axis: "n", match.k_axis: "k"}
                group.sort(key=lambda lp: ROLE_ORDER.index(roles[lp.axis]))
            ordered += group
        ctx.reorder(stage, ordered)
        # what one thread block stages, before S0 and S1 are fused away
        tiles = [self._tile_dims(ctx, stage, acc) for acc, _, _ in staged]
        block_loop = ctx.fuse(stage, blocks, "blockIdx") if len(blocks) > 1 else blocks[0]
        warp_loop = self._fuse_level(ctx, stage, "S1", "warps")
        ctx.bind(block_loop, "blockIdx.x")
        ctx.bind(warp_loop, "threadIdx.y")
        if split is not None:
            self._limit_split_grid(ctx, stage, split, block_loop.extent)
        ctx.threads.setdefault("threadIdx.x", []).append(WARP_SIZE)
        warps = warp_loop.extent

        # compute locations: fragments at the inner reduction step, staging at the outer one,
        # the accumulator's store at the warp
        r0, r1 = st.level("R0")[-1], st.level("R1")[-1]
        # (unit loops kept: the fragment tiles find their buffer dimensions by position)
        for _, _, frag in staged:
            ctx.step("compute_at", frag, Sym(r1.sym), True)
        for _, shared, _ in staged:
            ctx.step("compute_at", shared, Sym(r0.sym), True)
        ctx.step("reverse_compute_at", st.write_back, Sym(warp_loop.sym), True)
        st.cached_reads = [(frag, acc.buffer, ("R1",)) for acc, _, frag in staged]

        # cooperative fetch, row padding and the shared-memory budget
        swizzle = self._swizzle_knob(ctx, stage, shape, family)
        shared_bytes: list[Operand] = []
        for role, (acc, shared, _), dims in zip(("a", "b"), staged, tiles, strict=True):
            shared_bytes.append(
                self._stage_in_shared(ctx, stage, role, acc, dims, shared, warps, swizzle)
            )
            if swizzle is not None:  # the fetch's stores (the ldmatrix loads: once tensorized)
                ctx.step("annotate", shared, "permuted_layout", Ref(swizzle))
        st.extra["swizzle"] = swizzle
        # software pipelining (TVM's InjectSoftwarePipeline) of the R0 loop in ``stages``
        # stages: the shared tiles of the next ``stages - 1`` R0 steps are fetched while this
        # one's fragments are multiplied, into ``stages`` copies of each shared buffer. On
        # sm_80 and newer the fetches are asynchronous (``cp.async``: the loop's stage 0 is
        # an async stage and the build sets ``tirx.use_async_copy``); before sm_80 only the
        # synchronous double buffer (2 stages) exists.
        asynchronous = getattr(ctx.target, "sm", 80) >= 80
        choices = self.stages if asynchronous else tuple(s for s in self.stages if s <= 2)
        stages = csp.var(
            f"{stage}.stages",
            1,
            max(choices),
            knob=True,
            doc="pipeline stages of the shared-memory fetch"
            + (" (cp.async when > 1)" if asynchronous else " (double buffer when 2)"),
        )
        csp.add(In(stages, choices))
        # register double buffering: the same pass on the R1 loop, where the fragments are
        # loaded (two copies of each operand fragment buffer)
        fragment_stages = csp.var(
            f"{stage}.fragment_stages",
            1,
            max(self.fragment_stages),
            knob=True,
            doc="pipeline stages of the operand fragments (2: register double buffering)",
        )
        csp.add(In(fragment_stages, self.fragment_stages))
        least_steps = csp.var(f"{stage}.fragment_stages.least_steps", 1, 2)
        csp.add(
            Select(
                least_steps,
                fragment_stages,
                tuple(min(s, 2) or 1 for s in range(max(self.fragment_stages) + 1)),
            )
        )
        csp.add(Le(least_steps, r1.extent))
        ctx.step(
            "software_pipeline",
            Sym(r0.sym),
            Ref(stages),
            int(asynchronous),
            Sym(r1.sym),
            Ref(fragment_stages),
        )
        # the pipeline's epilogue waits for fewer copy groups on each of its last steps: the
        # wait counts must be constants, so from 3 stages on the epilogue is unrolled in TIR
        st.extra["unroll_explicit"] = Choice(
            stages, tuple(int(asynchronous and s >= 3) for s in range(max(choices) + 1))
        )
        if asynchronous:
            # cp.async copies 4, 8 or 16 bytes: a narrower fetch vector would stay synchronous
            least = csp.var(f"{stage}.shared.async_vector_bytes", 1, 4)
            csp.add(
                Select(least, stages, tuple(1 if s < 2 else 4 for s in range(max(choices) + 1)))
            )
            for role, acc in (("a", match.a), ("b", match.b)):
                lanes = f"{stage}.{role}.shared.vector"
                width = csp.var(
                    f"{stage}.{role}.shared.vector_bytes",
                    1,
                    csp.vars[lanes].hi * acc.itemsize,
                )
                csp.add(Prod(width, (lanes, acc.itemsize)))
                csp.add(Le(least, width))
        hi = sum(csp.vars[b].hi if isinstance(b, str) else b for b in shared_bytes)
        one = csp.var(f"{stage}.shared.bytes_per_stage", 0, hi)
        csp.add(Sum(one, tuple(shared_bytes)))
        total = csp.var(
            f"{stage}.shared.bytes", 0, max(choices) * hi, doc="shared memory per block"
        )
        csp.add(Prod(total, (one, stages)))
        level = ctx.target.memory_level("shared")
        if level is not None:
            csp.add(Le(total, level.capacity_bytes))

        # threads and accumulator registers
        csp.add(Le(warps, 1024 // WARP_SIZE))
        fragments = ctx.product(
            f"{stage}.fragments", [lp.extent for lp in st.level("S2")], upper=None
        )
        # one m·n accumulator fragment spread over a warp's 32 threads, in 4-byte registers
        per_fragment = max(1, match.intrinsic.m * match.intrinsic.n * st.stage.write.itemsize)
        per_fragment //= WARP_SIZE * 4
        acc_hi = _upper(csp, fragments) * per_fragment
        acc_regs = csp.var(f"{stage}.accumulator_registers", 1, acc_hi, doc="per thread")
        csp.add(Prod(acc_regs, (fragments, per_fragment)))
        csp.add(Le(acc_regs, self.accumulator_registers))
        # the operand fragments one warp holds during an R1 step: one per S2 tile of the axes
        # indexing the operand, each m·k (or n·k) elements over 32 threads
        operand_regs: list[Operand] = []
        for role, acc in (("a", match.a), ("b", match.b)):
            count = ctx.product(
                f"{stage}.{role}.fragments",
                [lp.extent for lp in st.level("S2") if lp.axis in acc.axes],
                upper=None,
            )
            rows = [i.m if role == "a" else i.n for i in family]
            per = [max(1, r * k * acc.itemsize // (WARP_SIZE * 4)) for r in rows]
            size = csp.var(f"{stage}.{role}.fragment_registers", 1, max(per))
            csp.add(Select(size, shape, tuple(per)))
            regs = csp.var(
                f"{stage}.{role}.registers",
                1,
                _upper(csp, count) * max(per) * max(self.fragment_stages),
                doc="per thread",
            )
            csp.add(Prod(regs, (count, size, fragment_stages)))
            operand_regs.append(regs)
        # the register file: every thread of the block holds its accumulators, its operand
        # fragments, addresses and indices (a reserve); ptxas checks the real count
        hi = acc_hi + sum(_upper(csp, r) for r in operand_regs) + self.register_reserve
        per_thread = csp.var(f"{stage}.registers", 1, hi)
        csp.add(Sum(per_thread, (acc_regs, *operand_regs, self.register_reserve)))
        csp.add(Le(per_thread, self.registers_per_thread))
        block_regs = csp.var(
            f"{stage}.block_registers", 1, _upper(csp, warps) * WARP_SIZE * csp.vars[per_thread].hi
        )
        csp.add(Prod(block_regs, (warps, WARP_SIZE, per_thread)))
        csp.add(Le(block_regs, self.registers_per_block))

        # unroll depth
        steps = self.gather_unroll_steps if _gathers_padding(ctx, stage) else self.unroll_steps
        unroll = csp.var(
            f"{stage}.unroll",
            0,
            len(steps) - 1,
            knob=True,
            doc="auto-unroll step",
            topology="categorical",
        )
        ctx.step(
            "annotate",
            Sym(block_loop.sym),
            "pragma_auto_unroll_max_step",
            Choice(unroll, steps),
        )
        ctx.step(
            "annotate", Sym(block_loop.sym), "pragma_unroll_explicit", st.extra["unroll_explicit"]
        )

    def _split_reduction(self, ctx: RuleContext, stage: str, match: IntrinsicMatch) -> str | None:
        """The split-K knob of ``stage`` and the ``split_k`` step, or None where split-K is
        not offered (a reduction of fewer than two intrinsic steps, more than one reduction
        axis, or an operand computed by another stage)."""
        st = ctx.states[stage]
        reduce = [ax for ax in st.stage.axes if ax.kind == "R"]
        k = match.intrinsic.k
        if (
            len(reduce) != 1
            or st.stage.axes[-1] is not reduce[0]
            or not isinstance(reduce[0].extent, int)
            or reduce[0].extent // k < 2
            or ctx.dag.producers(stage)
        ):
            return None
        steps = reduce[0].extent // k
        options = tuple(f for f in self.split_k if steps % f == 0 and f <= ctx.target.cores)
        if options == (1,) or not options:
            return None
        csp = ctx.csp
        split = csp.var(
            f"{stage}.split_k",
            1,
            max(options),
            knob=True,
            doc="split-K: thread blocks sharing the reduction (partial sums + a second kernel)",
        )
        csp.add(In(split, options))
        # the reduction left to one block; its tiling levels are still divisors of K
        per_split = csp.var(f"{stage}.{reduce[0].name}.per_split", k, reduce[0].extent)
        csp.add(Prod(reduce[0].extent, (split, per_split)))
        block = ctx.block(stage)
        names = [f"{stage}.{a.name}" for a in st.stage.axes]
        syms = ctx.step(
            "split_k", block, Ref(split), outs=[f"b_{stage}.partial", f"b_{stage}.sum", *names]
        )
        st.block = syms[0]
        st.extra["split_k"] = (split, syms[1])
        st.loops = [
            Loop(sym.name, a.name, a.kind, per_split if a.kind == "R" else a.extent)
            for sym, a in zip(syms[2:], st.stage.axes, strict=True)
        ]
        st.extra["split_k_divisors"] = divisors(reduce[0].extent)
        return split

    def _limit_split_grid(self, ctx: RuleContext, stage: str, split: str, blocks: Operand) -> None:
        """A split (factor > 1) keeps ``blocks · split_k`` within :attr:`split_k_waves` waves
        of one block per SM: SELECT picks the cap by the factor (none for factor 1)."""
        csp = ctx.csp
        most = _upper(csp, blocks)
        top = csp.vars[split].hi
        grid = csp.var(f"{stage}.split_k.grid", 1, most * top, doc="blocks of the split stage")
        csp.add(Prod(grid, (blocks, split)))
        limit = self.split_k_waves * ctx.target.cores
        cap = csp.var(f"{stage}.split_k.grid_cap", 1, max(most * top, limit))
        caps = tuple(max(most * top, limit) if f <= 1 else limit for f in range(top + 1))
        csp.add(Select(cap, split, caps))
        csp.add(Le(grid, cap))

    @staticmethod
    def _fuse_level(ctx: RuleContext, stage: str, level: str, name: str) -> Loop:
        loops = ctx.states[stage].level(level)
        return ctx.fuse(stage, loops, name) if len(loops) > 1 else loops[0]

    def _tile_dims(self, ctx: RuleContext, stage: str, acc: Access) -> list[Operand]:
        """Extent of each dimension of ``acc`` that one thread block stages: spatial axes
        under ``S0`` (every warp's rows), reduce axes under ``R0``; a compound index
        ``Σ c·x`` spans ``Σ |c|·(t − 1) + 1``."""
        st = ctx.states[stage]
        dims: list[Operand] = []
        for d, axis in enumerate(acc.axes):
            index = acc.index[d] if acc.index else None
            if axis is not None:
                below = "S0" if st.stage.axis(axis).kind == "S" else "R0"
                dims.append(ctx.inner_extent(stage, axis, below))
                continue
            if index is None:
                dims.append(acc.shape[d])
                continue
            terms: list[Operand] = []
            coeffs: list[int] = []
            for ax, c in index.terms:
                below = "S0" if st.stage.axis(ax).kind == "S" else "R0"
                terms.append(ctx.inner_extent(stage, ax, below))
                coeffs.append(abs(c))
            name = f"{stage}.{acc.buffer}.shared.d{d}"
            hi = sum(
                c * (t if isinstance(t, int) else ctx.csp.vars[t].hi) for c, t in zip(coeffs, terms)
            )
            ctx.csp.var(name, 1, max(1, hi), doc=f"staged extent of {acc.buffer} dim {d}")
            ctx.csp.add(Sum(name, (*terms, 1), (*coeffs, 1 - sum(coeffs))))
            dims.append(name)
        return dims

    def _swizzle_knob(
        self, ctx: RuleContext, stage: str, shape: str, family: Sequence[Intrinsic]
    ) -> str | None:
        """The ``swizzle`` knob (0/1) of a family with ``ldmatrix`` groups, or None: TVM's
        ``permuted_layout`` (``InjectPermutedLayout``) XORs each 16-byte column group of a
        staged row with its row index (mod 8), so the eight rows one ``ldmatrix`` phase reads
        sit in distinct banks without padding. Offered only with an ldmatrix member
        (SELECT on the intrinsic choice); its row constraints are in :meth:`_stage_in_shared`.
        """
        if not self.swizzle or not any(i.fragment_layout for i in family):
            return None
        csp = ctx.csp
        swizzle = csp.var(
            f"{stage}.swizzle",
            0,
            1,
            knob=True,
            doc="XOR-swizzled shared tiles (permuted_layout; ldmatrix groups only)",
        )
        allowed = csp.var(f"{stage}.swizzle.allowed", 0, 1)
        csp.add(Select(allowed, shape, tuple(int(i.fragment_layout is not None) for i in family)))
        csp.add(Le(swizzle, allowed))
        return swizzle

    def _stage_in_shared(
        self,
        ctx: RuleContext,
        stage: str,
        role: str,
        acc: Access,
        dims: Sequence[Operand],
        shared: Sym,
        warps: Operand,
        swizzle: str | None = None,
    ) -> str:
        """Cooperative fetch and row padding of one staged operand of tile ``dims``; returns
        its bytes variable. With ``swizzle`` set (1), the row is unpadded and a multiple of
        32 elements (``InjectPermutedLayout`` permutes rows of 32 or 64 elements; the rows
        above, whole intrinsic tiles, are even)."""
        csp = ctx.csp
        prefix = f"{stage}.{role}.shared"
        elems = ctx.product(f"{prefix}.elems", dims, upper=_size(acc.shape))
        row = dims[-1]
        itemsize = acc.itemsize
        lane_options = tuple(v for v in (1, 2, 4, 8, 16) if v * itemsize <= self.vector_bytes)
        lanes = csp.var(f"{prefix}.vector", 1, max(lane_options), knob=True, doc="fetch vector")
        csp.add(In(lanes, lane_options))
        iters = csp.var(f"{prefix}.iterations", 1, _size(acc.shape), doc="fetch iterations")
        csp.add(Prod(elems, (iters, warps, WARP_SIZE, lanes)))
        # a vector never crosses a row: the row and its padding are multiples of the vector
        row_vectors = csp.var(f"{prefix}.row_vectors", 1, _upper(csp, row))
        csp.add(Prod(row, (lanes, row_vectors)))
        # fragment loads need 16-byte-aligned row strides (``ldm``)
        step = max(1, 16 // itemsize)
        offsets = tuple(o for o in self.align_offsets if o % step == 0)
        offset = csp.var(f"{prefix}.align_offset", 0, max(offsets), knob=True, doc="row pad")
        csp.add(In(offset, offsets))
        offset_vectors = csp.var(f"{prefix}.align_vectors", 0, max(offsets))
        csp.add(Prod(offset, (lanes, offset_vectors)))
        if swizzle is not None:
            # swizzle: no padding, and the row a whole number of 32-element groups
            cap = csp.var(f"{prefix}.align_cap", 0, max(offsets))
            csp.add(Select(cap, swizzle, (max(offsets), 0)))
            csp.add(Le(offset, cap))
            unit = csp.var(f"{prefix}.swizzle_unit", 1, 32)
            csp.add(Select(unit, swizzle, (1, 32)))
            groups = csp.var(f"{prefix}.swizzle_groups", 1, _upper(csp, row))
            csp.add(Prod(row, (unit, groups)))
        row_less_1 = csp.var(f"{prefix}.row_minus_1", 0, _upper(csp, row))
        csp.add(Sum(row_less_1, (row, 1), (1, -1)))
        csp.add(Le(offset, row_less_1))  # storage_align(factor=row, offset) pads by offset
        padded = csp.var(f"{prefix}.padded_row", 1, _upper(csp, row) + max(offsets))
        csp.add(Sum(padded, (row, offset)))
        rows = ctx.product(f"{prefix}.rows", list(dims[:-1]), upper=None) if len(dims) > 1 else 1
        hi = _upper(csp, rows) * csp.vars[padded].hi * itemsize
        nbytes = csp.var(f"{prefix}.bytes", 0, hi, doc=f"shared bytes of {acc.buffer}")
        csp.add(Prod(nbytes, (rows, padded, itemsize)))
        ctx.step("storage_align", shared, 0, -2, _ref(row), Ref(offset))
        ctx.step("cooperative_fetch", shared, _ref(warps), WARP_SIZE, Ref(lanes))
        return nbytes


class ApplyTensorCore(Rule):
    """Condition: a stage tiled by :class:`TensorCoreTiling`. Apply: ``tensorize`` the
    group: the accumulator fill (after ``decompose_reduction`` at the outer reduction step),
    the fragment loads, the multiply-accumulate and the store, each the member of the shape
    the ``intrinsic`` knob chose."""

    name = "TensorCore.ApplyIntrinsic"

    def condition(self, ctx: RuleContext, stage: str) -> bool:
        st = ctx.states[stage]
        return (
            st.match is not None
            and bool(st.match.intrinsic.group)
            and bool(st.level("T"))
            and "intrinsic_choice" in st.extra
        )

    def apply(self, ctx: RuleContext, stage: str) -> None:
        st = ctx.states[stage]
        shape, family = st.extra["intrinsic_choice"]

        def member(role: str) -> Choice:
            return Choice(shape, tuple(i.group[role] for i in family))

        wm, wn = Ref(f"{stage}.intrin_m"), Ref(f"{stage}.intrin_n")
        k = family[0].k
        match = st.match
        assert match is not None and match.m_axis is not None
        (a_frag, _, _), (b_frag, _, _) = st.cached_reads[0], st.cached_reads[1]
        a_dims = (match.a.axes.index(match.m_axis), match.a.axes.index(match.k_axis))
        b_dims = (match.b.axes.index(match.n_axis), match.b.axes.index(match.k_axis))
        # counted from the end: a split-K partial-sum buffer has a leading split dimension
        rank = len(st.stage.write.axes)
        c_dims = (
            st.stage.write.axes.index(match.m_axis) - rank,
            st.stage.write.axes.index(match.n_axis) - rank,
        )
        # ldmatrix / mma.sync fragments: each tile re-laid onto the warp's registers first
        layout = Choice(shape, tuple(i.fragment_layout for i in family))
        assert st.write_back is not None
        ctx.step("fragment_layout", a_frag, "write", wm, k, layout)
        ctx.step("fragment_layout", b_frag, "write", wn, k, layout)
        ctx.step("fragment_layout", st.write_back, "read", wm, wn, layout)
        # with the swizzle the ldmatrix blocks read the permuted rows the fetch wrote
        swizzle = st.extra.get("swizzle")
        permuted = Ref(swizzle) if swizzle is not None else 0
        ctx.step("tensorize_tile", a_frag, wm, k, member("load_a"), *a_dims, permuted)
        ctx.step("tensorize_tile", b_frag, wn, k, member("load_b"), *b_dims, permuted)
        block = ctx.block(stage)
        first_reduce = st.level("R0")[0]
        (init,) = ctx.step(
            "decompose_reduction", block, Sym(first_reduce.sym), outs=[f"{block}.init"]
        )
        ctx.step("tensorize_last", init, 2, member("fill"))
        ctx.step("tensorize", Sym(st.level("T")[0].sym), member("compute"))
        ctx.step("tensorize_tile", st.write_back, wm, wn, member("store"), *c_dims)


def _gathers_padding(ctx: RuleContext, stage: str) -> bool:
    """True when a stage upstream of ``stage`` is data movement with a condition (zero
    padding: ``if_then_else``), which the shared-memory fetch then evaluates per element."""
    seen: set[str] = set()
    todo = list(ctx.dag.producers(stage))
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        st = ctx.dag.stage(name)
        if st.is_data_movement and any(c.endswith("if_then_else") for c in st.calls):
            return True
        todo += ctx.dag.producers(name)
    return False


def _fused(values: Sequence[Any], extents: Sequence[int]) -> Any:
    """Row-major fusion ``((v0·e1 + v1)·e2 + v2)…`` of index expressions."""
    out = values[0]
    for v, e in zip(values[1:], extents[1:], strict=True):
        out = out * e + v
    return out


def implicit_gemm(match: IntrinsicMatch, func: Any) -> Any:
    """The compute of ``match.stage`` rewritten as an implicit GEMM (what Heron's TensorCore
    convolutions do with an explicit im2col, and MetaSchedule with ``reindex``), or None when
    the stage is already a GEMM or cannot be rewritten by reshapes alone. ``func`` is the
    PrimFunc the stage belongs to.

    For a channels-last convolution ``Y[n, oh, ow, co] += Xp[n, oh·s + kh·d, ow·s + kw·d, ci] ·
    W[co, kh, kw, ci]``: ``Y`` becomes ``[N·OH·OW, CO]`` and ``W`` ``[CO, KH·KW·CI]`` (row-major
    reshapes of the user's arrays), the operand ``Xp`` is gathered by a new im2col stage
    ``Xp_reindex[m, k]`` (``s_tir`` ``reindex``), and the stage becomes
    ``Y[m, co] += Xp_reindex[m, k] · W[co, k]`` (``transform_block_layout``). The rules then
    compute the im2col gather inside the shared-memory fetch: it is never materialised.
    """
    from tvm import s_tir
    from tvm.tirx import IndexMap

    stage, a, b, out = match.stage, match.a, match.b, match.stage.write
    n_axis = match.n_axis
    if (
        tuple(b.axes[-2:]) == (n_axis, match.k_axis)
        and tuple(a.axes[-2:]) == (match.m_axis, match.k_axis)
        and tuple(out.axes[-2:]) == (match.m_axis, n_axis)
    ):
        return None  # already a GEMM
    axes = [ax.name for ax in stage.axes]
    extent = {ax.name: ax.extent for ax in stage.axes}
    m_axes = [ax for ax in out.axes if ax != n_axis]
    k_axes = [ax for ax in b.axes if ax != n_axis]
    # reshapes only: the output's n axis last, the weight's n axis first, every other
    # weight axis a reduction and every output and reduction axis used by the operand A
    if (
        None in out.axes
        or None in b.axes
        or out.axes[-1] != n_axis
        or b.axes[0] != n_axis
        or any(stage.axis(ax).kind != "R" for ax in k_axes)
        or sorted(m_axes + [n_axis] + k_axes) != sorted(axes)
    ):
        return None
    if sorted(ax for ax in axes if ax in _axes_of(a)) != sorted(m_axes + k_axes):
        return None

    m_ext = [extent[ax] for ax in m_axes]
    k_ext = [extent[ax] for ax in k_axes]

    def gemm_of(names: Sequence[str]) -> Any:
        def fn(*idx: Any) -> tuple[Any, ...]:
            env = dict(zip(names, idx, strict=True))  # an absent (unit) axis is 0
            m = _fused([env.get(ax, 0) for ax in m_axes], m_ext)
            k = _fused([env.get(ax, 0) for ax in k_axes], k_ext)
            return (m, env[n_axis], k) if n_axis in env else (m, k)

        return fn

    def index_map(fn: Any, ndim: int) -> Any:
        return IndexMap.from_func(fn, ndim=ndim, index_dtype="int32")

    sch = s_tir.Schedule(func)
    block = sch.get_sblock(stage.name)
    out_map = index_map(
        lambda *i: (_fused([i[out.axes.index(ax)] for ax in m_axes], m_ext), i[-1]), len(out.axes)
    )
    sch.transform_layout(block, ("write", 0), out_map)
    b_index = [r.buffer for r in stage.reads].index(b.buffer)
    b_map = index_map(
        lambda *i: (i[0], _fused([i[b.axes.index(ax)] for ax in k_axes], k_ext)), len(b.axes)
    )
    sch.transform_layout(block, ("read", b_index), b_map)
    a_index = [r.buffer for r in stage.reads].index(a.buffer)
    gather = sch.reindex(block, ("read", a_index))
    # the gather (reindex) buffer has one dimension per block iterator A uses (TVM leaves out
    # some unit ones): read them off the block's access of it
    region = sch.get(block).reads[a_index].region
    used = [str(r.min.name) for r in region]
    sch.transform_block_layout(block, index_map(gemm_of(axes), len(axes)))
    sch.transform_layout(block, ("read", a_index), index_map(gemm_of(used), len(used)))
    sch.transform_block_layout(gather, index_map(gemm_of(used), len(used)))
    return sch.mod["main"]


def pad_gemm_n(match: IntrinsicMatch, func: Any, multiple: int = 16) -> Any:
    """A GEMM/BMM stage whose ``n`` extent the intrinsic tiles do not divide (Heron's G3/G5:
    N = 1000), rewritten with ``n`` padded to a multiple of ``multiple``: the weight and the
    output become parameters of the padded shape (the weight zero-padded once with its
    pre-packing, :meth:`heronlike.space.Space.prepare_args`; the output's valid part is a
    view of the padded buffer). None when nothing needs padding or the compute is not a
    plain single-stage GEMM.

    Raises:
        UnsupportedShapeError: when ``m`` or ``k`` is not a multiple of 16 (padding them would
            pad the activation outside the measured kernel).
    """
    from tvm import te

    stage = match.stage
    n_axis, m_axis, k_axis = match.n_axis, match.m_axis, match.k_axis
    a, b, out = match.a, match.b, stage.write
    if not (a.is_plain and b.is_plain and out.is_plain) or m_axis is None:
        return None
    extent = {ax.name: ax.extent for ax in stage.axes}
    for ax, role in ((m_axis, "m"), (k_axis, "k")):
        if extent[ax] % 16:
            raise UnsupportedShapeError(
                f"stage {stage.name}: the TensorCore target needs the {role} extent "
                f"({ax} = {extent[ax]}) to be a multiple of 16 (n is padded; m and k would pad "
                "the activation)"
            )
    if extent[n_axis] % multiple == 0:
        return None
    padded = -(-extent[n_axis] // multiple) * multiple
    names = [p.name for p in func.params]
    if b.buffer not in names or out.buffer not in names:
        return None

    def shape(acc: Access) -> list[int]:
        return [padded if ax == n_axis else extent[ax] for ax in acc.axes]  # type: ignore[misc]

    A = te.placeholder([extent[ax] for ax in a.axes], a.dtype, name=a.buffer)  # type: ignore[index]
    B = te.placeholder(shape(b), b.dtype, name=b.buffer)
    red = te.reduce_axis((0, extent[k_axis]), name="k")
    spatial = [ax for ax in out.axes]

    def body(*idx: Any) -> Any:
        env = dict(zip(spatial, idx, strict=True))
        env[k_axis] = red
        va = A[tuple(env[ax] for ax in a.axes)].astype(out.dtype)
        vb = B[tuple(env[ax] for ax in b.axes)].astype(out.dtype)
        return te.sum(va * vb, axis=red)

    C = te.compute(shape(out), body, name=stage.name)
    tensors = {a.buffer: A, b.buffer: B, out.buffer: C}
    new = te.create_prim_func([tensors[name] for name in names])
    return new.with_attr("global_symbol", "main")


def _axes_of(access: Access) -> set[str]:
    """Every stage axis an access's indices use (plain or inside an affine index)."""
    out = {ax for ax in access.axes if ax is not None}
    for idx in access.index or ():
        if idx is not None:
            out.update(idx.axes)
    return out


def _check_trailing_tiles(stage: str, match: IntrinsicMatch) -> None:
    """WMMA loads and stores tensorize a 2-D tile, which TVM 0.27 can match only on the last
    two dimensions of a buffer (unit dimensions may lead, not sit between): A's m and k, B's n
    and k and the output's m and n must be each buffer's last two dimensions, in that order.
    GEMM and BMM are; a channels-last convolution mapped directly (batch on m, the spatial
    axes between it and the channels) is not.

    Raises:
        UnsupportedShapeError: naming the operand whose layout does not fit.
    """
    wants = (
        (match.a, (match.m_axis, match.k_axis)),
        (match.b, (match.n_axis, match.k_axis)),
        (match.stage.write, (match.m_axis, match.n_axis)),
    )
    for access, axes in wants:
        if tuple(access.axes[-2:]) != axes:
            raise UnsupportedShapeError(
                f"stage {stage}: the TensorCore target needs {access.buffer}'s last two "
                f"dimensions to be the intrinsic's {'/'.join(str(a) for a in axes)} axes "
                f"(row-major A[.., m, k], B[.., n, k], C[.., m, n], as GEMM and BMM are); "
                f"{access.buffer} is indexed [{', '.join(str(a) for a in access.axes)}]. "
                "Channels-last convolutions are not supported on TensorCore yet"
            )


def _size(shape: Sequence[int]) -> int:
    out = 1
    for d in shape:
        out *= int(d)
    return out


def _upper(csp: object, op: Operand) -> int:
    return op if isinstance(op, int) else csp.vars[op].hi  # type: ignore[attr-defined]


def _ref(op: Operand) -> Ref | int:
    return Ref(op) if isinstance(op, str) else op


__all__ = ["ApplyTensorCore", "TensorCoreTiling", "intrinsic_family"]
