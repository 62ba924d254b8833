"""ctypes mirrors of the host-backend entry point of libdf.so
(lib/Shared/host_api.h) and of libdfrt's types (include/df/runtime.h), and
the signatures of libdfrt's functions the bindings call. Their sizes and
offsets are checked against libdf.so's layout table with the other
mirrors (``_ctypes.check_layouts``)."""

from __future__ import annotations

from ctypes import (POINTER, Structure, c_bool, c_char, c_char_p, c_double, c_int, c_int64,
                    c_size_t, c_uint8, c_uint32, c_uint64, c_void_p)

from . import _ctypes as C

TMA_MAX_RANK = 5  # DF_CU_TENSOR_MAP_MAX_RANK
RT_MAX_DIMS = 8   # DF_RT_MAX_DIMS
u32 = c_uint32


# ---- host_api.h (libdf.so) -----------------------------------------------------------------

class df_shared_host_run_options(Structure):
    _fields_ = [("threads", u32), ("block_size", u32), ("op_log", c_bool), ("cost", c_bool),
                ("workspace_bytes", u32)]


class df_shared_host_run_info(Structure):
    _fields_ = [("steps", c_uint64), ("op_count", u32), ("diag_kind", u32),
                ("makespan_cycles", c_double), ("report", c_void_p), ("op_log", c_void_p),
                ("cost", c_void_p)]


# ---- runtime.h (libdfrt.so) ----------------------------------------------------------------

class df_rt_device_info(Structure):
    _fields_ = [("ordinal", c_int), ("name", c_char * 256), ("sm_count", c_int),
                ("cc_major", c_int), ("cc_minor", c_int), ("max_threads_per_block", c_int),
                ("max_shared_per_block_optin", c_int), ("cluster_launch", c_bool)]


class df_rt_tensor(Structure):
    _fields_ = [("data_ptr", c_uint64), ("source", c_char_p), ("missing", c_bool),
                ("has_shape", c_bool), ("has_strides", c_bool), ("ndim", u32),
                ("shape", c_int64 * RT_MAX_DIMS), ("strides_bytes", c_int64 * RT_MAX_DIMS),
                ("device_type", C.enum), ("has_device_index", c_bool), ("device_index", c_int),
                ("dtype_code", u32), ("dtype_bits", u32)]


class df_rt_tma_spec(Structure):
    _fields_ = [("name", c_char * C.NAME_MAX), ("tensor_name", c_char * C.NAME_MAX),
                ("dtype", u32), ("rank", u32),
                ("global_dim", c_uint64 * TMA_MAX_RANK), ("global_stride", c_uint64 * TMA_MAX_RANK),
                ("box_dim", u32 * TMA_MAX_RANK), ("element_strides", u32 * TMA_MAX_RANK),
                ("interleave", u32), ("swizzle", u32), ("l2_promotion", u32),
                ("oob_fill", u32), ("is_im2col", c_bool)]


class df_rt_tma_binding(Structure):
    _fields_ = [("name", c_char_p), ("has_ptr", c_bool), ("data_ptr", c_uint64),
                ("meta", POINTER(df_rt_tensor))]


class df_rt_executable_options(Structure):
    _fields_ = [("block_dim", u32 * 3), ("block_size", u32), ("copy_back_staging", c_bool),
                ("tma_count", u32), ("tma_specs", POINTER(df_rt_tma_spec)),
                ("tensor_name_count", u32), ("tensor_names", POINTER(c_char_p)),
                ("stream", c_void_p)]


class df_rt_launch_info(Structure):
    _fields_ = [("grid", u32 * 3), ("block", u32 * 3), ("cluster_size", u32),
                ("dynamic_shared_bytes", u32), ("non_portable_cluster", c_bool),
                ("needs_flag_reset", c_bool), ("flags_alternate", c_bool), ("block_size", u32),
                ("param_count", u32),
                ("flags_bytes", c_size_t), ("staging_bytes", c_size_t), ("plan_bytes", c_size_t)]


class df_patch_result(Structure):
    _fields_ = [("patched", c_bool), ("changed", u32), ("reason", c_char * 256)]


class df_rt_module_options(Structure):
    _fields_ = [("kernel_name", c_char_p), ("jit_log", c_void_p), ("jit_log_cap", c_size_t)]


DEVICE_TYPES = {None: 0, "cpu": 1, "cuda": 2}

MIRRORS = {
    "df_shared_host_run_options": df_shared_host_run_options,
    "df_shared_host_run_info": df_shared_host_run_info,
    "df_rt_device_info": df_rt_device_info, "df_rt_tensor": df_rt_tensor,
    "df_rt_tma_spec": df_rt_tma_spec, "df_rt_tma_binding": df_rt_tma_binding,
    "df_rt_executable_options": df_rt_executable_options,
    "df_rt_launch_info": df_rt_launch_info, "df_patch_result": df_patch_result,
}


def declare_runtime(dll) -> None:
    S, P = C.STATUS, c_void_p
    pP = POINTER(c_void_p)
    sigs = [
        ("df_rt_create", S, P, pP), ("df_rt_destroy", None, P),
        ("df_rt_device_count", S, P, POINTER(c_int)),
        ("df_rt_device_open", S, P, c_int, pP), ("df_rt_device_close", None, P),
        ("df_rt_device_get_info", POINTER(df_rt_device_info), P),
        ("df_rt_mem_alloc", S, P, c_size_t, POINTER(c_uint64)),
        ("df_rt_mem_free", S, P, c_uint64),
        ("df_rt_memcpy_htod", S, P, P, c_uint64, c_void_p, c_size_t),
        ("df_rt_memcpy_dtoh", S, P, P, c_void_p, c_uint64, c_size_t),
        ("df_rt_memset_d8", S, P, P, c_uint64, c_uint8, c_size_t),
        ("df_rt_stream_synchronize", S, P, P),
        ("df_rt_module_load", S, P, c_void_p, c_size_t, POINTER(df_rt_module_options), pP),
        ("df_rt_module_unload", None, P),
        ("df_rt_module_global", S, P, c_char_p, POINTER(c_uint64), POINTER(c_size_t)),
        ("df_rt_plan_from_blob", S, P, c_char_p, c_size_t, pP),
        ("df_rt_plan_replan", S, P, POINTER(C.df_schedule_options), P, pP),
        ("df_rt_plan_destroy", None, P),
        ("df_rt_plan_block_size", u32, P),
        ("df_rt_executable_create", S, P, P, POINTER(df_rt_executable_options), pP),
        ("df_rt_executable_destroy", None, P),
        ("df_rt_executable_set_plan", S, P, P, P),
        ("df_rt_executable_patch_lengths", S, P, P, POINTER(u32), u32, u32, P,
         POINTER(df_patch_result)),
        ("df_rt_executable_bind_tensors", S, P, P, POINTER(df_rt_tensor), u32),
        ("df_rt_executable_launch", S, P, P),
        ("df_rt_executable_launch_info", S, P, POINTER(df_rt_launch_info)),
        ("df_rt_tma_validate", S, POINTER(df_rt_tma_spec), u32, POINTER(df_rt_tma_binding), u32,
         c_int),
    ]
    for name, restype, *argtypes in sigs:
        C._sig(dll, name, restype, *argtypes)
