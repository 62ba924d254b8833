/* libdfrt internals: the object layouts and the helpers the files of the
   CUDA backend share. Not installed. */
#ifndef DFRT_INTERNAL_H
#define DFRT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "df/kernel_plan.h"
#include "df/runtime.h"

/* ---- objects --------------------------------------------------------------- */

struct df_rt {
  df_allocator alloc;
  df_cuda_driver drv;
  df_rt_loader loader;
  void *library; /* handle from loader.open, NULL for an injected table */
  uint64_t plan_ids; /* the last df_rt_plan id handed out */
};

struct df_rt_device {
  df_rt *rt;
  CUdevice device;
  CUcontext ctx;
  df_rt_device_info info;
  /* Set by the watchdog when a kernel did not finish: the context may
     still run it, so no driver call is made any more (destroy functions
     only free host memory; everything else fails). */
  bool hung;
};

struct df_rt_event {
  df_rt_device *dev;
  CUevent handle;
};

struct df_rt_stream {
  df_rt_device *dev;
  CUstream handle;
};

struct df_rt_module {
  df_rt_device *dev;
  CUmodule module;
  CUfunction fn;
  CUfunction fn_watched; /* kernel_name DF_RT_WATCHED_SUFFIX, or NULL: watched launches */
  char kernel_name[DF_NAME_MAX];
  df_rt_kernel_info info;
  char *info_log;
  /* Function attributes as last set by df (-1: never set). */
  int dynamic_shared_set;
  bool non_portable_set;
};

struct df_rt_plan {
  df_rt *rt;
  df_packed *packed;
  df_program *program; /* NULL when absent */
  uint32_t block_size; /* 0: unknown */
  uint64_t id;         /* unique in its df_rt: which plan an executable runs */
  /* df_rt_plan_patch_lengths' index (df_packed_last_blocks), built on the
     first patch for last_count tasks; patches move no instruction. */
  uint32_t *last_blocks;
  uint32_t last_count;
};

/* Plan sections in kernel-parameter order; tensor_args, global_staging
   and flags have buffers of their own. */
enum {
  DFRT_SEC_INSTRUCTIONS = 0,
  DFRT_SEC_QUEUE_OFFSETS,
  DFRT_SEC_QUEUE_LENGTHS,
  DFRT_SEC_SLOTS,
  DFRT_SEC_COMMS,
  DFRT_SEC_BARRIER_INIT_OFFSETS,
  DFRT_SEC_BARRIER_INIT_LENGTHS,
  DFRT_SEC_BARRIER_INIT_INDICES,
  DFRT_SEC_ARGS,
  DFRT_SEC_INPUT_SLOTS,
  DFRT_SEC_TASK_COORDS,
  DFRT_SEC_COUNT
};
#define DFRT_SECTION_ALIGN 256u

/* Kernel pointer parameters, REFERENCE §6 order. */
enum {
  DFRT_P_INSTRUCTIONS = 0,
  DFRT_P_QUEUE_OFFSETS,
  DFRT_P_QUEUE_LENGTHS,
  DFRT_P_SLOTS,
  DFRT_P_COMMS,
  DFRT_P_BARRIER_INIT_OFFSETS,
  DFRT_P_BARRIER_INIT_LENGTHS,
  DFRT_P_BARRIER_INIT_INDICES,
  DFRT_P_ARGS,
  DFRT_P_TENSOR_ARGS,
  DFRT_P_INPUT_SLOTS,
  DFRT_P_TASK_COORDS,
  DFRT_P_GLOBAL_STAGING,
  DFRT_P_FLAGS,
};

/* A device buffer that only grows. */
typedef struct dfrt_buffer {
  CUdeviceptr ptr; /* 0: none */
  size_t cap;
} dfrt_buffer;

/* Tensor metadata kept by an executable, with its source string. */
typedef struct dfrt_meta {
  bool present;
  df_rt_tensor t;
  char source[DF_NAME_MAX];
} dfrt_meta;

/* The persistent tensor-args state of REFERENCE 7.4. */
typedef struct dfrt_targs {
  dfrt_buffer buf;
  uint8_t *current; /* tensor_args_bytes */
  size_t current_len;
  uint8_t *uploaded; /* bytes last copied to buf */
  size_t uploaded_len;
  bool has_uploaded;
  uint32_t meta_count;
  dfrt_meta *meta;
  /* TMA: descriptors (tma_count, 128-byte aligned inside map_block) and
     the tensor pointer of each spec they were built from. */
  bool built;
  void *map_block;
  CUtensorMap *maps;
  bool has_ptr_map;
  uint64_t *ptr_map;
  uint32_t builds;
} dfrt_targs;

