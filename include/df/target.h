/* Code generation: the persistent kernel as PTX for a packed plan. */
#ifndef DF_TARGET_H
#define DF_TARGET_H

#include <stddef.h>

#include "df/plan.h"

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

/* Link the device runtime, the handler bitcode and a generated dispatch
   function (a switch over the plan's handler ids, each calling the
   variant's specialised symbol `<name>__dataflow_iter_tiles_N` /
   `<name>__dataflow_iter_len_N` when one is linked, else `<name>`),
   internalize everything but the kernel entry, optimise at O3 and emit PTX
   (malloc'ed, NUL-terminated; free with free()). */
df_status df_emit_ptx(const df_packed *k, const df_ptx_options *o, char **ptx,
                      size_t *len);

typedef struct df_host_handler_options {
  const char *output;            /* shared object path */
  const char *const *link_files; /* handler bitcode compiled for the host */
  unsigned link_count;
  const char *cc;                /* linker driver; NULL = "cc" */
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
