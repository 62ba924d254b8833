/* libdfrt: load a df persistent kernel (PTX or cubin) and its plan, and
   launch it on a CUDA GPU. The driver is reached through dlopen and a
   symbol table (include/df/cuda_driver.h); nothing here needs the CUDA
   toolkit or MLIR. There is no global state: every object hangs off a
   runtime context (df_rt) that owns the allocator and the driver table.

   Objects and their owners:
     df_rt             runtime context: allocator + driver table
     df_rt_device      one GPU (primary context), opened by ordinal
     df_rt_stream      a driver stream of a device (NULL = default stream)
     df_rt_module      a loaded PTX/cubin image and its kernel function
     df_rt_plan        a packed plan on the host (from a blob, a packed
                       plan, or re-planned in process), device-independent
     df_rt_executable  module + plan + launch package on the device:
                       uploaded plan arrays, staging, flags, tensor args,
                       TMA descriptors, launch configuration
   Destroy in reverse order of creation (executables before their module
   and device, devices before the runtime). Every fallible function returns
   a df_status whose message names the object and the rule broken. Objects
   are not thread-safe: use one from one thread at a time (every call makes
   its device's primary context current on the calling thread).

   Kernel contract (REFERENCE §6, df's device runtime): entry
   `df_persistent_kernel`, parameters in order: instructions,
   queue_offsets, queue_lengths, slots, comms, barrier_init_offsets,
   barrier_init_lengths, barrier_init_indices, args, tensor_args,
   input_slots, task_coords, global_staging, flags (14 CUdeviceptr), then
   six u32 by value: shared_slot_base_offset, barrier_count,
   cluster_ack_count, cluster_size, block_size, scratch_offset (0); then
   the watchdog's progress array (a CUdeviceptr, 0 without a watchdog;
   df/progress.h), parameter 20; then (df's, parameters 21 and 22) the
   flag words this launch zeroes for the next one (a CUdeviceptr, 0 =
   none) and their count (u32): an executable whose plan has HBM flags
   keeps two copies of them and alternates, so no flag reset runs
   between launches (docs/device-runtime.md); then one CUtensorMap by
   value per TMA descriptor spec, in spec order (from parameter 23). A
   kernel without the image constant df_rt_kernel_abi (ABI 1:
   REFERENCE §6's parameters) gets no parameters 21-22: its descriptors
   from parameter 21 and its flags reset by a memset before each launch
   (df_rt_kernel_info.kernel_abi). A kernel that declares fewer
   parameters ignores the rest, so kernels built before the progress
   parameter still launch (without a watchdog). */
#ifndef DF_RUNTIME_H
#define DF_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "df/abi.h"
#include "df/alloc.h"
#include "df/cuda_driver.h"
#include "df/plan.h"
#include "df/program.h"
#include "df/progress.h"
#include "df/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct df_rt df_rt;
typedef struct df_rt_device df_rt_device;
typedef struct df_rt_stream df_rt_stream;
typedef struct df_rt_module df_rt_module;
typedef struct df_rt_plan df_rt_plan;
typedef struct df_rt_executable df_rt_executable;
typedef struct df_rt_event df_rt_event;

/* The kernel entry point df's compiler emits. */
#define DF_RT_KERNEL_NAME "df_persistent_kernel"
/* Its twin with the watchdog's progress marks: a module's kernel NAME may
   come with NAME DF_RT_WATCHED_SUFFIX, the entry watched launches use
   (the plain one never writes progress). Without it, watched launches
   run NAME. */
#define DF_RT_WATCHED_SUFFIX "_watched"
/* The driver library df_rt_create opens by default. */
#define DF_RT_DRIVER_LIBRARY "libcuda.so.1"
/* Default CTA shape (x,1,1) of df kernels. The reference prototype uses 32;
   df's device runtime copies slots with the whole CTA and is written for
   four warps. */
#define DF_RT_DEFAULT_BLOCK_DIM_X 128u
/* Number of pointer and u32 kernel parameters before the tensor maps. */
#define DF_RT_KERNEL_POINTER_PARAMS 14u
#define DF_RT_KERNEL_SCALAR_PARAMS 6u
/* Index of the progress-array parameter. */
#define DF_RT_KERNEL_PROGRESS_PARAM 20u
/* Then, for a kernel of ABI 2, the words the launch zeroes for the next
   one (a pointer, NULL = none) and their count (u32): df's flags without
   a per-launch reset (docs/device-runtime.md). TMA descriptors follow
   (from parameter 21 for a kernel of ABI 1). */
