/* The generated dispatch function: df_dispatch(handler_id, ctx) switches
   over the plan's handler ids and calls each handler's symbol. */
#include <stdio.h>
#include <string.h>

#include "df/impl.h"
#include "llvm-c/Core.h"
#include "target_internal.h"

/* The symbol implementing handler `h`: the implementation df-select-variants
   chose, else the variant's specialised name when the module defines it,
   else the operator name. */
LLVMValueRef df_find_handler(LLVMModuleRef m, const df_handler *h, char *tried, size_t cap) {
  char special[2 * DF_NAME_MAX + 48] = "";
  if (h->has_variant)
    df_variant_diag_name(&h->variant, h->name, special, sizeof special);
  const char *names[2] = {special, h->name};
  if (h->impl[0]) /* a chosen implementation is never stood in for */
    names[0] = h->impl, names[1] = "";
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

/* A built-in library implementation: a private wrapper passing the
   operator's descriptor (df_library_descriptor) to the library entry. */
static df_status library_wrapper(LLVMModuleRef m, const df_handler *h, const char *library,
                                 const df_program *prog, LLVMValueRef *out) {
  if (!prog)
    return df_status_errorf(DF_EINVAL,
                            "handler %u ('%s') uses built-in handler '%s', whose descriptor "
                            "needs the program (give the program module)",
                            h->id, h->name, library);
  uint32_t words[8], count;
  DF_TRY(df_library_descriptor(library, prog, h->name, words, &count));
  LLVMValueRef entry = LLVMGetNamedFunction(m, h->impl);
  if (!entry || LLVMIsDeclaration(entry))
    return df_status_errorf(DF_EINTERNAL,
                            "built-in handler '%s' is missing from the linked runtime", h->impl);
  LLVMContextRef ctx = LLVMGetModuleContext(m);
  LLVMTypeRef i32 = LLVMInt32TypeInContext(ctx), ptr = LLVMPointerTypeInContext(ctx, 0);
  LLVMValueRef vals[8];
  for (uint32_t i = 0; i < 8; i++)
    vals[i] = LLVMConstInt(i32, words[i], 0);
  LLVMTypeRef arr = LLVMArrayType2(i32, 8);
  char name[2 * DF_NAME_MAX + 32];
  snprintf(name, sizeof name, "df_lib_desc_%u", h->id);
  LLVMValueRef desc = LLVMAddGlobal(m, arr, name);
  LLVMSetInitializer(desc, LLVMConstArray2(i32, vals, 8));
  LLVMSetGlobalConstant(desc, 1);
  LLVMSetLinkage(desc, LLVMPrivateLinkage);
  LLVMTypeRef wty = LLVMFunctionType(LLVMVoidTypeInContext(ctx), &ptr, 1, 0);
  LLVMTypeRef lty = LLVMFunctionType(LLVMVoidTypeInContext(ctx), (LLVMTypeRef[]){ptr, ptr}, 2, 0);
  snprintf(name, sizeof name, "df_lib_call_%u", h->id);
  LLVMValueRef w = LLVMAddFunction(m, name, wty);
  LLVMSetLinkage(w, LLVMPrivateLinkage);
  LLVMBuilderRef b = LLVMCreateBuilderInContext(ctx);
  LLVMPositionBuilderAtEnd(b, LLVMAppendBasicBlockInContext(ctx, w, "entry"));
  LLVMValueRef args[2] = {LLVMGetParam(w, 0), desc};
  LLVMBuildCall2(b, lty, entry, args, 2, "");
  LLVMBuildRetVoid(b);
  LLVMDisposeBuilder(b);
  *out = w;
  return df_status_ok();
}

df_status df_resolve_handler(LLVMModuleRef m, const df_handler *h, const df_program *prog,
                             LLVMValueRef *out) {
  const char *library = h->impl[0] ? df_library_of_symbol(h->impl) : NULL;
  if (library)
    return library_wrapper(m, h, library, prog, out);
  if (!h->impl[0] && prog && df_operator_has_impls(prog, h->name))
    return df_status_errorf(DF_EINVAL,
                            "handler %u ('%s', %s) has no chosen implementation, but the "
                            "program declares implementations of '%s': run df-select-variants "
                            "to choose one",
                            h->id, h->name, df_op_kind_name(h->kind), h->name);
  char tried[4 * DF_NAME_MAX + 64];
  LLVMValueRef fn = df_find_handler(m, h, tried, sizeof tried);
  if (!fn && h->impl[0])
    return df_status_errorf(DF_EINVAL,
                            "handler %u ('%s', %s) runs implementation '%s', which is not "
                            "defined in the module or the linked bitcode",
                            h->id, h->name, df_op_kind_name(h->kind), h->impl);
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

df_status df_build_dispatch(LLVMModuleRef m, const df_packed *k, const df_program *prog) {
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
  /* The dispatch and the handlers are inlined into both kernel entries
     (watched and not, lib/Runtime/device/kernel.c), as they were into
     the one: out of line, the df_ctx would live in local memory and the
     call would spill the loop's registers (the GQA kernel: 255 registers
     and 200 bytes of spills against 246 and none). */
  const unsigned always = LLVMGetEnumAttributeKindForName("alwaysinline", 12);
  LLVMAttributeRef inline_attr = LLVMCreateEnumAttribute(ctx, always, 0);
  LLVMAddAttributeAtIndex(dispatch, LLVMAttributeFunctionIndex, inline_attr);
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
    st = h->part_count ? df_build_composite(m, k, h, prog, true, &fn) /* fused */
                       : df_resolve_handler(m, h, prog, &fn);
    if (df_failed(&st))
      break;
    const unsigned never = LLVMGetEnumAttributeKindForName("noinline", 8);
    if (!LLVMGetEnumAttributeAtIndex(fn, LLVMAttributeFunctionIndex, never))
      LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex, inline_attr);
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
