"""Skipping the zero padding: the knob and block annotation that :mod:`heronlike.postproc` acts on.

A multiply-accumulate stage ``C += A * B`` whose ``A`` (or ``B``) is a zero-padding stage adds
nothing for the elements that lie in the padding (a convolution's padding taps). TIR reductions
have constant bounds, so the schedule cannot leave those taps out; the postprocessing guards
them with ``if``s instead, where this helper's annotation asks
(:data:`~heronlike.postproc.GUARD_PLACES`). ``outer`` guards (outside every unrolled loop) never
measured more than 1 % slower than none. ``all`` (also inside the unrolled register tile, in a
boundary version of the loop nest) ran 0.89–1.06× of ``outer`` on ten tuned schedules; offered
as a knob from 20 % of padding instead of 50 %, it made 16-trial tunes 0.93× slower (9 of 10),
the search spending trials on a space twice the size (Zen 5, int8; docs/results.md, "Skipping
the padding taps"). As branch-free versions per way a tile reads the padding (2026-12-06),
``all`` ran 0.74–1.26× of ``outer`` on 14 picks of an Emerald Rapids Xeon: 1.23× on C3D5,
below 1 on the 56 × 56 convolutions: which place is faster depends on the schedule and the
machine, not on the share of padding alone. So since 2026-12-06 the place is a *finish* knob
(``<stage>.skip_padding``, :attr:`heronlike.csp.Var.finish`), settled by measurement rather than
searched: the explorers search with ``outer`` guards, and the session spends the last two
trials of the budget on the two fastest candidates with ``all`` guards (variant trials), so
the finish picks between both without a search space twice the size. It is a knob where at
least :data:`ALL_GUARDS_MIN_ZERO_SHARE` of the padded operand is padding; elsewhere the guards
are ``outer``.
"""

from __future__ import annotations

from heronlike.postproc import GUARD_PLACES, SKIP_ZERO_READS, zero_padding, zero_share
from heronlike.template import Choice, Sym

from .base import RuleContext

ALL_GUARDS_MIN_ZERO_SHARE = 0.2
"""The share of zeros in a padded operand from which ``all`` guards are a choice, settled at
the finish (a target may set its own: ``dlboost -all-guards=<share>``, read as
``target.all_guards_min_share``). Below it (a 56 × 56 convolution's 7 %, T3's 13 %, a 1-D
one's 1 %) ``all`` guards gained at most 6 % over ``outer`` ones in 10 measured picks on two
machines: not worth two trials of a small budget."""


def skip_padding(ctx: RuleContext, stage: str, block: Sym, operands: tuple[str, ...]) -> None:
    """Annotate ``block`` (the stage's update, its initialisation already decomposed: a
    multiply-accumulate of ``operands``) to skip the reads of every operand that is a
    zero-padding stage (module docstring); nothing when none is."""
    func = ctx.dag.func
    padded = [b for b in operands if zero_padding(func, b) is not None]
    if not padded:
        return
    buffers = ",".join(padded)
    threshold = getattr(ctx.target, "all_guards_min_share", ALL_GUARDS_MIN_ZERO_SHARE)
    if max(zero_share(func, b) for b in padded) < threshold:
        ctx.step("annotate", block, SKIP_ZERO_READS, f"outer:{buffers}")
        return
    doc = ", ".join(f"{i} {p}" for i, p in enumerate(GUARD_PLACES))
    knob = ctx.csp.var(
        f"{stage}.skip_padding",
        0,
        len(GUARD_PLACES) - 1,
        knob=True,
        finish=True,
        doc=f"where the zero-padding reads are skipped: {doc}",
    )
    values = tuple(f"{p}:{buffers}" for p in GUARD_PLACES)
    ctx.step("annotate", block, SKIP_ZERO_READS, Choice(knob, values))
