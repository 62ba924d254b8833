/* The generated dispatch function: df_dispatch(handler_id, ctx) switches
   over the plan's handler ids and calls each handler's symbol. */
#include <stdio.h>
#include <string.h>

#include "llvm-c/Core.h"
#include "target_internal.h"

/* The symbol implementing handler `h`: the variant's specialised name when
   the module defines it, else the operator name. */
LLVMValueRef df_find_handler(LLVMModuleRef m, const df_handler *h, char *tried, size_t cap) {
  char special[2 * DF_NAME_MAX + 48] = "";
  if (h->has_variant)
    df_variant_diag_name(&h->variant, h->name, special, sizeof special);
  const char *names[2] = {special, h->name};
  tried[0] = '\0';
  for (int i = 0; i < 2; i++) {
    if (!names[i][0] || (i == 1 && !strcmp(names[0], names[1])))
      continue;
    size_t n = strlen(tried);
    snprintf(tried + n, cap - n, "%s%s", n ? ", " : "", names[i]);
    LLVMValueRef f = LLVMGetNamedFunction(m, names[i]);
    if (f && !LLVMIsDeclaration(f))
      return f;
  }
  return NULL;
}

df_status df_resolve_handler(LLVMModuleRef m, const df_handler *h, LLVMValueRef *out) {
  char tried[4 * DF_NAME_MAX + 64];
  LLVMValueRef fn = df_find_handler(m, h, tried, sizeof tried);
  if (!fn)
    return df_status_errorf(DF_EINVAL,
                            "handler %u ('%s', %s) has no implementation in the linked "
                            "bitcode (looked for %s); link one with --df-link=FILE.bc",
                            h->id, h->name, df_op_kind_name(h->kind), tried);
  LLVMTypeRef fty = LLVMGlobalGetValueType(fn);
  LLVMTypeRef voidt = LLVMVoidTypeInContext(LLVMGetModuleContext(m));
  if (LLVMCountParamTypes(fty) != 1 || LLVMGetReturnType(fty) != voidt)
    return df_status_errorf(DF_EINVAL, "handler '%s' must have the signature void(const df_ctx *)",
                            LLVMGetValueName(fn));
  *out = fn;
  return df_status_ok();
}

df_status df_build_dispatch(LLVMModuleRef m, const df_packed *k) {
  LLVMContextRef ctx = LLVMGetModuleContext(m);
  LLVMTypeRef i32 = LLVMInt32TypeInContext(ctx);
  LLVMTypeRef ptr = LLVMPointerTypeInContext(ctx, 0);
  LLVMTypeRef voidt = LLVMVoidTypeInContext(ctx);
  LLVMTypeRef handler_ty = LLVMFunctionType(voidt, &ptr, 1, 0);
  LLVMTypeRef params[2] = {i32, ptr};
  LLVMTypeRef dispatch_ty = LLVMFunctionType(voidt, params, 2, 0);
  LLVMValueRef dispatch = LLVMGetNamedFunction(m, "df_dispatch");
  if (dispatch && !LLVMIsDeclaration(dispatch))
    return df_status_errorf(DF_EINVAL, "linked bitcode already defines df_dispatch; the "
                                       "dispatch function is generated from the plan");
  if (!dispatch)
    dispatch = LLVMAddFunction(m, "df_dispatch", dispatch_ty);
  LLVMBuilderRef b = LLVMCreateBuilderInContext(ctx);
  LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(ctx, dispatch, "entry");
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(ctx, dispatch, "done");
  LLVMPositionBuilderAtEnd(b, done);
  LLVMBuildRetVoid(b);
  LLVMPositionBuilderAtEnd(b, entry);
  LLVMValueRef sw = LLVMBuildSwitch(b, LLVMGetParam(dispatch, 0), done, k->handler_count);
  df_status st = df_status_ok();
  for (uint32_t i = 0; i < k->handler_count && st.code == DF_OK; i++) {
    const df_handler *h = &k->handlers[i];
    LLVMValueRef fn;
    st = h->part_count ? df_build_composite(m, k, h, true, &fn) /* fused */
                       : df_resolve_handler(m, h, &fn);
    if (df_failed(&st))
      break;
    char name[32];
    snprintf(name, sizeof name, "h%u", h->id);
    LLVMBasicBlockRef bb = LLVMAppendBasicBlockInContext(ctx, dispatch, name);
    LLVMAddCase(sw, LLVMConstInt(i32, h->id, 0), bb);
    LLVMPositionBuilderAtEnd(b, bb);
    LLVMValueRef arg = LLVMGetParam(dispatch, 1);
    LLVMBuildCall2(b, handler_ty, fn, &arg, 1, "");
    LLVMBuildBr(b, done);
  }
  LLVMDisposeBuilder(b);
  return st;
}
