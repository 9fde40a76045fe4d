"""Compile scheduled IRModules to shared libraries in a persistent pool of worker processes.

Failures are data, never exceptions: a candidate that does not compile, exceeds the time limit
or kills its worker gets a :class:`BuildResult` with ``error_kind`` set; a dead or hung worker is
replaced and the other candidates of the batch still build.

The schedule (including tensorization) is applied in the main process and the result shipped as
TVM JSON, so workers only ``import tvm`` (about 1 s, once per worker) and never the 16 s
``tvm.s_tir.tensor_intrin`` registry.
"""

from __future__ import annotations

import itertools
import os
import queue
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

from heronlike.measure.kinds import ErrorKind
from heronlike.measure.runner import ManagedWorker, short_error

__all__ = ["BuildFunction", "BuildInput", "BuildResult", "Builder", "LocalBuilder", "build_llvm"]


@dataclass(frozen=True)
class BuildInput:
    """One candidate to build.

    Attributes:
        mod_json: ``tvm.ir.save_json`` of the scheduled ``IRModule`` (or ``PrimFunc``), with the
            schedule already applied; the function to call must be named ``main``.
        target: the TVM target in JSON-dict form, e.g.
            ``{"kind": "llvm", "mcpu": "znver4", "num-cores": 2}`` (target strings are rejected
            by TVM 0.27).
    """

    mod_json: str
    target: Mapping[str, Any]
    #: target-specific build options (e.g. TVM pass-context settings, nvcc flags); passed
    #: to the builder's build function unchanged
    options: Mapping[str, Any] = field(default_factory=dict)
    #: the candidate's CSP assignment, if known; :class:`LocalBuilder` hands it to the build
    #: function as ``options["assignment"]``, so a target whose code generator works from the
    #: template's parameters (rather than, or beside, the scheduled TIR) can use it
    assignment: Mapping[str, int] | None = None


