"""The accelerator interface: what a DLA target must provide, and how targets are found.

A target is one class deriving :class:`DLATarget`, in one file. heronlike finds it

* by file: every module of the ``heronlike.dla_targets`` package (the repository's
  ``dla_targets/`` folder) is scanned for ``DLATarget`` subclasses, and
* by entry point: a third-party package declares, in its own packaging metadata::

      [options.entry_points]
      heronlike.targets =
          mynpu = mypackage.mynpu:MyNPUTarget

so a new accelerator never needs an edit to the engine. A target string such as
``"dlboost"``, ``"llvm -mcpu=sapphirerapids -num-cores=2"`` or ``"cuda -tensorcore"`` is parsed
here into a name and options (``-key=value`` or ``-flag``); the first target class whose
:meth:`DLATarget.accepts` says yes is built with those options.

A target declares, as data: its intrinsics (:class:`~heronlike.intrinsic.Intrinsic`), its
memory levels with capacities in bytes (:class:`MemoryLevel`), its core count; and, as code: its
schedule and constraint rules (usually reused from :mod:`heronlike.rules`), the TVM target it
compiles for, its host checks, and its builder and runner.
"""

from __future__ import annotations

import importlib
import pkgutil
import threading
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any, ClassVar

from .errors import (
    NoTensorizableStageError,
    UnknownTargetError,
    UnsupportedDtypeError,
    UnsupportedShapeError,
)
from .intrinsic import Intrinsic, IntrinsicMatch, match_intrinsic, shape_problems, structural_match

if TYPE_CHECKING:  # pragma: no cover
    from .dag import ComputeDAG
    from .measure import Builder, Runner
    from .prior import LinearPrior
    from .rules.base import ConstraintRule, Rule
    from .space import Space

ENTRY_POINT_GROUP = "heronlike.targets"

Options = Mapping[str, str | bool]


@dataclass(frozen=True)
class MemoryLevel:
    """One level of the target's memory hierarchy.

    Attributes:
        name: e.g. ``"register"``, ``"L1"``, ``"L2"``, ``"shared"``, ``"acc_buffer"``.
        capacity_bytes: bytes available to one core (or one thread block / one VTA core).
        scope: the TVM storage scope of a cache stage placed in this level, if the rules place
            buffers there explicitly (``None`` for hardware-managed caches).
    """

    name: str
    capacity_bytes: int
    scope: str | None = None


