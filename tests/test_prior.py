"""Tests of the schedule prior (heronlike.prior) and the first round it ranks."""

from __future__ import annotations

import numpy as np
import pytest

import heronlike
from heronlike import ops
from heronlike.cost_model import PriorMarginCostModel, XGBCostModel
from heronlike.explore import search_for
from heronlike.prior import (
    GENERIC_FEATURES,
    LinearPrior,
    fit_linear_prior,
    generic_features,
    generic_matrix,
    main_stage,
)
from heronlike.records import Records
from heronlike.space import generate_space

pytest.importorskip("heronlike.sampler")


@pytest.fixture(scope="module")
def gemm_space():
    """The general (no intrinsic) rule set on a float32 GEMM: any x86 host."""
    return generate_space(ops.gemm(64, 96, 128, dtype="float32"), "llvm -num-cores=2")


def test_generic_features_are_the_main_stage_without_its_name(gemm_space) -> None:
    _, ex = search_for(gemm_space, "random", seed=0)
    pool = ex.sampler.sample(16)
    x = ex.features(pool)
    cols = generic_features(ex.featurizer.names, x)
    names = ex.featurizer.names
    main = names[[n.endswith(".register.bytes.fill") for n in names].index(True)].split(".")[0]
    for generic in ("S1.volume", "S2.volume", "R1.trips", "register.fill", "parallel.balance"):
        assert generic in cols
    # the same column as the stage-named feature
    i = names.index(f"{main}.S2.volume")
    assert np.array_equal(cols["S2.volume"], x[:, i])
    assert not any(name.startswith(main) for name in cols)
    with pytest.raises(ValueError, match="must be"):
        generic_features(names, x[:, :-1])


def test_fit_recovers_the_weights_of_a_linear_world() -> None:
    """Five workloads whose -ln(latency) is a known linear function of two generic features
    plus a constant of its own: the fixed-effects fit recovers the weights, and the other
    features get none."""
    rng = np.random.default_rng(0)
    truth = {"S2.volume": 0.5, "L1.fill": -2.0}
    names = ["C.S2.volume", "C.L1.bytes.fill", "C.R1.trips"]
    workloads = []
    for w in range(5):
        x = rng.uniform(0, 4, size=(40, 3))
        y = 0.5 * x[:, 0] - 2.0 * x[:, 1] + 10.0 * w  # its own constant
        workloads.append((names, x, np.exp(-y)))
    prior = fit_linear_prior(workloads, ridge=1e-6)
    for name, weight in truth.items():
        assert prior.weights[name] == pytest.approx(weight, abs=1e-4)
    assert abs(prior.weights.get("R1.trips", 0.0)) < 1e-4
    # a score orders one workload's programs as their speed does
    _, x, latency = workloads[3]
    assert np.array_equal(np.argsort(-prior.score(names, x)), np.argsort(latency))
    with pytest.raises(ValueError, match="two valid trials"):
        fit_linear_prior([(names, np.zeros((1, 3)), np.ones(1))])
    with pytest.raises(ValueError, match="positive"):
        fit_linear_prior([(names, np.zeros((2, 3)), np.array([1.0, -1.0]))])


def test_the_first_round_takes_the_priors_best_from_a_larger_pool(gemm_space) -> None:
    """With a prior that prefers large register tiles, the untrained round's greedy share
    holds larger tiles than the same seed's random round, all valid, fresh and distinct."""
    prior = LinearPrior({"S2.volume": 1.0})
    n = 8
    _, with_prior = search_for(gemm_space, "cga", seed=3)
    with_prior.prior = prior
    _, without = search_for(gemm_space, "cga", seed=3, prior=False)
    assert without.prior is None
    exclude = {without.sampler.key(a) for a in without.sampler.sample(4)}
    picked = with_prior.propose(n, exclude=exclude)
    random = without.propose(n, exclude=exclude)
    assert len(picked) == n
    keys = [with_prior.sampler.key(a) for a in picked]
    assert len(set(keys)) == n and not set(keys) & exclude
    assert not any(gemm_space.csp.violations(a) for a in picked)

    def volume(batch):
        return generic_features(with_prior.featurizer.names, with_prior.features(batch))[
            "S2.volume"
        ]

    greedy = volume(picked[: int(np.ceil(with_prior.prior_share * n))])
    assert greedy.min() >= np.median(volume(random))
    assert greedy.mean() > volume(random).mean()


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


