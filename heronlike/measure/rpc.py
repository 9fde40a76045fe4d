"""Run built candidates on a remote device through a TVM RPC tracker.

:class:`RPCRunner` implements the :class:`~heronlike.measure.Runner` protocol. The tuner runs
here; each candidate's shared library is uploaded to a TVM RPC server on the device machine
(found through a tracker by its key, e.g. ``h100``), loaded there, checked against the expected
outputs and timed there with ``time_evaluator``. Latencies are the remote device's own timings,
never the host's wall clock. See ``docs/rpc.md`` for setting up the tracker and the servers.

How a round (one :meth:`RPCRunner.run` call) goes:

* All RPC work happens in one **client worker process** (a
  :class:`~heronlike.measure.runner.ManagedWorker`), never in the tuner's process. A remote call
  that hangs (a kernel that never ends, a dropped network) blocks inside TVM's C++ socket code,
  which no Python thread can interrupt; the worker's parent-side watchdog kills the process
  after ``timeout_s``, which also closes the socket and frees everything that session held on
  the client side. A thread with a deadline would leave the stuck thread, its socket and the
  session alive in the tuner (and a fresh session could not be requested while the server still
  serves the old one).
* A session is requested from the tracker when the round needs the device and **released at
  the end of the round**, so the device is not held while the tuner builds the next batch and
  other tuners sharing the tracker can interleave. Within a round the session is reused
  (renewed before it could reach the server's ``session_timeout_s``), and the input tensors
  uploaded for the first candidate are kept on the device for the next candidates that use the
  same ``.npz`` file; outputs are re-uploaded (zero) for each checked candidate.
* The tracker request has its own time limit (``request_timeout_s``) and fails at once when the
  tracker is unreachable or no server is registered under the key; after such a failure the
  rest of the round is reported as ``"rpc"`` without waiting again.

Failures are data (:class:`~heronlike.measure.RunResult` ``error_kind``):
``"run"`` (missing artifact or args file, load or call raised on the device),
``"wrong_result"``, ``"run_timeout"`` (exceeded ``timeout_s``; the client worker is killed and
the server frees the device when the abandoned session reaches ``session_timeout_s``),
``"rpc"`` (no session: tracker unreachable, unknown key, no free server in time, or the
connection was lost outside the kernel call) and ``"crash"`` (the connection died while the
kernel ran: almost always a segfault on the device; TVM 0.27's Python RPC server stops serving
after such a session, see ``docs/rpc.md``).

Constructing a runner (and :func:`runner_from_spec`) touches neither the network nor a process:
the client worker starts, and the tracker is contacted, on the first :meth:`RPCRunner.run`.
"""

from __future__ import annotations

import gc
import math
import os
import re
import socket
import statistics
import struct
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from heronlike.errors import RunnerSpecError
from heronlike.measure.kinds import ErrorKind
from heronlike.measure.runner import (
    ManagedWorker,
    OnRunResult,
    RunInput,
    Runner,
    RunResult,
    _load_npz_cached,
    _ordered_args,
    parse_device,
    short_error,
)

__all__ = [
    "ENV_RUNNER",
    "RPCRunner",
    "artifact_library",
    "runner_from_spec",
    "runner_spec_from_env",
]

#: The environment variable that selects a runner (``rpc://HOST:PORT/KEY``, ``cupy``,
#: ``cupy+standin``).
ENV_RUNNER = "HERONLIKE_RUNNER"

#: A session is renewed before a candidate when less than ``timeout_s`` plus this many seconds
#: of the server's session time would be left, so the server never cuts a candidate short.
SESSION_MARGIN_S = 5.0

#: Seconds allowed to open the TCP connection to the tracker and to the server it names.
CONNECT_TIMEOUT_S = 10.0

#: The file uploaded when a build artifact is a folder (e.g. a CUDA build's output folder).
FOLDER_LIBRARY = "kernel.so"

