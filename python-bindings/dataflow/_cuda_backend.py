"""Launching on a CUDA GPU through libdfrt (include/df/runtime.h): one
session per compiled artifact and device holds the loaded PTX module, the
base plan (from the artifact's blob, which embeds the program) and the
executable. New range lengths patch the running plan in place
(df_rt_executable_patch_lengths) or, where that is refused, re-plan through
df_rt_plan_replan and switch the executable with df_rt_executable_set_plan
(same module). Tensors in
host memory are staged through device buffers around the launch."""

from __future__ import annotations

import ctypes
import weakref

from ._ctypes_rt import (DEVICE_TYPES, RT_MAX_DIMS, df_rt_executable_options,
                         df_patch_result, df_rt_launch_info, df_rt_module_options,
                         df_rt_tensor)
from ._lib import DataflowError, check, error_for, runtime

__all__ = ["NoCudaDriver", "runtime_context", "CudaSession"]

_UNSUPPORTED = 2
_RT: list = []  # the process's df_rt (created once, never destroyed)


class NoCudaDriver(DataflowError, RuntimeError):
    """libdfrt is missing, or found no CUDA driver (df_rt_create)."""

    def __init__(self, message: str):
        super().__init__(message, "unsupported")


def runtime_context() -> int:
    """The process-wide df_rt *; raises NoCudaDriver when there is none."""
    if _RT:
        if isinstance(_RT[0], Exception):
            raise _RT[0]
        return _RT[0]
    try:
        dll = runtime.load()
    except OSError as err:
        _RT.append(NoCudaDriver(f"df: no CUDA runtime: {err}"))
        raise _RT[0] from None
    rt = ctypes.c_void_p()
    status = dll.df_rt_create(None, ctypes.byref(rt))
    if status.code != 0:
        err = error_for(status)
        if status.code == _UNSUPPORTED and status.message.startswith(b"no CUDA driver"):
            err = NoCudaDriver(str(err))
        _RT.append(err)
        raise err
    _RT.append(rt.value)
    return rt.value


def _describe(t, keep: list, ptr: int | None = None) -> df_rt_tensor:
    d = df_rt_tensor()
    d.data_ptr = t.ptr if ptr is None else ptr
    source = t.source.encode()
    keep.append(source)
    d.source = source
    if t.missing:
        d.missing = True
        return d
    if t.dtype is None:
        return d  # a raw pointer
    if len(t.shape) > RT_MAX_DIMS:
        raise ValueError(f"tensor rank {len(t.shape)} exceeds {RT_MAX_DIMS}")
    d.has_shape = d.has_strides = True
    d.ndim = len(t.shape)
    for i, (n, s) in enumerate(zip(t.shape, t.strides_bytes)):
        d.shape[i], d.strides_bytes[i] = n, s
    d.device_type = DEVICE_TYPES["cuda"]
    if t.device_index is not None:
        d.has_device_index = True
        d.device_index = t.device_index
    d.dtype_code, d.dtype_bits = t.dtype.tensor_dtype_code, t.dtype.bits
    return d


def _release(dll, handles: dict) -> None:
    for key, destroy in (("exe", dll.df_rt_executable_destroy),
                         ("replanned", dll.df_rt_plan_destroy), ("plan", dll.df_rt_plan_destroy),
                         ("module", dll.df_rt_module_unload), ("dev", dll.df_rt_device_close)):
        if handles.get(key):
            destroy(handles.pop(key))


