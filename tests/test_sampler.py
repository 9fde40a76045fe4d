"""RandSAT (Heron ASPLOS'23 §5): validity, coverage, distinctness, determinism, errors.

Every sample is re-checked with ``CSP.violations`` (plain Python, independent of CP-SAT), and on
tiny spaces the samples are compared with a brute-force enumeration of all valid assignments, so
an encoding that is too strict (missing solutions) fails as surely as one that is too loose.
"""

from __future__ import annotations

import importlib.util
import itertools
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from heronlike.csp import CSP, Eq, In, Le, Prod, Select, Sum
from heronlike.errors import InfeasibleSpaceError, SolverTimeoutError
from heronlike.sampler import RandSAT, SamplerStats, solve_one


def brute_force(csp: CSP) -> set[tuple[int, ...]]:
    """Knob tuples of every valid assignment, by enumerating all variable ranges."""
    names = list(csp.vars)
    ranges = [range(v.lo, v.hi + 1) for v in csp.vars.values()]
    assert math.prod(len(r) for r in ranges) <= 200_000, "space too big to enumerate"
    keys = set()
    for values in itertools.product(*ranges):
        a = dict(zip(names, values))
        if not csp.violations(a):
            keys.add(tuple(a[k] for k in csp.knobs))
    return keys


def sample_all(
    csp: CSP, seed: int = 0, smart_hints: bool = True
) -> tuple[list[dict[str, int]], RandSAT]:
    size = len(brute_force(csp))
    sampler = RandSAT(csp, seed=seed)
    if not smart_hints:  # uniform knob hints only: CP-SAT must repair most of them
        sampler._plan.factorizers = []
        sampler._plan.complete = False
    return sampler.sample(size + 5, max_draws=60 * size + 60), sampler


def knobs(csp: CSP, *specs: tuple[str, int, int]) -> list[str]:
    return [csp.var(name, lo, hi, knob=True) for name, lo, hi in specs]


def _prod_chain() -> CSP:
    csp = CSP()
    x, y, z = knobs(csp, ("x", 1, 12), ("y", 1, 12), ("z", 1, 12))
    csp.add(Prod(12, (x, y, z)))
    return csp


def _prod_derived() -> CSP:
    csp = CSP()
    x, y = knobs(csp, ("x", 1, 6), ("y", 1, 6))
    t = csp.var("t", 1, 40)
    csp.add(Prod(t, (x, 2, y)))
    csp.add(Le(t, 20))
    return csp


def _sum() -> CSP:
    csp = CSP()
    x, y, z = knobs(csp, ("x", 0, 5), ("y", 0, 5), ("z", -3, 3))
    t = csp.var("t", -20, 20)
    csp.add(Sum(t, (x, y, z, 1), (2, -3, 1, 1)))
    csp.add(Sum(4, (x, z)))
    csp.add(Le(0, t))
    return csp


def _eq() -> CSP:
    csp = CSP()
    x, y, z = knobs(csp, ("x", 1, 8), ("y", 1, 8), ("z", 1, 8))
    csp.add(Eq(x, y))
    csp.add(Eq(4, z))
    csp.add(Prod(16, (x, z)))
    return csp


def _le() -> CSP:
    csp = CSP()
    x, y = knobs(csp, ("x", 0, 9), ("y", 0, 9))
    csp.add(Le(x, y))
    csp.add(Le(y, 6))
    csp.add(Le(2, x))
    return csp


def _in() -> CSP:
    csp = CSP()
    x, y = knobs(csp, ("x", 0, 20), ("y", 1, 16))
    csp.add(In(x, (1, 3, 5, 7, 99)))
    csp.add(In(x, (3, 5, 7, 8)))
    csp.add(In(y, (1, 2, 4, 8, 16)))
    csp.add(Le(y, 8))
    return csp


def _select() -> CSP:
    csp = CSP()
    i, x, y = knobs(csp, ("i", -1, 4), ("x", 1, 4), ("y", 1, 4))
    t = csp.var("t", 0, 9)
    csp.add(Select(t, i, (x, 5, y)))
    csp.add(Le(t, 3))
    csp.add(Select(2, "i", (y, 2, x)))
    return csp


def _free_derived() -> CSP:
    """A non-knob variable no constraint defines: the hints cannot be completed in Python."""
    csp = CSP()
    x, y = knobs(csp, ("x", 1, 12), ("y", 1, 12))
    free = csp.var("free", 0, 20)
    csp.add(Prod(12, (x, y)))
    csp.add(Le(free, x))
    csp.add(Le(y, free))
    return csp


