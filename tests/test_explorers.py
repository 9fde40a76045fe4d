"""Tests of the search explorers: random, cga, cga1, sa, ga, opevo (heronlike.explore)."""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Mapping

import networkx as nx
import numpy as np
import pytest

from heronlike import ops
from heronlike.cost_model import XGBCostModel, feature_names
from heronlike.csp import CSP, In, Le, Prod, Sum
from heronlike.explore import EXPLORERS, Explorer, Observation, explorer_class, make_explorer
from heronlike.explore.cga import crossover_constraints, mutate
from heronlike.explore.common import Completer
from heronlike.explore.opevo import (
    factor_graph,
    parameters,
    perm_graph,
    q_random_walk,
    walk_length_distribution,
)
from heronlike.explore.sa import acceptance_probability
from heronlike.sampler import RandSAT
from heronlike.space import generate_space

NAMES = ("random", "cga", "cga1", "sa", "ga", "opevo")
ROUNDS, BATCH = 4, 8


@functools.cache
def gemm_csp() -> CSP:
    return generate_space(ops.gemm(256, 256, 256, "int8"), "dlboost").csp


def oracle(a: Mapping[str, int]) -> float:
    """Synthetic throughput (op/s): smooth in log2 of four tile sizes, best at a valid point."""

    def lg(name: str) -> float:
        return math.log2(a[name])

    d = (
        (lg("C.v_i.S2") - 2) ** 2
        + lg("C.v_j.S2") ** 2
        + (lg("C.v_k.R1") - 3) ** 2
        + (lg("C.v_i.S1") - 3) ** 2
        + (a["C.write_back.pos"] - 1) ** 2
    )
    return 1e9 * (0.1 + math.exp(-d / 8))


def build(name: str, seed: int, csp: CSP | None = None, **options) -> Explorer:
    csp = csp if csp is not None else gemm_csp()
    return make_explorer(
        name,
        csp,
        RandSAT(csp, seed=seed),
        XGBCostModel(seed=seed),
        np.random.default_rng(seed),
        **options,
    )


def tune(ex: Explorer, rounds: int = ROUNDS, n: int = BATCH, score=oracle):
    """A miniature tune loop: propose, check, measure with ``score``, observe."""
    measured: set[tuple[int, ...]] = set()
    batches = []
    for _ in range(rounds):
        batch = ex.propose(n, exclude=frozenset(measured))
        assert len(batch) <= n
        keys = [ex.sampler.key(a) for a in batch]
        assert len(set(keys)) == len(keys), "duplicate proposals in one batch"
        assert not set(keys) & measured, "proposal already measured (in exclude)"
        for a in batch:
            assert ex.csp.violations(a) == [], a
        measured |= set(keys)
        batches.append(batch)
        ex.observe([Observation(a, score(a)) for a in batch])
    return batches


@functools.cache
def run(name: str, seed: int, repeat: int = 0) -> tuple[Explorer, list]:
    ex = build(name, seed)
    return ex, tune(ex)


# -- every explorer -------------------------------------------------------------------------------


def test_registry() -> None:
    assert set(NAMES) <= set(EXPLORERS)
    for name in NAMES:
        assert explorer_class(name).name == name


@pytest.mark.parametrize("name", NAMES)
def test_proposals_valid_distinct_new(name: str) -> None:
    ex, batches = run(name, 0)
    assert all(len(b) == BATCH for b in batches)
    keys = [ex.sampler.key(a) for b in batches for a in b]
    assert len(set(keys)) == len(keys)  # distinct across rounds too
    extra = {keys[0], keys[-1]}
    more = ex.propose(BATCH, exclude=frozenset(set(keys) | extra))
    assert 0 < len(more) <= BATCH
    assert not {ex.sampler.key(a) for a in more} & (set(keys) | extra)
    assert ex.propose(0, exclude=()) == []


@pytest.mark.parametrize("name", NAMES)
def test_seeded(name: str) -> None:
    _, first = run(name, 0)
    _, again = run(name, 0, repeat=1)
    _, other = run(name, 1)
    assert first == again
    assert first != other


@pytest.mark.parametrize("name", ["cga", "opevo"])
def test_improves(name: str) -> None:
    _, batches = run(name, 0)
    first = np.mean([oracle(a) for a in batches[0]])
    last = np.mean([oracle(a) for a in batches[-1]])
    assert last > first


# -- CGA -----------------------------------------------------------------------------------------