_KEY_RE = re.compile(r"[A-Za-z0-9_.\-]+")
_SPEC_FORM = (
    "rpc://HOST:PORT/KEY (e.g. rpc://10.0.0.5:9190/h100), cupy (this machine's GPU through "
    "CuPy) or cupy+standin (launches nothing; tests)"
)


# ------------------------------------------------------------------------------------------------
# specs


def runner_spec_from_env() -> str | None:
    """The runner spec in the environment variable ``HERONLIKE_RUNNER``, or ``None`` when it is
    unset or blank. It is returned as written (stripped), not validated: pass it to
    :func:`runner_from_spec`."""
    value = os.environ.get(ENV_RUNNER, "").strip()
    return value or None


def _parse_rpc_spec(spec: str) -> tuple[str, int, str]:
    """``"rpc://HOST:PORT/KEY"`` -> ``(host, port, key)``; raises :class:`RunnerSpecError`."""

    def bad(why: str) -> RunnerSpecError:
        return RunnerSpecError(f"bad runner spec {spec!r}: {why}; expected {_SPEC_FORM}")

    if not isinstance(spec, str):
        raise RunnerSpecError(f"runner spec must be a string, got {type(spec).__name__}")
    text = spec.strip()
    scheme, sep, _ = text.partition("://")
    if not sep:
        raise bad("no scheme")
    if scheme.lower() != "rpc":
        raise bad(f"unknown scheme {scheme!r}")
    try:
        parts = urlsplit(text)
        host = parts.hostname
        port = parts.port
    except ValueError as exc:  # e.g. a port out of range or not a number
        raise bad(str(exc)) from None
    if parts.username is not None or parts.password is not None:
        raise bad("user info is not supported")
    if parts.query or parts.fragment:
        raise bad("query and fragment are not supported")
    if not host:
        raise bad("no host")
    if port is None or port == 0:
        raise bad("no port")
    key = parts.path[1:] if parts.path.startswith("/") else parts.path
    if not key:
        raise bad("no key")
    if not _KEY_RE.fullmatch(key):
        raise bad(f"key {key!r} may only hold letters, digits, '_', '.' and '-'")
    return host, port, key


def runner_from_spec(spec: str, **evaluator: Any) -> Runner:
    """Make a runner from a spec string.

    ``"rpc://HOST:PORT/KEY"`` gives ``RPCRunner(HOST, PORT, KEY, **evaluator)``; IPv6 hosts go in
    brackets (``rpc://[::1]:9190/h100``). ``"cupy"`` gives a
    :class:`~heronlike.measure.cupy_runner.CupyRunner` (this machine's GPU through CuPy, no
    CUDA-enabled TVM needed) and ``"cupy+standin"`` its stand-in, which launches nothing
    (every candidate gets error kind ``"standin"`` and no latency; for tests). Case and
    surrounding blanks do not matter.

    Args:
        spec: the spec, e.g. from :func:`runner_spec_from_env`.
        **evaluator: keyword arguments of :class:`RPCRunner` (``number``, ``repeat``,
            ``min_repeat_ms``, ``timeout_s``, ``session_timeout_s``, ``request_timeout_s``,
            ``priority``) or of :class:`~heronlike.measure.cupy_runner.CupyRunner`
            (``number``, ``repeat``, ``timeout_s``, ``warmup``, ...; others are ignored).

    Raises:
        RunnerSpecError: the spec is malformed or names an unknown scheme (the message names
            the expected forms).
        HostFeatureError: ``cupy`` when CuPy is not installed here (the message names
            ``heronlike[cuda]``).
    """
    if isinstance(spec, str) and spec.strip().lower() in ("cupy", "cupy+standin"):
        from heronlike.measure.cupy_runner import CUPY_STANDIN_SPEC, CupyRunner, require_cupy

        standin = spec.strip().lower() == CUPY_STANDIN_SPEC
        if not standin:
            require_cupy()
        return CupyRunner(standin=standin, **evaluator)
    host, port, key = _parse_rpc_spec(spec)
    return RPCRunner(host, port, key, **evaluator)


