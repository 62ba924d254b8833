/* Internal to lib/Target: MLIR handler bodies -> LLVM IR. The module
   handed to these functions is a scratch copy holding the handler and
   helper functions of the program module. */
#ifndef DF_TARGET_MLIR_LOWER_H
#define DF_TARGET_MLIR_LOWER_H

#include <stddef.h>

#include "df/program.h"
#include "df/status.h"
#include "mlir-c/IR.h"

/* Ops of `module` (pre-order) whose name starts with `prefix`, in a
   malloc'ed array (free with free()). */
df_status df_mlir_collect(MlirOperation module, const char *prefix, MlirOperation **ops,
                          size_t *count);

/* Add the functions of `text` (top-level ops, parsed as one module) to
   the module body, skipping symbols already there; `what` names them in
   errors. */
df_status df_mlir_add_functions(MlirOperation module, const char *what, const char *text);

/* A helper function whose body is `body` (the text between the braces)
   and whose signature is `sig` ("(%a: T, ...) -> R"), named after a hash
   of both so equal helpers are shared: writes the symbol to name[64] and
   adds it, with the declarations it calls (`decls`, may be ""). */
df_status df_mlir_add_helper(MlirOperation module, const char *sig, const char *body,
                             const char *decls, char name[64]);

/* Replace `op` by `func.call @callee` with the same operands, result types
   and location; the op is destroyed. */
void df_mlir_call_instead(MlirOperation op, const char *callee);
/* The same with `extra` appended to the operands (null: none). */
void df_mlir_call_instead_with(MlirOperation op, const char *callee, MlirValue extra);

/* The op's name as a C string (valid while the context lives). */
void df_mlir_op_name(MlirOperation op, char *buf, size_t cap);

/* df.ctx_* ops -> calls of the device runtime's df_ctx_*_fn accessors.
   `prog` resolves `field` attributes (may be NULL: then they are errors). */
df_status df_lower_ctx_ops(MlirOperation module, const df_program *prog);

/* gpu thread/block ids and barriers -> nvvm; math ops that NVPTX cannot
   select -> nvvm approximations, or a located error. */
df_status df_lower_device_ops(MlirOperation module);

/* The host backend's counterpart: gpu thread ids, block dims and barriers
   -> df_ctx accessor calls; other gpu and all nvvm ops are located errors;
   math is left to the upstream lowering (libm). */
df_status df_lower_host_ops(MlirOperation module);

#endif