@dataclass(frozen=True)
class BuildResult:
    """What building one candidate gave.

    Attributes:
        artifact_path: the exported shared library (``.so``) on success, else ``None``.
        error_kind: ``None`` on success, else ``"build"`` (TVM or the linker raised, or the JSON
            did not load), ``"build_timeout"`` (exceeded ``timeout_s``; the worker was replaced)
            or ``"crash"`` (the worker process died).
        error_msg: short message for failures (the last lines of the TVM error), else ``None``.
        build_s: wall seconds this candidate took, from the moment a worker picked it up
            (includes starting the worker if it was the worker's first task).
        info: what the build function reports beside the artifact (JSON-serialisable), e.g.
            a CUDA kernel's registers, spills and launch manifest; empty for CPU builds.
    """

    artifact_path: str | None
    error_kind: str | None
    error_msg: str | None
    build_s: float
    info: Mapping[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when an artifact was produced."""
        return self.error_kind is None


class Builder(Protocol):
    """What the tune loop needs from a builder (MetaSchedule's builder seam).

    ``build`` turns scheduled modules into artifacts a :class:`~heronlike.measure.Runner` of
    the same target can run, one :class:`BuildResult` per input, in order, and never raises for
    a bad candidate; ``close`` releases workers and temporary files.
    """

    def build(self, inputs: Sequence[BuildInput]) -> list[BuildResult]: ...

    def close(self) -> None: ...


#: A build function runs inside a builder worker: ``fn(mod_json, target, path, options)``
#: returns ``(artifact_path, error_kind, error_msg, info)``; it must be a module-level
#: function (workers receive it by reference) and must not raise for a bad candidate.
BuildFunction = Callable[
    [str, dict[str, Any], str, dict[str, Any]],
    tuple[str | None, str | None, str | None, dict[str, Any]],
]


def build_llvm(
    mod_json: str, target: dict[str, Any], path: str, options: dict[str, Any]
) -> tuple[str | None, str | None, str | None, dict[str, Any]]:
    """The CPU build function: ``tvm.compile`` and ``export_library`` to ``path`` (a ``.so``).

    ``options["pass_config"]``, if given, is the TVM ``PassContext`` configuration.
    """
    try:
        import tvm

        mod = tvm.ir.load_json(mod_json)
        with tvm.transform.PassContext(config=dict(options.get("pass_config", {}))):
            executable = tvm.compile(mod, target=tvm.target.Target(target))
        executable.export_library(path)
        return path, None, None, {}
    except Exception as exc:  # noqa: BLE001 - failures are data
        try:
            os.remove(path)
        except OSError:
            pass
        return None, ErrorKind.BUILD, short_error(exc), {}


def needed_imports(mod_json: str, options: dict[str, Any]) -> tuple[str, ...]:
    """The modules a build of ``mod_json`` needs imported first: ``options["imports_when"]``
    maps a text to a module, imported when the module's JSON contains that text (e.g.
    TVM's CUDA tensor intrinsics, whose import registers the index maps that lowering
    ``ldmatrix`` looks up: ``{"ldmatrix": "tvm.s_tir.tensor_intrin.cuda"}``)."""
    wanted = dict(options.get("imports_when") or {})
    return tuple(sorted({module for text, module in wanted.items() if text in mod_json}))


def import_modules(modules: Sequence[str]) -> None:
    """Import ``modules`` (in a build worker, before its timed builds), each through
    :func:`heronlike.intrinsic.import_tvmscript_module` (TVM's tensor intrinsics in 6 s, not
    34 s)."""
    from ..intrinsic import import_tvmscript_module

    for name in modules:
        import_tvmscript_module(name)


#: seconds a build worker may take to import what a build needs (not the candidate's time)
IMPORT_TIMEOUT_S = 600.0


def _options(inp: BuildInput) -> dict[str, Any]:
    """The build function's options: the target's, plus the assignment when known."""
    out = dict(inp.options)
    if inp.assignment is not None:
        out["assignment"] = dict(inp.assignment)
    return out


class LocalBuilder:
    """Build candidates in parallel in a persistent pool of isolated worker processes.

    Args:
        max_workers: worker processes (and parallel builds); ``None`` = ``os.cpu_count()``.
        timeout_s: wall-clock limit per candidate in seconds (compile + export). A worker that
            exceeds it is killed and replaced; the candidate gets ``"build_timeout"``. The
            attribute ``timeout_s`` may be changed between :meth:`build` calls.
        work_dir: folder for the artifacts (created if missing, kept on :meth:`close`). If
            ``None`` a fresh temporary folder is made and **deleted** by :meth:`close`, so run
            the artifacts before closing the builder.
        build_fn: the function each worker runs per candidate (:data:`BuildFunction`; default
            :func:`build_llvm`); a target with another toolchain (CUDA: nvcc) passes its own.
        suffix: the artifact file name's ending (``".so"``; a CUDA build writes a folder).

    Workers start on their first task (about 1 s each, in parallel) and are reused across
    batches. Use as a context manager or call :meth:`close`; workers are also killed at
    interpreter exit. Worker processes never inherit the parent's stdin.
    """

    def __init__(
        self,
        *,
        max_workers: int | None = None,
        timeout_s: float = 60.0,
        work_dir: str | os.PathLike[str] | None = None,
        build_fn: BuildFunction = build_llvm,
        suffix: str = ".so",
    ) -> None:
        n = int(max_workers) if max_workers is not None else (os.cpu_count() or 1)
        if n < 1:
            raise ValueError(f"max_workers must be >= 1, got {max_workers}")
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s}")
        self.max_workers = n
        self.timeout_s = float(timeout_s)
        self.build_fn = build_fn
        self.suffix = suffix
        if work_dir is None:
            self.work_dir = tempfile.mkdtemp(prefix="heronlike_build_")
            self._owns_dir = True
        else:
            self.work_dir = os.fspath(work_dir)
            os.makedirs(self.work_dir, exist_ok=True)
            self._owns_dir = False
        self._workers = [ManagedWorker() for _ in range(n)]
        self._idle: queue.SimpleQueue[ManagedWorker] = queue.SimpleQueue()
        for worker in self._workers:
            self._idle.put(worker)
        self._threads: ThreadPoolExecutor | None = ThreadPoolExecutor(
            max_workers=n, thread_name_prefix="heronlike-build"
        )
        self._prefix = uuid.uuid4().hex[:8]
        self._counter = itertools.count()
        self._lock = threading.Lock()
        #: per worker: (its process id, the modules imported in it)
        self._imported: dict[int, tuple[int | None, tuple[str, ...]]] = {}

    def build(self, inputs: Sequence[BuildInput]) -> list[BuildResult]:
        """Build every input; results come back in the same order.

        Never raises for a bad candidate.

        Raises:
            RuntimeError: the builder was closed.
        """
        with self._lock:
            if self._threads is None:
                raise RuntimeError("LocalBuilder is closed")
            jobs = []
            for inp in inputs:
                name = f"cand_{self._prefix}_{next(self._counter):06d}{self.suffix}"
                path = os.path.join(self.work_dir, name)
                jobs.append(self._threads.submit(self._build_one, inp, path, self.timeout_s))
            return [job.result() for job in jobs]

    def _build_one(self, inp: BuildInput, path: str, timeout_s: float) -> BuildResult:
        worker = self._idle.get()
        t0 = time.perf_counter()
        info: dict[str, Any] = {}
        try:
            # slow imports a build needs (TVM's CUDA intrinsics: about 6 s) happen once per
            # worker process, outside the candidate's timeout
            modules = needed_imports(inp.mod_json, dict(inp.options))
            if modules and self._imported.get(id(worker)) != (worker.pid, modules):
                worker.call(import_modules, (modules,), timeout_s=IMPORT_TIMEOUT_S)
                self._imported[id(worker)] = (worker.pid, modules)
                t0 = time.perf_counter()
            artifact, kind, msg, info = worker.call(
                self.build_fn,
                (inp.mod_json, dict(inp.target), path, _options(inp)),
                timeout_s=timeout_s,
            )
        except TimeoutError:
            artifact, kind, msg = None, ErrorKind.BUILD_TIMEOUT, f"exceeded {timeout_s:g} s"
        except ChildProcessError:
            artifact, kind, msg = None, ErrorKind.CRASH, "build worker process died"
        except Exception as exc:  # noqa: BLE001 - e.g. an unpicklable target
            artifact, kind, msg = None, ErrorKind.BUILD, short_error(exc)
        finally:
            self._idle.put(worker)
        if kind is not None:
            if os.path.isdir(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                try:
                    os.remove(path)
                except OSError:
                    pass
        return BuildResult(
            artifact_path=artifact,
            error_kind=kind,
            error_msg=msg,
            build_s=time.perf_counter() - t0,
            info=dict(info or {}),
        )

    def close(self) -> None:
        """Kill the workers and delete the work dir if this builder created it. Idempotent."""
        with self._lock:
            if self._threads is None:
                return
            self._threads.shutdown(wait=True)
            self._threads = None
            for worker in self._workers:
                worker.kill()
            if self._owns_dir:
                shutil.rmtree(self.work_dir, ignore_errors=True)

    def __enter__(self) -> LocalBuilder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001
            pass
