/* Composite handlers of fused instructions (docs/fusion.md): one generated
   function per composite calls its part handlers in order on one df_ctx
   copy, pointing the copy at part i's args record (the packer lays a
   fused instruction's records out consecutively) and meeting at a CTA
   barrier between parts, as the runtime does between instructions. The
   intermediate stays in its slot in shared memory. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "df/device.h"
#include "llvm-c/Core.h"
#include "target_internal.h"

static void mark_convergent(LLVMContextRef ctx, LLVMValueRef fn) {
  unsigned kind = LLVMGetEnumAttributeKindForName("convergent", strlen("convergent"));
  LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(ctx, kind, 0));
}

/* bar.sync 0 on the device; the host backend's barrier callback (if set)
   on the host, as df_ctx_barrier does. */
static void build_barrier(LLVMBuilderRef b, LLVMModuleRef m, LLVMValueRef fn, LLVMValueRef ctxp,
                          bool device) {
  LLVMContextRef ctx = LLVMGetModuleContext(m);
  LLVMTypeRef voidt = LLVMVoidTypeInContext(ctx), ptr = LLVMPointerTypeInContext(ctx, 0);
  LLVMTypeRef i8 = LLVMInt8TypeInContext(ctx), i64 = LLVMInt64TypeInContext(ctx);
  if (device) {
    LLVMTypeRef aty = LLVMFunctionType(voidt, NULL, 0, 0);
    const char *text = "bar.sync 0;";
    LLVMValueRef asm_fn = LLVMGetInlineAsm(aty, (char *)text, strlen(text), "", 0, 1, 0,
                                           LLVMInlineAsmDialectATT, 0);
    LLVMValueRef call = LLVMBuildCall2(b, aty, asm_fn, NULL, 0, "");
    unsigned kind = LLVMGetEnumAttributeKindForName("convergent", strlen("convergent"));
    LLVMAddCallSiteAttribute(call, LLVMAttributeFunctionIndex,
                             LLVMCreateEnumAttribute(ctx, kind, 0));
    return;
  }
  LLVMValueRef off = LLVMConstInt(i64, offsetof(df_ctx, host_barrier), 0);
  LLVMValueRef slot = LLVMBuildGEP2(b, i8, ctxp, &off, 1, "");
  LLVMValueRef cb = LLVMBuildLoad2(b, ptr, slot, "host_barrier");
  LLVMValueRef none = LLVMBuildICmp(b, LLVMIntEQ, cb, LLVMConstNull(ptr), "");
  LLVMBasicBlockRef call_bb = LLVMAppendBasicBlockInContext(ctx, fn, "barrier");
  LLVMBasicBlockRef cont = LLVMAppendBasicBlockInContext(ctx, fn, "part");
  LLVMBuildCondBr(b, none, cont, call_bb);
  LLVMPositionBuilderAtEnd(b, call_bb);
  off = LLVMConstInt(i64, offsetof(df_ctx, host_user), 0);
  LLVMValueRef user = LLVMBuildLoad2(b, ptr, LLVMBuildGEP2(b, i8, ctxp, &off, 1, ""), "user");
  LLVMTypeRef cty = LLVMFunctionType(voidt, &ptr, 1, 0);
  LLVMBuildCall2(b, cty, cb, &user, 1, "");
  LLVMBuildBr(b, cont);
  LLVMPositionBuilderAtEnd(b, cont);
}

df_status df_build_composite(LLVMModuleRef m, const df_packed *k, const df_handler *h,
                             const df_program *prog, bool device, LLVMValueRef *out) {
  LLVMContextRef ctx = LLVMGetModuleContext(m);
  LLVMTypeRef voidt = LLVMVoidTypeInContext(ctx), ptr = LLVMPointerTypeInContext(ctx, 0);
  LLVMTypeRef i8 = LLVMInt8TypeInContext(ctx), i64 = LLVMInt64TypeInContext(ctx);
  LLVMTypeRef fty = LLVMFunctionType(voidt, &ptr, 1, 0);
  if (h->part_count < 2 || h->part_count > DF_FUSE_MAX_PARTS)
    return df_status_errorf(DF_EINVAL, "composite handler %u ('%s') has %u parts; 2..%u expected",
                            h->id, h->name, h->part_count, DF_FUSE_MAX_PARTS);
  LLVMValueRef parts[DF_FUSE_MAX_PARTS];
  for (uint32_t i = 0; i < h->part_count; i++) {
    if (h->parts[i] >= k->handler_count || k->handlers[h->parts[i]].part_count)
      return df_status_errorf(DF_EINVAL, "composite handler %u ('%s') part %u names handler %u, "
                                         "which is not an ordinary handler of the table",
                              h->id, h->name, i, h->parts[i]);
    DF_TRY(df_resolve_handler(m, &k->handlers[h->parts[i]], prog, &parts[i]));
  }
  char name[64];
  snprintf(name, sizeof name, "df_composite_%u", h->id);
  if (LLVMGetNamedFunction(m, name))
    return df_status_errorf(DF_EINVAL, "linked bitcode already defines '%s', the generated "
                                       "composite handler %u",
                            name, h->id);
  LLVMValueRef fn = LLVMAddFunction(m, name, fty);
  mark_convergent(ctx, fn);
  LLVMBuilderRef b = LLVMCreateBuilderInContext(ctx);
  LLVMPositionBuilderAtEnd(b, LLVMAppendBasicBlockInContext(ctx, fn, "entry"));
  LLVMValueRef in = LLVMGetParam(fn, 0);
  LLVMValueRef copy = LLVMBuildAlloca(b, LLVMArrayType2(i8, sizeof(df_ctx)), "ctx");
  LLVMSetAlignment(copy, _Alignof(df_ctx));
  LLVMBuildMemCpy(b, copy, _Alignof(df_ctx), in, _Alignof(df_ctx),
                  LLVMConstInt(i64, sizeof(df_ctx), 0));
  _Static_assert(offsetof(df_ctx, args) == 0, "df_ctx.args is the first field");
  LLVMValueRef args = LLVMBuildLoad2(b, ptr, in, "args");
  for (uint32_t i = 0; i < h->part_count; i++) {
    if (i) {
      build_barrier(b, m, fn, copy, device);
      LLVMValueRef off = LLVMConstInt(i64, (uint64_t)i * sizeof(df_abi_args), 0);
      LLVMBuildStore(b, LLVMBuildGEP2(b, i8, args, &off, 1, ""), copy);
    }
    LLVMValueRef call = LLVMBuildCall2(b, fty, parts[i], &copy, 1, "");
    (void)call;
  }
  LLVMBuildRetVoid(b);
  LLVMDisposeBuilder(b);
  *out = fn;
  return df_status_ok();
}
