"""Tests of the explorers (heronlike.explore): random, cga, cga1, sa, ga, opevo, flextensor."""

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
from heronlike.csp import CSP, In, Le, Prod, Select, Sum
from heronlike.explore import EXPLORERS, Explorer, Observation, explorer_class, make_explorer
from heronlike.explore.cga import CGAExplorer, crossover_constraints, mutate
from heronlike.explore.common import Completer, KnobDrawer
from heronlike.explore.opevo import (
    factor_graph,
    parameters,
    perm_graph,
    q_random_walk,
    walk_length_distribution,
)
from heronlike.explore.sa import acceptance_probability
from heronlike.features import alias_groups
from heronlike.sampler import RandSAT
from heronlike.space import generate_space

NAMES = ("random", "cga", "cga1", "sa", "ga", "opevo", "flextensor")
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


def test_alias_groups_one_per_quantity() -> None:
    csp = gemm_csp()
    names = feature_names(csp)
    groups = alias_groups(names, np.log2(features_of(csp)))
    of = {n: i for i, g in enumerate(groups) for n in g}
    assert of["C.v_i.S2"] == of["C.v_i@S1"] == of["C.v_i@R0"]  # PROD with one factor
    assert of["C.C@R0.elems"] == of["C.register.bytes"]  # 4 * elems + 320
    assert of["C.v_i.S0"] == of["C.v_i@S0"]  # 256 / @S0: the same quantity, reversed
    assert of["C.v_i.S1"] != of["C.v_i.S2"] and of["C.v_k.R1"] != of["C.L1.bytes"]
    assert "C.v_j.T" not in of  # constant: never split on
    assert sorted(n for g in groups for n in g) == sorted(set(of))


def features_of(csp: CSP) -> np.ndarray:
    a = RandSAT(csp, seed=0).sample(200)
    return np.array([[x[n] for n in csp.vars] for x in a], dtype=np.float64) + 1.0


def test_cga_key_variables_follow_grouped_importance() -> None:
    ex, _ = run("cga", 0)
    assert isinstance(ex, CGAExplorer) and ex.cost_model.trained
    reps = [r for r, _ in ex.groups]
    members = [m for _, m in ex.groups]
    assert len(set(reps)) == len(reps)
    imp = ex.cost_model.grouped_importance(ex.featurizer.names, members, kind="gain")
    k = math.ceil(0.14 * len(ex.csp.vars))
    expected = [reps[i] for i in sorted(range(len(reps)), key=lambda i: (-imp[i], i))[:k]]
    assert ex.key_variables() == expected and imp[reps.index(expected[0])] > 0
    of = {n: i for i, (_, m) in enumerate(ex.groups) for n in m}
    assert len({of[v] for v in expected}) == k  # no two keys are one quantity
    i_s2 = of["C.v_i.S2"]
    assert ex.groups[i_s2][0] == "C.v_i.S2"  # a quantity is represented by its knob
    assert {"C.v_i@S1", "C.v_i@R0"} <= set(ex.groups[i_s2][1])
    weight = build("cga", 0, importance_kind="weight")
    weight.cost_model = ex.cost_model
    w = ex.cost_model.grouped_importance(ex.featurizer.names, members, kind="weight")
    assert weight.key_variables() == [
        reps[i] for i in sorted(range(len(reps)), key=lambda i: (-w[i], i))[:k]
    ]
    raw = build("cga", 0, dealias=False)  # per feature, as the ASPLOS artifact
    raw.cost_model = ex.cost_model
    assert len(raw.groups) == len(ex.csp.vars)
    knob_ex = build("cga", 0, key_scope="knobs")
    knob_ex.cost_model = ex.cost_model
    assert set(knob_ex.key_variables()) <= set(ex.csp.knobs)
    random_ex, _ = run("cga1", 0)  # CGA-1: random quantities even when trained
    assert len({tuple(random_ex.key_variables()) for _ in range(10)}) > 1
    assert set(random_ex.key_variables()) <= set(reps)
    assert random_ex.random_key_generations > 0 and ex.stats()["random_key_generations"] == 0
    with pytest.raises(ValueError, match="importance_kind"):
        build("cga", 0, importance_kind="splits")


def test_cga_children_are_drawn_or_solved_by_cpsat() -> None:
    ex, _ = run("cga", 0)
    st = ex.stats()
    assert st["children"] == st["child_draws"] + st["child_solves"] + st["child_failures"] > 0
    only_cpsat = build("cga", 1, child_tries=0, pop_size=16, generations=2)
    tune(only_cpsat, rounds=3)
    st = only_cpsat.stats()
    assert st["child_draws"] == 0 and st["child_solves"] > 0  # no draw: CP-SAT solves each
    assert st["child_failures"] <= st["children"] // 10
    dropped = build("cga", 1, child_tries=0, pop_size=16, generations=2, child_cpsat_limit=0)
    tune(dropped, rounds=3)
    assert dropped.stats()["child_failures"] == dropped.stats()["children"] > 0


def incomplete_csp() -> CSP:
    """A split of 64 plus ``slack``, a variable no constraint defines from the knobs."""
    csp = CSP()
    parts = tuple(csp.var(f"i{k}", 1, 64, knob=True) for k in range(3))
    csp.add(Prod(64, parts))
    csp.var("slack", 0, 8)
    csp.add(Le("slack", "i2"))
    return csp