/* The launch configuration of the current plan. */
typedef struct dfrt_launch_cfg {
  uint32_t grid_x;
  uint32_t block[3];
  uint32_t cluster_size;
  uint32_t shared_bytes;
  bool non_portable;
  bool needs_flag_reset;
  uint32_t block_size;
} dfrt_launch_cfg;

struct df_rt_executable {
  df_rt_module *module;
  df_rt_device *dev;
  df_rt *rt;
  /* options */
  uint32_t block_dim[3];
  uint32_t block_size_option;
  bool copy_back_staging;
  /* the module plan's handler table, which handler ids are mapped onto */
  uint32_t handler_count;
  df_handler *handlers;
  /* tensor argument names; program tensor count or DF_SENTINEL */
  uint32_t name_count;
  char (*names)[DF_NAME_MAX];
  uint32_t program_tensor_count;
  /* TMA specs and the tensor index of each */
  uint32_t tma_count;
  df_rt_tma_spec *tma;
  uint32_t *tma_index;
  /* current plan; plan_valid is false after a set_plan that failed while
     uploading (device buffers may no longer hold a whole plan) */
  bool plan_valid;
  uint64_t plan_id;         /* the df_rt_plan last set (df_rt_plan.id) */
  df_launch_package launch; /* scalars only; arrays NULL */
  dfrt_launch_cfg cfg;
  dfrt_buffer plan_buf;
  size_t plan_bytes;
  size_t sections[DFRT_SEC_COUNT]; /* byte offsets in plan_buf */
  dfrt_buffer staging;
  size_t staging_bytes;
  dfrt_buffer flags;
  size_t flags_bytes;
  /* Two copies of the flags (a kernel of ABI 2 whose plan needs fresh
     flags): a launch runs on copy flag_copy and zeroes the other for the
     next one, so no memset runs between launches. flags_stale: both
     copies must be zeroed first (a new plan, a failed launch). */
  bool flags_alternate;
  bool flags_stale;
  uint32_t flag_copy;
  uint8_t *staging_host;
  size_t staging_host_len;
  dfrt_targs targs;
  /* host copy of the uploaded plan image (sections at `sections`), for
     the watchdog's dump */
  uint8_t *plan_host;
  /* watchdog (watchdog.c): 0 = off, launches are asynchronous */
  uint32_t timeout_ms;
  uint32_t *progress_host;  /* mapped host memory (cuMemHostAlloc), NULL = none */
  size_t progress_words;
  uint32_t progress_ctas;   /* CTAs of the last watched launch */
  df_rt_cta_progress *last_progress; /* snapshot at the last timeout */
  uint32_t last_progress_count;
  /* kernel parameter values */
  CUdeviceptr params_ptr[DF_RT_KERNEL_POINTER_PARAMS];
  uint32_t params_u32[DF_RT_KERNEL_SCALAR_PARAMS];
  CUdeviceptr param_progress; /* kernel parameter 20: 0 without a watchdog */
  CUdeviceptr param_flags_clear; /* 21: the flag copy this launch zeroes, or 0 */
  uint32_t param_flags_clear_words; /* 22 */
};

/* ---- helpers ------------------------------------------------------------------ */

/* Driver table: check an injected one; resolve one through a loader. */
df_status dfrt_driver_check_table(const df_cuda_driver *t);
df_status dfrt_driver_resolve(const df_rt_loader *l, void *handle, const char *library,
                              df_cuda_driver *out);
df_rt_loader dfrt_default_loader(void);

/* A df_status for a failed driver call: "<object>: <fn> failed:
   CUDA_ERROR_X (n): text". DF_OK for CUDA_SUCCESS. */
df_status dfrt_check(const df_rt *rt, CUresult r, const char *object, const char *fn);
/* Error class of a driver status. */
df_code dfrt_code_for(CUresult r);

/* Make the device's context current on the calling thread. Fails once the
   watchdog has marked the device hung. */
df_status dfrt_bind(df_rt_device *dev);

