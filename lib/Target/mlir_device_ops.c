/* Device ops of MLIR handler bodies that the upstream LLVM conversions do
   not lower for a standalone NVPTX module:
   - gpu thread/block ids, lane id and barrier become nvvm special-register
     reads and nvvm.barrier0 (convert-gpu-to-nvvm only runs inside a
     gpu.module and turns math ops into libdevice calls, which df does not
     link);
   - math ops whose LLVM intrinsics NVPTX cannot select without a libm
     (exp, log, sin, ...) become the PTX approximations on f32, the forms C
     handlers use through __nvvm_*_approx; the rest of the math dialect
     that NVPTX selects natively passes through convert-math-to-llvm; any
     other math op is a located error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlir-c/BuiltinTypes.h"
#include "mlir_lower.h"
#include "mlir_util.h"

/* Selected natively by NVPTX after convert-math-to-llvm. */
static const char *const native_math[] = {"absf", "absi", "ceil",  "floor", "trunc",
                                          "round", "roundeven", "sqrt", "fma", "copysign",
                                          "ctlz", "cttz", "ctpop", NULL};

typedef struct approx {
  const char *op;
  const char *body; /* helper body over %x: f32 */
} approx;

#define EX2 "llvm.call_intrinsic \"llvm.nvvm.ex2.approx.f32\""
#define LG2 "llvm.call_intrinsic \"llvm.nvvm.lg2.approx.f\""
static const approx approximations[] = {
    {"exp", "  %k = arith.constant 1.44269504088896341 : f32\n"
            "  %y = arith.mulf %x, %k : f32\n"
            "  %r = " EX2 "(%y) : (f32) -> f32\n"
            "  return %r : f32\n"},
    {"exp2", "  %r = " EX2 "(%x) : (f32) -> f32\n  return %r : f32\n"},
    {"log", "  %l = " LG2 "(%x) : (f32) -> f32\n"
            "  %k = arith.constant 0.693147180559945309 : f32\n"
            "  %r = arith.mulf %l, %k : f32\n"
            "  return %r : f32\n"},
    {"log2", "  %r = " LG2 "(%x) : (f32) -> f32\n  return %r : f32\n"},
    {"sin", "  %r = llvm.call_intrinsic \"llvm.nvvm.sin.approx.f\"(%x) : (f32) -> f32\n"
            "  return %r : f32\n"},
    {"cos", "  %r = llvm.call_intrinsic \"llvm.nvvm.cos.approx.f\"(%x) : (f32) -> f32\n"
            "  return %r : f32\n"},
    {"rsqrt", "  %r = llvm.call_intrinsic \"llvm.nvvm.rsqrt.approx.f\"(%x) : (f32) -> f32\n"
              "  return %r : f32\n"},
    /* tanh x = 1 - 2 / (2^(2 x log2 e) + 1): exact limits at +-inf. */
    {"tanh", "  %k = arith.constant 2.88539008177792681 : f32\n"
             "  %y = arith.mulf %x, %k : f32\n"
             "  %e = " EX2 "(%y) : (f32) -> f32\n"
             "  %one = arith.constant 1.0 : f32\n"
             "  %two = arith.constant 2.0 : f32\n"
             "  %d = arith.addf %e, %one : f32\n"
             "  %q = arith.divf %two, %d : f32\n"
             "  %r = arith.subf %one, %q : f32\n"
             "  return %r : f32\n"},
};