def test_the_cost_model_starts_from_the_prior(gemm_space) -> None:
    """A tune with a prior gets XGBoost with the prior as its base margin; without one, or
    given a model, the model alone (Heron's)."""
    _, with_prior = search_for(gemm_space, "cga", seed=0)
    assert isinstance(with_prior.cost_model, PriorMarginCostModel)
    assert with_prior.cost_model.prior is with_prior.prior is not None
    assert with_prior.cost_model.names == with_prior.featurizer.names
    _, without = search_for(gemm_space, "cga", seed=0, prior=False)
    assert isinstance(without.cost_model, XGBCostModel)
    given = XGBCostModel(seed=5)
    _, explicit = search_for(gemm_space, "cga", seed=0, cost_model=given)
    assert explicit.cost_model is given and explicit.prior is not None


def test_prior_margin_model_keeps_the_priors_order_where_eight_trials_say_little(
    gemm_space,
) -> None:
    """Throughput rising with the prior's score (plus noise): fitted on 8 points, the margin
    model ranks 56 unseen ones by the prior (the calibrated slope is positive) far better than
    XGBoost alone on the same 8; a prior that ranks the measurements backwards is dropped
    (slope 0, the margin the mean label)."""
    prior = LinearPrior({"S2.volume": 1.0, "register.fill": -0.5})
    _, ex = search_for(gemm_space, "random", seed=1)
    x = ex.features(ex.sampler.sample(64))
    names = ex.featurizer.names
    s = prior.score(names, x)
    assert np.ptp(s) > 0
    rng = np.random.default_rng(0)
    throughput = np.exp(s / np.ptp(s) + rng.normal(0, 0.05, len(s))) * 1e9
    seen, unseen = slice(0, 8), slice(8, None)

    margin = PriorMarginCostModel(prior, names, seed=0)
    margin.fit(x[seen], throughput[seen])
    assert margin.trained and margin.calibration[1] > 0
    alone = XGBCostModel(seed=0)
    alone.fit(x[seen], throughput[seen])
    truth = throughput[unseen]
    rho_margin = _spearman(margin.predict(x[unseen]), truth)
    rho_alone = _spearman(alone.predict(x[unseen]), truth)
    assert rho_margin > 0.8
    assert rho_margin > rho_alone + 0.1
    assert len(margin.feature_importance(names)) == len(names)

    backwards = PriorMarginCostModel(prior, names, seed=0)
    backwards.fit(x[seen], 1e9 / throughput[seen])
    label = (1 / throughput[seen]) / (1 / throughput[seen]).max()
    assert backwards.calibration == (pytest.approx(label.mean()), 0.0)
    assert np.all(np.isfinite(backwards.predict(x[unseen])))

    untrained = PriorMarginCostModel(prior, names, seed=0)
    untrained.fit(x[:3], throughput[:3])  # under XGBCostModel's min_trials
    assert not untrained.trained
    assert np.array_equal(untrained.predict(x[unseen]), np.zeros(56))


def test_dlboost_has_a_prior_over_generic_features_and_tune_records_it(tmp_path) -> None:
    target = heronlike.get_target("llvm")
    prior = target.prior()
    assert prior is not None and set(prior.weights) <= set(GENERIC_FEATURES)
    # the signs the fit found are the physics the prior stands for: idle threads, a working
    # set near L2's capacity and more loads per intrinsic call are slower (R1.trips no longer:
    # in the micro-kernel order an R1 step updates every accumulator once, no dependent chain)
    assert prior.weights["parallel.balance"] > 0 and prior.weights["L2.fill"] < 0
    assert prior.weights["tile.loads"] < 0
    assert heronlike.get_target("amx").prior() is None
    records = tmp_path / "r.sqlite"
    compute = ops.gemm(32, 32, 64, dtype="float32")
    on = heronlike.tune(compute, "llvm", trials=4, batch_size=4, explorer="cga", records=records)
    off = heronlike.tune(
        compute, "llvm -num-cores=1", trials=4, batch_size=4, records=records, prior=False
    )
    mine = LinearPrior({"tile.loads": -1.0}, source="my own prior")
    own = heronlike.tune(
        compute, "llvm -num-cores=1", trials=4, batch_size=4, records=records, prior=mine
    )
    assert on.latency_s and off.latency_s and own.latency_s
    with Records(records) as db:
        runs = [db.run_info(i) for i in (1, 2, 3)]
    assert runs[0]["options"]["prior"] == prior.source
    assert runs[1]["options"]["prior"] is None
    assert runs[2]["options"]["prior"] == "my own prior"
    models = [r["options"]["cost_model"] for r in runs]
    assert models == ["PriorMarginCostModel", "XGBCostModel", "PriorMarginCostModel"]
    # anything else is refused up front by name, by the tune and by search_for
    for bad in ({"tile.loads": -1.0}, "prior.json", None):
        with pytest.raises(heronlike.InvalidArgumentError, match="prior must be True, False"):
            heronlike.tune(compute, "llvm", trials=4, records=records, prior=bad)
    with pytest.raises(heronlike.InvalidArgumentError, match="got dict"):
        search_for(generate_space(compute, "llvm"), "cga", 0, prior={"tile.loads": -1.0})
    with Records(records) as db, pytest.raises(KeyError):
        db.run_info(4)  # the refused tunes recorded no run


