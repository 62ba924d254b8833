/* A fake CUDA driver for libdfrt's tests: a df_cuda_driver table whose
   entries record every call, emulate device memory with host blocks, and
   answer attribute and occupancy queries from a configurable state. Test
   code only: the state is one global. */
#ifndef DF_TEST_FAKE_DRIVER_H
#define DF_TEST_FAKE_DRIVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "df/cuda_driver.h"

enum {
  FAKE_MAX_CALLS = 2048,
  FAKE_CALL_DATA = 256,
  FAKE_MAX_BLOCKS = 512,
  FAKE_MAX_MAPS = 8,
  FAKE_MAX_EVENTS = 64,
  FAKE_MAX_HOST = 16
};

/* The function handles cuModuleGetFunction returns: a name ending in
   "_watched" (the watchdog's entry) gets the second. */
#define FAKE_FUNCTION 0x3000u
#define FAKE_WATCHED_FUNCTION 0x3001u
/* Any other entry (a bench's helper kernel, e.g. bench/moe's clock spin). */
#define FAKE_OTHER_FUNCTION 0x3002u

typedef struct fake_call {
  char name[48];
  uint64_t a[4];               /* numeric arguments, per entry point */
  size_t bytes;                /* byte count of copies/allocations */
  uint8_t data[FAKE_CALL_DATA]; /* first bytes of host->device copies */
} fake_call;

typedef struct fake_encode {
  uint32_t dtype, rank;
  uint64_t address;
  uint64_t dims[5], strides[5];
  uint32_t box[5], elem[5];
  uint32_t interleave, swizzle, l2, oob;
} fake_encode;

typedef struct fake_block {
  void *host;
  size_t size;
  bool live;
} fake_block;

typedef struct fake_state {
  /* configuration (fake_reset sets the defaults: an H200-like device) */
  int device_count, sm_count, optin_shared, cluster_launch, cc_major, cc_minor;
  int max_threads;
  int func_max_threads, func_static_shared, func_regs;
  int max_cluster_portable, max_cluster_non_portable;
  int max_active_clusters; /* < 0: sm_count / cluster size */
  int max_active_blocks;   /* CTAs per SM */
  CUresult module_load_result;
  const char *jit_error_log, *jit_info_log;
  CUresult get_function_result;
  bool no_watched_entry; /* the image has no NAME_watched entry */
  const char *fail_name; /* this entry point returns fail_result ... */
  CUresult fail_result;
  int fail_nth;          /* ... on its nth call (1-based; 0 = every call) */
  uint32_t launch_tma_count; /* tensor maps to capture at launch */
  /* The image's df_handler_workspace_bytes (cuModuleGetGlobal): absent
     unless module_has_workspace; module_global_bytes is the size the
     symbol reports (fake_reset: 4). */
  bool module_has_workspace;
  uint32_t module_workspace;
  size_t module_global_bytes;
  /* The image's df_rt_kernel_abi: absent when 0 (fake_reset), else this
     value (its size module_global_bytes too). */
  uint32_t module_kernel_abi;
  /* Streams: cuStreamQuery answers stream_query_result (default success);
     CUDA_ERROR_NOT_READY is a kernel that never finishes. query_hook, when
     set, runs first on every query (nth from 1) and may change the answer. */
  CUresult stream_query_result;
  void (*query_hook)(int nth);
  int query_count;
  /* Launches: the "kernel" calls launch_hook with the progress array
     (parameter 20, NULL without a watchdog) and the grid size. */
  void (*launch_hook)(uint32_t *progress, uint32_t ctas);
  uint64_t last_progress_param;
  /* parameters 21-22 of a kernel of ABI 2 (module_kernel_abi): the words
     the launch zeroes for the next one (the fake kernel zeroes them, as
     df's does); 0 for ABI 1, whose tensor maps start at 21 */
  uint64_t last_flags_clear;
  uint32_t last_flags_clear_words;
  /* Events: a clock advanced by launch_ms per launch; an event records
     the clock. */
  double clock_ms, launch_ms;
  double event_time[FAKE_MAX_EVENTS];
  bool event_recorded[FAKE_MAX_EVENTS];
  bool event_live[FAKE_MAX_EVENTS];
  int event_count;
  /* Mapped host memory (cuMemHostAlloc). */
  void *host[FAKE_MAX_HOST];
  bool host_live[FAKE_MAX_HOST];
  unsigned host_flags[FAKE_MAX_HOST];
  int host_count;
  /* recordings */
  fake_call calls[FAKE_MAX_CALLS];
  int call_count;
  int ctx_set_count;
  int launch_count;
  CUlaunchConfig last_cfg;
  CUlaunchAttribute last_attrs[4];
  CUdeviceptr last_ptrs[14];
  uint32_t last_u32[6];
  CUtensorMap last_maps[FAKE_MAX_MAPS];
  int encode_count;
  fake_encode encodes[FAKE_MAX_MAPS];
  int func_attr[16]; /* last values set through cuFuncSetAttribute, -1 unset */
  unsigned last_jit_options;
  fake_block blocks[FAKE_MAX_BLOCKS];
  int block_count;
} fake_state;

extern fake_state fake;

/* Free emulated memory and restore the default configuration. */
void fake_reset(void);
/* The table of fake entry points. */
df_cuda_driver fake_driver(void);
/* Calls recorded under `name` (cuCtxSetCurrent is not recorded). */
int fake_count(const char *name);
/* The nth (0-based) call named `name`, NULL if there are fewer. */
const fake_call *fake_nth(const char *name, int n);
/* Forget recorded calls (not memory or configuration). */
void fake_clear_calls(void);
/* Host memory behind a fake device pointer (any address inside a live
   block), NULL if none. */
void *fake_host(CUdeviceptr p);
/* Index of the allocation holding `p` in allocation order, -1 if none. */
int fake_block_index(CUdeviceptr p);
int fake_live_blocks(void);
/* Live mapped host allocations and events. */
int fake_live_host(void);
int fake_live_events(void);

#endif