class DLATarget(ABC):
    """Base class of every accelerator target (one subclass per file in ``dla_targets/``).

    Subclasses set :attr:`names` (the first is canonical) and implement the abstract members.

    Raises:
        UnknownTargetError: from ``__init__`` for an option the target does not know.
    """

    names: ClassVar[tuple[str, ...]] = ()
    #: the target can only run computes that map onto one of its intrinsics (a target may
    #: set it per instance, e.g. from an option that enables a general rule set)
    requires_intrinsic: bool = True
    #: the target's rules pad a matching stage whose extents the intrinsic tile does not
    #: divide (e.g. :class:`heronlike.rules.pad.PadToIntrinsic`); otherwise such a stage is an
    #: :class:`~heronlike.errors.UnsupportedShapeError`
    pads_shapes: ClassVar[bool] = False
    #: operations one core runs in the time TVM's thread pool takes to launch and join a
    #: parallel region, at the rate of the small stages where the launch matters: the
    #: ``parallel.speedup`` feature (:mod:`heronlike.features`) weighs a parallel loop's
    #: launch against the work it splits with it. 1.7e5 on a Zen 4's 2 cores: 0.78 µs of
    #: launch at the 222 G op/s per core of int8 matrix-vector products (their serial and
    #: parallel random programs fit ``serial / 2 + 0.78 µs``; docs/results.md, "A parallel
    #: loop's launch in the prior"). A target may set it per instance.
    parallel_launch_ops: float = 1.7e5
    #: options this target understands (``-key=value`` in a target string)
    option_names: ClassVar[tuple[str, ...]] = ()
    #: options a name of :attr:`names` implies, by name (e.g. ``"llvm"`` means
    #: ``"dlboost -general"``); options given explicitly override them
    name_options: ClassVar[Mapping[str, Options]] = {}

    def __init__(self, **options: str | bool) -> None:
        unknown = sorted(set(options) - set(self.option_names))
        if unknown:
            raise UnknownTargetError(
                f"target {self.names[0]!r} has no option {', '.join(unknown)}; "
                f"known: {', '.join(self.option_names) or 'none'}"
            )
        self.options: dict[str, str | bool] = dict(options)

    @classmethod
    def accepts(cls, name: str, options: Options) -> bool:
        """Whether a target string with this name and options means this target."""
        return name in cls.names

    # -- capabilities, as data ------------------------------------------------------------------
    @property
    @abstractmethod
    def intrinsics(self) -> tuple[Intrinsic, ...]:
        """The tensor intrinsics, preferred first."""

    @property
    @abstractmethod
    def memory(self) -> tuple[MemoryLevel, ...]:
        """Memory levels, innermost (registers) first."""

    @property
    @abstractmethod
    def cores(self) -> int:
        """Cores (or parallel units) a kernel may use."""

    @abstractmethod
    def tvm_target(self) -> dict[str, Any]:
        """The TVM target in JSON-dict form (0.27 rejects CLI-style target strings)."""

    @property
    def key(self) -> str:
        """Canonical target string: name and sorted options; the records key of the target."""
        opts = " ".join(
            f"-{k}" if v is True else f"-{k}={v}"
            for k, v in sorted(self.resolved_options().items())
        )
        return f"{self.names[0]} {opts}".strip()

    def resolved_options(self) -> dict[str, str | bool]:
        """Options after defaults and host detection (what :attr:`key` prints)."""
        return dict(self.options)

    def memory_level(self, name: str) -> MemoryLevel | None:
        for level in self.memory:
            if level.name == name:
                return level
        return None

    def peak_ops_per_s(self) -> float | None:
        """Peak operations per second of the intrinsic on all cores, or None if unknown."""
        return None

    def cycle_hz(self) -> float | None:
        """The clock (Hz) a simulated target's latencies count cycles of (latency = cycles /
        clock, e.g. VTA's simulator), so reports can show cycles; None for measured hardware."""
        return None

    # -- rules -----------------------------------------------------------------------------------
    @abstractmethod
    def schedule_rules(self) -> Sequence[Rule]:
        """Schedule-generation rules, in the order Heron's Algorithm 1 tries them."""

    def constraint_rules(self) -> Sequence[ConstraintRule]:
        """Global constraint rules run after the schedule rules (C5 AddMemLimit, C6 ...)."""
        return ()

    def normalize(self, dag: ComputeDAG) -> Any:
        """A ``tirx.PrimFunc`` computing the same as ``dag.func`` that this target's rules
        schedule (e.g. a convolution rewritten as an implicit GEMM), or None to keep the
        compute as it is (the default). A parameter may change shape only by a row-major
        reshape (same elements in the same order), so the user's arrays are passed as views;
        see :attr:`heronlike.space.Space.logical`."""
        return None

    def prior(self) -> LinearPrior | None:
        """The schedule prior explorers rank their first, untrained round by
        (:mod:`heronlike.prior`, fitted on recorded tunes by ``benchmarks/prior_fit.py``), or
        None (the default): that round is RandSAT samples at random, as in Heron."""
        return None

    def prior_for(self, space: Space) -> LinearPrior | None:
        """The schedule prior for one space of this target: :meth:`prior` (the default). A
        target whose spaces differ in kind (stages on different intrinsics) overrides it to
        give each kind the prior fitted on its own records."""
        return self.prior()

    # -- compute checks --------------------------------------------------------------------------
    def general_hint(self) -> str:
        """What the user can do when no stage maps onto an intrinsic (appended to the error);
        a target with an opt-in general rule set names its option here."""
        return ""

    def match(self, dag: ComputeDAG) -> list[IntrinsicMatch]:
        """Every stage that maps onto one of the intrinsics, with the intrinsic it maps onto.

        A matching stage whose extents are not multiples of the intrinsic tile is kept when
        :attr:`pads_shapes` (the rules pad it), and dropped otherwise unless
        :attr:`requires_intrinsic`, in which case it is an error.

        Raises (only when :attr:`requires_intrinsic`):
            UnsupportedDtypeError: a stage is a multiply-accumulate, but of other dtypes.
            NoTensorizableStageError: no stage is a multiply-accumulate over plain indices.
            UnsupportedShapeError: a matching stage's extents are not multiples of the tile
                and the target does not pad.
        """
        matches = []
        for stage in dag.stages:
            for intrin in self.intrinsics:
                m = match_intrinsic(stage, intrin)
                if m is not None:
                    matches.append(m)
                    break
        if not self.requires_intrinsic:
            return [m for m in matches if self.pads_shapes or not shape_problems(m)]
        if not matches:
            macs = [s for s in dag.stages if structural_match(s) is not None]
            if macs:
                s = macs[0]
                a, b, roles = structural_match(s)  # type: ignore[misc]
                wanted = " or ".join(dict.fromkeys(i.signature for i in self.intrinsics))
                signatures = {(i.a_dtype, i.b_dtype, i.c_dtype) for i in self.intrinsics}
                if not roles["m"] and any(
                    (x, y, s.write.dtype) in signatures
                    for x, y in ((a.dtype, b.dtype), (b.dtype, a.dtype))
                ):
                    raise NoTensorizableStageError(
                        f"target {self.names[0]}'s intrinsic tiles rows of A (an m axis: one "
                        f"that indexes the output and A but not B); stage {s.name} has none "
                        f"(a matrix-vector product)" + self.general_hint()
                    )
                raise UnsupportedDtypeError(
                    f"target {self.names[0]} runs {wanted}; stage {s.name} computes "
                    f"{a.dtype} x {b.dtype} -> {s.write.dtype}" + self.general_hint()
                )
            raise NoTensorizableStageError(
                f"target {self.names[0]} needs a stage C[..] += A[..] * B[..] with plain indices "
                f"to map onto its intrinsic; the compute has none"
                + self.general_hint()
                + ":\n"
                + dag.describe()
            )
        for m in matches:
            problems = shape_problems(m)
            if problems and not self.pads_shapes:
                raise UnsupportedShapeError(
                    f"stage {m.stage.name} does not fit intrinsic {m.intrinsic.name} "
                    f"({m.intrinsic.m}x{m.intrinsic.n}x{m.intrinsic.k}): " + "; ".join(problems)
                )
        return matches

    def check_host(self) -> None:
        """Raise :class:`~heronlike.errors.HostFeatureError` if this host cannot measure.

        The default accepts every host (a target measured remotely or simulated needs nothing).
        """
        return None

    def prepare_process(self) -> None:
        """Prepare this process to run the target's kernels (default: nothing). Called before
        the first kernel runs in the tuning process (:meth:`check_host`), in a runner's worker,
        in a loaded library and in a compiled model; AMX asks Linux for the tile state here.

        Raises:
            HostFeatureError: this process cannot run the kernels.
        """
        return None

    # -- measurement -----------------------------------------------------------------------------
    #: the TVM device kernels of this target run on (``"cpu"``, ``"cuda"``, ``"cuda:1"``)
    device: str = "cpu"
    #: built kernels can be called in the tuning process (:class:`heronlike.kernel.BuiltKernel`);
    #: False for a device this process may not have (a GPU measured remotely)
    runs_in_process: bool = True

    def build_options(self) -> dict[str, Any]:
        """Target-specific options passed to the build function with every candidate
        (:attr:`heronlike.measure.BuildInput.options`), e.g. TVM pass-context settings."""
        return {}

    def make_builder(self, *, timeout_s: float = 60.0) -> Builder:
        """The builder for candidates (default: TVM's LLVM build in a local process pool)."""
        from .measure import LocalBuilder

        return LocalBuilder(timeout_s=timeout_s)

    def make_runner(self, *, timeout_s: float = 30.0, **evaluator: Any) -> Runner:
        """The runner for candidates (default: one local process, all cores)."""
        from .measure import LocalRunner

        return LocalRunner(num_threads=self.cores, timeout_s=timeout_s, **evaluator)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.key}>"


