"""SA and GA respect knob topologies (issue 13): loop orders move by swaps and are crossed over
whole, categorical knobs are re-drawn, and the explorers count their moves by topology.

The spaces are real (llvm float32 conv2d on an AVX-512 `-mcpu`, the same space on every host:
a loop order of three tile loops; DL Boost int8 GEMM: an order of two) and cheap to build;
every test runs in about a second.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping

import numpy as np
import pytest

from heronlike import ops
from heronlike.cost_model import XGBCostModel
from heronlike.csp import CSP
from heronlike.explore import Explorer, Observation, make_explorer
from heronlike.explore.common import (
    TOPOLOGY_KINDS,
    choice_move,
    knob_topology,
    swap_move,
)
from heronlike.explore.opevo import parameters
from heronlike.sampler import RandSAT
from heronlike.space import generate_space

SPACES = {
    "c2d-llvm": lambda: (
        generate_space(
            ops.c2d(1, 14, 14, 32, 32, 3, 3, 1, 1, 1, "float32"), "llvm -mcpu=skylake-avx512"
        ).csp
    ),
    "gemm-dlboost": lambda: generate_space(ops.gemm(256, 256, 256, "int8"), "dlboost").csp,
}


@functools.cache
def space(name: str) -> CSP:
    return SPACES[name]()


def order(csp: CSP, a: Mapping[str, int]) -> tuple[int, ...]:
    (group,) = csp.perm_groups
    return tuple(int(a[k]) for k in group)


def is_order(csp: CSP, a: Mapping[str, int]) -> bool:
    return sorted(order(csp, a)) == list(range(1, len(csp.perm_groups[0]) + 1))


def score(csp: CSP, a: Mapping[str, int]) -> float:
    """Synthetic throughput: smooth in the tile sizes, with a preferred order and unroll depth."""
    (group,) = csp.perm_groups
    (unroll,) = csp.categorical
    tiles = [k for k in csp.knobs if k not in group and k != unroll and a[k] > 0]
    s = sum(math.log2(a[k]) * (i % 3 - 1) for i, k in enumerate(tiles))
    best_order = a[group[0]] == len(group)
    return 1e9 * (1 + 1 / (1 + (s - 3) ** 2) + 0.3 * best_order + 0.1 * (a[unroll] == 64))


def build(name: str, csp: CSP, seed: int, **options) -> Explorer:
    return make_explorer(
        name,
        csp,
        RandSAT(csp, seed=seed),
        XGBCostModel(seed=seed),
        np.random.default_rng(seed),
        **options,
    )


def test_knob_topology_matches_the_csp_and_opevo() -> None:
    csp = space("c2d-llvm")
    topo = knob_topology(csp)
    assert topo.perm == csp.perm_groups and len(topo.perm[0]) == 3
    assert {k for k in csp.knobs if topo.kind(k) == "choice"} == set(csp.categorical)
    assert set(topo.kinds) == set(csp.knobs) and set(topo.kinds.values()) == set(TOPOLOGY_KINDS)
    for p in parameters(csp):  # OpEvo's parameters are built from the same classification
        assert {topo.kind(k) for k in p.knobs} == {p.kind}
        if p.kind in ("perm", "factor"):
            assert all(topo.group(k) == p.knobs for k in p.knobs)


def test_swap_and_choice_moves() -> None:
    rng = np.random.default_rng(0)
    group = ("a", "b", "c", "d")
    values = {"a": 3, "b": 1, "c": 4, "d": 2, "x": 7}
    pairs = set()
    for _ in range(200):
        got = swap_move(values, group, rng)
        assert got is not None and set(got) == set(group)
        assert sorted(got.values()) == [1, 2, 3, 4]  # still a permutation
        changed = {k for k in group if got[k] != values[k]}
        assert len(changed) == 2
        pairs.add(frozenset(changed))
        assert "b" in {k for k in group if swap_move(values, group, rng, knob="b")["b"] != 1}
    assert len(pairs) == 6  # every transposition of 4 positions occurs
    assert swap_move({"a": 1, "b": 1}, ("a", "b"), rng) is None
    drawn = [choice_move(16, (0, 16, 64, 512), rng) for _ in range(100)]
    assert set(drawn) == {0, 64, 512}
    assert choice_move(16, (16,), rng) is None


@pytest.mark.parametrize("name", list(SPACES))
def test_sa_neighbours_swap_orders_and_redraw_categoricals(name: str) -> None:
    csp = space(name)
    (group,) = csp.perm_groups
    (unroll,) = csp.categorical
    ex = build("sa", csp, 0)
    (a,) = ex.sampler.sample(1)
    solves = 0
    sample = ex.sampler.sample

    def counted(*args, **kwargs):
        nonlocal solves
        solves += 1
        return sample(*args, **kwargs)

    ex.sampler.sample = counted  # type: ignore[method-assign]
    orders, depths = {order(csp, a)}, {a[unroll]}
    for _ in range(64):  # a random walk of 64 neighbour moves
        b = ex.neighbour(a)
        assert b is not None and csp.violations(b) == [] and is_order(csp, b)
        changed = {k for k in csp.knobs if a[k] != b[k]}
        if changed & set(group):  # a swap: two loops exchange positions, nothing else moves
            assert len(changed) == 2 and changed <= set(group)
        if unroll in changed:
            assert changed == {unroll}
        orders.add(order(csp, b))
        depths.add(b[unroll])
        a = b
    st = ex.stats()
    assert st["moves_perm"] > 0 and st["moves_choice"] > 0 and st["moves_factor"] > 0
    assert len(orders) > 1 and len(depths) > 1
    # swaps and re-draws are completed in Python: only the other moves ask RandSAT (CP-SAT)
    assert 0 < solves <= st["moves_factor"] + st["moves_discrete"] + st["invalid_moves"]
    attempts = 64 + st["invalid_moves"]  # an invalid swap is tried again, without a solve
    assert solves <= attempts - st["moves_perm"] - st["moves_choice"] < attempts


@pytest.mark.parametrize("crossover", ["one_point", "uniform"])
def test_ga_crossover_takes_an_order_whole(crossover: str) -> None:
    csp = space("c2d-llvm")
    ex = build("ga", csp, 0, crossover=crossover, mutation_prob=0.0)
    pool = ex.sampler.sample(40)
    p1 = pool[0]
    p2 = next(p for p in pool if order(csp, p) != order(csp, p1))
    got = {order(csp, ex.child(p1, p2)) for _ in range(64)}
    assert got == {order(csp, p1), order(csp, p2)}  # whole, from either parent
    assert tuple(csp.perm_groups[0]) in ex.genes
    assert sum(ex.stats()[f"mutations_{k}"] for k in TOPOLOGY_KINDS) == 0


def test_ga_mutation_swaps_orders_and_redraws_categoricals() -> None:
    csp = space("c2d-llvm")
    (unroll,) = csp.categorical
    ex = build("ga", csp, 0, mutation_prob=1.0)
    (p1,) = ex.sampler.sample(1)
    kids = [ex.child(p1, p1) for _ in range(64)]  # the parent itself, but for the mutation
    assert all(is_order(csp, c) for c in kids)  # a knob vector, before completion
    orders = {order(csp, c) for c in kids}
    assert len(orders) > 1  # only the mutation's swaps can change the parents' common order
    assert all(sum(x != y for x, y in zip(o, order(csp, p1))) in (0, 2) for o in orders)
    assert {c[unroll] for c in kids} - {p1[unroll]}  # categorical re-draws
    st = ex.stats()
    assert st["mutations_perm"] > 0 and st["mutations_choice"] > 0
    assert sum(st[f"mutations_{k}"] for k in TOPOLOGY_KINDS) == 64


@pytest.mark.parametrize("explorer", ["sa", "ga"])
@pytest.mark.parametrize("name", list(SPACES))
def test_proposals_are_orders_and_moves_are_counted(explorer: str, name: str) -> None:
    csp = space(name)
    ex = build(explorer, csp, 0)
    warm = ex.sampler.sample(16)
    ex.observe([Observation(a, score(csp, a)) for a in warm])
    got = ex.propose(64, exclude={ex.sampler.key(a) for a in warm})
    assert len(got) == 64
    assert all(csp.violations(a) == [] and is_order(csp, a) for a in got)
    assert len({order(csp, a) for a in got}) > 1
    st = ex.stats()
    if explorer == "sa":
        assert st["moves_perm"] > 0 and st["moves_choice"] > 0
        assert sum(st[f"moves_{k}"] for k in TOPOLOGY_KINDS) == st["moves"]
        assert st["invalid_moves"] >= 0
    else:
        assert st["mutations_perm"] > 0 and st["mutations_choice"] > 0
        assert 0 <= st["invalid_children"] < st["children"]


def test_a_csp_without_orders_keeps_one_gene_per_knob() -> None:
    csp = CSP()
    for k in ("i0", "i1", "u"):
        csp.var(k, 1, 8, knob=True)
    topo = knob_topology(csp)
    assert topo.perm == () and set(topo.kinds.values()) == {"discrete"}
    assert topo.group("i0") == ("i0",)
    assert build("ga", csp, 0).genes == [("i0",), ("i1",), ("u",)]


@pytest.mark.parametrize("explorer", ["sa", "ga"])
def test_topology_moves_are_seeded(explorer: str) -> None:
    csp = space("c2d-llvm")

    def moves(seed: int) -> list[dict[str, int]]:
        ex = build(explorer, csp, seed, **({"mutation_prob": 1.0} if explorer == "ga" else {}))
        a, b = ex.sampler.sample(2)
        out = []
        for _ in range(16):
            if explorer == "sa":
                a = ex.neighbour(a)
                out.append(a)
            else:
                out.append(ex.child(a, b))
        return out

    first = moves(0)
    assert first == moves(0) and first != moves(1)
