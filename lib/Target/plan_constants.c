/* The plan constants of the generated module (df/kernel_plan.h):
   df_plan_features, which specialises the device runtime to the plan's
   protocol paths, df_handler_workspace_bytes (docs/workspace.md), and
   df_embedded_plan, the plan's ABI records as constant
   data for --df-embed-plan. */
#include <stdio.h>
#include <string.h>

#include "df/kernel_plan.h"
#include "llvm-c/Core.h"
#include "target_internal.h"

/* Records up to this size go to the constant bank (.const, 64 KiB, read
   through the constant cache: every thread of a CTA reads the same
   record); larger plans to .global. */
/* The records are copied as the host holds them; the device is
   little-endian. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "embedding needs a little-endian host");

#define DF_CONST_BANK_LIMIT (60u * 1024u)
#define DF_ADDRSPACE_GLOBAL 1u
#define DF_ADDRSPACE_CONST 4u

uint32_t df_packed_features(const df_packed *k) {
  uint32_t f = df_plan_features_of(k->comms, k->comm_count, k->slots, k->slot_count,
                                   k->topology.cluster_size);
  if (df_packed_has_pool(k))
    f |= DF_FEATURE_POOL;
  return f;
}

uint32_t df_kernel_features(const df_packed *k, const df_kernel_options *ko) {
  if (!ko)
    return df_packed_features(k);
  return (ko->all_features ? DF_FEATURES_ALL : df_packed_features(k)) |
         (ko->embed_plan ? DF_FEATURE_EMBEDDED_PLAN : 0u) |
         (ko->no_resolve ? DF_FEATURE_NO_RESOLVE : 0u);
}

void df_features_name(uint32_t f, char *buf, size_t cap) {
  static const char *const names[] = {"cluster", "cluster_send", "cluster_recv",
                                      "release", "gated",        "hbm",
                                      "hbm_bulk", "direct_global", "scratch",
                                      "source_test", "pool"};
  size_t n = 0;
  buf[0] = '\0';
  for (unsigned i = 0; i < sizeof names / sizeof names[0]; i++)
    if (f & (1u << i))
      n += (size_t)snprintf(buf + n, n < cap ? cap - n : 0, "%s%s", n ? "," : "", names[i]);
  if (f & DF_FEATURE_EMBEDDED_PLAN)
    n += (size_t)snprintf(buf + n, n < cap ? cap - n : 0, "%sembedded_plan", n ? "," : "");
  if (f & DF_FEATURE_NO_RESOLVE)
    n += (size_t)snprintf(buf + n, n < cap ? cap - n : 0, "%sno_resolve", n ? "," : "");
  if (!n)
    snprintf(buf, cap, "none");
}

static size_t b_align16(size_t n) { return (n + 15) / 16 * 16; }

typedef struct blob {
  const char *name;
  const void *data;
  size_t bytes;
} blob;

/* One record array as an internal constant byte array; a generic pointer
   to it for the df_plan_records field. */
static LLVMValueRef record_array(LLVMModuleRef m, const blob *b, unsigned space) {
  LLVMContextRef ctx = LLVMGetModuleContext(m);
  static const char zero[16];
  const void *data = b->bytes ? b->data : zero;
  size_t bytes = b->bytes ? b->bytes : sizeof zero;
  LLVMValueRef init = LLVMConstStringInContext2(ctx, data, bytes, 1);
  char name[64];
  snprintf(name, sizeof name, "df_plan_%s", b->name);
  LLVMValueRef g = LLVMAddGlobalInAddressSpace(m, LLVMTypeOf(init), name, space);
  LLVMSetInitializer(g, init);
  LLVMSetGlobalConstant(g, 1);
  LLVMSetLinkage(g, LLVMInternalLinkage);
  LLVMSetAlignment(g, 16);
  return LLVMConstAddrSpaceCast(g, LLVMPointerTypeInContext(ctx, 0));
}

