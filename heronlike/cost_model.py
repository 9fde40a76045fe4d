"""The cost model: predicts which assignments of a CSP run fastest, from their features.

Heron (ASPLOS'23, §5) ranks candidate programs with an online XGBoost model trained on the
programs measured so far; its features are the values of every CSP variable (the "solution
vector") and its label is the normalised performance. This module keeps that design, with the
bugs and removed XGBoost helpers of Heron's ``model/xgboost_cost_model.py`` left out:

* :class:`CostModel` is the seam (a Protocol): ``fit``, ``predict``, ``trained``.
* :class:`XGBCostModel` is Heron's model on XGBoost's public API (``DMatrix``, ``train``,
  ``Booster.get_score``).
* :class:`PriorMarginCostModel` starts that model from a target's schedule prior (its base
  margin), the default where the target has a prior.
* :func:`assignment_features` and :func:`feature_names` give Heron's feature vector.

Throughput is in operations per second (op/s); scores are unitless, higher is better.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

import numpy as np

from heronlike.csp import CSP

if TYPE_CHECKING:
    from heronlike.prior import LinearPrior

__all__ = [
    "CostModel",
    "PriorMarginCostModel",
    "XGBCostModel",
    "assignment_features",
    "feature_names",
]

_IMPORTANCE_KINDS = ("weight", "gain", "cover", "total_gain", "total_cover")


@runtime_checkable
class CostModel(Protocol):
    """What an explorer needs from a cost model.

    ``fit`` takes the features (``(n, f)`` float64) and the throughput (``(n,)`` op/s, every entry
    > 0: the caller leaves failed trials out) of all trials so far; ``predict`` returns ``(n,)``
    scores, higher = faster. An untrained model predicts zeros.
    """

    def fit(self, features: np.ndarray, throughput: np.ndarray) -> None: ...

    def predict(self, features: np.ndarray) -> np.ndarray: ...

    @property
    def trained(self) -> bool: ...


class XGBCostModel:
    """Heron's online XGBoost cost model (ASPLOS'23 §5; ``model/xgboost_cost_model.py``).

    Each :meth:`fit` trains a new booster from scratch on all the rows it is given, as Heron does
    after every round. Until ``fit`` has seen at least ``min_trials`` rows the model is untrained
    and :meth:`predict` returns zeros (Heron predicts a constant too).

    Args:
        seed: XGBoost's ``seed``. Training uses one thread (``nthread=1``), so the same seed and
            the same data give bit-identical predictions on every run and machine thread count.
        objective: ``"reg"`` fits squared error on the normalised throughput
            ``throughput / max(throughput)`` (Heron's default ``loss_type='reg'``, which labels
            with ``ln(1/seconds)`` before normalising); ``"rank"`` fits ``rank:pairwise`` on the
            same labels (all rows form one query group, 32 random pairs per row), for which only
            the order of the scores matters.
        num_boost_round: boosting rounds. Fixed: Heron's early stopping watched recall on the
            training set itself, which stops nothing useful, so it is left out.
        max_depth: tree depth (Heron: 7 for ``reg``, 3 for ``rank``).
        eta: learning rate (Heron: 0.3).
        min_trials: rows needed before the model trains at all.

    Raises:
        ValueError: on an unknown objective or a non-positive ``num_boost_round``,
            ``max_depth``, ``eta`` or a negative ``min_trials``.
    """

    def __init__(
        self,
        *,
        seed: int = 0,
        objective: Literal["rank", "reg"] = "reg",
        num_boost_round: int = 200,
        max_depth: int = 6,
        eta: float = 0.2,
        min_trials: int = 8,
    ) -> None:
        if objective not in ("rank", "reg"):
            raise ValueError(f"objective must be 'rank' or 'reg', not {objective!r}")
        if num_boost_round < 1 or max_depth < 1 or not eta > 0 or min_trials < 0:
            raise ValueError(
                "num_boost_round and max_depth must be >= 1, eta > 0 and min_trials >= 0; got "
                f"{num_boost_round=}, {max_depth=}, {eta=}, {min_trials=}"
            )
        self.seed = int(seed)
        self.objective = objective
        self.num_boost_round = int(num_boost_round)
        self.max_depth = int(max_depth)
        self.eta = float(eta)
        self.min_trials = int(min_trials)
        self._booster = None  # xgboost.Booster once trained
        self._n_features: int | None = None

    @property
    def trained(self) -> bool:
        """Whether the last :meth:`fit` had enough rows to train a booster."""
        return self._booster is not None

    def _params(self) -> dict[str, object]:
        params: dict[str, object] = {
            "objective": "rank:pairwise" if self.objective == "rank" else "reg:squarederror",
            "max_depth": self.max_depth,
            "eta": self.eta,
            "gamma": 1e-5 if self.objective == "reg" else 1e-4,  # Heron's values
            "min_child_weight": 1,
            "subsample": 1.0,
            "lambda": 1.0,
            "alpha": 0.0,
            "seed": self.seed,
            "nthread": 1,
            "verbosity": 0,
        }
        if self.objective == "rank":
            # XGBoost >= 2 pairs each row only with the top-ranked one by default ("topk", 1
            # pair), which learns little of the global order; sample 32 random pairs per row
            # instead, as the classic pairwise objective Heron used did.
            params["lambdarank_pair_method"] = "mean"
            params["lambdarank_num_pair_per_sample"] = 32
        return params

    def fit(
        self,
        features: np.ndarray,
        throughput: np.ndarray,
        base_margin: np.ndarray | None = None,
    ) -> None:
        """Retrain from scratch on ``features`` (``(n, f)``) and ``throughput`` (``(n,)``, op/s).

        With fewer than ``min_trials`` rows the model becomes (or stays) untrained.
        ``base_margin`` (``(n,)``, on the scale of the normalised throughput), if given, is each
        row's prediction before the first tree (XGBoost's ``base_margin``): the trees then fit
        what it leaves unexplained, and :meth:`predict` must be given the margin of its rows
        too (:class:`PriorMarginCostModel`).

        Raises:
            ValueError: if the shapes disagree, or a throughput is not finite and > 0, or a
                feature or margin is not finite.
        """
        import xgboost as xgb

        x, y = _training_data(features, throughput)
        self._n_features = x.shape[1]
        if x.shape[0] < max(self.min_trials, 1):
            self._booster = None
            return
        label = y / y.max()
        dtrain = xgb.DMatrix(x, label=label, base_margin=_margin(base_margin, x), nthread=1)
        self._booster = xgb.train(self._params(), dtrain, num_boost_round=self.num_boost_round)

    def predict(self, features: np.ndarray, base_margin: np.ndarray | None = None) -> np.ndarray:
        """Scores of ``features`` (``(n, f)``) as a ``(n,)`` float64 array; zeros if untrained.
        ``base_margin``: as :meth:`fit` (``(n,)``), for a model fitted with one.

        Raises:
            ValueError: if ``features`` is not 2-D or, once trained, has another column count,
                or ``base_margin`` is not ``(n,)`` and finite.
        """
        import xgboost as xgb

        x = np.asarray(features, dtype=np.float64)
        if x.ndim != 2:
            raise ValueError(f"features must be (n, f); got shape {x.shape}")
        if self._booster is None or x.shape[0] == 0:
            return np.zeros(x.shape[0], dtype=np.float64)
        if x.shape[1] != self._n_features:
            raise ValueError(f"model was fitted on {self._n_features} features, got {x.shape[1]}")
        dmatrix = xgb.DMatrix(x, base_margin=_margin(base_margin, x), nthread=1)
        return self._booster.predict(dmatrix).astype(np.float64)

    def feature_importance(
        self, names: Sequence[str] | None = None, kind: str = "gain"
    ) -> dict[str, float]:
        """Importance of every feature, by XGBoost's ``Booster.get_score(importance_type=kind)``.

        Every feature is present (0.0 for a feature no tree splits on, and for all of them while
        untrained), keyed by ``names[i]`` or, without names, ``"f<i>"``. The constraint-based GA
        of the ASPLOS'23 artifact picks its key variables from the top of this ranking (there with
        ``kind="weight"``, the number of splits).

        Args:
            names: one name per feature column (e.g. :func:`feature_names`).
            kind: ``"weight"``, ``"gain"``, ``"cover"``, ``"total_gain"`` or ``"total_cover"``.

        Raises:
            ValueError: on an unknown ``kind`` or a ``names`` of the wrong length.
        """
        if kind not in _IMPORTANCE_KINDS:
            raise ValueError(f"kind must be one of {', '.join(_IMPORTANCE_KINDS)}; got {kind!r}")
        n = self._n_features if self._n_features is not None else (len(names) if names else 0)
        if names is not None and len(names) != n:
            raise ValueError(f"got {len(names)} names for {n} features")
        keys = list(names) if names is not None else [f"f{i}" for i in range(n)]
        scores = self._booster.get_score(importance_type=kind) if self._booster is not None else {}
        out = dict.fromkeys(keys, 0.0)
        for fname, value in scores.items():  # XGBoost names columns f0, f1, ...
            out[keys[int(fname[1:])]] = float(value)
        return out

    def grouped_importance(
        self, names: Sequence[str], groups: Sequence[Sequence[str]], kind: str = "gain"
    ) -> list[float]:
        """Importance of each group of features (e.g. the aliases of one quantity,
        :func:`heronlike.features.alias_groups`), as if the group were one feature.

        Additive kinds are summed over the group: ``"weight"`` (splits), ``"total_gain"``,
        ``"total_cover"``. The average kinds are the group's totals over its splits:
        ``"gain"`` = sum of total gains / sum of splits, ``"cover"`` likewise; 0.0 for a group
        no tree splits on (and for every group while untrained).

        Args:
            names: one name per feature column.
            groups: lists of names from ``names``.
            kind: as :meth:`feature_importance`.

        Raises:
            ValueError: on an unknown ``kind``, a ``names`` of the wrong length, or a group
                naming a feature not in ``names``.
        """
        if kind not in _IMPORTANCE_KINDS:
            raise ValueError(f"kind must be one of {', '.join(_IMPORTANCE_KINDS)}; got {kind!r}")
        weight = self.feature_importance(names, kind="weight")
        unknown = sorted({n for g in groups for n in g} - set(weight))
        if unknown:
            raise ValueError(f"groups name unknown features {unknown[:5]}")
        if kind == "weight":
            return [float(sum(weight[n] for n in g)) for g in groups]
        total_kind = {"gain": "total_gain", "cover": "total_cover"}.get(kind, kind)
        total = self.feature_importance(names, kind=total_kind)
        sums = [float(sum(total[n] for n in g)) for g in groups]
        if kind == total_kind:
            return sums
        splits = [float(sum(weight[n] for n in g)) for g in groups]
        return [s / w if w > 0 else 0.0 for s, w in zip(sums, splits, strict=True)]


def _training_data(features: np.ndarray, throughput: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``features`` and ``throughput`` as float64 arrays, checked as :meth:`XGBCostModel.fit`
    says."""
    x = np.asarray(features, dtype=np.float64)
    y = np.asarray(throughput, dtype=np.float64)
    if x.ndim != 2 or y.ndim != 1 or x.shape[0] != y.shape[0]:
        raise ValueError(
            f"features must be (n, f) and throughput (n,); got {x.shape} and {y.shape}"
        )
    if y.size and not (np.all(np.isfinite(y)) and np.all(y > 0)):
        raise ValueError("throughput must be finite and > 0 (leave failed trials out)")
    if not np.all(np.isfinite(x)):
        raise ValueError("features must be finite")
    return x, y