def test_crossover_child_contains_initial_csp() -> None:
    csp = gemm_csp()
    sampler = RandSAT(csp, seed=3)
    p1, p2 = sampler.sample(2)
    keys = ["C.v_i.S2", "C.L1.bytes", "C.v_k.R0", "C.write_back.pos"]
    cons = crossover_constraints(csp, keys, p1, p2, free=None)
    assert [c.var for c in cons] == keys
    assert all(isinstance(c, In) and set(c.values) == {p1[c.var], p2[c.var]} for c in cons)
    assert [c.var for c in crossover_constraints(csp, keys, p1, p2, free="C.v_k.R0")] == [
        "C.v_i.S2",
        "C.L1.bytes",
        "C.write_back.pos",
    ]
    child_csp = csp.extend(cons)
    assert child_csp.vars == csp.vars
    assert child_csp.constraints[: len(csp.constraints)] == csp.constraints
    added = child_csp.constraints[len(csp.constraints) :]
    assert all(isinstance(c, In) and c.var in keys for c in added)
    (child,) = sampler.sample(1, extra=cons)
    assert child_csp.violations(child) == [] and csp.violations(child) == []
    with pytest.raises(ValueError):
        crossover_constraints(csp, ["nope"], p1, p2)


def test_mutation_drops_exactly_one_in() -> None:
    cons = [In(f"v{i}", (1, 2)) for i in range(5)]
    rng = np.random.default_rng(0)
    dropped = set()
    for _ in range(50):
        out = mutate(cons, rng)
        assert len(out) == len(cons) - 1 and set(out) < set(cons)
        dropped |= set(cons) - set(out)
    assert dropped == set(cons)  # every position can be the mutation position
    assert mutate(cons, rng, prob=0.0) == cons
    assert mutate([], rng) == []


def test_cga_key_variables_follow_feature_importance() -> None:
    ex, _ = run("cga", 0)
    assert ex.cost_model.trained
    names = feature_names(ex.csp)
    imp = ex.cost_model.feature_importance(names, kind="weight")
    k = math.ceil(0.14 * len(names))
    expected = sorted(names, key=lambda v: (-imp[v], names.index(v)))[:k]
    assert ex.key_variables() == expected
    assert imp[expected[0]] > 0
    knob_ex = build("cga", 0, key_scope="knobs")
    knob_ex.cost_model = ex.cost_model
    knob_keys = knob_ex.key_variables()
    assert len(knob_keys) == math.ceil(0.14 * len(ex.csp.knobs))
    assert set(knob_keys) <= set(ex.csp.knobs)
    random_ex, _ = run("cga1", 0)  # CGA-1: random key variables even when trained
    assert len({tuple(random_ex.key_variables()) for _ in range(10)}) > 1


# -- SA ------------------------------------------------------------------------------------------


def test_metropolis_acceptance() -> None:
    for delta, t in ((-0.1, 0.05), (-1.0, 2.0), (-0.01, 0.01)):
        assert acceptance_probability(delta, t) == pytest.approx(math.exp(delta / t))
    assert acceptance_probability(0.0, 0.1) == 1.0
    assert acceptance_probability(0.3, 0.1) == 1.0
    assert acceptance_probability(-0.1, 0.0) == 0.0


def test_sa_neighbours_change_one_knob_or_split() -> None:
    ex = build("sa", 5)
    groups = [set(p.knobs) for p in parameters(ex.csp)]
    (a,) = ex.sampler.sample(1)
    for _ in range(20):
        b = ex.neighbour(a)
        assert b is not None and ex.csp.violations(b) == []
        changed = {k for k in ex.csp.knobs if a[k] != b[k]}
        assert changed and any(changed <= g for g in groups)


# -- GA ------------------------------------------------------------------------------------------


def test_ga_counts_invalid_children() -> None:
    ex, _ = run("ga", 0)
    assert 0 < ex.invalid_children < ex.children


def test_completer_matches_samples() -> None:
    csp = gemm_csp()
    complete = Completer(csp)
    assert complete.complete
    for a in RandSAT(csp, seed=2).sample(20):
        assert complete({k: a[k] for k in csp.knobs}) == a
    bad = {k: a[k] for k in csp.knobs}
    bad["C.v_i.S0"] *= 2  # breaks the split of v_i
    assert complete(bad) is None


# -- OpEvo ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("q", [0.3, 0.5, 0.7])
def test_q_random_walk_length(q: float) -> None:
    line = nx.DiGraph(list(zip(range(200), range(1, 201))))  # end node == number of steps
    rng = np.random.default_rng(0)
    steps = np.array([q_random_walk(line, 0, q, rng) for _ in range(20000)])
    assert steps.mean() == pytest.approx(q / (1 - q), rel=0.05)
    dist = walk_length_distribution(q, 5)
    assert dist.sum() == pytest.approx(1.0)
    empirical = [np.mean(steps == k) for k in range(5)] + [np.mean(steps >= 5)]
    assert np.allclose(empirical, dist, atol=0.015)


