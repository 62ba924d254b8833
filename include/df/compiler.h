/* The df compiler front end over the MLIR C API: context with the df
   dialect loaded, parsing, IR -> program model, and df's passes. */
#ifndef DF_COMPILER_H
#define DF_COMPILER_H

#include <stddef.h>

#include "mlir-c/Diagnostics.h"
#include "mlir-c/IR.h"
#include "mlir-c/Pass.h"

#include "df/plan.h"
#include "df/program.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A context with func, every upstream dialect and the df dialect (the
   embedded IRDL) loaded. Destroy with mlirContextDestroy. */
df_status df_context_create(MlirContext *out);

/* Error diagnostics of a context collected as text ("file:line:col:
   message", "; "-separated, truncated to fit) instead of printed, between
   begin and end (callers that hand the message on, e.g. to Python). */
typedef struct df_diag_capture {
  char text[400];
  size_t len;
  MlirContext ctx;
  MlirDiagnosticHandlerID id;
} df_diag_capture;
void df_diag_capture_begin(MlirContext ctx, df_diag_capture *c);
void df_diag_capture_end(df_diag_capture *c);

/* Parse `len` bytes of MLIR text (or bytecode) named `source_name` into a
   builtin.module. Parse errors are reported through the context's
   diagnostics; the status summarises them. */
df_status df_parse_module(MlirContext ctx, const char *text, size_t len,
                          const char *source_name, MlirOperation *out);

/* Read a whole file ("-" = stdin) into a NUL-terminated buffer owned by
   the caller (free with free()). */
df_status df_read_file(const char *path, char **data, size_t *len);

/* The program function of a module: the func.func carrying
   df.task_domain. `name` NULL selects the only one (error if several). */
df_status df_find_program(MlirOperation module, const char *name,
                          MlirOperation *out);

/* Convert a module's program to the model. Every error is also emitted
   as a located diagnostic. */
df_status df_program_from_module(MlirOperation module, const char *name,
                                 const df_allocator *alloc, df_program **out);

/* The df-verify pass: converts the program and checks every rule. */
MlirPass df_create_verify_pass(void);

/* One of df's passes with its options. */
typedef struct df_pass_info {
  const char *name;        /* "df-verify" */
  const char *description;
  const char *options;     /* help text of the options, "" if none */
  /* Creates the pass from "key=value key=value" options. */
  df_status (*create)(const char *options, MlirPass *out);
} df_pass_info;

/* df's pass table, NULL-name terminated. */
const df_pass_info *df_pass_table(void);

/* Program model -> IR (the inverse of df_program_from_module), built with
   the MLIR C API: one df.intermediate op per type, the program func.func
   (df.task_domain, df.dynamic_ranges, one stage op per stage, return) and
   one private func.func declaration per handler (df.kind, df.params).
   The module is verified; df_program_from_module reads back the same
   program. The caller owns *module_out (mlirOperationDestroy). */
df_status df_program_to_mlir(const df_program *p, MlirContext ctx,
                             MlirOperation *module_out);
/* As df_program_to_mlir in a private context, printed in generic form
   (as df-opt prints); *text is malloc'ed and NUL-terminated. */
df_status df_program_to_mlir_text(const df_program *p, char **text);

/* `op` printed in generic form, newline-terminated, into a malloc'ed
   NUL-terminated string (free with free()). */
df_status df_operation_generic_text(MlirOperation op, char **text);

/* Merge one handler's MLIR body, given as text apart from the program,
   into `module` (df_program_to_mlir's): the text (a module, or func.func
   ops) defines `func.func @<op_name>(%ctx: !llvm.ptr)` with a body and any
   functions it calls. The body replaces the handler's declaration; its
   df.signature / df.kind / df.params, when given, must equal the
   declaration's type / df.kind / df.params (else they are taken from it).
   Helpers the module already has with the same definition are kept once.
   `op_name` may also name an implementation (a declaration with
   df.implements, df/impl.h): its body has the same df_ctx signature, any
   df.implements / region attributes it repeats must equal the
   declaration's, and its df.ctx_input/output `field`s are those of the
   operator it implements.
   Parse errors come back in the status (with `source_name` locations),
   not on stderr. On error the module is unchanged. */
df_status df_module_add_handler_body(MlirOperation module, const char *op_name,
                                     const char *text, size_t len, const char *source_name);

#ifdef __cplusplus
}
#endif

#endif