def test_tile_loads_counts_the_register_tiles_loads_per_intrinsic_call() -> None:
    """The schedule feature ``C.tile.loads`` (generic ``tile.loads``) on a DL Boost GEMM (built
    for a VNNI CPU, never run): a tile of i rows by j output vectors (the innermost spatial
    split factors ``C.v_i.S2``, ``C.v_j.S2``) needs i broadcasts and j weight loads for i * j
    ``vpdpbusd``."""
    space = generate_space(ops.gemm(64, 64, 64, dtype="int8"), "dlboost -mcpu=znver4")
    _, ex = search_for(space, "random", seed=0)
    pool = ex.sampler.sample(16)
    names, x = ex.featurizer.names, ex.features(pool)
    assert main_stage(names) == "C"
    got = generic_features(names, x)["tile.loads"]
    want = [1 / a["C.v_j.S2"] + 1 / a["C.v_i.S2"] for a in pool]
    assert got == pytest.approx(want)
    assert x[:, names.index("C.tile.loads")] == pytest.approx(want)
    assert len(set(want)) > 2  # the pool holds tiles of several shapes


def test_write_back_outside_counts_the_buffer_the_accumulators_go_through() -> None:
    """``Y.write_back.outside`` (generic ``write_back.outside``) on a DL Boost 1 × 1
    convolution (built for a Zen 4, never run): ``log2`` of the output tile the write-back
    copies over the smallest tile among its candidate places, 0 exactly where the knob picks
    that place (the accumulators stored from the register tile straight to the output)."""
    space = generate_space(ops.c2d(1, 14, 14, 64, 64, 1, 1, dtype="int8"), "dlboost -mcpu=znver4")
    _, ex = search_for(space, "random", seed=0)
    pool = ex.sampler.sample(48)
    names, x = ex.featurizer.names, ex.features(pool)
    got = generic_features(names, x)["write_back.outside"]
    assert x[:, names.index("Y.write_back.outside")] == pytest.approx(got)
    candidates = sorted(n for n in pool[0] if n.startswith("Y.write_back@"))
    assert len(candidates) >= 2  # the knob chooses among places
    for point, value in zip(pool, got, strict=True):
        smallest = min(point[c] for c in candidates)
        assert value == pytest.approx(np.log2(point["Y.write_back.elems"] / smallest))
        assert (value == 0) == (point["Y.write_back.elems"] == smallest)
    assert 0 < (got == 0).sum() < len(got)  # the pool holds both kinds


