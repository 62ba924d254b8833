/* Handlers for the host backend: host bitcode -> a shared object exporting
   each handler of the plan under its packed symbol. */
#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "df/impl.h"
#include "llvm-c/Core.h"
#include "llvm-c/Linker.h"
#include "llvm-c/Target.h"
#include "llvm-c/TargetMachine.h"
#include "llvm-c/Transforms/PassBuilder.h"
#include "target_internal.h"

extern char **environ;

/* Does some handler run a built-in library implementation? */
static bool uses_library(const df_packed *k) {
  for (uint32_t i = 0; i < k->handler_count; i++)
    if (k->handlers[i].impl[0] && df_library_of_symbol(k->handlers[i].impl))
      return true;
  return false;
}

/* MLIR-body handlers lowered for the host, and the accessors and built-in
   library they (or the handler table) call. */
static df_status link_mlir_bodies(LLVMContextRef ctx, LLVMModuleRef m, const df_packed *k,
                                  const df_host_handler_options *o) {
  LLVMModuleRef h;
  DF_TRY(df_mlir_handlers_to_llvm(o->handler_module, o->program, ctx, true, &h));
  if (!h && !uses_library(k))
    return df_status_ok();
  if (h && LLVMLinkModules2(m, h))
    return df_status_errorf(DF_EINVAL, "linking the MLIR handlers failed (a function defined "
                                       "both in the module and in --df-link bitcode?)");
  if (!o->accessors_bc || !o->accessors_bc_size)
    return df_status_errorf(DF_EINTERNAL, "no host build of the df_ctx accessors was given");
  LLVMModuleRef acc;
  DF_TRY(df_parse_bitcode(ctx,
                          LLVMCreateMemoryBufferWithMemoryRangeCopy(o->accessors_bc,
                                                                    o->accessors_bc_size,
                                                                    "df_host_ctx_fn"),
                          "df_host_ctx_fn", &acc));
  if (LLVMLinkModules2(m, acc))
    return df_status_errorf(DF_EINTERNAL, "linking the host df_ctx accessors failed");
  return df_status_ok();
}

/* One exported thunk per handler id: the backend resolves the packed
   symbol first, so the object serves exactly this plan's table. */
static df_status add_thunks(LLVMModuleRef m, const df_packed *k, const df_program *prog) {
  LLVMContextRef ctx = LLVMGetModuleContext(m);
  LLVMTypeRef ptr = LLVMPointerTypeInContext(ctx, 0);
  LLVMTypeRef fty = LLVMFunctionType(LLVMVoidTypeInContext(ctx), &ptr, 1, 0);
  LLVMBuilderRef b = LLVMCreateBuilderInContext(ctx);
  df_status st = df_status_ok();
  for (uint32_t i = 0; i < k->handler_count && st.code == DF_OK; i++) {
    const df_handler *h = &k->handlers[i];
    LLVMValueRef impl;
    st = h->part_count ? df_build_composite(m, k, h, prog, false, &impl) /* fused */
                       : df_resolve_handler(m, h, prog, &impl);
    if (st.code != DF_OK)
      break;
    if (LLVMGetNamedFunction(m, h->symbol)) {
      st = df_status_errorf(DF_EINVAL, "linked bitcode already defines '%s', the packed symbol "
                                       "of handler %u", h->symbol, h->id);
      break;
    }
    LLVMValueRef thunk = LLVMAddFunction(m, h->symbol, fty);
    LLVMPositionBuilderAtEnd(b, LLVMAppendBasicBlockInContext(ctx, thunk, "entry"));
    LLVMValueRef arg = LLVMGetParam(thunk, 0);
    LLVMBuildCall2(b, fty, impl, &arg, 1, "");
    LLVMBuildRetVoid(b);
  }
  LLVMDisposeBuilder(b);
  return st;
}

/* The handlers' workspace as the device module has it
   (df_handler_workspace_bytes, docs/workspace.md): the host backend reads
   it from the object and gives each virtual CTA a buffer of that size. */
static df_status add_workspace_constant(LLVMModuleRef m, const df_program *prog) {
  if (LLVMGetNamedGlobal(m, "df_handler_workspace_bytes"))
    return df_status_errorf(DF_EINVAL, "linked bitcode already defines "
                                       "'df_handler_workspace_bytes'; the generated object "
                                       "defines it from the handlers' df.workspace_bytes");
  LLVMTypeRef i32 = LLVMInt32TypeInContext(LLVMGetModuleContext(m));
  LLVMValueRef g = LLVMAddGlobal(m, i32, "df_handler_workspace_bytes");
  LLVMSetInitializer(g, LLVMConstInt(i32, df_program_workspace_bytes(prog), 0));
  LLVMSetGlobalConstant(g, 1);
  LLVMSetLinkage(g, LLVMExternalLinkage);
  LLVMSetAlignment(g, 4);
  return df_status_ok();
}

