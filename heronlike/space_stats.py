"""How large a schedule space is: variables, constraints, knobs and valid assignments.

Heron (ASPLOS'23, Table 5) reports the variables and constraints its rules generate per operator;
:func:`space_size` gives the same counts for a heronlike CSP plus what they describe: the knobs
by topology (split factors, loop orders, categorical choices, other) and an estimate of log10 of
the number of valid knob assignments.

The estimate is exact for the structure and sampled for the limits: the *structured* size is
the product, over split loops, of the number of ordered factorisations whose parts are
candidates of their knobs, times ``n!`` per loop order, times the candidates of every other
knob; a uniform sample of that product is completed (non-knob variables derived) and checked
against every constraint (capacities, vector widths, core counts), and the valid fraction
scales the structured size. With no valid sample, the result is an upper bound
(``log10(structured / samples)``) and says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .csp import CSP


@dataclass(frozen=True)
class SpaceSize:
    """Counts of one CSP (see the module docstring).

    Attributes:
        variables, constraints, knobs: counts (Heron Table 5 counts variables and constraints).
        split_knobs, order_knobs, categorical_knobs, other_knobs: knobs by topology.
        log10_structured: log10 of the split × order × candidate product.
        valid_fraction: of ``samples`` uniform draws from that product, the valid share.
        log10_valid: log10 of the estimated valid assignments; an upper bound when
            ``upper_bound`` (no valid draw).
    """

    variables: int
    constraints: int
    knobs: int
    split_knobs: int
    order_knobs: int
    categorical_knobs: int
    other_knobs: int
    log10_structured: float
    samples: int
    valid_fraction: float
    log10_valid: float
    upper_bound: bool


def space_size(csp: CSP, samples: int = 2000, seed: int = 0) -> SpaceSize:
    """Count ``csp``'s variables, constraints and knobs, and estimate its valid assignments.

    Args:
        csp: the space's CSP.
        samples: uniform draws from the structured product used for the valid fraction.
        seed: their random seed.

    Raises:
        ValueError: if ``samples < 1``.
    """
    from .explore.common import Completer, factorizations, split_groups

    if samples < 1:
        raise ValueError(f"samples must be >= 1, got {samples}")
    rng = np.random.default_rng(seed)
    knobs = csp.knobs
    orders = csp.perm_groups
    in_order = {k for g in orders for k in g}
    splits = [(names, total) for names, total in split_groups(csp) if not set(names) & in_order]
    in_split = {k for names, _ in splits for k in names}
    rest = [k for k in knobs if k not in in_split and k not in in_order]

    tables: list[tuple[tuple[str, ...], list[tuple[int, ...]]]] = []
    for names, total in splits:
        allowed = [set(csp.candidates(k)) for k in names]
        rows = [
            f
            for f in factorizations(total, len(names))
            if all(v in allowed[i] for i, v in enumerate(f))
        ]
        tables.append((names, rows))
    choices = {k: csp.candidates(k) for k in rest}
    log10 = sum(math.log10(max(1, len(rows))) for _, rows in tables)
    log10 += sum(math.log10(math.factorial(len(g))) for g in orders)
    log10 += sum(math.log10(max(1, len(v))) for v in choices.values())

    complete = Completer(csp)  # knob values -> the full assignment, or None if invalid
    valid = 0
    for _ in range(samples if complete.complete else 0):  # incomplete: only an upper bound
        a: dict[str, int] = {}
        for names, rows in tables:
            if not rows:
                break
            a.update(zip(names, rows[int(rng.integers(len(rows)))]))
        else:
            for g in orders:
                a.update(zip(g, (int(x) + 1 for x in rng.permutation(len(g)))))
            for k, values in choices.items():
                a[k] = int(values[int(rng.integers(len(values)))])
            if complete(a) is not None:
                valid += 1
    fraction = valid / samples
    upper = valid == 0
    log10_valid = log10 + math.log10(fraction if valid else 1 / samples)
    return SpaceSize(
        variables=len(csp.vars),
        constraints=len(csp.constraints),
        knobs=len(knobs),
        split_knobs=len(in_split),
        order_knobs=len(in_order),
        categorical_knobs=sum(1 for k in rest if k in set(csp.categorical)),
        other_knobs=sum(1 for k in rest if k not in set(csp.categorical)),
        log10_structured=log10,
        samples=samples,
        valid_fraction=fraction,
        log10_valid=log10_valid,
        upper_bound=upper,
    )