static df_status embedded_records(LLVMModuleRef m, const df_packed *k, uint32_t block_size,
                                  LLVMTypeRef type, LLVMValueRef *out) {
  LLVMContextRef ctx = LLVMGetModuleContext(m);
  const df_launch_package *l = &k->launch;
  const uint32_t sms = k->topology.sm_count;
  const blob blobs[] = {
      {"instructions", k->instrs, (size_t)k->instr_count * sizeof(df_abi_instr)},
      {"queue_offsets", k->queue_offsets, (size_t)sms * 4},
      {"queue_lengths", k->queue_lengths, (size_t)sms * 4},
      {"slots", k->slots, (size_t)k->slot_count * sizeof(df_abi_slot)},
      {"comms", k->comms, (size_t)k->comm_count * sizeof(df_abi_comm)},
      {"barrier_init_offsets", l->barrier_init_offsets, (size_t)sms * 4},
      {"barrier_init_lengths", l->barrier_init_lengths, (size_t)sms * 4},
      {"barrier_init_indices", l->barrier_init_indices, (size_t)l->barrier_init_count * 4},
      {"args", k->args, (size_t)k->arg_count * sizeof(df_abi_args)},
      {"input_slots", k->input_slots, (size_t)k->input_slot_count * 4},
      {"task_coords", k->task_coords, (size_t)k->task_coord_count * 4},
  };
  enum { NB = sizeof blobs / sizeof blobs[0], NW = 5 };
  if (LLVMGetTypeKind(type) != LLVMStructTypeKind || LLVMCountStructElementTypes(type) != NB + NW)
    return df_status_errorf(DF_EINTERNAL, "the device runtime's df_plan_records has %u fields, "
                                          "the generator writes %d",
                            LLVMGetTypeKind(type) == LLVMStructTypeKind
                                ? LLVMCountStructElementTypes(type)
                                : 0,
                            NB + NW);
  size_t total = 0;
  for (int i = 0; i < NB; i++)
    total += b_align16(blobs[i].bytes);
  unsigned space = total <= DF_CONST_BANK_LIMIT ? DF_ADDRSPACE_CONST : DF_ADDRSPACE_GLOBAL;
  LLVMValueRef fields[NB + NW];
  for (int i = 0; i < NB; i++)
    fields[i] = record_array(m, &blobs[i], space);
  LLVMTypeRef i32 = LLVMInt32TypeInContext(ctx);
  const uint32_t words[NW] = {l->shared_slot_base_offset, l->barrier_count,
                              l->cluster_ack_count, l->cluster_size, block_size};
  for (int i = 0; i < NW; i++)
    fields[NB + i] = LLVMConstInt(i32, words[i], 0);
  *out = LLVMConstNamedStruct(type, fields, NB + NW);
  return df_status_ok();
}

/* Take over the runtime's external declaration of `name` (or add one). */
static df_status define_global(LLVMModuleRef m, const char *name, LLVMTypeRef fallback,
                               LLVMValueRef *out) {
  LLVMValueRef g = LLVMGetNamedGlobal(m, name);
  if (g && !LLVMIsDeclaration(g))
    return df_status_errorf(DF_EINVAL, "linked bitcode already defines '%s'; the generated "
                                       "module defines it from the plan", name);
  if (!g)
    g = LLVMAddGlobal(m, fallback, name);
  *out = g;
  return df_status_ok();
}

/* A visible u32 constant the runtime declares extern (a launcher reads it
   from the image). */
static df_status define_u32(LLVMModuleRef m, const char *name, uint32_t value) {
  LLVMTypeRef i32 = LLVMInt32TypeInContext(LLVMGetModuleContext(m));
  LLVMValueRef g;
  DF_TRY(define_global(m, name, i32, &g));
  LLVMSetInitializer(g, LLVMConstInt(i32, value, 0));
  LLVMSetGlobalConstant(g, 1);
  LLVMSetLinkage(g, LLVMExternalLinkage);
  LLVMSetAlignment(g, 4);
  return df_status_ok();
}

df_status df_define_plan_constants(LLVMModuleRef m, const df_packed *k, uint32_t features,
                                   uint32_t block_size, uint32_t workspace) {
  DF_TRY(define_u32(m, "df_plan_features", features));
  DF_TRY(define_u32(m, "df_handler_workspace_bytes", workspace));

  LLVMValueRef e = LLVMGetNamedGlobal(m, "df_embedded_plan");
  if (!e)
    return df_status_errorf(DF_EINTERNAL, "the device runtime does not declare df_embedded_plan");
  DF_TRY(define_global(m, "df_embedded_plan", NULL, &e));
  LLVMTypeRef type = LLVMGlobalGetValueType(e);
  LLVMValueRef init = LLVMConstNull(type);
  if (features & DF_FEATURE_EMBEDDED_PLAN)
    DF_TRY(embedded_records(m, k, block_size, type, &init));
  LLVMSetInitializer(e, init);
  LLVMSetGlobalConstant(e, 1);
  LLVMSetLinkage(e, LLVMInternalLinkage);
  return df_status_ok();
}
