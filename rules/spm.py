"""S2 Add Multi-Level SPM and S3 Add Multi-Scope SPM (Heron ASPLOS'23 Table 6).

Both stage a tensorized stage's operands through explicit scratchpad memories (SPMs):

* **S2, multi-level**: every input operand goes through the same chain of scopes, outer to inner
  (TensorCore: ``shared`` then the fragment scopes; a CPU target may stage packed tiles in a
  ``global`` buffer).
* **S3, multi-scope**: each operand role has its own scope (VTA: input, weight and accumulator
  buffers).

Each cache stage is made by ``cache_read`` (``cache_write`` for the accumulator); where it is
computed is chosen later by :class:`~heronlike.rules.tiling.MultiLevelTiling` among the tile
loops named in ``levels``, by a knob with a SELECT on the staged tile's size (C4), which C5
(:mod:`heronlike.rules.mem_limit`) can bound by the scope's capacity.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .base import Rule, RuleContext


def _stage_operand(
    ctx: RuleContext, stage: str, buffer: str, scope: str, levels: Sequence[str]
) -> None:
    st = ctx.states[stage]
    (block,) = ctx.step(
        "cache_read", ctx.block(stage), buffer, scope, outs=[f"b_{stage}.{buffer}.{scope}"]
    )
    st.cached_reads.append((block, buffer, tuple(levels)))


class AddMultiLevelSPM(Rule):
    """Condition: a tensorized stage whose inputs are not staged yet.

    ``scopes``: the chain of storage scopes, outer to inner; ``levels``: tiling levels at whose
    last loop a staged operand may be computed (one knob per operand and scope).
    """

    name = "S2.AddMultiLevelSPM"

    def __init__(self, scopes: Sequence[str], levels: Sequence[str] = ("S1", "R0")) -> None:
        self.scopes, self.levels = tuple(scopes), tuple(levels)

    def condition(self, ctx: RuleContext, stage: str) -> bool:
        st = ctx.states[stage]
        return st.match is not None and not st.cached_reads and bool(self.scopes)

    def apply(self, ctx: RuleContext, stage: str) -> None:
        m = ctx.states[stage].match
        assert m is not None
        for buffer in (m.a.buffer, m.b.buffer):
            for scope in self.scopes:
                _stage_operand(ctx, stage, buffer, scope, self.levels)


class AddMultiScopeSPM(Rule):
    """Condition: a tensorized stage whose operands are not staged yet.

    ``scopes`` maps an operand role (``"a"``, ``"b"``) to its storage scope; the accumulator
    role ``"c"`` becomes the stage's write cache (the write-back is attached by the tiling rule).
    """

    name = "S3.AddMultiScopeSPM"

    def __init__(self, scopes: Mapping[str, str], levels: Sequence[str] = ("S1", "R0")) -> None:
        unknown = set(scopes) - {"a", "b", "c"}
        if unknown:
            raise ValueError(f"operand roles are a, b, c; got {sorted(unknown)}")
        self.scopes, self.levels = dict(scopes), tuple(levels)

    def condition(self, ctx: RuleContext, stage: str) -> bool:
        st = ctx.states[stage]
        return st.match is not None and not st.cached_reads and bool(self.scopes)

    def apply(self, ctx: RuleContext, stage: str) -> None:
        st = ctx.states[stage]
        m = st.match
        assert m is not None
        for role, access in (("a", m.a), ("b", m.b)):
            if role in self.scopes:
                _stage_operand(ctx, stage, access.buffer, self.scopes[role], self.levels)
        if "c" in self.scopes and st.write_back is None:
            (st.write_back,) = ctx.step(
                "cache_write", ctx.block(stage), 0, self.scopes["c"], outs=[f"b_{stage}.write_back"]
            )