def artifact_library(artifact_path: str) -> str:
    """The file to upload for a build artifact: the path itself, or ``folder/kernel.so`` when
    the artifact is a folder."""
    if os.path.isdir(artifact_path):
        return os.path.join(artifact_path, FOLDER_LIBRARY)
    return artifact_path


# ------------------------------------------------------------------------------------------------
# client worker side (runs inside the ManagedWorker process)


class _NoSession(Exception):
    """The tracker gave no session (the message says why)."""


@dataclass
class _Session:
    remote: Any
    where: str
    uploads: int = 0
    #: remote tensors of the current args file: (file key, device) -> list of tensors
    args_key: tuple[Any, ...] | None = None
    args: list[Any] = field(default_factory=list)


_SESSION: _Session | None = None
#: counters for diagnostics: sessions opened, full uploads of an args file
_STATS = {"sessions": 0, "arg_uploads": 0}


def _tracker_request(
    host: str, port: int, key: str, priority: int, request_timeout_s: float
) -> tuple[str, int, str]:
    """Ask the tracker for a free server under ``key``: ``(server host, port, match key)``.

    Speaks the tracker protocol of ``tvm.rpc.TrackerSession.request`` with time limits, which
    TVM 0.27 lacks: its ``connect_tracker`` retries a refused connection for 60 s and its
    ``request`` waits forever for a key no server has registered.
    """
    from tvm.rpc import base

    where = f"tracker {host}:{port}, key {key!r}"
    try:
        sock = socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S)
    except OSError as exc:
        raise _NoSession(f"cannot reach RPC {where}: {short_error(exc)}") from None
    try:
        sock.settimeout(CONNECT_TIMEOUT_S)
        try:
            sock.sendall(struct.pack("<i", base.RPC_TRACKER_MAGIC))
            magic = struct.unpack("<i", base.recvall(sock, 4))[0]
        except OSError as exc:
            raise _NoSession(f"RPC handshake failed with {where}: {short_error(exc)}") from None
        if magic != base.RPC_TRACKER_MAGIC:
            raise _NoSession(f"{host}:{port} is not a TVM RPC tracker")
        try:
            base.sendjson(sock, [base.TrackerCode.SUMMARY])
            summary = base.recvjson(sock)
        except (OSError, ValueError) as exc:
            raise _NoSession(f"no summary from {where}: {short_error(exc)}") from None
        servers = summary[1].get("server_info", []) if summary and summary[0] == 0 else []
        registered = [str(s.get("key", "")).removeprefix("server:") for s in servers]
        keys = sorted(set(registered))
        if key not in keys:
            raise _NoSession(
                f"no RPC server registered under key {key!r} at tracker {host}:{port} "
                f"(registered keys: {keys or 'none'})"
            )
        sock.settimeout(request_timeout_s)
        try:
            base.sendjson(sock, [base.TrackerCode.REQUEST, key, "", int(priority)])
            value = base.recvjson(sock)
        except TimeoutError:
            n = registered.count(key)
            raise _NoSession(
                f"no free RPC server within {request_timeout_s:g} s from {where} "
                f"({n} registered, all busy)"
            ) from None
        except (OSError, ValueError) as exc:
            raise _NoSession(f"request to {where} failed: {short_error(exc)}") from None
        if not value or value[0] != base.TrackerCode.SUCCESS:
            raise _NoSession(f"{where} refused the request: {value!r}")
        url, server_port, matchkey = value[1]
        return str(url), int(server_port), str(matchkey)
    finally:
        sock.close()


def _close_session() -> None:
    """Drop the session: every remote object holds it, so all go, then the socket closes."""
    global _SESSION
    if _SESSION is not None:
        _SESSION = None
        gc.collect()


