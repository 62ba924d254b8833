/* Entry points that exist only for the Python bindings (libdf.so): the
   ABI constants of abi.h/plan.h by name and the sizes and offsets of the C
   types the bindings mirror with ctypes, so the bindings read constants
   from C and refuse to load when a mirror drifts from its header. */
#ifndef DF_SHARED_H
#define DF_SHARED_H

#include <stdint.h>

typedef struct df_shared_entry {
  const char *name; /* "DF_ABI_VERSION", "sizeof df_plan", "offsetof df_plan.queue_ids" */
  uint64_t value;
} df_shared_entry;

/* Named constants: macros and enumerators of abi.h, plan.h, program.h. */
const df_shared_entry *df_shared_constants(uint32_t *count);
/* sizeof / offsetof of the mirrored types. */
const df_shared_entry *df_shared_layouts(uint32_t *count);
/* free() for memory df hands out malloc'ed (texts, default-allocator
   blobs), so callers need not find the C library themselves. */
void df_shared_free(void *p);
/* libdf_compiler.so: always 1 (the library is present and loads). */
int df_compiler_shared_available(void);

#endif