/* Watchdog (watchdog.c). Before a watched launch: wait (with the
   deadline) for earlier work on the stream, size and zero the progress
   array and set parameter 20. After it: poll the stream until it is done,
   fails, or the deadline passes (then snapshot the progress, request the
   abort, mark the device hung and return DF_ETIMEOUT with a summary). */
df_status dfrt_watch_before(df_rt_executable *e, CUstream stream);
df_status dfrt_watch_after(df_rt_executable *e, CUstream stream);
void dfrt_watch_release(df_rt_executable *e);

/* Read a whole file into a new buffer (allocated with `a`). */
df_status dfrt_read_file(const df_allocator *a, const char *path, const char *what,
                         uint8_t **bytes, size_t *len);

/* Grow `b` to at least `bytes` (at least 1): frees the old buffer and
   allocates a new one when it is too small. *grown tells whether it did. */
df_status dfrt_buffer_reserve(df_rt_device *dev, dfrt_buffer *b, size_t bytes,
                              const char *object, bool *grown);
/* Frees the buffer (only forgets it on a hung device). */
void dfrt_buffer_release(df_rt_device *dev, dfrt_buffer *b);

/* Clone a program through its builders. */
df_status dfrt_program_clone(const df_program *p, const df_allocator *a,
                             df_program **out);

/* Launch package sanity against its packed plan. */
df_status dfrt_plan_check(const df_packed *k);

/* Map the handler ids of `k` onto the executable's module handler table:
   map[i] = module handler id of k's handler i. */
df_status dfrt_map_handlers(const df_rt_executable *e, const df_packed *k,
                            uint32_t *map);

/* Build and upload the plan image (handler ids mapped) on `stream`. */
df_status dfrt_plan_upload(df_rt_executable *e, const df_packed *k, const uint32_t *map,
                           CUstream stream);

/* Pre-checks of REFERENCE 7.5 and the launch configuration of a package;
   sets the function attributes the launch needs. */
df_status dfrt_launch_prepare(df_rt_executable *e, const df_launch_package *lp,
                              uint32_t plan_block_size, dfrt_launch_cfg *cfg);
/* Keep the module's function attributes in line with `cfg`. */
df_status dfrt_launch_attributes(df_rt_executable *e, const dfrt_launch_cfg *cfg);
/* cuLaunchKernelEx with the executable's parameters and configuration. */
/* Kernel parameters before the TMA descriptors: 23 for a kernel of ABI
   2, 21 for one of ABI 1 (df_rt_kernel_info.kernel_abi). */
uint32_t dfrt_fixed_params(const df_rt_module *m);
df_status dfrt_launch_kernel(df_rt_executable *e, CUstream stream);

/* REFERENCE 7.4 on raw record bytes. */
df_status dfrt_targs_update(df_rt_executable *e, const void *bytes, size_t len,
                            CUstream stream);
/* Validate the TMA tensors (pointers `ptrs`, one per spec; metadata by
   tensor index) and encode every descriptor into `maps`. */
df_status dfrt_tma_build(const df_rt_executable *e, const uint64_t *ptrs,
                         const dfrt_meta *meta, uint32_t meta_count, CUtensorMap *maps);
/* Encode one tiled descriptor. */
df_status dfrt_tma_encode(const df_rt *rt, const df_rt_tma_spec *spec, uint64_t ptr,
                          CUtensorMap *map);
/* Pointer of each spec's tensor in record bytes (0 when out of range). */
void dfrt_tma_pointers(const df_rt_executable *e, const void *bytes, size_t len,
                       uint64_t *ptrs);
void dfrt_targs_release(df_rt_executable *e);
/* A metadata array (allocated with the runtime's allocator) from tensors. */
df_status dfrt_meta_build(df_rt_executable *e, const df_rt_tensor *tensors, uint32_t count,
                          dfrt_meta **out);
/* Replace the metadata (takes ownership of `meta`). */
void dfrt_targs_adopt_meta(df_rt_executable *e, dfrt_meta *meta, uint32_t count);
/* Bind packed records and their metadata: validate and encode TMA
   descriptors from the new metadata first, and change nothing when that
   fails; then upload like dfrt_targs_update. */
df_status dfrt_targs_bind(df_rt_executable *e, const df_abi_tensor_arg *records,
                          uint32_t count, dfrt_meta *meta, CUstream stream);

#endif
