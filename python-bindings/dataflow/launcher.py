"""Backend choice and dispatch of ``CompiledArtifact.launch``."""

from __future__ import annotations

from ._cuda_backend import CudaSession, NoCudaDriver, runtime_context
from ._host_backend import host_run
from ._lib import DataflowError, DataflowValueError

__all__ = ["launch", "cuda_available"]

BACKENDS = ("auto", "cuda", "host")


def _no_gpu(err: Exception) -> bool:
    return isinstance(err, NoCudaDriver) or "CUDA_ERROR_NO_DEVICE" in str(err)


def cuda_available() -> bool:
    """Whether libdfrt is present and found a CUDA driver with a GPU."""
    try:
        runtime_context()
    except DataflowError:
        return False
    return True


def _choose(artifact, refs, backend: str) -> str:
    if backend not in BACKENDS:
        raise DataflowValueError(f"launch: backend must be one of {BACKENDS}, got {backend!r}")
    on_gpu = any(t.device == "cuda" for t in refs)
    if backend == "host" or (backend == "auto" and artifact.ptx is None and not on_gpu):
        return "host"
    if artifact.ptx is None:
        raise DataflowValueError("launch: the artifact was compiled for target 'host' and has "
                                 "no PTX; compile for sm_90a to launch on a GPU")
    if backend == "cuda" or on_gpu:
        return "cuda"
    try:
        runtime_context()
    except DataflowError as err:
        if _no_gpu(err):
            return "host"
        raise
    return "cuda"


def _variants(packed) -> frozenset:
    return frozenset(v for v in packed.handler_variant_keys if v is not None)


def _new_session(artifact, ptx: str, key, device: int) -> CudaSession:
    """A session whose module and base plan are those of lengths ``key``."""
    session = CudaSession(ptx, artifact._blob(key), block_size=artifact.block_size,
                          device=device)
    session.lengths_key = key
    session.variants = _variants(artifact._plan_pair(key)[1])
    return session


def _session(artifact, device: int) -> CudaSession:
    """A session whose module holds every handler variant of the current
    plan: the compiled one, or one compiled for a variant it lacks (a
    reduce of one partial, say) when the handlers can be recompiled. The
    one chosen moves to the front of the device's list."""
    sessions = artifact._sessions.setdefault(device, [])
    if not sessions:
        sessions.append(_new_session(artifact, artifact.ptx, artifact._base_key, device))
    need = _variants(artifact.packed)
    for i, session in enumerate(sessions):
        if need <= session.variants:
            sessions.insert(0, sessions.pop(i))
            return session
    session = _new_session(artifact, artifact.kernel_for_current_plan(), artifact._key, device)
    sessions.insert(0, session)
    return session


def _patchable(old, new) -> bool:
    """Lengths keys of one range axis with as many lengths (tasks)."""
    return (old is not None and len(old) == 1 and len(new) == 1 and old[0][0] == new[0][0]
            and len(old[0][1]) == len(new[0][1]))


def _patched(artifact, device: int):
    """The device's last-used session with the current lengths patched into
    the plan it runs (CudaSession.patch: each task's last block ends at its
    new length, the blocks a re-plan would cut; nothing is scheduled in
    Python, the handler variants stay those of its plan), else None."""
    sessions = artifact._sessions.get(device)
    if not sessions:
        return None
    session, key = sessions[0], artifact._key
    if session.lengths_key == key:
        return session
    if _patchable(session.lengths_key, key) and session.patch(list(key[0][1]),
                                                              artifact.block_size):
        session.lengths_key = key
        return session
    return None


def _cuda(artifact, refs, device: int, synchronize: bool) -> str:
    # A decode step's lengths patch the running plan in place; otherwise
    # the session whose module covers the new plan re-plans.
    session = _patched(artifact, device)
    if session is None:
        session = _session(artifact, device)
        if session.lengths_key != artifact._key:
            options, keep = artifact._schedule_options()
            session.set_plan(options)
            del keep
            session.lengths_key = artifact._key
    session.launch(refs, synchronize=synchronize)
    return session.device_name


def launch(artifact, refs, *, backend, device, threads, synchronize, op_log, cost, replanned):
    from .artifact import LaunchResult

    chosen = _choose(artifact, refs, backend)
    if chosen == "cuda":
        name = _cuda(artifact, refs, device, synchronize)
        return LaunchResult("cuda", artifact.range_lengths, replanned, name)
    stats = host_run(artifact.packed, artifact.host_library, refs,
                     block_size=artifact.block_size, threads=threads, op_log=op_log, cost=cost,
                     workspace_bytes=artifact.workspace_bytes)
    return LaunchResult("host", artifact.range_lengths, replanned, "host", stats)