def _shared_knob() -> CSP:
    """Two split PRODs sharing a knob, and a capacity over both."""
    csp = CSP()
    a, b, c = knobs(csp, ("a", 1, 16), ("b", 1, 8), ("c", 1, 8))
    csp.add(Prod(16, (a, b)))
    csp.add(Prod(8, (b, c)))
    tile = csp.var("tile", 1, 64)
    csp.add(Prod(tile, (a, c)))
    csp.add(Le(tile, 8))
    return csp


ENCODINGS = {
    "prod_chain": _prod_chain,
    "prod_derived": _prod_derived,
    "sum": _sum,
    "eq": _eq,
    "le": _le,
    "in": _in,
    "select": _select,
    "free_derived": _free_derived,
    "shared_knob": _shared_knob,
}


@pytest.mark.parametrize("smart_hints", [True, False], ids=["smart", "uniform"])
@pytest.mark.parametrize("build", ENCODINGS.values(), ids=ENCODINGS.keys())
def test_encoding_is_sound_and_complete(build, smart_hints: bool) -> None:
    csp = build()
    expected = brute_force(csp)
    assert expected, "test space must be feasible"
    samples, sampler = sample_all(csp, smart_hints=smart_hints)
    for a in samples:
        assert set(a) == set(csp.vars)
        assert csp.violations(a) == []
    keys = [sampler.key(a) for a in samples]
    assert len(set(keys)) == len(keys)
    assert set(keys) == expected


def test_prod_chain_has_all_ordered_factorisations() -> None:
    samples, _ = sample_all(_prod_chain())
    # 12 = 2^2 * 3 over 3 ordered factors: C(4, 2) * C(3, 2) = 18 tuples
    assert len(samples) == 18


@st.composite
def split_csps(draw: st.DrawFn) -> CSP:
    """Random split spaces: constant extents split into 2-4 knob levels, and capacities."""
    csp = CSP()
    inner: list[str] = []
    for axis in range(draw(st.integers(1, 3))):
        extent = draw(st.sampled_from([1, 6, 12, 16, 24, 30, 64, 72, 128, 256]))
        levels = draw(st.integers(2, 4))
        names = knobs(csp, *[(f"a{axis}_{j}", 1, extent) for j in range(levels)])
        csp.add(Prod(extent, tuple(names)))
        divisors = tuple(d for d in range(1, extent + 1) if extent % d == 0)
        if draw(st.booleans()):
            csp.add(In(names[0], divisors))
        if draw(st.booleans()):
            csp.add(Eq(names[-1], draw(st.sampled_from(divisors))))
        inner += names[max(1, levels - 2) :]  # names[0] can always absorb the rest
    fixed = math.prod(
        c.b for c in csp.constraints if isinstance(c, Eq) and c.a in inner and isinstance(c.b, int)
    )
    tile = csp.var("tile", 1, 1 << 24)
    csp.add(Prod(tile, tuple(inner)))
    csp.add(Le(tile, fixed * draw(st.integers(1, 64))))
    if draw(st.booleans()):
        bytes_ = csp.var("bytes", 0, 1 << 26)
        csp.add(Sum(bytes_, (tile, inner[0]), (4, 1)))
        csp.add(Le(bytes_, 4 * fixed * 64 + 256))
    return csp


@settings(max_examples=40, deadline=None)
@given(csp=split_csps(), seed=st.integers(0, 2**32 - 1))
def test_random_split_spaces_give_valid_distinct_samples(csp: CSP, seed: int) -> None:
    sampler = RandSAT(csp, seed=seed)
    samples = sampler.sample(20)
    assert samples
    for a in samples:
        assert csp.violations(a) == []
    keys = [sampler.key(a) for a in samples]
    assert len(set(keys)) == len(keys)
    assert sampler.stats.timeouts == 0


