"""Typed errors raised for bad input and unusable spaces.

Every error a user can provoke with bad input derives from :class:`HeronlikeError`, so
``except heronlike.HeronlikeError`` catches all of them. A failing *candidate* (a program that
does not build, crashes, hangs or computes a wrong result) is never an exception: it is a value in
its trial record (see :mod:`heronlike.records`).
"""

from __future__ import annotations

from collections.abc import Mapping


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


class SymbolicShapeError(UnsupportedShapeError, InvalidComputeError):
    """The compute has a symbolic extent (a dynamic batch, a sequence length): heronlike tunes
    concrete shapes only. Attribute ``dimension`` names the symbolic variable; models bind it
    with ``shapes={"batch": 1}`` (:mod:`heronlike.model`)."""

    def __init__(self, message: str, *, dimension: str = "") -> None:
        super().__init__(message)
        self.dimension = dimension


class ModelImportError(HeronlikeError, ValueError):
    """A model cannot be imported: a missing or unreadable file, a frontend that is not
    installed, or an operator the frontend cannot convert (:class:`UnsupportedOperatorError`).
    The message names the file or the operator."""


class UnsupportedOperatorError(ModelImportError):
    """The model uses an operator TVM's frontend cannot convert; attribute ``operators`` lists
    them by name."""

    def __init__(self, message: str, *, operators: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.operators = tuple(operators)


class ModelCompileError(HeronlikeError, RuntimeError):
    """TVM failed to fuse, lower or build a model (a Relax pass or the code generator raised);
    the message names the stage and keeps TVM's last lines."""


class ModelInputError(HeronlikeError, ValueError):
    """A compiled model was called with the wrong number of inputs, or an input of the wrong
    shape or dtype; the message names the input, what it must be and what it got."""


class NoTensorizableStageError(HeronlikeError, ValueError):
    """The target requires its intrinsic but no stage of the compute matches it."""


class HostFeatureError(HeronlikeError, RuntimeError):
    """The host lacks what the target needs: a CPU instruction-set feature for measuring, a
    GPU, nvcc or CuPy."""


#: what to install to run CUDA kernels through CuPy (the CuPy runner, CUDA kernel libraries)
CUPY_INSTALL_HINT = (
    'pip install "heronlike[cuda]" (CuPy for CUDA 12; with a CUDA 13 driver: pip install '
    "cupy-cuda13x)"
)


class InfeasibleSpaceError(HeronlikeError, RuntimeError):
    """The CSP of a compute has no solution (the rules and the target's limits contradict)."""


class SolverTimeoutError(HeronlikeError, RuntimeError):
    """CP-SAT found no solution within its time limit, even after retries."""


class RecordsMismatchError(HeronlikeError, ValueError):
    """A records database cannot be used: the file is corrupted, belongs to another application
    or a newer schema, or holds no usable trial for the requested compute and target. The
    message names the file."""


class RecordsBusyError(HeronlikeError, TimeoutError):
    """Another process kept a records database locked for longer than the wait allowed
    (:class:`heronlike.records.Records` ``busy_timeout_s``); nothing was written by the call
    that raised it. The message names the file."""


class InvalidArgumentError(HeronlikeError, ValueError):
    """An argument of a public function or CLI command has a bad value or type; the message
    names the argument and what it accepts (e.g. ``trials must be an integer >= 1, got 0``)."""


class UnknownExplorerError(HeronlikeError, ValueError):
    """The explorer name is not registered."""


class RunnerSpecError(HeronlikeError, ValueError):
    """A runner spec string (e.g. ``HERONLIKE_RUNNER``) is malformed; the expected forms are
    ``rpc://HOST:PORT/KEY``, ``cupy`` and ``cupy+standin``."""


class BundleError(HeronlikeError, ValueError):
    """An offline measurement bundle or its results cannot be written, read or imported
    (malformed input, results of another bundle, or stand-in results refused)."""


class VTAConfigError(HeronlikeError, ValueError):
    """A VTA hardware configuration (:class:`heronlike.dla_targets.vta.VTAConfig`) is invalid:
    an unknown or malformed ``vta_config.json`` key, a width the model cannot run, or a buffer
    too small for one element."""


class VTAProgramError(HeronlikeError, ValueError):
    """A VTA instruction program is malformed: an instruction on the wrong engine, an SRAM or
    DRAM access out of bounds, padding where none is allowed, a missing or misplaced FINISH."""


class VTAFieldError(VTAProgramError):
    """A VTA instruction or micro-op field does not fit its encoding width.

    Attributes ``field``, ``width`` (bits), ``value`` and ``signed`` name the offender (their
    defaults only let the exception be unpickled across processes)."""

    def __init__(
        self, message: str, *, field: str = "", width: int = 0, value: int = 0, signed: bool = False
    ) -> None:
        super().__init__(message)
        self.field = field
        self.width = width
        self.value = value
        self.signed = signed


class VTAHazardError(VTAProgramError):
    """A VTA GEMM writes one accumulator address from micro-ops too close together in its
    pipeline (the read-modify-write of the later one would miss the earlier write)."""


class VTATokenError(VTAProgramError):
    """The VTA dependency-token protocol is broken: tokens left in a queue at FINISH, an engine
    still busy after FINISH, a token flag the instruction's engine has no queue for."""


class VTADeadlockError(VTATokenError):
    """A VTA engine waits for a dependency token that never arrives (or for a command-queue
    slot that never frees): the program can never reach FINISH."""


class VTATimeoutError(HeronlikeError, TimeoutError):
    """A VTA simulation ran past its budget (``timeout_s`` wall-clock seconds or
    ``max_events`` events) and was stopped; the program may be fine, only too long to simulate."""


class UnsupportedComputeError(InvalidComputeError):
    """A stage of the compute is valid TVM but no rule set of heronlike can schedule or check
    it (an extern call, a tuple reduction such as argmax, an index loaded from a tensor); the
    message names the stage and why."""


class KernelNotFoundError(UnsupportedShapeError):
    """The library holds no kernel for this operator, shapes, dtypes and attributes (a
    :class:`~heronlike.errors.HeronlikeError` and a ``ValueError``). Attributes: ``op``,
    ``inputs`` (``(dtype, shape)`` per input), ``attrs`` and ``available`` (the signatures the
    library holds for ``op``)."""

    def __init__(
        self,
        message: str,
        *,
        op: str = "",
        inputs: tuple[tuple[str, tuple[int, ...]], ...] = (),
        attrs: Mapping[str, int] | None = None,
        available: tuple[str, ...] = (),
    ) -> None:
        super().__init__(message)
        self.op = op
        self.inputs = inputs
        self.attrs = dict(attrs or {})
        self.available = available


class LibraryFormatError(RecordsMismatchError):
    """A library folder cannot be loaded: no or a malformed manifest, another format or a
    newer format version, or the shared library is missing. The message names the file."""


#: what TVM 0.27 raises: its FFI (``tvm_ffi``) maps C++ errors onto these Python built-ins;
#: ``tvm.error.TVMError`` is gone (``tvm.error.InternalError`` and friends subclass
#: RuntimeError). Catch heronlike's own errors first: they subclass some of these.
TVM_ERRORS: tuple[type[Exception], ...] = (
    RuntimeError,
    ValueError,
    TypeError,
    KeyError,
    IndexError,
    AttributeError,
    AssertionError,
)
