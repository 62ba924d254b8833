/* libdf_compiler.so: code generation for the Python bindings' df.compile.
   A packed plan (scheduled and packed through libdf.so) plus handler
   bitcode becomes the persistent kernel's PTX, with the device runtime
   bitcode embedded in this library. */
#ifndef DF_SHARED_COMPILE_API_H
#define DF_SHARED_COMPILE_API_H

#include <stddef.h>

#include "df/plan.h"
#include "df/status.h"

/* 1 when the device runtime bitcode is embedded (built with clang-22). */
int df_shared_has_device_runtime(void);

/* df_emit_ptx with the embedded device runtime: `sm` ("sm_90a" when NULL),
   `link_files` handler bitcode for nvptx64. *ptx is malloc'ed and
   NUL-terminated (free with df_shared_free). */
df_status df_shared_emit_ptx(const df_packed *k, const char *sm,
                             const char *const *link_files, unsigned link_count, char **ptx,
                             size_t *len);

#endif