def gemm_like_csp() -> CSP:
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "randsat_throughput.py"
    spec = importlib.util.spec_from_file_location("randsat_throughput", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.gemm_like_csp()


def test_gemm_like_space_many_distinct_valid() -> None:
    csp = gemm_like_csp()
    sampler = RandSAT(csp, seed=3)
    samples = sampler.sample(300)
    assert len(samples) == 300
    assert all(csp.violations(a) == [] for a in samples)
    assert len({sampler.key(a) for a in samples}) == 300
    # the hints must spread the knobs, not just the solver seed
    assert len({a["m0"] for a in samples}) >= 6
    assert {a["cache_write_pos"] for a in samples} == {0, 1}
    assert sampler.stats.draws < 400 and sampler.stats.timeouts == 0


def test_hints_are_mostly_valid_on_gemm_like_space() -> None:
    csp = gemm_like_csp()
    plan = RandSAT(csp, seed=0)._plan
    assert len(plan.factorizers) == 3  # one per split axis, fixed intrinsic levels included
    rng = np.random.default_rng(0)
    first_try = [plan.hints(rng, tries=1) for _ in range(200)]
    assert sum(csp.violations(h) == [] for h in first_try if len(h) == len(csp.vars)) > 40
    assert all(csp.violations(plan.hints(rng)) == [] for _ in range(50))


def test_reproducible_by_seed() -> None:
    csp = gemm_like_csp()
    first = RandSAT(csp, seed=7)
    again = RandSAT(csp, seed=7)
    other = RandSAT(csp, seed=8)
    run = [first.sample(20), first.sample(5, extra=[In("unroll", (0, 16))])]
    assert [again.sample(20), again.sample(5, extra=[In("unroll", (0, 16))])] == run
    assert other.sample(20) != run[0]


def test_exclude_is_respected() -> None:
    csp = _le()
    sampler = RandSAT(csp, seed=1)
    first = sampler.sample(6)
    taken = {sampler.key(a) for a in first}
    rest = sampler.sample(100, exclude=taken, max_draws=2000)
    assert {sampler.key(a) for a in rest} == brute_force(csp) - taken
    assert sampler.stats.duplicates > 0


def test_extra_is_respected_and_csp_unchanged() -> None:
    csp = _prod_chain()
    before = list(csp.constraints)
    sampler = RandSAT(csp, seed=2)
    extra = [In("x", (2, 3)), Le("z", 2)]
    expected = brute_force(csp.extend(extra))
    restricted = sampler.sample(len(expected), extra=extra, max_draws=500)
    assert csp.constraints == before
    assert {sampler.key(a) for a in restricted} == expected
    free = sampler.sample(18, max_draws=1000)
    assert {sampler.key(a) for a in free} == brute_force(csp)


def test_extra_with_unknown_variable_raises() -> None:
    sampler = RandSAT(_le(), seed=0)
    with pytest.raises(ValueError, match="unknown variable"):
        sampler.sample(3, extra=[In("nope", (1,))])


def test_infeasible_space_raises() -> None:
    csp = _prod_chain()
    csp.add(Le("x", 1))
    csp.add(Le("y", 1))
    csp.add(Le("z", 11))
    with pytest.raises(InfeasibleSpaceError, match="3 variables"):
        RandSAT(csp, seed=0).sample(1)
    with pytest.raises(InfeasibleSpaceError):
        RandSAT(_le(), seed=0).sample(1, extra=[Le("y", 1)])


def test_empty_in_or_false_constant_constraint_raises() -> None:
    csp = _le()
    csp.add(In("x", (17, 18)))
    with pytest.raises(InfeasibleSpaceError):
        RandSAT(csp, seed=0)
    csp = _le()
    csp.add(Le(3, 2))
    with pytest.raises(InfeasibleSpaceError):
        RandSAT(csp, seed=0)


def test_timeout_is_retried_then_raised() -> None:
    sampler = RandSAT(_free_derived(), seed=0, time_limit_s=1e-9, max_retries=2)
    with pytest.raises(SolverTimeoutError):
        sampler.sample(3)
    assert sampler.stats.timeouts == 3
    assert sampler.stats.retries == 2
    assert sampler.stats.solutions == 0


def test_stats_and_max_draws() -> None:
    csp = _le()  # 15 valid assignments
    sampler = RandSAT(csp, seed=4)
    assert sampler.sample(0) == []
    got = sampler.sample(100, max_draws=30)
    assert sampler.stats.draws == 30
    assert sampler.stats.solutions == 30
    assert sampler.stats.duplicates == 30 - len(got)
    assert sampler.stats.solve_seconds > 0
    assert sampler.stats.timeouts == sampler.stats.retries == 0
    assert isinstance(sampler.stats, SamplerStats)


def test_key_follows_knob_order() -> None:
    csp = _prod_derived()
    sampler = RandSAT(csp, seed=0)
    assert sampler.key({"y": 3, "t": 12, "x": 2}) == (2, 3)


def test_solve_one() -> None:
    csp = _prod_derived()
    a = solve_one(csp, seed=0)
    assert a is not None and csp.violations(a) == []
    assert solve_one(csp, seed=0, hints={"x": 5, "y": 2, "t": 20}) == {"x": 5, "y": 2, "t": 20}
    b = solve_one(csp, seed=0, extra=[Eq("x", 3)])
    assert b is not None and b["x"] == 3 and b["y"] in (1, 2, 3)
    with pytest.raises(ValueError, match="unknown"):
        solve_one(csp, seed=0, hints={"q": 1})