def prepare_process_for(key: str) -> None:
    """:meth:`DLATarget.prepare_process` of the target a records or manifest ``key`` names
    (e.g. ``"amx -mcpu=sapphirerapids -num-cores=2"``), and for a CPU target TVM's thread pool
    sized to its cores (:func:`heronlike.host.use_cpu_threads`); nothing for a target not
    installed here (its kernels were built elsewhere, nothing to prepare for).

    Cheap after the first call for a key on a thread (TVM's thread pools are per thread), so
    callers may call it before every run.

    Raises:
        HostFeatureError: this process cannot run the target's kernels.
    """
    done = (key, threading.get_ident())
    if done in _PREPARED:
        return
    try:
        target = get_target(key)
    except UnknownTargetError:
        return
    target.prepare_process()
    if target.device == "cpu":
        from .host import use_cpu_threads

        use_cpu_threads(target.cores)
    _PREPARED.add(done)


#: ``(target key, thread id)`` pairs :func:`prepare_process_for` has prepared
_PREPARED: set[tuple[str, int]] = set()


def parse_target_string(text: str) -> tuple[str, dict[str, str | bool]]:
    """Split ``"name -key=value -flag"`` into ``("name", {"key": "value", "flag": True})``.

    Raises:
        UnknownTargetError: for an empty string or a token that is not ``-key[=value]``.
    """
    tokens = text.split()
    if not tokens:
        raise UnknownTargetError("empty target string")
    name, options = tokens[0].lower(), {}
    for tok in tokens[1:]:
        if not tok.startswith("-") or tok == "-":
            raise UnknownTargetError(f"target option {tok!r} is not of the form -key[=value]")
        key, sep, value = tok.lstrip("-").partition("=")
        options[key] = value if sep else True
    return name, options