#define DF_RT_KERNEL_FLAGS_CLEAR_PARAM 21u
#define DF_RT_KERNEL_FLAGS_CLEAR_WORDS_PARAM 22u
#define DF_RT_KERNEL_FIXED_PARAMS 23u
/* Largest tensor rank a tensor description carries (the tensor-arg record
   holds ndim only). */
#define DF_RT_MAX_DIMS 8u

/* ---- runtime context ------------------------------------------------------ */

/* Dynamic-loader hooks (dlopen/dlsym/dlclose/dlerror by default). Tests
   inject a loader that fails to see the "no CUDA driver" path. */
typedef struct df_rt_loader {
  void *(*open)(void *user, const char *library);   /* NULL on failure */
  void *(*symbol)(void *user, void *handle, const char *name); /* NULL: absent */
  void (*close)(void *user, void *handle);
  const char *(*error)(void *user); /* last failure text, may return NULL */
  void *user;
} df_rt_loader;

typedef struct df_rt_options {
  df_allocator alloc;            /* hook NULL: the C library's */
  const df_cuda_driver *driver;  /* non-NULL: use this table (copied), load nothing */
  const df_rt_loader *loader;    /* NULL: dlopen */
  const char *library;           /* NULL: DF_RT_DRIVER_LIBRARY */
} df_rt_options;

/* Create a runtime context: resolve the driver table (from o->driver, or
   by loading o->library through o->loader) and call cuInit(0). o may be
   NULL (all defaults). When the library cannot be opened the status is
   DF_EUNSUPPORTED with a message starting "no CUDA driver"; a library
   that lacks a required entry point or whose cuInit fails is reported
   with the symbol or driver error. */
df_status df_rt_create(const df_rt_options *o, df_rt **out);
/* Close the driver library (if this context opened it) and free `rt`. */
void df_rt_destroy(df_rt *rt);
/* The driver table in use. */
const df_cuda_driver *df_rt_driver(const df_rt *rt);
/* The driver's CUDA version (e.g. 13000). */
df_status df_rt_driver_version(const df_rt *rt, int *version);
/* Number of CUDA devices. */
df_status df_rt_device_count(const df_rt *rt, int *count);

/* ---- device ------------------------------------------------------------------- */

/* What df needs to know about a device. */
typedef struct df_rt_device_info {
  int ordinal;
  char name[256];
  int sm_count;                   /* multiprocessors */
  int cc_major, cc_minor;         /* compute capability */
  int max_threads_per_block;
  int max_shared_per_block_optin; /* opt-in dynamic + static shared bytes */
  bool cluster_launch;            /* thread-block clusters supported */
} df_rt_device_info;

/* Open device `ordinal`: retain its primary context, make it current on
   the calling thread and read its attributes. Out-of-range ordinals are
   DF_EINVAL naming the device count. */
df_status df_rt_device_open(df_rt *rt, int ordinal, df_rt_device **out);
/* Release the primary context and free the device object. */
void df_rt_device_close(df_rt_device *dev);
const df_rt_device_info *df_rt_device_get_info(const df_rt_device *dev);
/* Whether a watched launch on this device timed out: its context may still
   run the kernel, so every later call on the device fails (DF_ETIMEOUT)
   and closing it releases nothing on the driver side. Exit the process to
   free the GPU. */
bool df_rt_device_hung(const df_rt_device *dev);

/* Device memory helpers (tools and tests that bind raw pointers). Copies
   are ordered on `stream` (NULL: default stream); df_rt_memcpy_dtoh waits
   for its copy to finish. */
df_status df_rt_mem_alloc(df_rt_device *dev, size_t bytes, CUdeviceptr *out);
df_status df_rt_mem_free(df_rt_device *dev, CUdeviceptr ptr);
df_status df_rt_memcpy_htod(df_rt_device *dev, df_rt_stream *stream, CUdeviceptr dst,
                            const void *src, size_t bytes);
df_status df_rt_memcpy_dtoh(df_rt_device *dev, df_rt_stream *stream, void *dst,
                            CUdeviceptr src, size_t bytes);
