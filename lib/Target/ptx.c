/* Link runtime + handlers + dispatch, optimise, emit PTX (LLVM-C). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llvm-c/BitReader.h"
#include "llvm-c/Core.h"
#include "llvm-c/Linker.h"
#include "llvm-c/Target.h"
#include "llvm-c/TargetMachine.h"
#include "llvm-c/Transforms/PassBuilder.h"
#include "df/kernel_plan.h"
#include "target_internal.h"

#define DF_KERNEL_NAME "df_persistent_kernel"
/* The watched twin (include/df/runtime.h DF_RT_WATCHED_SUFFIX). */
#define DF_RT_WATCHED_SUFFIX "_watched"
#define DF_TRIPLE "nvptx64-nvidia-cuda"
/* Pinned PTX ISA: 8.6 (CUDA 12.8 ptxas, r570 drivers and later) for the
   relaxed remote arrive.expect_tx of cluster sends (docs/device-runtime.md);
   8.0 forms cost ~0.3 us per cluster edge. */
#define DF_PTX_FEATURES "+ptx86"

static df_status take_error(LLVMErrorRef e, const char *what) {
  char *msg = LLVMGetErrorMessage(e);
  df_status s = df_status_errorf(DF_EINTERNAL, "%s: %s", what, msg);
  LLVMDisposeErrorMessage(msg);
  return s;
}

static void record_diagnostic(LLVMDiagnosticInfoRef info, void *user) {
  df_diag_sink *sink = user;
  if (LLVMGetDiagInfoSeverity(info) != LLVMDSError)
    return;
  char *text = LLVMGetDiagInfoDescription(info);
  snprintf(sink->message, sizeof sink->message, "%s", text);
  LLVMDisposeMessage(text);
}

LLVMContextRef df_llvm_context_create(df_diag_sink *sink) {
  LLVMContextRef ctx = LLVMContextCreate();
  LLVMContextSetDiagnosticHandler(ctx, record_diagnostic, sink);
  return ctx;
}

void df_diag_sink_append(const df_diag_sink *sink, df_status *s) {
  if (s->code != DF_OK && sink->message[0]) {
    size_t n = strlen(s->message);
    snprintf(s->message + n, sizeof s->message - n, " (LLVM: %s)", sink->message);
  }
}

static bool is_bitcode(LLVMMemoryBufferRef buf) {
  const unsigned char *p = (const unsigned char *)LLVMGetBufferStart(buf);
  size_t n = LLVMGetBufferSize(buf);
  static const unsigned char raw[4] = {'B', 'C', 0xC0, 0xDE};
  static const unsigned char wrapper[4] = {0xDE, 0xC0, 0x17, 0x0B};
  return n >= 4 && (!memcmp(p, raw, 4) || !memcmp(p, wrapper, 4));
}

df_status df_parse_bitcode(LLVMContextRef ctx, LLVMMemoryBufferRef buf, const char *name,
                           LLVMModuleRef *out) {
  if (!is_bitcode(buf) || LLVMParseBitcodeInContext2(ctx, buf, out)) {
    LLVMDisposeMemoryBuffer(buf);
    return df_status_errorf(DF_EFORMAT, "'%s' is not LLVM bitcode", name);
  }
  LLVMDisposeMemoryBuffer(buf);
  return df_status_ok();
}

df_status df_link_bitcode_file(LLVMContextRef ctx, LLVMModuleRef dest, const char *path,
                               const char *triple_prefix, const char *hint) {
  LLVMMemoryBufferRef buf;
  char *msg = NULL;
  if (LLVMCreateMemoryBufferWithContentsOfFile(path, &buf, &msg)) {
    df_status s = df_status_errorf(DF_EIO, "cannot read handler bitcode '%s': %s", path,
                                   msg ? msg : "unknown error");
    LLVMDisposeMessage(msg);
    return s;
  }
  LLVMModuleRef m;
  DF_TRY(df_parse_bitcode(ctx, buf, path, &m));
  const char *triple = LLVMGetTarget(m);
  if (triple_prefix && triple[0] && strncmp(triple, triple_prefix, strlen(triple_prefix)) != 0) {
    df_status s = df_status_errorf(DF_EINVAL, "handler bitcode '%s' targets '%s'; %s", path,
                                   triple, hint);
    LLVMDisposeModule(m);
    return s;
  }
  if (LLVMLinkModules2(dest, m))
    return df_status_errorf(DF_EINVAL, "linking '%s' failed (conflicting definitions?)", path);
  return df_status_ok();
}

