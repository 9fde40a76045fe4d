"""Constraint generation rules (Heron ASPLOS'23 §4.2, Table 8).

C1–C4 and the intrinsic part of C6 are functions here, which the
:class:`~heronlike.rules.base.RuleContext` primitives call as they emit schedule steps; C5
(:mod:`heronlike.rules.mem_limit`) and the parallelism part of C6
(:class:`heronlike.rules.parallel.UseAllCores`) are global
:class:`~heronlike.rules.base.ConstraintRule` classes that run after all stages:

====  ==================  ===============================================================
C1    AddLoopSplit        PROD: a loop's extent is the product of its split parts
C2    AddLoopFuse         PROD: a fused loop's extent is the product of the fused loops
C3    AddCandidates       IN: a split part divides the constant extent
C4    AddStageFuse        SELECT: an attached stage's tile follows its compute location
C5    AddMemLimit         PROD, SUM, LE: bytes live in a memory level fit its capacity
C6    AddDLASpecific      EQ/LE: intrinsic tile sizes, core counts
====  ==================  ===============================================================
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from heronlike.csp import CSP, Eq, In, Operand, Prod, Select, Sum


def divisors(n: int) -> tuple[int, ...]:
    """Positive divisors of ``n`` in increasing order."""
    small = [d for d in range(1, int(n**0.5) + 1) if n % d == 0]
    return tuple(sorted(set(small + [n // d for d in small])))


def add_loop_split(csp: CSP, extent: Operand, parts: Sequence[Operand]) -> None:
    """C1 AddLoopSplit: ``extent == parts[0] * ... * parts[-1]`` (perfect tiling)."""
    csp.add(Prod(extent, tuple(parts)))


def add_loop_fuse(csp: CSP, fused: Operand, loops: Sequence[Operand]) -> None:
    """C2 AddLoopFuse: the fused loop's extent is the product of the fused loops' extents."""
    csp.add(Prod(fused, tuple(loops)))


def add_candidates(csp: CSP, var: str, values: Sequence[int]) -> None:
    """C3 AddCandidates: ``var`` takes one of ``values``."""
    csp.add(In(var, tuple(values)))


def add_stage_fuse(csp: CSP, size: str, position: str, sizes: Sequence[Operand]) -> None:
    """C4 AddStageFuse: an attached stage's tile size is the one at its chosen location."""
    csp.add(Select(size, position, tuple(sizes)))


def add_permutation(csp: CSP, positions: Sequence[str]) -> None:
    """Loop order: the ``n`` position variables (each in ``1 .. n``) hold a permutation, by
    SUM ``== n(n+1)/2`` and PROD ``== n!`` (unique to the permutations for ``n <= 7``)."""
    n = len(positions)
    csp.add(Sum(n * (n + 1) // 2, tuple(positions)))
    csp.add(Prod(math.factorial(n), tuple(positions)))


def add_dla_specific(csp: CSP, var: str, value: Operand) -> None:
    """C6 AddDLASpecific (intrinsic part): a split part equals the intrinsic's tile extent
    (a constant, or the variable that chooses among an intrinsic group's shapes)."""
    csp.add(Eq(var, value))