/* Set `bytes` bytes at `dst` to `value`, ordered on `stream`. */
df_status df_rt_memset_d8(df_rt_device *dev, df_rt_stream *stream, CUdeviceptr dst,
                          uint8_t value, size_t bytes);

/* ---- streams --------------------------------------------------------------------- */

/* A non-blocking stream of `dev`. */
df_status df_rt_stream_create(df_rt_device *dev, df_rt_stream **out);
/* Wait until all work queued on `s` (NULL: the default stream of `dev`)
   has finished; reports asynchronous launch errors. */
df_status df_rt_stream_synchronize(df_rt_device *dev, df_rt_stream *s);
void df_rt_stream_destroy(df_rt_stream *s);
/* The driver handle (NULL stream for NULL). */
CUstream df_rt_stream_handle(const df_rt_stream *s);

/* ---- events (timing) ---------------------------------------------------------------- */

/* A timing event of `dev` (cuEventCreate, default flags). */
df_status df_rt_event_create(df_rt_device *dev, df_rt_event **out);
/* Record the event on `s` (NULL: the default stream). */
df_status df_rt_event_record(df_rt_event *ev, df_rt_stream *s);
/* Wait until the event has completed. */
df_status df_rt_event_synchronize(df_rt_event *ev);
/* Milliseconds between two completed events of one device. */
df_status df_rt_event_elapsed_ms(const df_rt_event *start, const df_rt_event *end, float *ms);
void df_rt_event_destroy(df_rt_event *ev);

/* ---- modules ------------------------------------------------------------------------ */

/* Image kinds df_rt_module_load recognises. */
typedef enum df_rt_image_kind {
  DF_RT_IMAGE_PTX = 0,    /* PTX text (".version" directive) */
  DF_RT_IMAGE_CUBIN = 1,  /* ELF */
  DF_RT_IMAGE_FATBIN = 2, /* fatbin container */
} df_rt_image_kind;

typedef struct df_rt_module_options {
  const char *kernel_name; /* NULL: DF_RT_KERNEL_NAME */
  char *jit_log;           /* optional: receives the JIT error log on failure,
                              the info log on success (NUL-terminated) */
  size_t jit_log_cap;
} df_rt_module_options;

/* Classify an image: ELF -> cubin, fatbin magic -> fatbin, text with a
   ".version" directive -> PTX; anything else is DF_EFORMAT. */
df_status df_rt_image_classify(const void *image, size_t bytes, df_rt_image_kind *out);

/* Load a PTX/cubin/fatbin image (copied; PTX need not be NUL-terminated)
   with cuModuleLoadDataEx and look up the kernel. On a JIT failure the
   status message carries the start of the driver's error log and
   o->jit_log receives all of it. Reads the kernel's attributes (maximum
   threads per block, static shared bytes, registers). */
df_status df_rt_module_load(df_rt_device *dev, const void *image, size_t bytes,
                            const df_rt_module_options *o, df_rt_module **out);
/* As df_rt_module_load, reading the image from a file. */
df_status df_rt_module_load_file(df_rt_device *dev, const char *path,
                                 const df_rt_module_options *o, df_rt_module **out);
void df_rt_module_unload(df_rt_module *m);

/* The device address and size of the module's global variable `name`
   (cuModuleGetGlobal): a developer read of state the kernel leaves in its
   image, e.g. the device runtime trace df_rt_trace_buf (df/rt_trace.h;
   zero it before a launch and copy it back after with df_rt_memset_d8 /
   df_rt_memcpy_dtoh). Errors name the symbol: DF_EINVAL when the image
   has no such global, DF_EUNSUPPORTED when the driver lacks
   cuModuleGetGlobal, the driver's error otherwise. */
df_status df_rt_module_global(const df_rt_module *m, const char *name, CUdeviceptr *ptr,
                              size_t *bytes);

/* Kernel attributes read at load. */
typedef struct df_rt_kernel_info {
  df_rt_image_kind image_kind;
  int max_threads_per_block;
  int static_shared_bytes;
  int num_regs;
  int local_bytes;
  /* The image's df_handler_workspace_bytes (docs/workspace.md): launches
     add df_workspace_launch_bytes of it to the plan's dynamic shared
     memory. 0 when the image has no such symbol (images built before the
     workspace) or the driver table has no cuModuleGetGlobal. */
  uint32_t workspace_bytes;
  /* The image's df_rt_kernel_abi: 2 = the kernel takes parameters 21-22
     and zeroes the next launch's flags itself (libdfrt then alternates
     two flag buffers instead of resetting them before every launch); 1
     when the image has no such symbol (REFERENCE §6 kernels, df's before
     it) or the driver table has no cuModuleGetGlobal. */
  uint32_t kernel_abi;
} df_rt_kernel_info;
const df_rt_kernel_info *df_rt_module_kernel_info(const df_rt_module *m);
/* The JIT info log of a successful load ("" if none). */
const char *df_rt_module_info_log(const df_rt_module *m);