def _rpc_open(
    host: str,
    port: int,
    key: str,
    priority: int,
    request_timeout_s: float,
    session_timeout_s: float,
) -> str | None:
    """Worker side: open a fresh session (closing any old one). ``None`` or an error message."""
    global _SESSION
    _close_session()
    try:
        from tvm import rpc

        url, server_port, matchkey = _tracker_request(host, port, key, priority, request_timeout_s)
        try:
            remote = rpc.connect(url, server_port, matchkey, session_timeout=session_timeout_s)
        except Exception as exc:  # noqa: BLE001
            return (
                f"tracker {host}:{port} gave server {url}:{server_port} for key {key!r}, "
                f"but connecting failed: {short_error(exc)}"
            )
        _SESSION = _Session(remote, f"server {url}:{server_port} (key {key!r})")
        _STATS["sessions"] += 1
        return None
    except _NoSession as exc:
        return str(exc)
    except Exception as exc:  # noqa: BLE001 - failures are data
        return f"RPC session from tracker {host}:{port}, key {key!r}: {short_error(exc)}"


def _rpc_close() -> None:
    """Worker side: release the session at the end of a round."""
    _close_session()


def _session_alive(sess: _Session) -> bool:
    try:
        sess.remote.get_function("tvm.rpc.server.workpath")("probe")
        return True
    except Exception:  # noqa: BLE001
        return False


def _output_indices(expected: dict[str, Any], n_args: int, expected_path: str) -> list[int]:
    idx = []
    for name in expected:
        i = int(name[3:]) if name.startswith("arg") and name[3:].isdigit() else -1
        if not 0 <= i < n_args:
            raise KeyError(f"{expected_path}: key {name!r} names no argument")
        idx.append(i)
    return sorted(idx)


def _rpc_run(
    library: str,
    args_path: str,
    expected_path: str | None,
    rtol: float,
    number: int,
    repeat: int,
    min_repeat_ms: float,
    device: str,
) -> tuple[str | None, str | None, tuple[float, ...], bool]:
    """Worker side of one candidate: ``(error_kind, error_msg, latencies_s, session_alive)``."""
    global _SESSION
    sess = _SESSION
    if sess is None:
        return ErrorKind.RPC, "no RPC session is open", (), False
    phase = "upload"
    try:
        import tvm

        from heronlike.measure.check import compare, poison

        remote = sess.remote
        sess.uploads += 1
        remote_name = f"c{sess.uploads}_{os.path.basename(library)}"  # never reuse a loaded name
        remote.upload(library, remote_name)
        phase = "load"
        try:
            mod = remote.load_module(remote_name)
            func = mod["main"]
        finally:
            try:
                remote.remove(remote_name)
            except Exception:  # noqa: BLE001 - the server deletes its folder at session end
                pass
        phase = "args"
        kind, index = parse_device(device)
        dev = remote.device(kind, index)
        arrays = _ordered_args(_load_npz_cached(args_path, "args"), args_path)
        expected = _load_npz_cached(expected_path, "expected") if expected_path else None
        outputs = _output_indices(expected, len(arrays), expected_path) if expected else []
        st = os.stat(args_path)
        args_key = (os.path.abspath(args_path), st.st_mtime_ns, st.st_size, device)
        cached = sess.args_key == args_key and len(sess.args) == len(arrays)
        if not cached:
            sess.args_key, sess.args = None, []
            sess.args = [tvm.runtime.tensor(a, dev) for a in arrays]
            sess.args_key = args_key
            _STATS["arg_uploads"] += 1
        tensors = list(sess.args)
        for i in outputs:  # fresh outputs, poisoned (NaN / a bit pattern) for the check
            tensors[i] = tvm.runtime.tensor(poison(arrays[i]), dev)
        phase = "call"
        func(*tensors)
        if expected is not None:
            phase = "check"
            mismatch = _first_mismatch(tensors, expected, outputs, rtol, compare)
            if mismatch is not None and cached:
                # Inputs kept from an earlier candidate could have been clobbered: confirm the
                # mismatch with freshly uploaded tensors before blaming this candidate.
                sess.args_key, sess.args = None, []
                phase = "args"
                tensors = [
                    tvm.runtime.tensor(poison(a) if i in outputs else a, dev)
                    for i, a in enumerate(arrays)
                ]
                _STATS["arg_uploads"] += 1
                phase = "call"
                func(*tensors)
                phase = "check"
                mismatch = _first_mismatch(tensors, expected, outputs, rtol, compare)
            if mismatch is not None:
                return ErrorKind.WRONG_RESULT, mismatch, (), True
        phase = "time"
        timer = mod.time_evaluator(  # runs on the device; TVM takes whole milliseconds
            "main", dev, number=number, repeat=repeat, min_repeat_ms=math.ceil(min_repeat_ms)
        )
        results = tuple(float(x) for x in timer(*tensors).results)
        if expected is not None:  # a kernel that accumulates across calls is wrong by now
            phase = "check"
            mismatch = _first_mismatch(tensors, expected, outputs, rtol, compare)
            if mismatch is not None:
                return ErrorKind.WRONG_RESULT, f"after the timed calls: {mismatch}", (), True
        return None, None, results, True
    except Exception as exc:  # noqa: BLE001 - failures are data
        msg = short_error(exc)
        if "RPCSessionTimeoutError" in msg:
            _close_session()
            why = f"the server ended the session ({sess.where}): {msg}"
            return ErrorKind.RUN_TIMEOUT, why, (), False
        if _session_alive(sess):
            return ErrorKind.RUN, f"{phase}: {msg}", (), True
        _close_session()
        if phase in ("call", "time"):
            return (
                ErrorKind.CRASH,
                f"connection to {sess.where} died while the kernel ran (a crash on the device, "
                f"e.g. a segfault, or the network dropped): {msg}",
                (),
                False,
            )
        return ErrorKind.RPC, f"connection to {sess.where} lost during {phase}: {msg}", (), False