@pytest.mark.parametrize(("rows", "columns", "serial_first"), [(512, 16, True), (1024, 256, False)])
def test_parallel_speedup_weighs_the_launch_against_the_work(rows, columns, serial_first) -> None:
    """``parallel.speedup`` on DL Boost matrix-vector products (built for a Zen 4's 2 cores,
    never run): 0 for a serial program (``y.serial`` = 1), ``ln(busy) - ln(1 + launch_ops *
    busy / ops)`` for a parallel one. Its launch of 1.7e5 operations outweighs the 16 K of a
    512 × 16 product (whose serial programs ran 10× faster on the Zen 4) and not the 524 K of
    a 1024 × 256 one (1.2× slower), so :data:`~dla_targets.dlboost.PRIOR_ZEN4`, which weighs
    it 1, ranks a serial program first in the former and a parallel one in the latter."""
    from dla_targets.dlboost import PRIOR_ZEN4

    space = generate_space(ops.gemv(rows, columns), "dlboost -mcpu=znver4 -num-cores=2")
    _, ex = search_for(space, "random", seed=0)
    pool = ex.sampler.sample(64)
    names, x = ex.featurizer.names, ex.features(pool)
    got = generic_features(names, x)["parallel.speedup"]
    serial = np.array([a["y.serial"] == 1 for a in pool])
    assert 0 < serial.sum() < len(pool)  # the pool holds both kinds
    launch = space.target.parallel_launch_ops / (2 * rows * columns)
    for point, value in zip(pool, got, strict=True):
        extent = point["y.v_i.S0"]  # the parallel loop
        busy = extent / np.ceil(extent / 2)
        want = np.log(busy) - np.log1p((extent > 1) * launch * busy)
        assert value == pytest.approx(want)
    assert np.all(got[serial] == 0)
    assert np.all(got[~serial] < 0) if serial_first else np.all(got[~serial] > 0)
    best = int(np.argmax(PRIOR_ZEN4.score(names, x)))
    assert serial[best] == serial_first


@pytest.mark.parametrize(
    ("target", "widened"),
    [
        ("dlboost -general -mcpu=znver2", ("b",)),
        ("dlboost -general -mcpu=znver2 -widen-a=0", ("a", "b")),
        ("dlboost -mcpu=znver4", ()),
    ],
)
def test_tile_widens_counts_the_operand_widenings_per_intrinsic_call(target, widened) -> None:
    """``C.tile.widens`` (generic ``tile.widens``) on an int8 GEMM tensorized onto AVX2's
    ``vpmaddwd`` (a Zen 2 target without VNNI, never run): B is widened once per loaded
    vector, ``1/i`` per call of an ``i × j`` tile, and A, when read as uint8 rather than from
    the pre-widened copy, once per broadcast, ``1/j``. VNNI widens nothing: no feature. Such
    spaces rank by the prior fitted on them (``prior_for``); the others by the target's."""
    from dla_targets.dlboost import PRIOR, PRIOR_PMADDWD, PRIOR_ZEN4

    space = generate_space(ops.gemm(64, 64, 64, dtype="int8"), target)
    _, ex = search_for(space, "random", seed=0)
    pool = ex.sampler.sample(16)
    names, x = ex.featurizer.names, ex.features(pool)
    assert space.target.prior_for(space) == (PRIOR_PMADDWD if widened else PRIOR_ZEN4)
    assert "tile.widens" not in PRIOR_ZEN4.weights
    assert "tile.widens" in PRIOR_PMADDWD.weights and "tile.widens" not in PRIOR.weights
    if not widened:
        assert "C.tile.widens" not in names
        assert np.all(generic_matrix(names, x, ("tile.widens",)) == 0)
        return
    want = [("b" in widened) / a["C.v_i.S2"] + ("a" in widened) / a["C.v_j.S2"] for a in pool]
    assert generic_features(names, x)["tile.widens"] == pytest.approx(want)
    # with A pre-widened, the loads alone cannot tell an i x j tile from a j x i one; the
    # widenings can (with A widened too, they are the loads)
    loads = generic_features(names, x)["tile.loads"]
    differ = len(set(np.round(np.asarray(want) - loads, 6))) > 1
    assert differ == (widened == ("b",))