/* ---- plans ---------------------------------------------------------------------------- */

/* Read a plan blob (df_blob_read): the packed plan and, when the blob
   embeds it, the program it was planned from. block_size is unknown
   (0): df_packed does not record the range block size, so executables
   take it from df_rt_executable_options.block_size. */
df_status df_rt_plan_from_blob(df_rt *rt, const uint8_t *bytes, size_t len,
                               df_rt_plan **out);
/* As df_rt_plan_from_blob, reading a file. */
df_status df_rt_plan_from_file(df_rt *rt, const char *path, df_rt_plan **out);
/* Adopt a packed plan and optionally its program (both owned by the plan
   afterwards, also on failure). block_size 0 = unknown. The packed plan
   must have been allocated with the runtime's allocator or carry its
   own (df_packed.alloc). */
df_status df_rt_plan_from_packed(df_rt *rt, df_packed *packed, df_program *program,
                                 uint32_t block_size, df_rt_plan **out);
/* Schedule `program` with `so` and pack it with `po` in process (NULL po:
   default layout, no fingerprint). The plan keeps a copy of the program,
   so it can be re-planned; its block size is the plan's (so->block_size,
   or the chosen one with so->auto_split). */
df_status df_rt_plan_from_program(df_rt *rt, const df_program *program,
                                  const df_schedule_options *so,
                                  const df_pack_options *po, df_rt_plan **out);
/* Re-plan `base` for new range lengths without the compiler: schedule its
   program (the base must carry one; blobs written with the program do)
   with `so` and pack with `po` (NULL: defaults without the fingerprint,
   which run-time plans do not need). so->topology with sm_count 0 takes
   the base plan's topology. The compiled plan's choices recorded in the
   program are repeated (df_schedule_replan): so->transfer_tile_bytes 0
   takes the base plan's tile, and a plan compiled with
   reduce-strategy=auto is re-fitted under its recorded shared-memory
   limit (so->policy / so->strategy are then not used); one compiled with
   block-size=auto chooses its block size and placement again for the new
   lengths (so->block_size, policy, strategy and placement are then not
   used; df_rt_plan_block_size of the result is the chosen block, which
   executables then take). A base plan with an instruction pool
   (docs/pool.md) re-plans with one (so->pool set): its kernel may lack
   the paths of a plan without. The result is a new plan;
   df_rt_executable_set_plan switches an executable to it without
   reloading the module. */
df_status df_rt_plan_replan(const df_rt_plan *base, const df_schedule_options *so,
                            const df_pack_options *po, df_rt_plan **out);
/* New range lengths patched into `plan` in place instead of a re-plan
   (df_packed_patch_lengths: each task's last block ends at its new
   length; lengths has one entry per task). out->patched false (DF_OK,
   out->reason says why, the plan untouched) means re-plan
   (df_rt_plan_replan): e.g. with max_last_block = the block size, a
   sequence that crossed a block boundary. Executables running the plan
   see the new lengths after df_rt_executable_set_plan. */
df_status df_rt_plan_patch_lengths(df_rt_plan *plan, const uint32_t *lengths, uint32_t count,
                                   uint32_t max_last_block, df_patch_result *out);
void df_rt_plan_destroy(df_rt_plan *plan);
const df_packed *df_rt_plan_packed(const df_rt_plan *plan);
/* NULL when the plan carries no program. */
const df_program *df_rt_plan_program(const df_rt_plan *plan);
/* The range block size, 0 when unknown. */
uint32_t df_rt_plan_block_size(const df_rt_plan *plan);

/* ---- tensors ------------------------------------------------------------------------------ */

typedef enum df_rt_device_type {
  DF_RT_DEVICE_UNKNOWN = 0,
  DF_RT_DEVICE_CPU = 1,
  DF_RT_DEVICE_CUDA = 2,
} df_rt_device_type;