def test_cga_incomplete_csp_is_solved_or_refused() -> None:
    csp = incomplete_csp()
    with pytest.raises(ValueError, match="not derivable"):
        build("cga", 0, csp=csp, child_cpsat_limit=0)
    ex = build("cga", 0, csp=csp, pop_size=8, generations=2, select_num=8)
    tune(ex, rounds=3, n=4, score=lambda a: 1e9 * a["i2"])
    st = ex.stats()
    assert st["child_solves"] > 0 and st["child_draws"] == 0
    assert st["child_failures"] <= st["children"] // 10  # not silently ε-greedy


def test_cga_survivors_and_round_size() -> None:
    union = build("cga", 2, pop_size=16, select_num=8, generations=2)
    tune(union, rounds=2)
    assert len(union._population) > 16  # children ∪ parents: no cut to pop_size
    cut = build("cga", 2, pop_size=16, select_num=8, generations=2, survivors="cut")
    tune(cut, rounds=2)
    assert len(cut._population) <= 16
    heron = build("cga", 3, pop_size=16, select_num=8, generations=1, round_size=16)
    tune(heron, rounds=3)  # rounds of 16 (untrained: RandSAT), each served over 2 batches
    children = heron.children
    assert children > 0
    batch = heron.propose(8, exclude=())
    assert len(batch) == 8 and heron.children == children  # served from the round's queue
    heron.propose(8, exclude=())
    assert heron.children > children  # queue spent: a new round


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


def four_topology_csp() -> CSP:
    """One split (factor), a loop order of 3 positions (perm), an ordered knob (discrete) and a
    compute location read as categorical (choice, with ``position_topology="choice"``)."""
    csp = CSP()
    parts = tuple(csp.var(f"i{k}", 1, 64, knob=True) for k in range(3))
    csp.add(Prod(64, parts))
    order = tuple(csp.var(f"o{k}", 1, 3, knob=True) for k in range(3))
    for o in order:
        csp.add(In(o, (1, 2, 3)))
    csp.add(Sum(6, order))
    csp.var("o.prod", 6, 6)
    csp.add(Prod("o.prod", order))
    csp.var("vec", 1, 16, knob=True)
    csp.add(In("vec", (1, 2, 4, 8, 16)))
    csp.var("pos", 0, 2, knob=True)
    csp.var("at", 1, 64)
    csp.add(Select("at", "pos", ("i0", "i1", "i2")))
    return csp


def four_score(a: Mapping[str, int]) -> float:
    d = (math.log2(a["i2"]) - 3) ** 2 + (a["o0"] - 3) ** 2 + (math.log2(a["vec"]) - 2) ** 2
    return 1e9 * (1 + a["pos"]) / (1 + d)


def test_opevo_walks_all_four_topologies() -> None:
    csp = four_topology_csp()
    ex = build("opevo", 0, csp=csp, perm_groups=(("o0", "o1", "o2"),), position_topology="choice")
    assert sorted(p.kind for p in ex.params) == ["choice", "discrete", "factor", "perm"]
    batches = tune(ex, rounds=5, n=8, score=four_score)
    st = ex.stats()
    for kind in ("factor", "perm", "discrete", "choice"):
        assert st[f"walks_{kind}"] > 0 and 0 < st[f"moved_{kind}"] < st[f"walks_{kind}"], kind
    for a in itertools.chain.from_iterable(batches):
        assert sorted(a[k] for k in ("o0", "o1", "o2")) == [1, 2, 3]  # orders stay orders
    assert not ex.cost_model.trained  # model-free (the paper's OpEvo)
    guided = build("opevo", 0, csp=csp, guided=True, position_topology="choice")
    tune(guided, rounds=3, n=8, score=four_score)
    assert guided.cost_model.trained and guided.stats()["generations"] > 0


def test_opevo_reads_topologies_declared_by_the_csp() -> None:
    try:
        csp = CSP()
        order = tuple(csp.var(f"o{k}", 1, 3, knob=True, topology="perm:C.o") for k in range(3))
        csp.var("unroll", 0, 512, knob=True, topology="categorical")
    except TypeError:
        pytest.skip("this CSP has no knob topologies yet")
    for o in order:
        csp.add(In(o, (1, 2, 3)))
    csp.add(Sum(6, order))
    csp.add(In("unroll", (0, 16, 64, 512)))
    kinds = {p.knobs: p.kind for p in parameters(csp)}
    assert kinds == {order: "perm", ("unroll",): "choice"}
    perm = next(p for p in parameters(csp) if p.kind == "perm")
    assert set(perm.graph.nodes) == set(itertools.permutations((1, 2, 3)))
    rows = KnobDrawer(csp).options()
    assert rows is not None and any(names == order and len(r) == 6 for names, r in rows)


def test_opevo_breeds_one_generation_per_measurement() -> None:
    ex = build("opevo", 0, csp=four_topology_csp(), offspring=4)
    first = ex.propose(8, exclude=())  # no fitness yet: RandSAT (Algorithm 1 step 1)
    assert ex.generations == 0 and ex.fills == 0
    ex.observe([Observation(a, four_score(a)) for a in first])
    measured = {ex.sampler.key(a) for a in first}
    second = ex.propose(8, exclude=measured)
    assert ex.generations == 1 and ex.fills == 4  # ρ = 4 children, then fresh samples
    measured |= {ex.sampler.key(a) for a in second}
    ex.propose(4, exclude=())  # nothing measured since: no second generation
    assert ex.generations == 1 and ex.fills == 8
    ex.observe([Observation(a, four_score(a)) for a in second])
    ex.propose(4, exclude=measured)
    assert ex.generations == 1  # the 4 samples proposed last are still unmeasured
    ex2 = build("opevo", 0, csp=four_topology_csp())  # offspring=0: ρ is the batch
    tune(ex2, rounds=3, n=8, score=four_score)
    assert ex2.generations == 2 and ex2.fills == 0