static df_status emit_object(LLVMModuleRef m, const char *path) {
  LLVMInitializeNativeTarget();
  LLVMInitializeNativeAsmPrinter();
  char *triple = LLVMGetDefaultTargetTriple(), *msg = NULL;
  LLVMTargetRef target;
  df_status s = df_status_ok();
  if (LLVMGetTargetFromTriple(triple, &target, &msg)) {
    s = df_status_errorf(DF_EINTERNAL, "no host target '%s' in libLLVM: %s", triple, msg);
    LLVMDisposeMessage(msg);
    LLVMDisposeMessage(triple);
    return s;
  }
  LLVMTargetMachineRef tm = LLVMCreateTargetMachine(target, triple, "", "",
                                                    LLVMCodeGenLevelDefault, LLVMRelocPIC,
                                                    LLVMCodeModelDefault);
  LLVMSetTarget(m, triple);
  LLVMTargetDataRef td = LLVMCreateTargetDataLayout(tm);
  LLVMSetModuleDataLayout(m, td);
  LLVMDisposeTargetData(td);
  LLVMPassBuilderOptionsRef po = LLVMCreatePassBuilderOptions();
  LLVMErrorRef e = LLVMRunPasses(m, "default<O2>", tm, po);
  LLVMDisposePassBuilderOptions(po);
  if (e) {
    char *em = LLVMGetErrorMessage(e);
    s = df_status_errorf(DF_EINTERNAL, "optimising the host handlers: %s", em);
    LLVMDisposeErrorMessage(em);
  }
  if (s.code == DF_OK && LLVMTargetMachineEmitToFile(tm, m, path, LLVMObjectFile, &msg)) {
    s = df_status_errorf(DF_EIO, "writing the host object '%s': %s", path, msg);
    LLVMDisposeMessage(msg);
  }
  LLVMDisposeTargetMachine(tm);
  LLVMDisposeMessage(triple);
  return s;
}

/* `cc -shared -o out obj`: the system linker makes the shared object. */
static df_status link_shared(const char *cc, const char *obj, const char *out) {
  char *argv[] = {(char *)cc, "-shared", "-o", (char *)out, (char *)obj, "-lm", NULL};
  pid_t pid;
  int rc = posix_spawnp(&pid, cc, NULL, NULL, argv, environ);
  if (rc != 0)
    return df_status_errorf(DF_EIO, "cannot run the host linker '%s': %s (set DF_HOST_CC)", cc,
                            strerror(rc));
  int status;
  if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return df_status_errorf(DF_EIO, "the host linker '%s' failed making '%s'", cc, out);
  return df_status_ok();
}

df_status df_emit_host_handlers(const df_packed *k, const df_host_handler_options *o) {
  if (!o->output)
    return df_status_errorf(DF_EINVAL, "the host handler object needs an output path (-o)");
  df_diag_sink sink = {""};
  LLVMContextRef ctx = df_llvm_context_create(&sink);
  LLVMModuleRef m = LLVMModuleCreateWithNameInContext("df_host_handlers", ctx);
  df_status s = df_status_ok();
  const char *triple_hint = "compile it for the host (no --target)";
  for (unsigned i = 0; s.code == DF_OK && i < o->link_count; i++) {
    s = df_link_bitcode_file(ctx, m, o->link_files[i], NULL, triple_hint);
    if (s.code == DF_OK && !strncmp(LLVMGetTarget(m), "nvptx", 5))
      s = df_status_errorf(DF_EINVAL, "handler bitcode '%s' targets '%s'; %s", o->link_files[i],
                           LLVMGetTarget(m), triple_hint);
  }
  if (s.code == DF_OK && o->handler_module.ptr)
    s = link_mlir_bodies(ctx, m, k, o);
  if (s.code == DF_OK)
    s = add_thunks(m, k, o->program);
  if (s.code == DF_OK)
    s = add_workspace_constant(m, o->program);
  char obj[4096];
  snprintf(obj, sizeof obj, "%s.o", o->output);
  if (s.code == DF_OK)
    s = emit_object(m, obj);
  if (s.code == DF_OK) {
    const char *cc = o->cc ? o->cc : "cc";
    s = link_shared(cc, obj, o->output);
    unlink(obj);
  }
  df_diag_sink_append(&sink, &s);
  LLVMDisposeModule(m);
  LLVMContextDispose(ctx);
  return s;
}