bool df_visible_symbol(const char *name) {
  return !strcmp(name, "df_plan_features") || !strcmp(name, "df_handler_workspace_bytes") ||
         !strcmp(name, "df_rt_kernel_abi") || !strcmp(name, "df_rt_trace_buf") ||
         !strcmp(name, "df_rt_diag_buf");
}

/* Everything but the kernel becomes internal so O3 can inline handlers
   into the dispatch and the dispatch into the loop. df_plan_features and
   df_handler_workspace_bytes stay visible (a launcher reads them: does
   the plan fit the kernel, how much workspace to add), and so does
   df_rt_kernel_abi (which parameters the entries take); they are
   constants with definitive initializers, so O3 still folds them. df_rt_trace_buf
   and df_rt_diag_buf (only in a runtime built with DF_RT_TRACE, and
   DF_RT_TRACE_DIAG, df/rt_trace.h) stay visible too: internal, their
   stores would be dead (nothing in the module reads them) and the host
   could not find them by name. */
static void internalize(LLVMModuleRef m) {
  for (LLVMValueRef f = LLVMGetFirstFunction(m); f; f = LLVMGetNextFunction(f))
    if (!LLVMIsDeclaration(f) && strcmp(LLVMGetValueName(f), DF_KERNEL_NAME) != 0 &&
        strcmp(LLVMGetValueName(f), DF_KERNEL_NAME DF_RT_WATCHED_SUFFIX) != 0)
      LLVMSetLinkage(f, LLVMInternalLinkage);
  for (LLVMValueRef g = LLVMGetFirstGlobal(m); g; g = LLVMGetNextGlobal(g))
    if (!LLVMIsDeclaration(g) && !df_visible_symbol(LLVMGetValueName(g)))
      LLVMSetLinkage(g, LLVMInternalLinkage);
}

/* After O3, a call of a function nothing defines would reach ptxas as an
   unresolved extern: name it here instead. */
static df_status check_unresolved(LLVMModuleRef m) {
  for (LLVMValueRef f = LLVMGetFirstFunction(m); f; f = LLVMGetNextFunction(f)) {
    const char *name = LLVMGetValueName(f);
    if (LLVMIsDeclaration(f) && LLVMGetFirstUse(f) && strncmp(name, "llvm.", 5) != 0)
      return df_status_errorf(DF_EINVAL, "the kernel calls '%s', which no handler module or "
                                         "linked bitcode defines (add it with --df-link)",
                              name);
  }
  return df_status_ok();
}

static df_status check_sm(const char *sm) {
  if (!strcmp(sm, "sm_90a") || !strcmp(sm, "sm_90"))
    return df_status_ok();
  if (!strcmp(sm, "sm_80"))
    return df_status_errorf(DF_EUNSUPPORTED,
                            "target sm_80 is refused: df's persistent kernel uses mbarrier "
                            "transaction counts and cp.async.bulk, which need sm_90");
  return df_status_errorf(DF_EINVAL, "unknown target '%s'; expected sm_90a, sm_90 or sm_80", sm);
}

static df_status emit(LLVMModuleRef m, const char *sm, char **ptx, size_t *len) {
  LLVMInitializeNVPTXTargetInfo();
  LLVMInitializeNVPTXTarget();
  LLVMInitializeNVPTXTargetMC();
  LLVMInitializeNVPTXAsmPrinter();
  LLVMTargetRef target;
  char *msg = NULL;
  if (LLVMGetTargetFromTriple(DF_TRIPLE, &target, &msg)) {
    df_status s = df_status_errorf(DF_EINTERNAL, "no NVPTX target in libLLVM: %s", msg);
    LLVMDisposeMessage(msg);
    return s;
  }
  LLVMTargetMachineRef tm = LLVMCreateTargetMachine(target, DF_TRIPLE, sm, DF_PTX_FEATURES,
                                                    LLVMCodeGenLevelAggressive, LLVMRelocDefault,
                                                    LLVMCodeModelDefault);
  LLVMSetTarget(m, DF_TRIPLE);
  LLVMTargetDataRef td = LLVMCreateTargetDataLayout(tm);
  LLVMSetModuleDataLayout(m, td);
  LLVMDisposeTargetData(td);
  df_status s = df_status_ok();
  LLVMPassBuilderOptionsRef po = LLVMCreatePassBuilderOptions();
  LLVMErrorRef e = LLVMRunPasses(m, "default<O3>", tm, po);
  LLVMDisposePassBuilderOptions(po);
  if (e)
    s = take_error(e, "optimising the kernel");
  if (s.code == DF_OK)
    s = check_unresolved(m);
  LLVMMemoryBufferRef out = NULL;
  if (s.code == DF_OK && LLVMTargetMachineEmitToMemoryBuffer(tm, m, LLVMAssemblyFile, &msg, &out)) {
    s = df_status_errorf(DF_EINTERNAL, "emitting PTX failed: %s", msg);
    LLVMDisposeMessage(msg);
  }
  if (s.code == DF_OK) {
    size_t n = LLVMGetBufferSize(out);
    char *text = malloc(n + 1);
    if (!text) {
      s = df_status_errorf(DF_ENOMEM, "out of memory copying %zu bytes of PTX", n);
    } else {
      memcpy(text, LLVMGetBufferStart(out), n);
      text[n] = '\0';
      *ptx = text;
      *len = n;
    }
  }
  if (out)
    LLVMDisposeMemoryBuffer(out);
  LLVMDisposeTargetMachine(tm);
  return s;
}