/* One tensor argument: a device pointer plus the runtime metadata of
   REFERENCE 7.2 (all optional except the source). Raw pointers carry no
   metadata; descriptions carry shape, byte strides, dtype and device.
   A record with `missing` set packs as an all-zero record. */
typedef struct df_rt_tensor {
  uint64_t data_ptr;
  const char *source; /* "raw_pointer", "tensor_description", ... (copied) */
  bool missing;
  bool has_shape;
  bool has_strides;
  uint32_t ndim;
  int64_t shape[DF_RT_MAX_DIMS];
  int64_t strides_bytes[DF_RT_MAX_DIMS];
  df_rt_device_type device_type;
  bool has_device_index;
  int device_index;
  uint32_t dtype_code; /* DF_TENSOR_DTYPE_* */
  uint32_t dtype_bits;
} df_rt_tensor;

/* A raw device pointer: record (ptr, ndim 0, dtype 0, bits 0,
   DF_TENSOR_ARG_RAW_POINTER), source "raw_pointer", no metadata. */
df_rt_tensor df_rt_tensor_raw(uint64_t data_ptr);
/* A missing (optional) tensor: an all-zero record, source "missing". */
df_rt_tensor df_rt_tensor_missing(void);
/* A row-major contiguous CUDA tensor of `dtype` on device `ordinal`. */
df_status df_rt_tensor_contiguous(uint64_t data_ptr, df_dtype dtype, uint32_t ndim,
                                  const int64_t *shape, int ordinal, df_rt_tensor *out);
/* The 32-byte record of a tensor (REFERENCE 7.1): raw pointers -> flag
   RAW_POINTER; descriptions -> ndim, dtype code/bits, flag
   ARRAY_INTERFACE (byte strides, like a CUDA array interface). Checks
   ndim <= DF_RT_MAX_DIMS, dtype code <= BOOL, non-negative shape and a
   dtype with bits when the code is known. */
df_status df_rt_tensor_pack(const df_rt_tensor *t, df_abi_tensor_arg *out);

/* ---- TMA descriptors (REFERENCE 7.3) ------------------------------------------------------- */

/* One tensor-map descriptor the kernel takes by value. Dims and strides
   are innermost first; global_stride[0] is the element size and is not
   passed to the driver. dtype/interleave/swizzle/l2_promotion/oob_fill
   are the driver's enum values. */
typedef struct df_rt_tma_spec {
  char name[DF_NAME_MAX];
  char tensor_name[DF_NAME_MAX];
  uint32_t dtype; /* CUtensorMapDataType */
  uint32_t rank;  /* 1..5 */
  uint64_t global_dim[DF_CU_TENSOR_MAP_MAX_RANK];
  uint64_t global_stride[DF_CU_TENSOR_MAP_MAX_RANK];
  uint32_t box_dim[DF_CU_TENSOR_MAP_MAX_RANK];
  uint32_t element_strides[DF_CU_TENSOR_MAP_MAX_RANK];
  uint32_t interleave, swizzle, l2_promotion, oob_fill;
  bool is_im2col; /* im2col descriptors are not supported (DF_EUNSUPPORTED) */
} df_rt_tma_spec;

/* Structural checks of a spec: names present, rank 1..5, enum values in
   range, non-zero dims/boxes/element strides, not im2col. */
df_status df_rt_tma_spec_check(const df_rt_tma_spec *spec);

/* What validation knows about one tensor name: its pointer (has_ptr false
   = the name is not a tensor argument) and its metadata (NULL = none). */
typedef struct df_rt_tma_binding {
  const char *name;
  bool has_ptr;
  uint64_t data_ptr;
  const df_rt_tensor *meta;
} df_rt_tma_binding;

/* Validate the tensors behind TMA specs fail-closed, per spec and in the
   reference's order: missing tensor argument; null pointer; 16-byte
   alignment; metadata present; shape and strides present (a raw pointer
   cannot be validated); dtype (known map dtypes 0-9); rank; shape =
   reversed(global_dim); byte strides = reversed(global_stride); explicit
   CUDA device; device ordinal = expected_ordinal (skipped when < 0).
   DF_EINVAL with the reference's message fragments. */
df_status df_rt_tma_validate(const df_rt_tma_spec *specs, uint32_t spec_count,
                             const df_rt_tma_binding *bindings, uint32_t binding_count,
                             int expected_ordinal);

