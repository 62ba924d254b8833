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
   `link_files` handler bitcode for nvptx64, `program` (may be NULL) the
   program the plan was made from, for its handlers' workspace
   (docs/workspace.md). *ptx is malloc'ed and NUL-terminated (free with
   df_shared_free). */
df_status df_shared_emit_ptx(const df_packed *k, const df_program *program, const char *sm,
                             const char *const *link_files, unsigned link_count, char **ptx,
                             size_t *len);

/* A program module (df_program_to_mlir) with the handler bodies given as
   MLIR text merged in, for code generation of the program's plans. The
   program must outlive the object. */
typedef struct df_shared_handlers df_shared_handlers;

/* A new module for `p` in its own context. */
df_status df_shared_handlers_create(const df_program *p, df_shared_handlers **out);

/* Merge operator `op_name`'s body from MLIR text (df_module_add_handler_body):
   a parse error, a signature that differs from the operator's declaration,
   an unknown operator or a second body is an error naming the operator. */
df_status df_shared_handlers_add_mlir(df_shared_handlers *h, const char *op_name,
                                      const char *text, size_t len);

/* The module as text (generic form; free with df_shared_free). */
df_status df_shared_handlers_text(const df_shared_handlers *h, char **text);

/* The kernel for every plan of the program (df_emit_kernel with
   all_features) with the module's bodies and `link_files` nvptx64
   bitcode; as df_shared_emit_ptx otherwise. */
df_status df_shared_handlers_emit_ptx(const df_shared_handlers *h, const df_packed *k,
                                      const char *sm, const char *const *link_files,
                                      unsigned link_count, char **ptx, size_t *len);

/* The host backend's handler shared object for plan `k`
   (df_emit_host_handlers): the module's bodies lowered for the host with
   the embedded host accessors, plus `link_files` host bitcode; `cc` the
   linker driver (NULL = "cc"). */
df_status df_shared_handlers_emit_host(const df_shared_handlers *h, const df_packed *k,
                                       const char *output, const char *const *link_files,
                                       unsigned link_count, const char *cc);

void df_shared_handlers_destroy(df_shared_handlers *h);

#endif
