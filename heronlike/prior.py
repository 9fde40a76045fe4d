"""A prior over schedules: ranks candidates before anything of the workload has been measured.

Heron (ASPLOS'23 §5) measures pure RandSAT samples in its first round, because its cost model
is trained online on the workload's own measurements and knows nothing yet. At small budgets
(16 trials in rounds of 8) that first round is half of the search, and most random valid
programs are slow for reasons that hold on every workload of a target: an unbalanced parallel
loop, a cache tile spilling out of L1, a register tile that loads more than it multiplies. A
:class:`LinearPrior` scores those reasons: a linear function of *workload-independent* schedule
features (:func:`generic_features`), fitted once per target on recorded tunes of many workloads
(:func:`fit_linear_prior`; ``benchmarks/prior_fit.py`` refits it from records files and checks
it leave-one-workload-out). A target supplies its prior through
:meth:`heronlike.target.DLATarget.prior`; explorers use it only while their cost model is
untrained (:meth:`heronlike.explore.base.Explorer.initial`), where Heron samples at random.

The generic features are the :class:`~heronlike.features.ScheduleFeatures` of the *main* stage
(the first stage whose register footprint the rules bound, else the first tiled stage), renamed
without the stage: ``S1.volume`` instead of ``C.S1.volume``; ``register.fill``, ``L1.fill``,
``L2.fill`` (footprint / capacity of the memory levels), ``parallel.balance``,
``parallel.extent`` and ``parallel.speedup``, ``unroll.depth`` (the stage's auto-unroll knob),
``tile.loads`` (the register tile's vector loads per intrinsic call), ``tile.widens`` (the
operand widenings per call of an intrinsic that widens in the call: AVX2's ``vpmaddwd``),
``padding.skipped`` (``log2`` of the work over what the padding guards let run) and
``write_back.outside`` (``log2`` of the output tile the write-back copies over the innermost one
it could: accumulators that go through a buffer). A feature a space does not have is 0.

``parallel.speedup`` and ``padding.skipped`` are weighed from first principles rather than
fitted. ``parallel.speedup`` is ``ln`` of the speedup over one core of a program that runs its
operations on the cores its parallel loop keeps busy and pays TVM's parallel launch once per
parallel region (:mod:`heronlike.features`), so ``-ln(latency)`` grows by 1 per unit
(:data:`PARALLEL_SPEEDUP_WEIGHT`). Without it a prior saw a serial program only through the
idle core of ``parallel.balance``: no weight of that ranked both a 512 × 16 matrix-vector
product's serial programs (10× faster than its parallel ones: the launch costs 0.78 µs on a Zen
4, the work 0.07 µs) and a 1024 × 256 one's (1.2× slower). ``padding.skipped``: a compute-bound
stage's latency scales with the work it runs, so ``-ln(latency)`` grows by ``ln 2`` per unit
(:data:`PADDING_SKIPPED_WEIGHT`). The fitted features know nothing of the guards, so a prior
without it ranked a padded 3-D convolution's candidates that keep the whole padded depth in the
register tile (nothing skipped: 1.5–1.9× slower on a Zen 1) among its first picks.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from .errors import InvalidArgumentError

__all__ = [
    "GENERIC_FEATURES",
    "PADDING_SKIPPED_WEIGHT",
    "PARALLEL_SPEEDUP_WEIGHT",
    "LinearPrior",
    "check_prior_choice",
    "fit_linear_prior",
    "generic_features",
    "generic_matrix",
    "main_stage",
]

#: the generic features a prior is fitted on (:func:`generic_features` gives their meaning)
GENERIC_FEATURES: tuple[str, ...] = (
    "parallel.balance",
    "parallel.extent",
    "parallel.speedup",
    "register.fill",
    "L1.fill",
    "L2.fill",
    "P.intensity",
    "S1.volume",
    "S1.bytes",
    "S1.intensity",
    "R0.trips",
    "R0.intensity",
    "S2.trips",
    "S2.volume",
    "R1.trips",
    "unroll.depth",
    "tile.loads",
    "tile.widens",
    "padding.skipped",
    "write_back.outside",
)

#: weight of ``padding.skipped`` in a prior (module docstring): ``ln 2`` per halving of the work
PADDING_SKIPPED_WEIGHT = math.log(2.0)

#: weight of ``parallel.speedup`` in a prior (module docstring): the feature is the natural log
#: of the speedup a parallel loop gives over one core, launch included, so ``-ln(latency)``
#: grows by 1 per unit
PARALLEL_SPEEDUP_WEIGHT = 1.0

_LEVEL = re.compile(r"^(?P<stage>\w+)\.(?P<level>P|S\d|R\d|T)\.(?P<kind>\w+)$")
_FILL = re.compile(r"^(?P<stage>\w+)\.(?P<mem>register|L1|L2)\.bytes\.fill$")
_UNROLL = re.compile(r"^(?P<stage>\w+)\.unroll$")
_LOADS = re.compile(r"^(?P<stage>\w+)\.tile\.loads$")
_WIDENS = re.compile(r"^(?P<stage>\w+)\.tile\.widens$")
_SKIPPED = re.compile(r"^(?P<stage>\w+)\.padding\.skipped$")
_WRITE_BACK = re.compile(r"^(?P<stage>\w+)\.write_back\.outside$")


def main_stage(names: Sequence[str]) -> str | None:
    """The stage whose features :func:`generic_features` keeps: the first stage whose register
    footprint the rules bound (a ``<stage>.register.bytes.fill`` column), else the first tiled
    stage (a ``<stage>.<level>.<kind>`` column); ``None`` when ``names`` has neither."""
    for pattern in (_FILL, _LEVEL):
        for name in names:
            m = pattern.match(name)
            if m:
                return m.group("stage")
    return None


def generic_features(names: Sequence[str], x: np.ndarray) -> dict[str, np.ndarray]:
    """The workload-independent columns of a schedule-feature matrix, by generic name.

    Args:
        names: the column names of ``x`` (:attr:`heronlike.features.ScheduleFeatures.names`).
        x: ``(n, len(names))`` float64 features of ``n`` assignments of one space.

    Returns:
        Generic name (e.g. ``"S2.volume"``, ``"L1.fill"``) -> its ``(n,)`` column, for the
        features the space has: level features of the main stage, its memory-level fills and
        unroll knob, and the parallel features.

    Raises:
        ValueError: if ``x`` is not ``(n, len(names))``.
    """
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] != len(names):
        raise ValueError(f"x must be (n, {len(names)}), got shape {x.shape}")
    main = main_stage(names)
    out: dict[str, np.ndarray] = {}
    for i, name in enumerate(names):
        if name in ("parallel.balance", "parallel.extent", "parallel.speedup"):
            out[name] = x[:, i]
            continue
        for pattern, generic in (
            (_LEVEL, lambda m: f"{m.group('level')}.{m.group('kind')}"),
            (_FILL, lambda m: f"{m.group('mem')}.fill"),
            (_UNROLL, lambda m: "unroll.depth"),
            (_LOADS, lambda m: "tile.loads"),
            (_WIDENS, lambda m: "tile.widens"),
            (_SKIPPED, lambda m: "padding.skipped"),
            (_WRITE_BACK, lambda m: "write_back.outside"),
        ):
            m = pattern.match(name)
            if m and m.group("stage") == main:
                out.setdefault(generic(m), x[:, i])
    return out


def generic_matrix(
    names: Sequence[str], x: np.ndarray, features: Sequence[str] = GENERIC_FEATURES
) -> np.ndarray:
    """The ``(n, len(features))`` matrix of the generic ``features`` of ``x`` (columns
    ``names``), in that order; a feature the space does not have is a column of zeros.

    Raises:
        ValueError: as :func:`generic_features`.
    """
    cols = generic_features(names, x)
    n = np.asarray(x).shape[0]
    return np.stack([cols.get(f, np.zeros(n)) for f in features], axis=1)


@dataclass(frozen=True)
class LinearPrior:
    """``score = sum(weights[f] * feature f)`` over :func:`generic_features`; higher = faster.

    A fitted prior predicts ``-ln(latency)`` up to a constant per workload, so only the order of
    its scores within one space means anything.

    Attributes:
        weights: generic feature name -> weight (per unit of the feature as
            :class:`~heronlike.features.ScheduleFeatures` gives it: log2 counts, ratios).
        source: where the weights come from (machine, date, records, command).
    """

    weights: Mapping[str, float]
    source: str = field(default="", compare=False)

    def score(self, names: Sequence[str], x: np.ndarray) -> np.ndarray:
        """``(n,)`` scores of the ``n`` rows of the feature matrix ``x`` with columns ``names``.

        Raises:
            ValueError: as :func:`generic_features`.
        """
        columns = generic_features(names, x)
        out = np.zeros(np.asarray(x).shape[0])
        for name, weight in self.weights.items():
            if name in columns:
                out += weight * columns[name]
        return out


def check_prior_choice(prior: object) -> None:
    """Check a tune's ``prior`` argument: ``True`` (the target's prior), ``False`` (none) or a
    :class:`LinearPrior`.

    Raises:
        InvalidArgumentError: anything else (a path, a dict of weights, None).
    """
    if not isinstance(prior, bool | LinearPrior):
        raise InvalidArgumentError(
            f"prior must be True, False or a heronlike.prior.LinearPrior, got "
            f"{type(prior).__name__} {prior!r:.80}"
        )


def fit_linear_prior(
    workloads: Iterable[tuple[Sequence[str], np.ndarray, np.ndarray]],
    *,
    features: Sequence[str] = GENERIC_FEATURES,
    ridge: float = 1.0,
    source: str = "",
    fixed: Mapping[str, float] | None = None,
) -> LinearPrior:
    """Fit a :class:`LinearPrior` to measured trials of several workloads.

    The model is ``-ln(latency) = c_w + sum_f weight_f * feature_f`` with one free constant
    ``c_w`` per workload (a fixed-effects regression: features and labels are centred within
    each workload, so only differences between programs of one workload are fitted), solved as
    ridge regression on standardised features.

    Args:
        workloads: per workload, ``(names, x, latency_s)``: its feature names, ``(n, f)``
            features and ``(n,)`` latencies in seconds of its valid trials (n >= 2).
        features: the generic features to fit (absent ones are 0).
        ridge: the ridge penalty on the standardised weights.
        source: stored in the prior's :attr:`LinearPrior.source`.
        fixed: generic features weighed from first principles rather than fitted, with their
            weights (``padding.skipped``: :data:`PADDING_SKIPPED_WEIGHT`): their share
            ``weight * feature`` is taken off each label before the fit, they are not fitted
            even when in ``features``, and the prior holds them with these weights.

    Returns:
        The fitted prior.

    Raises:
        ValueError: if no workload has two valid trials, or a latency is not positive.
    """
    fixed = dict(fixed or {})
    features = [f for f in features if f not in fixed]
    rows, labels = [], []
    for names, x, latency in workloads:
        latency = np.asarray(latency, dtype=np.float64)
        if latency.size < 2:
            continue
        if np.any(latency <= 0) or not np.all(np.isfinite(latency)):
            raise ValueError("latencies must be positive and finite")
        m = generic_matrix(names, x, features)
        y = -np.log(latency)
        if fixed:
            y = y - generic_matrix(names, x, tuple(fixed)) @ np.array(list(fixed.values()))
        rows.append(m - m.mean(axis=0))
        labels.append(y - y.mean())
    if not rows:
        raise ValueError("no workload has two valid trials to fit a prior on")
    a, b = np.concatenate(rows), np.concatenate(labels)
    scale = a.std(axis=0)
    scale[scale == 0] = 1.0
    z = a / scale
    w = np.linalg.solve(z.T @ z + ridge * np.eye(len(features)), z.T @ b) / scale
    fitted = {f: float(v) for f, v in zip(features, w) if v != 0.0}
    return LinearPrior(fitted | {f: float(v) for f, v in fixed.items()}, source=source)