/* ---- executables ----------------------------------------------------------------------------------- */

typedef struct df_rt_executable_options {
  uint32_t block_dim[3];   /* all 0: (DF_RT_DEFAULT_BLOCK_DIM_X,1,1); else 3 positive */
  uint32_t block_size;     /* range block size passed to the kernel when the
                              plan does not know it; 0: 1 */
  bool copy_back_staging;  /* copy global staging to the host after each
                              launch (debugging; see df_rt_executable_staging) */
  uint32_t tma_count;
  const df_rt_tma_spec *tma_specs;
  /* Tensor argument names by index, for TMA specs. NULL: the plan's
     program's tensor argument order (REFERENCE 7.1). */
  uint32_t tensor_name_count;
  const char *const *tensor_names;
  df_rt_stream *stream;    /* stream of the plan upload (NULL: default) */
} df_rt_executable_options;

/* Create an executable: check the plan against the device and kernel
   (REFERENCE 7.5 pre-checks: sm_count % cluster_size, cluster launch
   support, dynamic shared bytes vs the device limit, block threads vs the
   kernel's maximum, cluster size vs the kernel's maximum, every CTA
   co-resident), upload the plan arrays once (one allocation, 256-byte
   aligned sections), allocate global staging and flags once
   (uninitialised), and set the kernel's dynamic shared memory maximum.
   The plan is copied; it may be destroyed afterwards. */
df_status df_rt_executable_create(df_rt_module *module, const df_rt_plan *plan,
                                  const df_rt_executable_options *o,
                                  df_rt_executable **out);
void df_rt_executable_destroy(df_rt_executable *e);

/* Switch to another plan for the same module (e.g. re-planned for new
   range lengths): handler ids are mapped onto the module plan's handler
   table (a handler variant the module's plan lacks is an error), the
   pre-checks run again, and plan arrays, staging and flags are re-uploaded
   or grown on `stream`. Tensor arguments and TMA descriptors are kept.
   When a check fails the executable keeps its previous plan; when an
   upload fails it refuses to launch until a plan is set successfully. */
df_status df_rt_executable_set_plan(df_rt_executable *e, const df_rt_plan *plan,
                                    df_rt_stream *stream);
/* A decode step's new range lengths, patched into `plan` in place
   (df_rt_plan_patch_lengths) and, where they moved, the plan's args
   records alone uploaded on `stream`: no re-check and no re-upload of the
   rest, which the patch leaves as they were. `plan` must be the plan `e`
   runs (its last successful df_rt_executable_set_plan), else DF_EINVAL.
   Not patched (out->patched false, out->reason says why): nothing
   changes; re-plan (df_rt_plan_replan) and set that plan. A failed
   upload leaves the executable refusing to launch until a plan is set. */
df_status df_rt_executable_patch_lengths(df_rt_executable *e, df_rt_plan *plan,
                                         const uint32_t *lengths, uint32_t count,
                                         uint32_t max_last_block, df_rt_stream *stream,
                                         df_patch_result *out);

/* Bind tensor arguments by index (REFERENCE 7.1): pack their records,
   remember their metadata for TMA validation, rebuild TMA descriptors
   from the new metadata and upload the records (REFERENCE 7.4). When the
   plan carries a program, `count` must equal its tensor argument count. */
df_status df_rt_executable_bind_tensors(df_rt_executable *e, df_rt_stream *stream,
                                        const df_rt_tensor *tensors, uint32_t count);
/* Replace the metadata used to validate TMA tensors without uploading. */
df_status df_rt_executable_set_tensor_metadata(df_rt_executable *e,
                                               const df_rt_tensor *tensors,
                                               uint32_t count);
/* The persistent tensor-args update of REFERENCE 7.4 on raw record bytes
   ("pointer-only"): builds TMA descriptors once, refuses to change TMA
   tensor pointers afterwards (state untouched), grows the device buffer
   only when needed and skips the copy when the bytes are unchanged. */
df_status df_rt_executable_update_tensor_args(df_rt_executable *e, df_rt_stream *stream,
                                              const void *bytes, size_t len);

