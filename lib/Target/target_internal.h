/* Internal to lib/Target. */
#ifndef DF_TARGET_INTERNAL_H
#define DF_TARGET_INTERNAL_H

#include <stdbool.h>

#include "df/target.h"
#include "llvm-c/Types.h"

/* LLVM's default diagnostic handler exits the process on errors; contexts
   made here keep the last error message instead. */
typedef struct df_diag_sink {
  char message[256];
} df_diag_sink;
LLVMContextRef df_llvm_context_create(df_diag_sink *sink);
/* Append the recorded LLVM message (if any) to a failed status. */
void df_diag_sink_append(const df_diag_sink *sink, df_status *s);

/* The function implementing handler `h` in `m` (the chosen implementation;
   else the variant's specialised symbol, else the operator name), with its
   signature checked. A built-in library implementation gets a generated
   wrapper passing its descriptor, computed from `prog` (may be NULL when
   no handler uses the library). */
df_status df_resolve_handler(LLVMModuleRef m, const df_handler *h, const df_program *prog,
                             LLVMValueRef *out);
LLVMValueRef df_find_handler(LLVMModuleRef m, const df_handler *h, char *tried, size_t cap);

/* Parse bitcode from `buf` (consumed), refusing what is not bitcode. */
df_status df_parse_bitcode(LLVMContextRef ctx, LLVMMemoryBufferRef buf, const char *name,
                           LLVMModuleRef *out);
/* Link the bitcode file at `path` into `dest`; `triple_prefix` ("nvptx64",
   or NULL for any) guards against handler bitcode built for another target. */
df_status df_link_bitcode_file(LLVMContextRef ctx, LLVMModuleRef dest, const char *path,
                               const char *triple_prefix, const char *hint);

/* Define the function of composite handler `h` (h->part_count parts) in
   `m`: its parts in order on one df_ctx copy, args record i for part i,
   a CTA barrier between parts (bar.sync when `device`, the host backend's
   callback otherwise). */
df_status df_build_composite(LLVMModuleRef m, const df_packed *k, const df_handler *h,
                             const df_program *prog, bool device, LLVMValueRef *out);

/* Define df_dispatch in `m` for the plan's handler table. */
df_status df_build_dispatch(LLVMModuleRef m, const df_packed *k, const df_program *prog);

/* Define the plan constants the device runtime reads: df_plan_features
   and df_handler_workspace_bytes = `workspace` (both kept visible in the
   image) and df_embedded_plan (the records as constant data when
   `features` has DF_FEATURE_EMBEDDED_PLAN, else zero). */
df_status df_define_plan_constants(LLVMModuleRef m, const df_packed *k, uint32_t features,
                                   uint32_t block_size, uint32_t workspace);

/* Symbols of the generated module that stay visible (not internalized). */
bool df_visible_symbol(const char *name);

/* Lower the func.func bodies of `module` (MLIR handlers and the functions
   they call) to an LLVM module in `ctx`, for the GPU or (host) for the
   host backend; *out = NULL when there is none. */
df_status df_mlir_handlers_to_llvm(MlirOperation module, const df_program *prog,
                                   LLVMContextRef ctx, bool host, LLVMModuleRef *out);

#endif