/* The generic kernel (every feature): it serves re-planned plans too. */
df_status df_emit_ptx(const df_packed *k, const df_ptx_options *o, char **ptx, size_t *len) {
  df_kernel_options ko;
  memset(&ko, 0, sizeof ko);
  ko.all_features = true;
  return df_emit_kernel(k, o, &ko, ptx, len);
}

/* Link the handlers lowered from the MLIR module, if it has any. */
static df_status link_mlir_handlers(LLVMContextRef ctx, LLVMModuleRef m,
                                    const df_kernel_options *ko) {
  if (!ko->handler_module.ptr)
    return df_status_ok();
  LLVMModuleRef h;
  DF_TRY(df_mlir_handlers_to_llvm(ko->handler_module, ko->program, ctx, false, &h));
  if (!h)
    return df_status_ok();
  LLVMSetTarget(h, DF_TRIPLE);
  LLVMSetDataLayout(h, LLVMGetDataLayoutStr(m));
  if (LLVMLinkModules2(m, h))
    return df_status_errorf(DF_EINVAL, "linking the MLIR handlers failed (a function defined "
                                       "both in the module and in --df-link bitcode?)");
  return df_status_ok();
}

df_status df_emit_kernel(const df_packed *k, const df_ptx_options *o,
                         const df_kernel_options *ko, char **ptx, size_t *len) {
  static const df_kernel_options none;
  if (!ko)
    ko = &none;
  const char *sm = o->sm ? o->sm : "sm_90a";
  DF_TRY(check_sm(sm));
  if (!o->runtime_bc || !o->runtime_bc_size)
    return df_status_errorf(DF_EINTERNAL, "no device runtime bitcode was given");
  const uint32_t features = df_kernel_features(k, ko);
  df_diag_sink sink = {""};
  LLVMContextRef ctx = df_llvm_context_create(&sink);
  LLVMModuleRef m = NULL;
  LLVMMemoryBufferRef rt = LLVMCreateMemoryBufferWithMemoryRangeCopy(
      o->runtime_bc, o->runtime_bc_size, "df_device_runtime");
  df_status s = df_parse_bitcode(ctx, rt, "df_device_runtime", &m);
  for (unsigned i = 0; s.code == DF_OK && i < o->link_count; i++)
    s = df_link_bitcode_file(ctx, m, o->link_files[i], "nvptx64",
                             "compile it with --target=" DF_TRIPLE);
  if (s.code == DF_OK)
    s = link_mlir_handlers(ctx, m, ko);
  if (s.code == DF_OK && !LLVMGetNamedFunction(m, DF_KERNEL_NAME))
    s = df_status_errorf(DF_EINTERNAL, "the device runtime has no %s", DF_KERNEL_NAME);
  if (s.code == DF_OK)
    s = df_define_plan_constants(m, k, features, ko->block_size,
                                 df_program_workspace_bytes(ko->program));
  if (s.code == DF_OK)
    s = df_build_dispatch(m, k, ko ? ko->program : NULL);
  if (s.code == DF_OK) {
    internalize(m);
    s = emit(m, sm, ptx, len);
  }
  df_diag_sink_append(&sink, &s);
  if (m)
    LLVMDisposeModule(m);
  LLVMContextDispose(ctx);
  return s;
}
