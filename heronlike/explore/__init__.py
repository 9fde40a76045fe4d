"""Explorers: the search strategies that pick which assignments to measure (Heron ASPLOS'23 §5).

An explorer is ask/tell (:class:`Explorer`): ``propose(n, exclude=...)`` returns up to ``n`` new
valid assignments, ``observe(observations)`` feeds back their throughput. The tune loop owns the
budget, the measurement and the records.

Built-in explorers are listed by name in :data:`EXPLORERS` and imported on first use:

* ``"random"``: RandSAT samples, picked ε-greedily by the cost model (Heron's ``CRAND``);
* ``"rand"``: RandSAT samples only, no cost model (Heron's RAND baseline);
* ``"cga"``: Heron's constraint-based GA with key variables by feature importance;
  ``"cga1"``: the same with random key variables (the CGA-1 ablation);
* ``"sa"``: simulated annealing on the cost model, Metropolis acceptance, neighbours by knob
  topology (loop-order swaps, categorical re-draws);
* ``"ga"``: a classic GA on knob vectors (loop orders crossed over whole, mutated by swaps),
  invalid children discarded;
* ``"opevo"``: OpEvo's q-random-walk evolution on measured throughput (model-free by default);
* ``"flextensor"``: FlexTensor's simulated annealing over measured points with Q-learned
  directions (model-free).

Adding your own explorer (three ways):

1. Subclass :class:`Explorer`: set ``name``, optionally ``Options`` (a frozen dataclass of your
   options with defaults), and implement ``propose``; override ``observe`` only if you need more
   than "remember and refit the cost model".
2. Pass the class, or an instance you built yourself, wherever an explorer name is accepted
   (``make_explorer(MyExplorer, ...)``, ``tune(..., explorer=MyExplorer(...))``).
3. Or make it available by name: add ``"myname": "mypackage.module:MyExplorer"`` to
   :data:`EXPLORERS` (one line, for explorers shipped in ``heronlike/explore/``; third parties
   may also insert into the dict at import time).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from heronlike.cost_model import CostModel
from heronlike.csp import CSP
from heronlike.errors import UnknownExplorerError
from heronlike.explore.base import Explorer, Observation
from heronlike.features import Featurizer

if TYPE_CHECKING:
    from heronlike.prior import LinearPrior
    from heronlike.sampler import RandSAT

__all__ = ["EXPLORERS", "Explorer", "Observation", "explorer_class", "make_explorer", "search_for"]

#: Explorer name -> ``"module:Class"``, imported lazily by :func:`explorer_class`.
EXPLORERS: dict[str, str] = {
    "random": "heronlike.explore.random:RandomExplorer",
    "rand": "heronlike.explore.random:RandSATExplorer",
    "cga": "heronlike.explore.cga:CGAExplorer",
    "cga1": "heronlike.explore.cga:CGARandomKeysExplorer",
    "sa": "heronlike.explore.sa:SAExplorer",
    "ga": "heronlike.explore.ga:GAExplorer",
    "opevo": "heronlike.explore.opevo:OpEvoExplorer",
    "flextensor": "heronlike.explore.flextensor:FlexTensorExplorer",
}


def explorer_class(name: str) -> type[Explorer]:
    """The explorer class registered as ``name`` in :data:`EXPLORERS`.

    Raises:
        UnknownExplorerError: if ``name`` is not registered (the message lists the known names).
    """
    if name not in EXPLORERS:
        known = ", ".join(sorted(EXPLORERS))
        raise UnknownExplorerError(f"unknown explorer {name!r}; known explorers: {known}")
    module_name, _, class_name = EXPLORERS[name].partition(":")
    return getattr(importlib.import_module(module_name), class_name)


def make_explorer(
    name_or_obj: str | type[Explorer] | Explorer,
    csp: CSP,
    sampler: RandSAT,
    cost_model: CostModel,
    rng: np.random.Generator,
    *,
    featurizer: Featurizer | None = None,
    prior: LinearPrior | None = None,
    **options: Any,
) -> Explorer:
    """Normalise an explorer given by name, class or instance into an instance.

    A name is looked up in :data:`EXPLORERS`; a class is built with ``(csp, sampler, cost_model,
    rng, featurizer=featurizer, prior=prior, **options)``; an :class:`Explorer` instance is
    returned as it is.

    Raises:
        UnknownExplorerError: if a name is not registered.
        TypeError: on an unknown option, on options given with an instance, or if
            ``name_or_obj`` is none of a name, an Explorer subclass or an Explorer.
    """
    if isinstance(name_or_obj, Explorer):
        if options:
            raise TypeError(
                f"options {', '.join(sorted(options))} cannot be applied to an explorer "
                "instance; pass its name or class instead"
            )
        return name_or_obj
    if isinstance(name_or_obj, str):
        cls = explorer_class(name_or_obj)
    elif isinstance(name_or_obj, type) and issubclass(name_or_obj, Explorer):
        cls = name_or_obj
    else:
        raise TypeError(
            f"explorer must be a name, an Explorer subclass or an Explorer, not {name_or_obj!r}"
        )
    return cls(csp, sampler, cost_model, rng, featurizer=featurizer, prior=prior, **options)


def search_for(
    space: Any,
    explorer: str | type[Explorer] | Explorer,
    seed: int,
    *,
    cost_model: CostModel | None = None,
    options: Mapping[str, Any] | None = None,
    prior: bool | LinearPrior = True,
) -> tuple[RandSAT, Explorer]:
    """The sampler and explorer a tune of ``space`` (a :class:`heronlike.space.Space`) with
    ``seed`` uses, both on the space's search CSP (:meth:`heronlike.csp.CSP.search`: its
    finish knobs held at one value): RandSAT seeded from ``numpy.random.default_rng(seed)``,
    the explorer given that generator, ``cost_model`` and the schedule features of ``space``
    and, with ``prior``, the target's schedule prior (:meth:`heronlike.target.DLATarget.prior`;
    a :class:`~heronlike.prior.LinearPrior` given instead is used as it is), which ranks the
    untrained first round. The default ``cost_model`` is XGBoost seeded with ``seed``, with the
    prior as its base margin where there is one
    (:class:`~heronlike.cost_model.PriorMarginCostModel`; pass ``XGBCostModel(seed=seed)`` for
    Heron's model alone). Every caller that
    must reproduce a tune (the session, offline bundles, benchmarks) builds them here, so one
    seed means one search.

    Raises:
        UnknownExplorerError, TypeError: as :func:`make_explorer`.
        InvalidArgumentError: ``prior`` is neither a bool nor a ``LinearPrior``.
    """
    from heronlike.cost_model import PriorMarginCostModel, XGBCostModel
    from heronlike.features import ScheduleFeatures
    from heronlike.prior import check_prior_choice
    from heronlike.sampler import RandSAT

    check_prior_choice(prior)

    rng = np.random.default_rng(seed)
    csp = space.csp.search()  # finish knobs held at one value: settled by the session, not searched
    sampler = RandSAT(csp, seed=int(rng.integers(2**31 - 1)))
    featurizer = ScheduleFeatures(space)
    chosen = prior if not isinstance(prior, bool) else None
    if prior is True:  # the target's prior for this space
        chosen = space.target.prior_for(space)
    model = cost_model
    if model is None:
        model = XGBCostModel(seed=seed)
        if chosen is not None:
            model = PriorMarginCostModel(chosen, featurizer.names, model)
    found = make_explorer(
        explorer,
        csp,
        sampler,
        model,
        rng,
        featurizer=featurizer,
        prior=chosen,
        **dict(options or {}),
    )
    return sampler, found
