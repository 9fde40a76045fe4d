"""Tests of heronlike.cost_model: XGBCostModel on a synthetic problem, and the feature vector."""

from __future__ import annotations

import numpy as np
import pytest

from heronlike.cost_model import CostModel, XGBCostModel, assignment_features, feature_names
from heronlike.csp import CSP, Prod


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman rank correlation (no ties expected in continuous data)."""
    ra = np.argsort(np.argsort(a)).astype(float)
    rb = np.argsort(np.argsort(b)).astype(float)
    return float(np.corrcoef(ra, rb)[0, 1])


def synthetic(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """10 features in [0, 4); throughput (op/s) depends on features 3 and 7 only."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.0, 4.0, size=(n, 10))
    y = 1e9 * (1.0 + 2.0 * x[:, 3] - (x[:, 7] - 2.0) ** 2 + 4.0)
    return x, y


@pytest.mark.parametrize("objective", ["reg", "rank"])
def test_learns_ranking_and_importance(objective: str) -> None:
    x, y = synthetic(300, seed=1)
    xt, yt = synthetic(200, seed=2)
    model = XGBCostModel(seed=0, objective=objective)
    assert isinstance(model, CostModel)
    model.fit(x, y)
    assert model.trained
    pred = model.predict(xt)
    assert pred.shape == (200,) and pred.dtype == np.float64
    assert spearman(pred, yt) > 0.8
    names = [f"x{i}" for i in range(10)]
    imp = model.feature_importance(names)
    assert list(imp) == names
    top2 = sorted(imp, key=imp.__getitem__, reverse=True)[:2]
    assert set(top2) == {"x3", "x7"}
    weights = model.feature_importance(kind="weight")
    assert set(weights) == {f"f{i}" for i in range(10)}


def test_untrained_predicts_zeros() -> None:
    model = XGBCostModel(min_trials=8)
    assert not model.trained
    assert np.array_equal(model.predict(np.ones((3, 10))), np.zeros(3))
    assert model.feature_importance() == {}
    x, y = synthetic(7, seed=0)
    model.fit(x, y)  # fewer rows than min_trials: stays untrained
    assert not model.trained
    assert np.array_equal(model.predict(x), np.zeros(7))
    assert model.feature_importance() == {f"f{i}": 0.0 for i in range(10)}
    x, y = synthetic(8, seed=0)
    model.fit(x, y)
    assert model.trained
    model.fit(x[:2], y[:2])  # retrained from scratch on each fit
    assert not model.trained


def test_deterministic_with_seed() -> None:
    x, y = synthetic(100, seed=3)
    xt, _ = synthetic(50, seed=4)
    preds = []
    for _ in range(2):
        model = XGBCostModel(seed=5)
        model.fit(x, y)
        preds.append(model.predict(xt))
    assert np.array_equal(preds[0], preds[1])


def test_bad_input() -> None:
    model = XGBCostModel()
    x, y = synthetic(20, seed=0)
    with pytest.raises(ValueError):
        model.fit(x, y[:-1])
    with pytest.raises(ValueError, match="failed trials"):
        model.fit(x, np.where(np.arange(20) == 3, 0.0, y))
    model.fit(x, y)
    with pytest.raises(ValueError, match="features"):
        model.predict(np.ones((2, 9)))
    with pytest.raises(ValueError):
        model.feature_importance(["a", "b"])
    with pytest.raises(ValueError):
        model.feature_importance(kind="splits")
    with pytest.raises(ValueError):
        XGBCostModel(objective="lambdarank")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="base_margin"):
        model.fit(x, y, base_margin=np.ones(3))
    with pytest.raises(ValueError, match="base_margin"):
        model.predict(x, base_margin=np.full(len(x), np.nan))


def test_base_margin_is_where_the_trees_start() -> None:
    """Fitted with each row's label as its margin, the trees have nothing left to learn: the
    prediction is the margin given at predict time."""
    model = XGBCostModel(seed=0)
    x, y = synthetic(40, seed=1)
    label = y / y.max()
    model.fit(x, y, base_margin=label)
    margin = np.linspace(0.0, 1.0, len(x))
    assert np.allclose(model.predict(x, base_margin=margin), margin, atol=1e-3)


def test_assignment_features() -> None:
    csp = CSP()
    csp.var("n", 64, 64)
    csp.var("a", 1, 64, knob=True)
    csp.var("b", 1, 64, knob=True)
    csp.add(Prod("n", ("a", "b")))
    assert feature_names(csp) == ["n", "a", "b"]
    f = assignment_features(csp, [{"b": 1, "a": 64, "n": 64}, {"n": 64, "a": 8, "b": 8}])
    assert f.dtype == np.float64
    np.testing.assert_allclose(f, np.log2(np.array([[65, 65, 2], [65, 9, 9]], dtype=float)))
    assert assignment_features(csp, []).shape == (0, 3)


def test_grouped_importance_sums_aliases() -> None:
    """Aliased columns (one quantity, two columns) count as one feature in the grouped ranking."""
    x, y = synthetic(300, seed=3)
    x = np.concatenate([x, 2.0 * x[:, [3]] + 1.0], axis=1)  # x10 is x3 again, another unit
    names = [f"x{i}" for i in range(11)]
    model = XGBCostModel(seed=0)
    model.fit(x, y)
    groups = [["x3", "x10"], ["x7"], ["x0"]]
    weight = model.feature_importance(names, kind="weight")
    total = model.feature_importance(names, kind="total_gain")
    got = model.grouped_importance(names, groups, kind="weight")
    assert got == [weight["x3"] + weight["x10"], weight["x7"], weight["x0"]]
    gain = model.grouped_importance(names, groups, kind="gain")
    splits = weight["x3"] + weight["x10"]
    assert gain[0] == pytest.approx((total["x3"] + total["x10"]) / splits)
    assert model.grouped_importance(names, groups, kind="total_gain")[1] == pytest.approx(
        total["x7"]
    )
    with pytest.raises(ValueError, match="unknown"):
        model.grouped_importance(names, [["nope"]])
    with pytest.raises(ValueError, match="kind"):
        model.grouped_importance(names, groups, kind="splits")
    assert XGBCostModel().grouped_importance(names, groups) == [0.0, 0.0, 0.0]