static df_status lower_math(MlirOperation module, MlirOperation op, const char *name) {
  const char *m = name + strlen("math.");
  for (const char *const *n = native_math; *n; n++)
    if (!strcmp(m, *n))
      return df_status_ok();
  MlirLocation loc = mlirOperationGetLocation(op);
  for (size_t i = 0; i < sizeof approximations / sizeof approximations[0]; i++) {
    if (strcmp(m, approximations[i].op) != 0)
      continue;
    MlirType t = mlirValueGetType(mlirOperationGetResult(op, 0));
    if (!mlirTypeIsAF32(t)) {
      char ts[128];
      df_type_to_string(t, ts, sizeof ts);
      return df_emit(loc, "%s on %s: df lowers it for the device on scalar f32 only (the PTX "
                          "approximation); convert to f32 or unroll vectors",
                     name, ts);
    }
    char helper[64];
    DF_TRY(df_mlir_add_helper(module, "(%x: f32) -> f32", approximations[i].body, "", helper));
    df_mlir_call_instead(op, helper);
    return df_status_ok();
  }
  return df_emit(loc, "%s has no device lowering in df handlers (NVPTX has no math library "
                      "here); supported: absf, absi, ceil, floor, trunc, round, roundeven, "
                      "sqrt, fma, copysign, ctlz, cttz, ctpop, and on f32 exp, exp2, log, log2, "
                      "sin, cos, tanh, rsqrt",
                 name);
}

/* gpu.<id op> -> the PTX special register of its dimension. */
static df_status lower_gpu(MlirOperation module, MlirOperation op, const char *name) {
  static const struct {
    const char *op, *sreg;
  } ids[] = {{"gpu.thread_id", "tid"},
             {"gpu.block_id", "ctaid"},
             {"gpu.block_dim", "ntid"},
             {"gpu.grid_dim", "nctaid"}};
  char body[256], helper[64];
  if (!strcmp(name, "gpu.barrier")) {
    DF_TRY(df_mlir_add_helper(module, "()", "  nvvm.barrier0\n  return\n", "", helper));
    df_mlir_call_instead(op, helper);
    return df_status_ok();
  }
  const char *sreg = NULL;
  char dim = 0;
  if (!strcmp(name, "gpu.lane_id")) {
    sreg = "laneid";
  } else {
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
      if (!strcmp(name, ids[i].op))
        sreg = ids[i].sreg;
    char a[64] = "";
    MlirAttribute d = df_op_attr(op, "dimension");
    if (!mlirAttributeIsNull(d))
      df_attr_to_string(d, a, sizeof a);
    size_t n = strlen(a);
    if (n >= 2 && a[n - 1] == '>' && (a[n - 2] == 'x' || a[n - 2] == 'y' || a[n - 2] == 'z'))
      dim = a[n - 2];
  }
  if (!sreg || (strcmp(sreg, "laneid") != 0 && !dim))
    return df_emit(mlirOperationGetLocation(op),
                   "%s has no device lowering in df handlers; supported gpu ops: thread_id, "
                   "block_id, block_dim, grid_dim, lane_id, barrier (or use nvvm ops)",
                   name);
  char reg[32];
  snprintf(reg, sizeof reg, dim ? "%s.%c" : "%s", sreg, dim);
  snprintf(body, sizeof body,
           "  %%r = nvvm.read.ptx.sreg.%s : i32\n"
           "  %%o = arith.index_castui %%r : i32 to index\n"
           "  return %%o : index\n",
           reg);
  DF_TRY(df_mlir_add_helper(module, "() -> index", body, "", helper));
  df_mlir_call_instead(op, helper);
  return df_status_ok();
}

static df_status lower_prefix(MlirOperation module, const char *prefix,
                              df_status (*fn)(MlirOperation, MlirOperation, const char *)) {
  MlirOperation *ops;
  size_t n;
  DF_TRY(df_mlir_collect(module, prefix, &ops, &n));
  df_status s = df_status_ok();
  for (size_t i = 0; i < n && s.code == DF_OK; i++) {
    char name[64];
    df_mlir_op_name(ops[i], name, sizeof name);
    /* gpu.module / gpu.func structure is not handler code. */
    if (!strcmp(name, "gpu.module") || !strcmp(name, "gpu.func") || !strcmp(name, "gpu.return"))
      s = df_emit(mlirOperationGetLocation(ops[i]),
                  "%s in a handler module: handlers are func.func at module level", name);
    else
      s = fn(module, ops[i], name);
  }
  free(ops);
  return s;
}

