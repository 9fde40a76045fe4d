"""Why a trial failed: the one enumeration of failure kinds every measuring piece reports.

A failed candidate is data, not an exception (:mod:`heronlike.errors` holds the exceptions for
bad *input*). Its :class:`ErrorKind` is stored as its string value in the records database
(``trials.error_kind``), so the values are a stable on-disk format: add kinds, never rename them.
:class:`ErrorKind` is a :class:`~enum.StrEnum`, so a member compares equal to its value
(``ErrorKind.WRONG_RESULT == "wrong_result"``) and records written before this enum existed
read the same.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["ErrorKind"]


class ErrorKind(StrEnum):
    """The failure kinds of a trial, by the stage that failed.

    Scheduling: ``SCHEDULE`` (applying the candidate's schedule raised: a template bug).
    Building: ``BUILD`` (TVM or the linker raised), ``BUILD_TIMEOUT`` (the build worker passed
    its limit and was replaced); for CUDA also ``NVCC`` (nvcc or ptxas failed), ``SPILL``
    (ptxas spilled registers to local memory), ``REGISTERS`` (registers per thread or per block
    over the limit) and ``SHARED_MEMORY`` (shared memory per block over the limit).
    Running: ``RUN`` (loading or calling raised), ``RUN_TIMEOUT`` (the run passed its limit; the
    worker was killed), ``CRASH`` (the worker died, e.g. a segfault, or the device connection
    was lost), ``WRONG_RESULT`` (an output differs from the reference; outputs are filled with
    a poison value before every checked call, so a kernel that skips initialising its output
    is caught), ``RPC`` (the connection to a remote device was lost outside the kernel call).
    Simulation mode: ``NOT_RECORDED`` (the replayed records never measured these knob values).
    Stand-ins: ``STANDIN`` (``run_bundle.py --standin`` validated the candidate and launched
    nothing: it has no latency; for tests on machines without a GPU).
    """

    SCHEDULE = "schedule"
    BUILD = "build"
    BUILD_TIMEOUT = "build_timeout"
    NVCC = "nvcc"
    SPILL = "spill"
    REGISTERS = "registers"
    SHARED_MEMORY = "shared_memory"
    RUN = "run"
    RUN_TIMEOUT = "run_timeout"
    CRASH = "crash"
    WRONG_RESULT = "wrong_result"
    RPC = "rpc"
    NOT_RECORDED = "not_recorded"
    STANDIN = "standin"
