/* Code generation: the persistent kernel as PTX for a packed plan. */
#ifndef DF_TARGET_H
#define DF_TARGET_H

#include <stddef.h>

#include "df/plan.h"
#include "df/program.h"
#include "mlir-c/IR.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct df_ptx_options {
  const char *sm;                /* "sm_90a" (default when NULL) or "sm_90" */
  const char *const *link_files; /* handler bitcode files (--df-link) */
  unsigned link_count;
  const void *runtime_bc;        /* device runtime bitcode */
  size_t runtime_bc_size;
} df_ptx_options;

/* The kernel for every plan of the program (df_emit_kernel with
   all_features): link the device runtime, the handler bitcode and a
   generated dispatch function (a switch over the plan's handler ids, each
   calling the variant's specialised symbol `<name>__dataflow_iter_tiles_N`
   / `<name>__dataflow_iter_len_N` when one is linked, else `<name>`),
   internalize everything but the kernel entry, optimise at O3 and emit PTX
   (malloc'ed, NUL-terminated; free with free()). */
df_status df_emit_ptx(const df_packed *k, const df_ptx_options *o, char **ptx,
                      size_t *len);

/* Beyond df_ptx_options (docs/codegen.md). Zero-initialised: handlers from
   bitcode only, a kernel specialised to the plan's features, the plan read
   from the kernel parameters. */
typedef struct df_kernel_options {
  /* The program module: its func.func handlers with bodies (and the
     functions they call) are lowered and linked; null = none. */
  MlirOperation handler_module;
  /* The program of that module, for df.ctx_input/output `field`. */
  const df_program *program;
  /* Every protocol path, not just the plan's (DF_FEATURES_ALL): one
     kernel for every plan of its program, re-plans included. */
  bool all_features;
  /* Bake the plan's ABI records into the image as constant data; the
     kernel ignores its plan parameters (df/kernel_plan.h). */
  bool embed_plan;
  uint32_t block_size; /* the plan's range block size, for embed_plan */
  /* Cluster-receiving instructions leave the handler's addresses to its
     accessors instead of resolving them before the wait
     (DF_FEATURE_NO_RESOLVE, df/kernel_plan.h). */
  bool no_resolve;
} df_kernel_options;

/* df_emit_ptx with kernel options (NULL = all zero: the kernel
   specialised to this plan's features, which runs only plans whose
   features are a subset; df_plan_features in the image says which). */
df_status df_emit_kernel(const df_packed *k, const df_ptx_options *o,
                         const df_kernel_options *ko, char **ptx, size_t *len);

/* The feature bits (df/kernel_plan.h) of a packed plan, and their names
   ("cluster,cluster_send,...", "none") into buf. */
uint32_t df_packed_features(const df_packed *k);
void df_features_name(uint32_t features, char *buf, size_t cap);
/* The feature bits df_emit_kernel gives the kernel of `k` under `ko`
   (NULL = all zero): the plan's (or all, all_features) plus the bits of
   the kernel options. */
uint32_t df_kernel_features(const df_packed *k, const df_kernel_options *ko);

/* ptxas: DF_PTXAS when set (it must then exist), else `ptxas` on PATH,
   else /usr/local/cuda/bin/ptxas. DF_EUNSUPPORTED when there is none. */
df_status df_ptxas_find(char *path, size_t cap);

typedef struct df_ptxas_result {
  unsigned registers, barriers;
  unsigned stack_frame, spill_stores, spill_loads; /* bytes */
  unsigned static_shared, constant;                /* bytes (smem, cmem[0]) */
  bool found_entry; /* ptxas -v reported the kernel entry */
  char log[4096];   /* ptxas output (truncated) */
} df_ptxas_result;

/* Assemble PTX text with `ptxas -v -arch=<sm>`; writes the cubin to
   `cubin` (a path; NULL = discard) and parses the kernel's resource usage
   from the -v report. */
df_status df_ptxas_run(const char *ptxas, const char *ptx, size_t len, const char *sm,
                       const char *cubin, df_ptxas_result *r);

typedef struct df_host_handler_options {
  const char *output;            /* shared object path */
  const char *const *link_files; /* handler bitcode compiled for the host */
  unsigned link_count;
  const char *cc;                /* linker driver; NULL = "cc" */
  /* The program module: its func.func handlers with bodies are lowered for
     the host and linked; null = bitcode handlers only. */
  MlirOperation handler_module;
  const df_program *program;     /* of that module, for `field` accessors */
  /* The host build of the out-of-line df_ctx accessors MLIR bodies call
     (df_host_ctx_fn_bc of df/device_runtime.h). */
  const void *accessors_bc;
  size_t accessors_bc_size;
} df_host_handler_options;

/* Link host handler bitcode, add one exported thunk per handler of the
   plan under its packed symbol (dataflow_handler_<id>_<name>, calling the
   variant's specialised symbol or the operator name), optimise at O2 and
   link a shared object the host backend loads (df-run --backend=host). */
df_status df_emit_host_handlers(const df_packed *k, const df_host_handler_options *o);

#ifdef __cplusplus
}
#endif

#endif