df_status df_lower_device_ops(MlirOperation module) {
  DF_TRY(lower_prefix(module, "gpu.", lower_gpu));
  return lower_prefix(module, "math.", lower_math);
}

/* ---- the host backend ------------------------------------------------------ */

/* The handler's context: the first argument of its func.func. */
static MlirValue enclosing_ctx(MlirOperation op) {
  MlirOperation fn = mlirOperationGetParentOperation(op);
  while (!mlirOperationIsNull(fn) && !df_op_is(fn, "func.func"))
    fn = mlirOperationGetParentOperation(fn);
  if (mlirOperationIsNull(fn))
    return (MlirValue){NULL};
  MlirBlock entry = mlirRegionGetFirstBlock(mlirOperationGetRegion(fn, 0));
  if (mlirBlockIsNull(entry) || mlirBlockGetNumArguments(entry) < 1)
    return (MlirValue){NULL};
  return mlirBlockGetArgument(entry, 0);
}

/* On the host a CTA is one-dimensional and its threads are the backend's:
   thread_id x / block_dim x / barrier go through the df_ctx accessors
   (y and z are 0 and 1); block and grid ids have no host meaning. */
static df_status lower_gpu_host(MlirOperation module, MlirOperation op, const char *name) {
  char a[64] = "", helper[64], body[320];
  MlirAttribute d = df_op_attr(op, "dimension");
  if (!mlirAttributeIsNull(d))
    df_attr_to_string(d, a, sizeof a);
  size_t n = strlen(a);
  char dim = n >= 2 && a[n - 1] == '>' ? a[n - 2] : 0;
  const char *decl = "", *sig = "(%c: !llvm.ptr) -> index";
  if (!strcmp(name, "gpu.barrier")) {
    sig = "(%c: !llvm.ptr)";
    decl = "func.func private @df_ctx_barrier_fn(!llvm.ptr)\n";
    snprintf(body, sizeof body, "  func.call @df_ctx_barrier_fn(%%c) : (!llvm.ptr) -> ()\n"
                                "  return\n");
  } else if ((!strcmp(name, "gpu.thread_id") || !strcmp(name, "gpu.block_dim")) && dim) {
    bool tid = !strcmp(name, "gpu.thread_id");
    const char *fn = tid ? "df_ctx_thread_fn" : "df_ctx_threads_fn";
    decl = tid ? "func.func private @df_ctx_thread_fn(!llvm.ptr) -> i32\n"
               : "func.func private @df_ctx_threads_fn(!llvm.ptr) -> i32\n";
    if (dim == 'x')
      snprintf(body, sizeof body,
               "  %%r = func.call @%s(%%c) : (!llvm.ptr) -> i32\n"
               "  %%o = arith.index_castui %%r : i32 to index\n"
               "  return %%o : index\n",
               fn);
    else
      snprintf(body, sizeof body, "  %%o = arith.constant %d : index\n  return %%o : index\n",
               tid ? 0 : 1);
  } else {
    return df_emit(mlirOperationGetLocation(op),
                   "%s has no host lowering in df handlers; on the host backend use "
                   "gpu.thread_id x, gpu.block_dim x and gpu.barrier (or df.ctx_thread, "
                   "df.ctx_threads, df.ctx_barrier)",
                   name);
  }
  MlirValue ctx = enclosing_ctx(op);
  if (mlirValueIsNull(ctx))
    return df_emit(mlirOperationGetLocation(op), "%s outside a handler function", name);
  DF_TRY(df_mlir_add_helper(module, sig, body, decl, helper));
  df_mlir_call_instead_with(op, helper, ctx);
  return df_status_ok();
}

static df_status refuse_nvvm(MlirOperation module, MlirOperation op, const char *name) {
  (void)module;
  return df_emit(mlirOperationGetLocation(op),
                 "%s is device-only: this handler cannot run on the host backend", name);
}

df_status df_lower_host_ops(MlirOperation module) {
  DF_TRY(lower_prefix(module, "gpu.", lower_gpu_host));
  return lower_prefix(module, "nvvm.", refuse_nvvm);
}