def test_q_random_walk_end_distribution_on_path() -> None:
    path, q, start = nx.path_graph(5), 0.5, 2
    rng = np.random.default_rng(1)
    ends = [q_random_walk(path, start, q, rng) for _ in range(20000)]
    empirical = np.bincount(ends, minlength=5) / len(ends)
    assert empirical.sum() == pytest.approx(1.0)
    # exact: sum_k (1 - q) q^k P^k[start] for the uniform-neighbour walk
    adj = nx.to_numpy_array(path, nodelist=range(5))
    step = adj / adj.sum(axis=1, keepdims=True)
    exact, state = np.zeros(5), np.eye(5)[start]
    for k in range(200):
        exact += (1 - q) * q**k * state
        state = state @ step
    assert np.allclose(empirical, exact, atol=0.015)
    with pytest.raises(ValueError):
        q_random_walk(path, 99, q, rng)
    assert q_random_walk(path, 0, 0.0, rng) == 0


def test_factor_graph_moves_one_prime() -> None:
    graph = factor_graph(72, 3)
    assert graph.number_of_nodes() == 10 * 6  # 2^3 over 3 parts x 3^2 over 3 parts
    for f, g in graph.edges:
        assert math.prod(f) == math.prod(g) == 72
        diff = [i for i in range(3) if f[i] != g[i]]
        assert len(diff) == 2
        i, j = diff if f[diff[0]] > g[diff[0]] else diff[::-1]  # the part i gives p to part j
        p = f[i] // g[i]
        assert p in (2, 3) and f[i] == g[i] * p and g[j] == f[j] * p  # one prime factor moved
    restricted = factor_graph(64, 2, [{1, 2, 4, 8}, set(range(1, 65))])
    assert set(restricted.nodes) == {(1, 64), (2, 32), (4, 16), (8, 8)}
    assert restricted.degree((8, 8)) == 1


def test_perm_graph_transpositions() -> None:
    graph = perm_graph([0, 1, 2, 3])
    assert graph.number_of_nodes() == 24
    for f, g in graph.edges:
        diff = [i for i in range(4) if f[i] != g[i]]
        assert len(diff) == 2 and f[diff[0]] == g[diff[1]] and f[diff[1]] == g[diff[0]]
    assert all(d == 6 for _, d in graph.degree)
    adjacent = perm_graph([0, 1, 2, 3], adjacent=True)
    for f, g in adjacent.edges:
        i, j = [i for i in range(4) if f[i] != g[i]]
        assert j == i + 1
    assert all(d == 3 for _, d in adjacent.degree)


def test_opevo_parameters_of_gemm() -> None:
    params = parameters(gemm_csp())
    kinds = {p.knobs: p.kind for p in params}
    assert kinds[("C.v_i.S0", "C.v_i.S1", "C.v_i.S2")] == "factor"
    assert kinds[("C.v_j.S0", "C.v_j.S1", "C.v_j.S2")] == "factor"  # 256 / T(16) = 16
    assert kinds[("C.write_back.pos",)] == "discrete"
    assert sorted(k for p in params for k in p.knobs) == sorted(gemm_csp().knobs)
    j = next(p for p in params if p.knobs[0] == "C.v_j.S0")
    assert all(math.prod(node) == 16 for node in j.graph.nodes)
    choice = parameters(gemm_csp(), position_topology="choice")
    assert next(p for p in choice if p.knobs == ("C.write_back.pos",)).kind == "choice"


def tight_csp() -> CSP:
    """Loops of extent 64 and 48 split in 3 levels; the inner tile holds <= 32 points."""
    csp = CSP()
    for loop, extent in (("i", 64), ("j", 48)):
        parts = tuple(csp.var(f"{loop}{k}", 1, extent, knob=True) for k in range(3))
        csp.add(Prod(extent, parts))
    csp.var("tile", 1, 64 * 48)
    csp.add(Prod("tile", ("i2", "j2")))
    csp.add(Le("tile", 32))
    return csp


def test_opevo_counts_invalid_walks() -> None:
    def score(a: Mapping[str, int]) -> float:  # best at the capacity limit: walks overshoot
        return 1e9 * (1 + math.log2(a["tile"]))

    ex = build("opevo", 0, csp=tight_csp())
    tune(ex, rounds=4, n=8, score=score)
    assert ex.invalid_walks > 0 and ex.walks > ex.invalid_walks
    assert 0 < ex.invalid_rate < 1


def test_opevo_perm_parameter() -> None:
    csp = CSP()
    order = tuple(csp.var(f"o{i}", 0, 2, knob=True) for i in range(3))
    csp.add(Sum(3, order))  # with the product below: exactly the permutations of 0, 1, 2
    csp.var("p", 0, 0)
    csp.add(Prod("p", order))
    csp.var("s", 1, 2, knob=True)

    def score(a: Mapping[str, int]) -> float:
        return 1e9 * (1 + a["o0"] + 2 * a["o1"] + a["s"])

    ex = build("opevo", 0, csp=csp, perm_groups=(order,))
    assert [p.kind for p in ex.params] == ["perm", "discrete"]
    batches = tune(ex, rounds=3, n=4, score=score)
    for a in itertools.chain.from_iterable(batches):
        assert sorted(a[k] for k in order) == [0, 1, 2]
    with pytest.raises(ValueError):
        build("opevo", 0, csp=csp, perm_groups=(("o0", "p"),))
