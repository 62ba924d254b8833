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

#ifdef __cplusplus
}
#endif

#endif
