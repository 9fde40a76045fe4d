"""Typed errors raised for bad input and unusable spaces.

Every error a user can provoke with bad input derives from :class:`HeronlikeError`, so
``except heronlike.HeronlikeError`` catches all of them. A failing *candidate* (a program that
does not build, crashes, hangs or computes a wrong result) is never an exception: it is a value in
its trial record (see :mod:`heronlike.records`).
"""

from __future__ import annotations


class HeronlikeError(Exception):
    """Base class of every error heronlike raises on purpose."""


class UnknownTargetError(HeronlikeError, ValueError):
    """The target name or string names no registered DLA target."""


class UnsupportedDtypeError(HeronlikeError, TypeError):
    """The compute uses dtypes the target's intrinsics cannot run."""


class UnsupportedShapeError(HeronlikeError, ValueError):
    """The compute has a shape the target cannot hold (e.g. not divisible by the intrinsic)."""


class InvalidComputeError(HeronlikeError, ValueError):
    """The compute itself is malformed: zero or negative extents, no output, wrong types."""


class NoTensorizableStageError(HeronlikeError, ValueError):
    """The target requires its intrinsic but no stage of the compute matches it."""


class HostFeatureError(HeronlikeError, RuntimeError):
    """The host CPU lacks an instruction-set feature the target needs for measuring."""


class InfeasibleSpaceError(HeronlikeError, RuntimeError):
    """The CSP of a compute has no solution (the rules and the target's limits contradict)."""


class SolverTimeoutError(HeronlikeError, RuntimeError):
    """CP-SAT found no solution within its time limit, even after retries."""


class RecordsMismatchError(HeronlikeError, ValueError):
    """A records database holds no usable trial for the requested compute and target."""


class UnknownExplorerError(HeronlikeError, ValueError):
    """The explorer name is not registered."""


class RunnerSpecError(HeronlikeError, ValueError):
    """A runner spec string (e.g. ``HERONLIKE_RUNNER``) is malformed; the expected form is
    ``rpc://HOST:PORT/KEY``."""


class BundleError(HeronlikeError, ValueError):
    """An offline measurement bundle or its results cannot be written, read or imported
    (malformed input, results of another bundle, or stand-in results refused)."""