def _margin(base_margin: np.ndarray | None, x: np.ndarray) -> np.ndarray | None:
    if base_margin is None:
        return None
    m = np.asarray(base_margin, dtype=np.float64)
    if m.shape != (x.shape[0],) or not np.all(np.isfinite(m)):
        raise ValueError(f"base_margin must be finite and ({x.shape[0]},); got shape {m.shape}")
    return m


class PriorMarginCostModel:
    """The online cost model with a schedule prior as its starting point: XGBoost fits what the
    prior leaves unexplained.

    Heron (ASPLOS'23 §5) trains its XGBoost model on the workload's own measurements only, so
    after the first round of a small budget (8 trials) it ranks the next round from 8 points.
    Replayed on 160 random programs of each of eight DL Boost workloads the target's prior was
    not fitted on (``benchmarks/prior_margin.py``), such a model ranked the second round little
    better than chance, and worse than the prior alone (docs/results.md, "The prior as the cost
    model's base margin"). This model keeps the prior's ranking where the measurements say
    nothing, and lets them correct it, without a weight to tune:

    * :meth:`fit`: the prior's scores ``s`` of the measured rows are mapped onto the normalised
      throughput ``y / max(y)`` by least squares, ``a + b·s`` (with ``b >= 0``: a prior that
      ranks this workload's measurements backwards is dropped, ``b = 0`` and ``a`` the mean), and
      the XGBoost model is trained with ``a + b·s`` as every row's base margin (gradient boosting
      from a prior mean, as AutoTVM's transfer learning starts from a global model);
    * :meth:`predict`: ``a + b·s`` of the candidates plus the trees.

    Until ``inner`` is trained (fewer than its ``min_trials`` rows) it predicts zeros, as
    :class:`XGBCostModel` does (the explorers then rank by the prior themselves:
    :meth:`heronlike.explore.base.Explorer.initial`).

    Args:
        prior: the target's :class:`~heronlike.prior.LinearPrior`.
        names: the names of the feature columns :meth:`fit` and :meth:`predict` get (the
            explorer's featurizer's, :class:`~heronlike.features.ScheduleFeatures`).
        inner: the XGBoost model (default ``XGBCostModel(seed=seed)``).
        seed: XGBoost's seed when ``inner`` is not given.
    """

    def __init__(
        self,
        prior: LinearPrior,
        names: Sequence[str],
        inner: XGBCostModel | None = None,
        *,
        seed: int = 0,
    ) -> None:
        self.prior = prior
        self.names = list(names)
        self.inner = inner if inner is not None else XGBCostModel(seed=seed)
        #: the map of prior scores onto normalised throughput, ``(a, b)``, from the last fit
        self.calibration: tuple[float, float] = (0.0, 0.0)

    @property
    def trained(self) -> bool:
        """Whether the XGBoost model is trained (:attr:`XGBCostModel.trained`)."""
        return self.inner.trained

    def fit(self, features: np.ndarray, throughput: np.ndarray) -> None:
        """Calibrate the prior on the measured rows and retrain XGBoost from it (class
        docstring); ``features`` ``(n, f)``, ``throughput`` ``(n,)`` op/s, every entry > 0.

        Raises:
            ValueError: as :meth:`XGBCostModel.fit`, or when ``features`` has not one column
                per name.
        """
        x, y = _training_data(features, throughput)
        if not y.size:
            self.inner.fit(x, y)
            return
        s = self.prior.score(self.names, x)
        label = y / y.max()
        a, b = float(label.mean()), 0.0
        if np.ptp(s) > 0:
            slope, intercept = np.polyfit(s, label, 1)
            if slope > 0:
                a, b = float(intercept), float(slope)
        self.calibration = (a, b)
        self.inner.fit(x, y, base_margin=a + b * s)

    def predict(self, features: np.ndarray) -> np.ndarray:
        """``(n,)`` scores of ``features`` (``(n, f)``): the calibrated prior plus the trees;
        zeros while untrained.

        Raises:
            ValueError: as :meth:`XGBCostModel.predict`.
        """
        x = np.asarray(features, dtype=np.float64)
        if not self.trained or x.ndim != 2 or x.shape[0] == 0:
            return self.inner.predict(x)
        a, b = self.calibration
        return self.inner.predict(x, base_margin=a + b * self.prior.score(self.names, x))

    def feature_importance(
        self, names: Sequence[str] | None = None, kind: str = "gain"
    ) -> dict[str, float]:
        """The trees' feature importance (:meth:`XGBCostModel.feature_importance`): what the
        measurements taught beyond the prior."""
        return self.inner.feature_importance(names, kind)

    def grouped_importance(
        self, names: Sequence[str], groups: Sequence[Sequence[str]], kind: str = "gain"
    ) -> list[float]:
        """As :meth:`XGBCostModel.grouped_importance`, of the trees."""
        return self.inner.grouped_importance(names, groups, kind)


def feature_names(csp: CSP) -> list[str]:
    """Names of the columns of :func:`assignment_features`: every CSP variable, creation order."""
    return list(csp.vars)


def assignment_features(csp: CSP, assignments: Sequence[Mapping[str, int]]) -> np.ndarray:
    """Heron's feature vector: every CSP variable of each assignment, in creation order.

    A value ``v`` becomes ``log2(v + 1)`` (``sign(v) * log2(|v| + 1)`` for negative values, so
    the map stays finite and monotone). Returns a ``(len(assignments), len(csp.vars))`` float64
    array.

    Raises:
        KeyError: if an assignment misses a variable.
    """
    names = feature_names(csp)
    values = np.array([[a[name] for name in names] for a in assignments], dtype=np.float64)
    values = values.reshape(len(assignments), len(names))
    return np.sign(values) * np.log2(np.abs(values) + 1.0)
