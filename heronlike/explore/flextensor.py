"""FlexTensor's explorer (Zheng et al., ASPLOS'20 §5.1): simulated annealing over the measured
points, each step's direction chosen by Q-learning.

FlexTensor rearranges the schedule space into a high-dimensional space of *directions*
(§4.3): for a loop split ``[f_1, ..., f_N]`` the neighbour along direction ``(i, j)`` has
``g_i > f_i``, ``g_j < f_j`` and every other part unchanged. Exploration (§5.1) keeps the set
``H`` of measured points with their performance ``E`` (here throughput, op/s) and repeats:

* **Starting points** (the heuristic, simulated annealing): a point ``p`` of ``H`` is chosen
  with probability ∝ ``exp(-γ (E* - E_p) / E*)``, ``E*`` the best performance so far (here:
  ``n`` points per ``propose(n)``, drawn with replacement by those weights; a point with no
  unvisited valid neighbour left is not drawn again).
* **Direction** (the learning part): a network ``X`` maps ``p`` to a Q-value per direction;
  the move takes the direction of largest Q-value among those whose neighbour is valid and not
  visited yet (no back-tracing), one step; with probability ``epsilon`` a random such direction
  instead (a deviation: the paper is greedy; 0 restores it).
* **Learning** (Q-learning with a target network, as the paper's DQN-style training): each
  measured move gives the tuple ``(p, d, e, r)`` with the reward ``r = (E_e - E_p) / E_p`` (a
  failed trial has ``E_e = 0``; ``r`` is clipped to ``[-1, reward_clip]`` for stability, a
  deviation); every ``train_every`` new tuples (the paper: every five trials) ``X`` is trained
  for ``epochs`` passes over every tuple so far on the target ``r + α max Y(e)`` with squared
  error and AdaDelta (the paper's optimiser), then copied into ``Y``.

The network is the paper's four fully connected layers with ReLU (``hidden`` units each), in
numpy, on the knobs' ``log2(v + 1)`` scaled to ``[0, 1]`` by their largest candidate. Until a
point of positive performance has been measured, and whenever no start has a valid unvisited
direction left, proposals are RandSAT samples (counted in ``fills``).

**Directions** per parameter (the parameters are OpEvo's, :func:`heronlike.explore.opevo.
parameters`): a split of ``m`` factors has the ``m (m - 1)`` ordered pairs ``(i, j)``, the nearest
neighbour moving the smallest prime factor of ``f_j`` that keeps both parts candidates to
``f_i``; a loop order (``perm``) has one transposition per pair of positions; an ordered knob
(``discrete``) steps to the next larger or smaller candidate; a categorical knob (``choice``) to
the next or previous candidate, cyclically. A neighbour is completed and checked
(:class:`~heronlike.explore.common.Completer`); invalid neighbours are never proposed.

The explorer is model-free, as FlexTensor: it never fits the tune loop's cost model.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from heronlike.explore.base import Explorer, Observation, check_options
from heronlike.explore.common import Completer
from heronlike.explore.opevo import Parameter, parameters

__all__ = ["FlexTensorExplorer", "FlexTensorOptions", "QNetwork", "directions"]

Assignment = dict[str, int]
Key = tuple[int, ...]
#: one direction: (index of the parameter, kind of move, first index, second index)
Direction = tuple[int, str, int, int]


def _smallest_prime(n: int) -> int:
    p = 2
    while p * p <= n:
        if n % p == 0:
            return p
        p += 1
    return n


def directions(params: Sequence[Parameter]) -> list[Direction]:
    """FlexTensor's directions (ASPLOS'20 §4.3) over OpEvo's ``params``.

    ``("split", i, j)``: part ``i`` grows and part ``j`` shrinks; ``("swap", i, j)``: positions
    ``i < j`` of a loop order swap; ``("step", +1/-1, 0)``: the next larger / smaller
    candidate of an ordered knob, or the next / previous one of a categorical knob (cyclic).
    """
    out: list[Direction] = []
    for k, p in enumerate(params):
        m = len(p.knobs)
        if p.kind == "factor":
            out += [(k, "split", i, j) for i in range(m) for j in range(m) if i != j]
        elif p.kind == "perm":
            out += [(k, "swap", i, j) for i in range(m) for j in range(i + 1, m)]
        else:
            out += [(k, "step", 1, 0), (k, "step", -1, 0)]
    return out


class QNetwork:
    """The Q-value network of FlexTensor (ASPLOS'20 §5.1): four fully connected layers with
    ReLU between them, trained by squared error with AdaDelta (Zeiler 2012).

    Args:
        n_in: input features; n_out: Q-values (one per direction); hidden: units per hidden
            layer; rng: initialisation (He-normal weights, zero biases).
    """

    def __init__(self, n_in: int, n_out: int, hidden: int, rng: np.random.Generator) -> None:
        sizes = [n_in, hidden, hidden, hidden, n_out]
        self.w = [
            rng.normal(0.0, math.sqrt(2.0 / a), size=(a, b)) for a, b in zip(sizes, sizes[1:])
        ]
        self.b = [np.zeros(b) for b in sizes[1:]]
        self._eg = [np.zeros_like(p) for p in self.w + self.b]  # AdaDelta running E[g^2]
        self._ed = [np.zeros_like(p) for p in self.w + self.b]  # and E[dx^2]

    def copy(self) -> QNetwork:
        """A network with the same parameters (the target network ``Y``)."""
        other = object.__new__(QNetwork)
        other.w = [w.copy() for w in self.w]
        other.b = [b.copy() for b in self.b]
        other._eg = [g.copy() for g in self._eg]
        other._ed = [d.copy() for d in self._ed]
        return other

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """Q-values of the ``(n, n_in)`` inputs ``x``: ``(n, n_out)``."""
        h = np.asarray(x, dtype=np.float64)
        for i, (w, b) in enumerate(zip(self.w, self.b)):
            h = h @ w + b
            if i < len(self.w) - 1:
                h = np.maximum(h, 0.0)
        return h

    def train(
        self,
        x: np.ndarray,
        actions: np.ndarray,
        target: np.ndarray,
        *,
        rho: float = 0.95,
        eps: float = 1e-6,
    ) -> float:
        """One AdaDelta step on the mean squared error of ``Q(x)[actions]`` against
        ``target``; returns the loss before the step."""
        acts = [np.asarray(x, dtype=np.float64)]
        for i, (w, b) in enumerate(zip(self.w, self.b)):
            z = acts[-1] @ w + b
            acts.append(np.maximum(z, 0.0) if i < len(self.w) - 1 else z)
        out = acts[-1]
        rows = np.arange(len(actions))
        err = out[rows, actions] - target
        loss = float(np.mean(err**2))
        grad = np.zeros_like(out)
        grad[rows, actions] = 2.0 * err / len(actions)
        gw: list[np.ndarray] = [np.empty(0)] * len(self.w)
        gb: list[np.ndarray] = [np.empty(0)] * len(self.b)
        for i in reversed(range(len(self.w))):
            gw[i] = acts[i].T @ grad
            gb[i] = grad.sum(axis=0)
            if i:
                grad = (grad @ self.w[i].T) * (acts[i] > 0)
        params = self.w + self.b
        for k, (p, g) in enumerate(zip(params, gw + gb)):
            self._eg[k] = rho * self._eg[k] + (1 - rho) * g * g
            step = -np.sqrt(self._ed[k] + eps) / np.sqrt(self._eg[k] + eps) * g
            self._ed[k] = rho * self._ed[k] + (1 - rho) * step * step
            p += step
        return loss


@dataclass(frozen=True)
class FlexTensorOptions:
    """Options of :class:`FlexTensorExplorer` (see the module docstring).

    Raises:
        ValueError: on an out-of-range option.
    """

    gamma: float = field(
        default=5.0, metadata={"doc": "γ of the starting-point probability exp(-γ (E*-E)/E*)"}
    )
    alpha: float = field(default=0.5, metadata={"doc": "α: weight of max Y(e) in the Q target"})
    epsilon: float = field(
        default=0.1, metadata={"doc": "probability of a random valid direction (paper: 0)"}
    )
    hidden: int = field(default=64, metadata={"doc": "units per hidden layer"})
    train_every: int = field(
        default=5, metadata={"doc": "new measured moves between trainings (paper: 5)"}
    )
    epochs: int = field(default=20, metadata={"doc": "AdaDelta steps per training"})
    reward_clip: float = field(default=1.0, metadata={"doc": "upper clip of the reward"})
    start_tries: int = field(
        default=8, metadata={"doc": "starting points drawn per proposal before a RandSAT fill"}
    )

    def __post_init__(self) -> None:
        check_options(
            self,
            positive=("hidden", "train_every", "start_tries"),
            non_negative=("epochs",),
            unit=("alpha", "epsilon"),
        )
        if not self.gamma >= 0:
            raise ValueError(f"gamma must be >= 0, got {self.gamma}")
        if not self.reward_clip > 0:
            raise ValueError(f"reward_clip must be > 0, got {self.reward_clip}")


class FlexTensorExplorer(Explorer):
    """FlexTensor's Q-learning-guided simulated annealing (ASPLOS'20 §5.1; module docstring).

    Attributes:
        params: OpEvo's parameters of the CSP; dirs: the directions over them.
        moves: neighbours proposed; greedy_moves: of them, by the largest Q-value;
        invalid_moves: neighbours that broke a constraint (never proposed); fills: RandSAT
        samples proposed instead of moves; trainings: Q-network trainings.
    """

    name = "flextensor"
    Options = FlexTensorOptions
    counters = ("moves", "greedy_moves", "invalid_moves", "fills", "trainings")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.params = parameters(self.csp)
        self.dirs = directions(self.params)
        self.complete = Completer(self.csp, self.sampler)
        self._knobs = self.csp.knobs
        self._scale = np.array(
            [math.log2(max(max(self.csp.candidates(k)), 0) + 2) for k in self._knobs]
        )
        self.perf: dict[Key, tuple[Assignment, float]] = {}  # H: measured points
        self._exhausted: set[Key] = set()
        self._pending: dict[Key, tuple[Key, int]] = {}  # proposed e -> (p, direction)
        self._tuples: list[tuple[np.ndarray, int, float, np.ndarray]] = []
        self._untrained = 0
        self.q = QNetwork(len(self._knobs), max(1, len(self.dirs)), self.options.hidden, self.rng)
        self.target = self.q.copy()
        self.moves = self.greedy_moves = self.invalid_moves = self.fills = self.trainings = 0

    # -- the pieces ------------------------------------------------------------------------------

    def encode(self, assignments: Sequence[Assignment]) -> np.ndarray:
        """The network's input: ``log2(v + 1)`` of each knob over ``log2(max + 2)``."""
        x = np.array([[a[k] for k in self._knobs] for a in assignments], dtype=np.float64)
        return np.log2(np.maximum(x, 0.0) + 1.0).reshape(len(assignments), -1) / self._scale

    def neighbour(self, a: Assignment, d: int) -> Assignment | None:
        """The point next to ``a`` along direction ``d`` (knob values only; not checked), or
        None where the direction leaves the space."""
        k, kind, i, j = self.dirs[d]
        p = self.params[k]
        values = [int(a[n]) for n in p.knobs]
        if kind == "split":
            if values[j] <= 1:
                return None
            allowed = (set(self.csp.candidates(p.knobs[i])), set(self.csp.candidates(p.knobs[j])))
            rest, moved = values[j], False
            while rest > 1:  # the smallest prime of f_j whose move keeps both parts candidates
                prime = _smallest_prime(rest)
                if values[i] * prime in allowed[0] and values[j] // prime in allowed[1]:
                    values[i], values[j], moved = values[i] * prime, values[j] // prime, True
                    break
                rest //= prime
            if not moved:
                return None
        elif kind == "swap":
            values[i], values[j] = values[j], values[i]
        else:
            cands = list(self.csp.candidates(p.knobs[0]))
            pos = cands.index(values[0]) if values[0] in cands else -1
            if pos < 0:
                return None
            nxt = pos + i
            if p.kind == "choice":
                nxt %= len(cands)
            if not 0 <= nxt < len(cands) or cands[nxt] == values[0]:
                return None
            values[0] = cands[nxt]
        out = {n: int(a[n]) for n in self._knobs}
        out.update(zip(p.knobs, values))
        return out

    def _starts(self) -> tuple[list[Assignment], np.ndarray]:
        """Points of H that may start a move, and their simulated-annealing weights."""
        best = max(f for _, f in self.perf.values())
        pts = [(a, f) for k, (a, f) in self.perf.items() if k not in self._exhausted]
        if not pts or best <= 0:
            return [], np.zeros(0)
        w = np.array([math.exp(-self.options.gamma * (best - f) / best) for _, f in pts])
        return [a for a, _ in pts], w / w.sum()

    def _move(self, p: Assignment, taken: set[Key]) -> tuple[Assignment, int] | None:
        """The best valid unvisited neighbour of ``p`` by Q-value (or a random one with
        probability ``epsilon``) and its direction; None (and ``p`` exhausted) if none."""
        key = self.sampler.key
        q = self.q(self.encode([p]))[0]
        order = [int(d) for d in np.argsort(-q, kind="stable")]
        greedy = True
        if self.rng.random() < self.options.epsilon:
            order = [int(d) for d in self.rng.permutation(len(self.dirs))]
            greedy = False
        for d in order:
            knobs = self.neighbour(p, d)
            if knobs is None or tuple(knobs[k] for k in self._knobs) in taken:
                continue
            full = self.complete(knobs)
            if full is None:
                self.invalid_moves += 1
                continue
            if key(full) in taken:
                continue
            self.moves += 1
            self.greedy_moves += greedy
            return full, d
        self._exhausted.add(key(p))
        return None

    # -- ask / tell ------------------------------------------------------------------------------

    def propose(self, n: int, *, exclude: Collection[tuple[int, ...]]) -> list[dict[str, int]]:
        if n <= 0:
            return []
        key = self.sampler.key
        taken = set(exclude) | set(self.perf)
        out: list[Assignment] = []
        positive = any(f > 0 for _, f in self.perf.values())
        tries = 0
        while positive and len(out) < n and tries < n * self.options.start_tries:
            tries += 1
            starts, weights = self._starts()
            if not starts:
                break
            p = starts[int(self.rng.choice(len(starts), p=weights))]
            got = self._move(p, taken)
            if got is None:
                continue
            e, d = got
            taken.add(key(e))
            self._pending[key(e)] = (key(p), d)
            out.append(e)
        if len(out) < n:
            fresh = self.sampler.sample(n - len(out), exclude=taken)
            self.fills += len(fresh) if positive else 0
            out += fresh
        return out

    def observe(self, observations: Sequence[Observation]) -> None:
        """Add the measured points to H; turn measured moves into Q-learning tuples and train
        every ``train_every`` of them. The tune loop's cost model is not fitted."""
        self.observations.extend(observations)
        key = self.sampler.key
        for o in observations:
            k = key(o.assignment)
            value = float(o.throughput) if o.throughput is not None else 0.0
            old = self.perf.get(k)
            if old is None or value > old[1]:
                self.perf[k] = (dict(o.assignment), value)
            src = self._pending.pop(k, None)
            if src is None or src[0] not in self.perf:
                continue
            p, e_p = self.perf[src[0]]
            if e_p <= 0:
                continue
            r = min(max((value - e_p) / e_p, -1.0), self.options.reward_clip)
            x_p, x_e = self.encode([p, o.assignment])
            self._tuples.append((x_p, src[1], r, x_e))
            self._untrained += 1
        if self._untrained >= self.options.train_every:
            self._train()

    def _train(self) -> None:
        """``epochs`` AdaDelta steps of X on every tuple, target ``r + α max Y(e)``; Y <- X."""
        self._untrained = 0
        if not self._tuples or not self.dirs:
            return
        x = np.stack([t[0] for t in self._tuples])
        acts = np.array([t[1] for t in self._tuples], dtype=np.int64)
        r = np.array([t[2] for t in self._tuples])
        xe = np.stack([t[3] for t in self._tuples])
        target = r + self.options.alpha * self.target(xe).max(axis=1)
        for _ in range(self.options.epochs):
            self.q.train(x, acts, target)
        self.target = self.q.copy()
        self.trainings += 1