def _first_mismatch(
    tensors: list[Any], expected: dict[str, Any], outputs: list[int], rtol: float, compare: Any
) -> str | None:
    for i in outputs:
        msg = compare(tensors[i].numpy(), expected[f"arg{i}"], rtol)
        if msg is not None:
            return f"arg{i}: {msg}"
    return None


def _worker_session_state() -> dict[str, Any]:
    """Diagnostics from the client worker (tests): pid, session, cached args, counters."""
    return {
        **_STATS,
        "pid": os.getpid(),
        "session": _SESSION.where if _SESSION is not None else None,
        "uploads": _SESSION.uploads if _SESSION is not None else 0,
        "args_cached": bool(_SESSION is not None and _SESSION.args_key is not None),
    }


# ------------------------------------------------------------------------------------------------
# runner


class RPCRunner:
    """Time candidates on a remote device through a TVM RPC tracker.

    Args:
        tracker_host: the tracker's host name or address.
        tracker_port: the tracker's port (TVM's default is 9190).
        key: the device key the servers registered with (``rpc_server --key``).
        number: calls averaged into one measurement (``time_evaluator`` ``number``).
        repeat: measurements per candidate; the latency is their median.
        min_repeat_ms: minimum milliseconds per measurement (rounded up to a whole millisecond,
            as TVM requires); ``time_evaluator`` raises ``number`` for fast kernels.
        timeout_s: wall-clock limit per candidate once a session is open (upload, load, check
            and timing). Past it the client worker is killed and the candidate recorded as
            ``"run_timeout"``.
        session_timeout_s: the session length the server enforces (it kills a session running
            longer, which is what frees the device after a hung kernel). A session is reused
            across a round's candidates while ``timeout_s + 5`` seconds of it remain. Default:
            ``timeout_s + 60``; must exceed ``timeout_s``.
        request_timeout_s: how long to wait for a free server. Default: ``session_timeout_s``
            (long enough to outlast a session this runner abandoned after a timeout).
        priority: the tracker request priority (higher is served first).

    The client worker starts on the first :meth:`run` (about 1 s, not charged to a candidate)
    and is reused. Use as a context manager or call :meth:`close`.
    """

    def __init__(
        self,
        tracker_host: str,
        tracker_port: int,
        key: str,
        *,
        number: int = 3,
        repeat: int = 5,
        min_repeat_ms: float = 10.0,
        timeout_s: float = 60.0,
        session_timeout_s: float | None = None,
        request_timeout_s: float | None = None,
        priority: int = 1,
    ) -> None:
        if number < 1 or repeat < 1:
            raise ValueError(f"number and repeat must be >= 1, got {number}, {repeat}")
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s}")
        if not tracker_host:
            raise ValueError("tracker_host must not be empty")
        if not 0 < int(tracker_port) < 65536:
            raise ValueError(f"tracker_port must be in 1..65535, got {tracker_port}")
        if not key or not _KEY_RE.fullmatch(key):
            raise ValueError(f"key must be letters, digits, '_', '.' or '-', got {key!r}")
        session = float(session_timeout_s) if session_timeout_s is not None else timeout_s + 60.0
        if session <= timeout_s:
            raise ValueError(
                f"session_timeout_s ({session:g}) must exceed timeout_s ({timeout_s:g})"
            )
        request = float(request_timeout_s) if request_timeout_s is not None else session
        if request <= 0:
            raise ValueError(f"request_timeout_s must be positive, got {request_timeout_s}")
        self.tracker_host = str(tracker_host)
        self.tracker_port = int(tracker_port)
        self.key = str(key)
        self.number = int(number)
        self.repeat = int(repeat)
        self.min_repeat_ms = float(min_repeat_ms)
        self.timeout_s = float(timeout_s)
        self.session_timeout_s = session
        self.request_timeout_s = request
        self.priority = int(priority)
        self._worker: ManagedWorker | None = ManagedWorker()
        self._lock = threading.Lock()
        self._session_born: float | None = None  # monotonic time the open session was requested
        self._round_error: str | None = None

    @property
    def spec(self) -> str:
        """This runner's spec string (``rpc://HOST:PORT/KEY``)."""
        host = f"[{self.tracker_host}]" if ":" in self.tracker_host else self.tracker_host
        return f"rpc://{host}:{self.tracker_port}/{self.key}"

    def __repr__(self) -> str:
        return (
            f"RPCRunner({self.spec!r}, number={self.number}, repeat={self.repeat}, "
            f"timeout_s={self.timeout_s:g})"
        )

    def _require_worker(self) -> ManagedWorker:
        if self._worker is None:
            raise RuntimeError("RPCRunner is closed")
        return self._worker

    def run(
        self, inputs: Sequence[RunInput], on_result: OnRunResult | None = None
    ) -> list[RunResult]:
        """Run and time each candidate on the remote device, in order, one at a time;
        ``on_result(i, result)`` is called after each.

        Never raises for a bad candidate: every input gets a :class:`RunResult` (same order).

        Raises:
            RuntimeError: the runner was closed.
        """
        results: list[RunResult] = []
        with self._lock:
            worker = self._require_worker()
            if not inputs:
                return results
            self._start(worker)
            self._session_born = None
            self._round_error = None
            try:
                for i, inp in enumerate(inputs):
                    results.append(self._run_one(worker, inp))
                    if on_result is not None:
                        on_result(i, results[-1])
            finally:
                self._release(worker)
        return results

    @staticmethod
    def _start(worker: ManagedWorker) -> None:
        try:  # start-up (importing TVM, ~1 s) is not charged to a candidate
            worker.start()
        except Exception:  # noqa: BLE001 - the next call retries lazily
            worker.kill()

    def _release(self, worker: ManagedWorker) -> None:
        if self._session_born is None:
            return
        self._session_born = None
        try:
            worker.call(_rpc_close, (), timeout_s=CONNECT_TIMEOUT_S)
        except Exception:  # noqa: BLE001 - killing the worker closes the session too
            worker.kill()

    def _where(self) -> str:
        return f"tracker {self.tracker_host}:{self.tracker_port}, key {self.key!r}"

    def _open(self, worker: ManagedWorker) -> str | None:
        """Open a session in the worker; ``None`` or the reason it failed."""
        self._session_born = None
        limit = self.request_timeout_s + 3 * CONNECT_TIMEOUT_S
        args = (
            self.tracker_host,
            self.tracker_port,
            self.key,
            self.priority,
            self.request_timeout_s,
            self.session_timeout_s,
        )
        born = time.monotonic()
        try:
            msg = worker.call(_rpc_open, args, timeout_s=limit)
        except TimeoutError:
            self._start(worker)
            return f"no RPC session within {limit:g} s from {self._where()} (connecting hung)"
        except Exception as exc:  # noqa: BLE001 - e.g. the client worker died
            self._start(worker)
            return f"RPC client failed opening a session from {self._where()}: {short_error(exc)}"
        if msg is None:
            self._session_born = born
        return msg

    def _needs_session(self) -> bool:
        if self._session_born is None:
            return True
        age = time.monotonic() - self._session_born
        return age + self.timeout_s + SESSION_MARGIN_S > self.session_timeout_s

    def _run_one(self, worker: ManagedWorker, inp: RunInput) -> RunResult:
        t0 = time.perf_counter()

        def result(kind: str | None, msg: str | None, lats: tuple[float, ...] = ()) -> RunResult:
            return RunResult(
                latency_s=statistics.median(lats) if kind is None and lats else None,
                latencies_s=tuple(lats) if kind is None else (),
                error_kind=kind,
                error_msg=msg,
                run_s=time.perf_counter() - t0,
            )

        library = artifact_library(str(inp.artifact_path))
        if not os.path.isfile(library):
            return result(ErrorKind.RUN, f"artifact not found: {library}")
        if not os.path.isfile(str(inp.args_path)):
            return result(ErrorKind.RUN, f"args file not found: {inp.args_path}")
        if inp.expected_path is not None and not os.path.isfile(str(inp.expected_path)):
            return result(ErrorKind.RUN, f"expected file not found: {inp.expected_path}")
        try:
            parse_device(str(inp.device))
        except ValueError as exc:
            return result(ErrorKind.RUN, str(exc))
        if self._round_error is not None:
            return result(ErrorKind.RPC, f"not attempted: {self._round_error}")
        if self._needs_session():
            if self._session_born is not None:
                self._release(worker)
            msg = self._open(worker)
            if msg is not None:
                self._round_error = msg
                return result(ErrorKind.RPC, msg)
        args = (
            library,
            str(inp.args_path),
            None if inp.expected_path is None else str(inp.expected_path),
            float(inp.rtol),
            self.number,
            self.repeat,
            self.min_repeat_ms,
            str(inp.device),
        )
        try:
            kind, msg, lats, alive = worker.call(_rpc_run, args, timeout_s=self.timeout_s)
        except TimeoutError:
            kind, lats, alive = ErrorKind.RUN_TIMEOUT, (), False
            msg = (
                f"exceeded {self.timeout_s:g} s on {self._where()}; the session was abandoned "
                f"(the server frees the device within session_timeout_s="
                f"{self.session_timeout_s:g} s)"
            )
            self._start(worker)
        except ChildProcessError:
            kind, msg, lats, alive = ErrorKind.RPC, "the RPC client process died", (), False
            self._start(worker)
        except Exception as exc:  # noqa: BLE001 - e.g. an unpicklable input
            kind, msg, lats, alive = ErrorKind.RUN, short_error(exc), (), True
        if not alive:
            self._session_born = None
        return result(kind, msg, tuple(lats))

    def worker_state(self) -> dict[str, Any]:
        """Diagnostics from the client worker: ``pid``, the open ``session`` (or ``None``; it is
        released after each round), ``uploads`` in it, whether args are cached, and the
        worker's counters ``sessions`` (opened) and ``arg_uploads`` (full args uploads)."""
        with self._lock:
            return self._require_worker().call(_worker_session_state, (), timeout_s=60.0)

    def close(self) -> None:
        """Kill the client worker (closing any session). Idempotent; the runner cannot be used
        afterwards."""
        with self._lock:
            if self._worker is not None:
                self._worker.kill()
                self._worker = None
                self._session_born = None

    def __enter__(self) -> RPCRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001
            pass