def available_targets() -> dict[str, type[DLATarget]]:
    """Every target class by canonical name: the classes defined in each ``heronlike.dla_targets``
    module (or, for a target package such as ``vta/``, in its submodules and imported by its
    ``__init__``), then the ``heronlike.targets`` entry points."""
    from . import dla_targets  # type: ignore[attr-defined]

    found: dict[str, type[DLATarget]] = {}
    for info in pkgutil.iter_modules(dla_targets.__path__):
        module = importlib.import_module(f"{dla_targets.__name__}.{info.name}")
        for obj in vars(module).values():
            if isinstance(obj, type) and issubclass(obj, DLATarget) and obj.names:
                home = obj.__module__
                # defined in the module, or (a target package) in one of its submodules
                if home == module.__name__ or home.startswith(module.__name__ + "."):
                    found.setdefault(obj.names[0], obj)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        obj = ep.load()
        if not (isinstance(obj, type) and issubclass(obj, DLATarget) and obj.names):
            raise UnknownTargetError(
                f"entry point {ep.name} = {ep.value} is not a DLATarget subclass with names"
            )
        found.setdefault(obj.names[0], obj)
    return found


def get_target(spec: str | Mapping[str, Any] | DLATarget) -> DLATarget:
    """Resolve a target name, string, TVM-style dict (``{"kind": ...}``) or object.

    Raises:
        UnknownTargetError: when no registered target accepts it, listing the known ones.
    """
    if isinstance(spec, DLATarget):
        return spec
    if isinstance(spec, Mapping):
        options = {str(k): v for k, v in spec.items() if k != "kind"}
        name = str(spec.get("kind", "")).lower()
    elif isinstance(spec, str):
        name, options = parse_target_string(spec)
    else:
        raise UnknownTargetError(f"target must be a string, dict or DLATarget, not {spec!r}")
    targets = available_targets()
    for cls in targets.values():
        if cls.accepts(name, options):
            given = {**cls.name_options.get(name, {}), **options}
            return cls(**{k: (v if isinstance(v, bool) else str(v)) for k, v in given.items()})
    known = ", ".join(sorted(n for cls in targets.values() for n in cls.names))
    raise UnknownTargetError(f"unknown target {spec!r}; known targets: {known}")