@pytest.mark.parametrize(
    ("target", "dtype", "want"),
    [
        ("dlboost -mcpu=znver4", "int8", "PRIOR_ZEN4"),
        ("llvm -mcpu=znver4", "int8", "PRIOR_ZEN4"),
        ("llvm -mcpu=znver4", "float32", "PRIOR"),
        ("dlboost -mcpu=sapphirerapids", "int8", "PRIOR"),
        ("dlboost -mcpu=znver5", "int8", "PRIOR"),
    ],
)
def test_vnni_spaces_rank_by_the_prior_fitted_on_their_cpu(target, dtype, want) -> None:
    """A VNNI space of ``-mcpu=znver4`` ranks by the prior fitted on a Zen 4
    (:data:`~dla_targets.dlboost.PRIOR_ZEN4`: in a replay of 12 cases it was not fitted on,
    16-trial tunes 1.042× of the best recorded program against 1.091× with ``PRIOR``); other
    CPUs' VNNI spaces and every float32 space keep ``PRIOR``, and a tune's explorer ranks its
    first round and its cost model's base margin by the prior ``prior_for`` gives. Spaces
    only: nothing runs, so the test holds on any CPU."""
    from dla_targets import dlboost

    space = generate_space(ops.gemm(64, 64, 64, dtype=dtype), target)
    prior = getattr(dlboost, want)
    assert space.target.prior_for(space) == prior
    assert space.target.prior() == dlboost.PRIOR  # the target's prior for any space
    _, explorer = search_for(space, "cga", seed=0)
    assert explorer.prior == prior
    # physics the Zen 4 fit kept: a working set near L2's capacity, a register
    # file near full and more loads per intrinsic call are slower
    zen4 = dlboost.PRIOR_ZEN4.weights
    assert zen4["parallel.speedup"] == 1 and zen4["L2.fill"] < 0 and zen4["register.fill"] < 0
    assert zen4["tile.loads"] < 0 and zen4["padding.skipped"] == pytest.approx(np.log(2))
    assert zen4["write_back.outside"] < 0  # accumulators through a buffer: an extra pass


def test_the_zen4_prior_is_the_fit_its_replay_measured() -> None:
    """``PRIOR_ZEN4`` holds the weights of
    ``benchmarks/priors/dlboost-zen4-speedup-2026-12-07.json`` (the file ``prior_margin.py
    --prior`` replayed, read as it reads it), to the 4 decimals it is written with (a weight
    under that: absent)."""
    from pathlib import Path

    from benchmarks.prior_fit import read_prior
    from dla_targets.dlboost import PRIOR_ZEN4

    root = Path(__file__).resolve().parent.parent
    path = root / "benchmarks/priors/dlboost-zen4-speedup-2026-12-07.json"
    fitted = read_prior(path).weights
    assert "write_back.outside" in PRIOR_ZEN4.weights
    for name in set(fitted) | set(PRIOR_ZEN4.weights):
        got, want = PRIOR_ZEN4.weights.get(name, 0.0), fitted.get(name, 0.0)
        assert got == pytest.approx(want, abs=5e-5), name


def test_float32_spaces_of_a_general_target_keep_the_targets_prior() -> None:
    """On a CPU without VNNI (``-mcpu=znver2``), a float32 GEMM of the same ``-general``
    target has no stage on ``vpmaddwd``: it ranks by the DL Boost prior, which the
    ``vpmaddwd`` one would rank backwards (docs/results.md, "The prior of vpmaddwd spaces")."""
    from dla_targets.dlboost import PRIOR

    space = generate_space(ops.gemm(64, 64, 64, dtype="float32"), "dlboost -general -mcpu=znver2")
    assert space.target.prior_for(space) == PRIOR == space.target.prior()


def test_fixed_weights_are_held_not_fitted() -> None:
    """``fit_linear_prior(fixed=...)``: a feature weighed from first principles keeps its
    weight, its share is taken off the labels, and the other weights are fitted to the rest.
    Latencies built as ``exp(-(0.5 * S1.volume + 2 * parallel.balance))`` times a constant per
    workload: fixing ``parallel.balance`` at 2 recovers 0.5 for ``S1.volume``, as the free fit
    of both recovers both."""
    rng = np.random.default_rng(0)
    names = ["C.S1.volume", "parallel.balance"]
    workloads = []
    for _ in range(6):
        x = np.column_stack([rng.uniform(0, 8, 40), rng.uniform(0.5, 1, 40)])
        workloads.append((names, x, np.exp(-(0.5 * x[:, 0] + 2.0 * x[:, 1]) + rng.normal())))
    features = ("S1.volume", "parallel.balance")
    right = fit_linear_prior(workloads, features=features, ridge=0.0, fixed={"parallel.balance": 2})
    assert right.weights["parallel.balance"] == 2.0
    assert right.weights["S1.volume"] == pytest.approx(0.5, abs=1e-9)
    free = fit_linear_prior(workloads, features=features, ridge=0.0)
    assert free.weights["parallel.balance"] == pytest.approx(2.0, abs=1e-9)
    assert free.weights["S1.volume"] == pytest.approx(0.5, abs=1e-9)