/* Launch once on `stream` (NULL: default): update tensor args, give the
   kernel zeroed flags when the plan needs them (HBM send/recv comms; a
   kernel of ABI 2 zeroes the next launch's copy itself, others get a
   memset before every launch: df_rt_kernel_info.kernel_abi), launch with
   grid (sm_count,1,1), block_dim, cluster (cluster_size,1,1) and dynamic
   shared memory = the launch package's bytes, and, with
   copy_back_staging, copy global staging back (waiting for the launch).
   With a timeout (df_rt_executable_set_timeout) the launch is watched and
   returns when the kernel has finished; otherwise it is asynchronous. */
df_status df_rt_executable_launch(df_rt_executable *e, df_rt_stream *stream);

/* ---- watchdog ------------------------------------------------------------------------ */

/* Watch every later launch of `e` for at most timeout_ms milliseconds (0:
   off, the default). A watched launch first waits (within the deadline)
   for earlier work on its stream, passes the kernel a progress array in
   mapped host memory (parameter 20, df/progress.h) and returns only when
   the kernel has finished, failed, or the deadline has passed. A kernel
   that does not finish in time makes the launch return DF_ETIMEOUT: the
   message names the blocked CTAs (queue position, phase, the comm and
   epoch or parity they wait on), df_rt_executable_progress has every
   CTA, the kernel is asked to abort (spinning CTAs trap) and the device
   is marked hung: its CUDA context is unusable (df_rt_device_hung); exit
   the process. Needs cuStreamQuery, cuMemHostAlloc, cuMemFreeHost and
   cuMemHostGetDevicePointer in the driver table. Progress stores cost a
   few host-memory writes per instruction, so timings of watched launches
   are slower. */
df_status df_rt_executable_set_timeout(df_rt_executable *e, uint32_t timeout_ms);

/* One CTA's progress (df/progress.h words). */
typedef struct df_rt_cta_progress {
  uint32_t cta;
  uint32_t pc;    /* DF_PROGRESS_PC_NONE outside the loop */
  uint32_t phase; /* df_progress_phase */
  uint32_t comm;  /* comm record index, handler id, or DF_PROGRESS_NONE */
  uint32_t wait;  /* awaited epoch / parity / task id */
} df_rt_cta_progress;

/* The snapshot taken at the last timeout (count 0 when none). */
df_status df_rt_executable_progress(const df_rt_executable *e, const df_rt_cta_progress **out,
                                    uint32_t *count);
/* "hbm_recv", "cluster_recv", ... ("unknown" when out of range). */
const char *df_rt_phase_name(uint32_t phase);
/* One line about a CTA's progress against the executable's current plan:
   "CTA 3: pc 2 of 4 (reduce, task 1): hbm_recv: waits on comm 5 (hbm_recv
   slot 1 -> 3, flag 3 >= epoch 1000)". */
void df_rt_executable_describe_progress(const df_rt_executable *e, const df_rt_cta_progress *p,
                                        char *buf, size_t cap);

/* The launch configuration an executable uses. */
typedef struct df_rt_launch_info {
  uint32_t grid[3];
  uint32_t block[3];
  uint32_t cluster_size;
  uint32_t dynamic_shared_bytes;
  bool non_portable_cluster;
  bool needs_flag_reset;
  /* needs_flag_reset with a kernel of ABI 2: the executable alternates
     two copies of the flags, each launch zeroing the other's, instead of
     a memset before every launch (df_rt_kernel_info.kernel_abi). */
  bool flags_alternate;
  uint32_t block_size;
  uint32_t param_count; /* 23 (21 for a kernel of ABI 1) + TMA descriptors */
  size_t flags_bytes, staging_bytes, plan_bytes;
} df_rt_launch_info;
df_status df_rt_executable_launch_info(const df_rt_executable *e, df_rt_launch_info *out);

/* The host copy of global staging made by the last launch with
   copy_back_staging (NULL/0 before). */
df_status df_rt_executable_staging(const df_rt_executable *e, const uint8_t **bytes,
                                   size_t *len);
/* Copy global staging to `dst` now (waits on `stream`). len must equal
   the staging size. */
df_status df_rt_executable_read_staging(df_rt_executable *e, df_rt_stream *stream,
                                        void *dst, size_t len);
/* The current tensor-arg bytes (host copy). */
void df_rt_executable_tensor_args(const df_rt_executable *e, const uint8_t **bytes,
                                  size_t *len);
/* Number of TMA descriptor builds so far (diagnostics and tests). */
uint32_t df_rt_executable_tma_builds(const df_rt_executable *e);

#ifdef __cplusplus
}
#endif

#endif