class CudaSession:
    """Module + plan + executable of one artifact on one device."""

    def __init__(self, ptx: str, blob: bytes, *, block_size: int, device: int = 0):
        rt = runtime_context()
        self.dll = dll = runtime.load()
        self.h: dict = {}
        self._finalizer = weakref.finalize(self, _release, dll, self.h)
        out = ctypes.c_void_p()
        check(dll.df_rt_device_open(rt, device, ctypes.byref(out)))
        self.h["dev"] = out.value
        info = dll.df_rt_device_get_info(out.value).contents
        self.device_name = info.name.decode()
        self.device = device
        image = ptx.encode()
        log = ctypes.create_string_buffer(16384)
        mo = df_rt_module_options(None, ctypes.cast(log, ctypes.c_void_p), len(log))
        status = dll.df_rt_module_load(self.h["dev"], image, len(image), ctypes.byref(mo),
                                       ctypes.byref(out))
        if status.code != 0:
            err = error_for(status, "loading the PTX")
            err.jit_log = log.value.decode("utf-8", "replace")
            raise err
        self.h["module"] = out.value
        check(dll.df_rt_plan_from_blob(rt, blob, len(blob), ctypes.byref(out)))
        self.h["plan"] = out.value
        eo = df_rt_executable_options()
        eo.block_size = block_size
        check(dll.df_rt_executable_create(self.h["module"], self.h["plan"], ctypes.byref(eo),
                                          ctypes.byref(out)))
        self.h["exe"] = out.value
        self.lengths_key = None

    def set_plan(self, options) -> None:
        """Re-plan the base plan with ``options`` (df_schedule_options) and
        switch the executable to it."""
        out = ctypes.c_void_p()
        check(self.dll.df_rt_plan_replan(self.h["plan"], ctypes.byref(options), None,
                                         ctypes.byref(out)), "re-planning")
        status = self.dll.df_rt_executable_set_plan(self.h["exe"], out.value, None)
        if status.code != 0:
            self.dll.df_rt_plan_destroy(out.value)
            raise error_for(status, "switching to the re-planned plan (a handler variant the "
                                    "compiled plan lacks needs a new df.compile)")
        if self.h.get("replanned"):
            self.dll.df_rt_plan_destroy(self.h["replanned"])
        self.h["replanned"] = out.value

    def patch(self, lengths: list, block_size: int) -> bool:
        """New range lengths (one per task) patched into the plan the
        executable runs, only its args records uploaded
        (df_rt_executable_patch_lengths, last blocks up to the plan's block
        size); False, with nothing changed, where a re-plan is needed (a
        sequence crossed a block boundary, a fixed-extent variant, ...)."""
        plan = self.h.get("replanned") or self.h["plan"]
        block = self.dll.df_rt_plan_block_size(plan) or block_size
        arr = (ctypes.c_uint32 * max(1, len(lengths)))(*lengths)
        res = df_patch_result()
        check(self.dll.df_rt_executable_patch_lengths(self.h["exe"], plan, arr, len(lengths),
                                                      block, None, ctypes.byref(res)),
              "patching the range lengths")
        return bool(res.patched)

    def launch_info(self) -> df_rt_launch_info:
        li = df_rt_launch_info()
        check(self.dll.df_rt_executable_launch_info(self.h["exe"], ctypes.byref(li)))
        return li

    def launch(self, tensors: list, *, synchronize: bool = True) -> None:
        dll, dev = self.dll, self.h["dev"]
        keep: list = []
        staged: list = []  # (TensorRef, device pointer)
        try:
            descs = (df_rt_tensor * max(1, len(tensors)))()
            for i, t in enumerate(tensors):
                ptr = None
                if t.device == "cpu":
                    ptr = self._stage_in(t)
                    staged.append((t, ptr))
                descs[i] = _describe(t, keep, ptr)
            check(dll.df_rt_executable_bind_tensors(self.h["exe"], None, descs, len(tensors)))
            check(dll.df_rt_executable_launch(self.h["exe"], None))
            if synchronize or staged:
                check(dll.df_rt_stream_synchronize(dev, None))
            for t, ptr in staged:
                if t.writable and t.nbytes:
                    check(dll.df_rt_memcpy_dtoh(dev, None, t.ptr, ptr, t.nbytes))
        finally:
            for _, ptr in staged:
                if ptr:
                    dll.df_rt_mem_free(dev, ptr)

    def _stage_in(self, t) -> int:
        if not t.nbytes:
            return 0
        ptr = ctypes.c_uint64()
        check(self.dll.df_rt_mem_alloc(self.h["dev"], t.nbytes, ctypes.byref(ptr)))
        status = self.dll.df_rt_memcpy_htod(self.h["dev"], None, ptr.value, t.ptr, t.nbytes)
        if status.code != 0:
            self.dll.df_rt_mem_free(self.h["dev"], ptr.value)
            raise error_for(status)
        return ptr.value

    def close(self) -> None:
        self._finalizer()
