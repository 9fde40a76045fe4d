"""Tests of FlexTensor's explorer (Zheng et al., ASPLOS'20 §5.1): directions, the Q-network and
a search that beats random sampling on a simulated space in the same budget."""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pytest

from heronlike.cost_model import XGBCostModel
from heronlike.csp import CSP, Le, Prod
from heronlike.explore import EXPLORERS, Observation, make_explorer
from heronlike.explore.flextensor import FlexTensorExplorer, QNetwork, directions
from heronlike.sampler import RandSAT

TARGET = {"i0": 16, "i1": 8, "i2": 8, "j0": 4, "j1": 8, "j2": 32, "k0": 8, "k1": 16, "k2": 4}


def space() -> CSP:
    """Three loops (1024, 1024, 512) split in 3 levels; the inner i-j tile holds <= 256."""
    csp = CSP()
    for loop, extent in (("i", 1024), ("j", 1024), ("k", 512)):
        parts = tuple(csp.var(f"{loop}{n}", 1, extent, knob=True) for n in range(3))
        csp.add(Prod(extent, parts))
    csp.var("tile", 1, 1 << 20)
    csp.add(Prod("tile", ("i2", "j2")))
    csp.add(Le("tile", 256))
    return csp


def score(a: Mapping[str, int]) -> float:
    """Simulated throughput (op/s): 1 / (1 + squared log2 distance to TARGET / 4)."""
    d = sum((math.log2(a[k]) - math.log2(v)) ** 2 for k, v in TARGET.items())
    return 1e9 / (1 + d / 4)


def best_of(name: str, seed: int, rounds: int = 8, n: int = 8) -> float:
    csp = space()
    ex = make_explorer(
        name, csp, RandSAT(csp, seed=seed), XGBCostModel(seed=seed), np.random.default_rng(seed)
    )
    measured: set[tuple[int, ...]] = set()
    best = 0.0
    for _ in range(rounds):
        batch = ex.propose(n, exclude=frozenset(measured))
        assert len(batch) == n
        for a in batch:
            assert csp.violations(a) == []
            assert ex.sampler.key(a) not in measured
            measured.add(ex.sampler.key(a))
        ex.observe([Observation(a, score(a)) for a in batch])
        best = max([best] + [score(a) for a in batch])
    return best


def test_registered_through_the_seam() -> None:
    assert EXPLORERS["flextensor"] == "heronlike.explore.flextensor:FlexTensorExplorer"


def test_better_than_random_in_the_same_budget() -> None:
    seeds = range(5)
    flex = np.array([best_of("flextensor", s) for s in seeds])
    rand = np.array([best_of("rand", s) for s in seeds])
    assert flex.mean() > 1.25 * rand.mean()
    assert np.sum(flex >= rand) >= 4


def test_directions_move_one_prime_between_two_parts() -> None:
    csp = space()
    ex = make_explorer(
        "flextensor", csp, RandSAT(csp, seed=0), XGBCostModel(), np.random.default_rng(0)
    )
    assert isinstance(ex, FlexTensorExplorer)
    assert len(ex.dirs) == 3 * 6 == len(directions(ex.params))  # 3 splits x (i, j) pairs
    a = {"i0": 16, "i1": 8, "i2": 8, "j0": 4, "j1": 8, "j2": 32, "k0": 8, "k1": 16, "k2": 4}
    for d, (k, kind, i, j) in enumerate(ex.dirs):
        b = ex.neighbour(a, d)
        assert b is not None and kind == "split"
        knobs = ex.params[k].knobs
        assert b[knobs[i]] == 2 * a[knobs[i]] and b[knobs[j]] * 2 == a[knobs[j]]
        assert all(b[n] == a[n] for n in a if n not in (knobs[i], knobs[j]))
    a["i1"], a["i0"] = 1, 128
    d = ex.dirs.index((0, "split", 0, 1))  # i1 == 1 cannot shrink
    assert ex.neighbour(a, d) is None


def test_q_learning_updates_and_stats() -> None:
    csp = space()
    ex = make_explorer(
        "flextensor", csp, RandSAT(csp, seed=1), XGBCostModel(), np.random.default_rng(1)
    )
    measured: set[tuple[int, ...]] = set()
    before = ex.q(ex.encode([dict(TARGET)])).copy()
    for _ in range(4):
        batch = ex.propose(8, exclude=frozenset(measured))
        measured |= {ex.sampler.key(a) for a in batch}
        ex.observe([Observation(a, score(a)) for a in batch])
    st = ex.stats()
    assert st["moves"] == 24 and st["fills"] == 0 and st["trainings"] >= 3
    assert not np.allclose(before, ex.q(ex.encode([dict(TARGET)])))
    assert not ex.cost_model.trained  # model-free, as FlexTensor


def test_q_network_fits_a_target() -> None:
    rng = np.random.default_rng(0)
    net = QNetwork(4, 3, 32, rng)
    x = rng.uniform(size=(64, 4))
    acts = rng.integers(3, size=64)
    target = x[:, 0] - x[:, 1]
    first = net.train(x, acts, target)
    for _ in range(300):
        last = net.train(x, acts, target)
    assert last < 0.5 * first
    with pytest.raises(ValueError):
        make_explorer(
            "flextensor",
            space(),
            RandSAT(space(), seed=0),
            XGBCostModel(),
            np.random.default_rng(0),
            alpha=2.0,
        )
