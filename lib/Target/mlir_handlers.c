/* MLIR handler bodies -> an LLVM IR module in the emitter's LLVM context.
   The program module's func.funcs with bodies (handlers with df.kind and
   the helpers they call) are copied into a scratch module, their df.ctx_*,
   gpu and math ops rewritten (mlir_ctx_ops.c, mlir_device_ops.c), then the
   upstream conversions run (mlirParsePassPipeline) and
   mlirTranslateModuleToLLVMIR translates the result. */
#include <stdio.h>
#include <string.h>

#include "llvm-c/Core.h"
#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/Pass.h"
#include "mlir-c/RegisterEverything.h"
#include "mlir-c/Target/LLVMIR.h"
#include "mlir_lower.h"
#include "mlir_util.h"
#include "target_internal.h"

/* Upstream conversions to the LLVM dialect, in dependency order. */
static const char pipeline[] =
    "builtin.module(convert-vector-to-scf,convert-scf-to-cf,expand-strided-metadata,"
    "lower-affine,convert-vector-to-llvm,finalize-memref-to-llvm,convert-math-to-llvm,"
    "convert-arith-to-llvm,convert-index-to-llvm,convert-cf-to-llvm,convert-func-to-llvm,"
    "convert-nvvm-to-llvm,convert-ub-to-llvm,reconcile-unrealized-casts)";

static MlirBlock module_body(MlirOperation module) {
  return mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0));
}

static bool has_body(MlirOperation fn) {
  return !mlirBlockIsNull(mlirRegionGetFirstBlock(mlirOperationGetRegion(fn, 0)));
}

/* Functions that go to the device: bodies other than the program, and
   declarations of non-handlers (functions linked from bitcode). */
static bool lowered(MlirOperation op) {
  if (!df_op_is(op, "func.func") || !mlirAttributeIsNull(df_op_attr(op, "df.task_domain")))
    return false;
  return has_body(op) || mlirAttributeIsNull(df_op_attr(op, "df.kind"));
}

/* Drop df.* attributes: the LLVM dialect has no use for them. */
static void strip_df_attributes(MlirOperation fn) {
  char names[32][64];
  int n = 0;
  for (intptr_t i = 0; i < mlirOperationGetNumAttributes(fn) && n < 32; i++) {
    MlirStringRef a = mlirIdentifierStr(mlirOperationGetAttribute(fn, i).name);
    if (a.length > 3 && !memcmp(a.data, "df.", 3) && df_strref_copy(a, names[n], 64))
      n++;
  }
  for (int i = 0; i < n; i++)
    mlirOperationRemoveAttributeByName(fn, mlirStringRefCreateFromCString(names[i]));
}

static void append_error(MlirStringRef s, void *user) {
  char *buf = user;
  size_t n = strlen(buf);
  snprintf(buf + n, 256 - n, "%.*s", (int)s.length, s.data);
}

static df_status run_pipeline(MlirOperation module) {
  /* Registering again is harmless; no process-wide flag needed. */
  mlirRegisterAllPasses();
  MlirContext ctx = mlirOperationGetContext(module);
  MlirPassManager pm = mlirPassManagerCreate(ctx);
  char err[256] = "";
  df_status s = df_status_ok();
  if (mlirLogicalResultIsFailure(mlirParsePassPipeline(mlirPassManagerGetAsOpPassManager(pm),
                                                       mlirStringRefCreateFromCString(pipeline),
                                                       append_error, err)))
    s = df_status_errorf(DF_EINTERNAL, "the handler lowering pipeline does not parse: %s", err);
  else if (mlirLogicalResultIsFailure(mlirPassManagerRunOnOp(pm, module)))
    s = df_status_errorf(DF_EINVAL, "lowering the MLIR handler bodies to the LLVM dialect "
                                    "failed (see the diagnostics above)");
  mlirPassManagerDestroy(pm);
  return s;
}

typedef struct leftover {
  MlirOperation op, cast;
} leftover;

static MlirWalkResult find_leftover(MlirOperation op, void *user) {
  leftover *l = user;
  MlirStringRef n = mlirIdentifierStr(mlirOperationGetName(op));
  if ((n.length > 5 && !memcmp(n.data, "llvm.", 5)) ||
      (n.length > 5 && !memcmp(n.data, "nvvm.", 5)) || df_strref_eq(n, "builtin.module"))
    return MlirWalkResultAdvance;
  if (df_strref_eq(n, "builtin.unrealized_conversion_cast")) {
    if (mlirOperationIsNull(l->cast))
      l->cast = op;
    return MlirWalkResultAdvance;
  }
  l->op = op;
  return MlirWalkResultInterrupt;
}

/* After the conversions only the LLVM and NVVM dialects may be left: name
   the first op that was not lowered (a cast left over points at the use
   of an op that was). */
static df_status check_lowered(MlirOperation module) {
  leftover l = {{NULL}, {NULL}};
  mlirOperationWalk(module, find_leftover, &l, MlirWalkPreOrder);
  MlirOperation op = mlirOperationIsNull(l.op) ? l.cast : l.op;
  if (mlirOperationIsNull(op))
    return df_status_ok();
  char name[64];
  df_mlir_op_name(op, name, sizeof name);
  if (mlirOperationIsNull(l.op))
    return df_emit(mlirOperationGetLocation(op),
                   "a value of this handler code has no LLVM lowering (a cast is left after "
                   "the conversions; an op of an unsupported dialect produces or uses it)");
  return df_emit(mlirOperationGetLocation(op),
                 "'%s' has no lowering to LLVM in df handlers (supported: arith, math, scf, cf, "
                 "memref, vector, affine, index, func, gpu ids and barrier, nvvm, llvm)",
                 name);
}

/* Handlers are called uniformly by every thread of the CTA and may hold
   barriers: like the runtime (-fconvergent-functions), they are convergent. */
static void mark_convergent(LLVMModuleRef m) {
  LLVMContextRef ctx = LLVMGetModuleContext(m);
  unsigned kind = LLVMGetEnumAttributeKindForName("convergent", strlen("convergent"));
  for (LLVMValueRef f = LLVMGetFirstFunction(m); f; f = LLVMGetNextFunction(f))
    if (!LLVMIsDeclaration(f))
      LLVMAddAttributeAtIndex(f, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(ctx, kind, 0));
}

static df_status lower(MlirOperation scratch, const df_program *prog, LLVMContextRef llctx,
                       bool host, LLVMModuleRef *out) {
  DF_TRY(df_lower_ctx_ops(scratch, prog));
  DF_TRY(host ? df_lower_host_ops(scratch) : df_lower_device_ops(scratch));
  for (MlirOperation op = mlirBlockGetFirstOperation(module_body(scratch));
       !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op))
    strip_df_attributes(op);
  if (!mlirOperationVerify(scratch))
    return df_status_errorf(DF_EINVAL, "the MLIR handler bodies do not verify (see the "
                                       "diagnostics above)");
  DF_TRY(run_pipeline(scratch));
  DF_TRY(check_lowered(scratch));
  mlirRegisterAllLLVMTranslations(mlirOperationGetContext(scratch));
  LLVMModuleRef m = mlirTranslateModuleToLLVMIR(scratch, llctx);
  if (!m)
    return df_status_errorf(DF_EINVAL, "translating the MLIR handler bodies to LLVM IR failed "
                                       "(see the diagnostics above)");
  mark_convergent(m);
  *out = m;
  return df_status_ok();
}

df_status df_mlir_handlers_to_llvm(MlirOperation module, const df_program *prog,
                                   LLVMContextRef llctx, bool host, LLVMModuleRef *out) {
  *out = NULL;
  bool any = false;
  for (MlirOperation op = mlirBlockGetFirstOperation(module_body(module));
       !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op))
    any |= lowered(op) && has_body(op);
  if (!any)
    return df_status_ok();
  MlirModule scratch = mlirModuleCreateEmpty(mlirOperationGetLocation(module));
  MlirOperation sop = mlirModuleGetOperation(scratch);
  for (MlirOperation op = mlirBlockGetFirstOperation(module_body(module));
       !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op))
    if (lowered(op))
      mlirBlockAppendOwnedOperation(mlirModuleGetBody(scratch), mlirOperationClone(op));
  df_status s = lower(sop, prog, llctx, host, out);
  mlirModuleDestroy(scratch);
  return s;
}
