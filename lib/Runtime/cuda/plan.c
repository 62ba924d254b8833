/* Host-side plans: from a blob, a packed plan or a program, and re-planned
   in process through lib/Plan for new range lengths. */
#include <string.h>

#include "df/blob.h"
#include "internal.h"

df_status dfrt_plan_check(const df_packed *k) {
  const df_launch_package *l = &k->launch;
  if (k->abi_version != DF_ABI_VERSION || l->abi_version != DF_ABI_VERSION)
    return df_status_errorf(DF_EINVAL,
                            "plan: ABI version %u (launch package %u) is not the runtime's %u",
                            k->abi_version, l->abi_version, DF_ABI_VERSION);
  if (k->topology.sm_count == 0 || k->topology.cluster_size == 0)
    return df_status_errorf(DF_EINVAL, "plan: topology %u SMs / cluster %u is empty",
                            k->topology.sm_count, k->topology.cluster_size);
  if (l->sm_count != k->topology.sm_count || l->cluster_size != k->topology.cluster_size)
    return df_status_errorf(DF_EINVAL,
                            "plan: launch package topology %u/%u differs from the plan's %u/%u",
                            l->sm_count, l->cluster_size, k->topology.sm_count,
                            k->topology.cluster_size);
  if (l->instruction_count != k->instr_count || l->slot_count != k->slot_count ||
      l->comm_count != k->comm_count || l->arg_count != k->arg_count)
    return df_status_errorf(DF_EINVAL,
                            "plan: launch package counts (%u instructions, %u slots, %u comms, "
                            "%u args) differ from the plan's (%u, %u, %u, %u)",
                            l->instruction_count, l->slot_count, l->comm_count, l->arg_count,
                            k->instr_count, k->slot_count, k->comm_count, k->arg_count);
  if (!l->barrier_init_offsets || !l->barrier_init_lengths ||
      (l->barrier_init_count && !l->barrier_init_indices))
    return df_status_errorf(DF_EINVAL, "plan: launch package has no barrier-init lists");
  return df_status_ok();
}

df_status df_rt_plan_from_packed(df_rt *rt, df_packed *packed, df_program *program,
                                 uint32_t block_size, df_rt_plan **out) {
  if (out)
    *out = NULL;
  if (!rt || !packed || !out) {
    df_packed_destroy(packed);
    df_program_destroy(program);
    return df_status_errorf(DF_EINVAL, "plan: NULL argument to df_rt_plan_from_packed");
  }
  df_status s = dfrt_plan_check(packed);
  df_rt_plan *p = NULL;
  if (s.code == DF_OK) {
    p = df_alloc(&rt->alloc, sizeof *p);
    if (!p)
      s = df_status_errorf(DF_ENOMEM, "plan: out of memory");
  }
  if (s.code != DF_OK) {
    df_packed_destroy(packed);
    df_program_destroy(program);
    return s;
  }
  p->rt = rt;
  p->packed = packed;
  p->program = program;
  p->block_size = block_size;
  p->id = ++rt->plan_ids;
  p->last_blocks = NULL;
  p->last_count = 0;
  *out = p;
  return s;
}

df_status df_rt_plan_from_blob(df_rt *rt, const uint8_t *bytes, size_t len,
                               df_rt_plan **out) {
  if (!rt || !bytes || !out)
    return df_status_errorf(DF_EINVAL, "plan: NULL argument to df_rt_plan_from_blob");
  *out = NULL;
  df_packed *k;
  df_program *prog;
  DF_TRY(df_blob_read(bytes, len, &rt->alloc, &k, &prog));
  return df_rt_plan_from_packed(rt, k, prog, 0, out);
}

df_status df_rt_plan_from_file(df_rt *rt, const char *path, df_rt_plan **out) {
  if (!rt || !out)
    return df_status_errorf(DF_EINVAL, "plan: NULL argument to df_rt_plan_from_file");
  *out = NULL;
  uint8_t *bytes;
  size_t len;
  DF_TRY(dfrt_read_file(&rt->alloc, path, "plan", &bytes, &len));
  df_status s = df_rt_plan_from_blob(rt, bytes, len, out);
  df_free(&rt->alloc, bytes);
  return s;
}

static df_status plan_program(df_rt *rt, const df_program *program,
                              const df_schedule_options *so, const df_pack_options *po,
                              bool replan, df_rt_plan **out) {
  df_plan *plan;
  DF_TRY(replan ? df_schedule_replan(program, so, po, &plan, NULL)
                : df_schedule(program, so, &plan));
  /* Run-time plans need no fingerprint (df_plan_fingerprint computes it on
     demand); skipping it keeps re-plans cheap. */
  df_pack_options defaults;
  memset(&defaults, 0, sizeof defaults);
  defaults.skip_fingerprint = true;
  df_packed *k;
  df_status s = df_pack(plan, po ? po : &defaults, &rt->alloc, &k);
  uint32_t block_size = plan->block_size; /* so->block_size or the split chosen */
  df_plan_destroy(plan);
  if (s.code != DF_OK)
    return s;
  df_program *copy;
  s = dfrt_program_clone(program, &rt->alloc, &copy);
  if (s.code != DF_OK) {
    df_packed_destroy(k);
    return s;
  }
  return df_rt_plan_from_packed(rt, k, copy, block_size, out);
}

df_status df_rt_plan_from_program(df_rt *rt, const df_program *program,
                                  const df_schedule_options *so, const df_pack_options *po,
                                  df_rt_plan **out) {
  if (!rt || !program || !so || !out)
    return df_status_errorf(DF_EINVAL, "plan: NULL argument to df_rt_plan_from_program");
  *out = NULL;
  return plan_program(rt, program, so, po, false, out);
}

df_status df_rt_plan_replan(const df_rt_plan *base, const df_schedule_options *so,
                            const df_pack_options *po, df_rt_plan **out) {
  if (!base || !so || !out)
    return df_status_errorf(DF_EINVAL, "plan: NULL argument to df_rt_plan_replan");
  *out = NULL;
  if (!base->program)
    return df_status_errorf(DF_EINVAL,
                            "plan: cannot re-plan: the plan carries no program (write the "
                            "blob with its program)");
  df_schedule_options o = *so;
  if (o.topology.sm_count == 0)
    o.topology = base->packed->topology;
  /* its kernel runs pooled plans (and has no cluster paths if the pool
     forced HBM): the re-plan pools too */
  if (df_packed_has_pool(base->packed))
    o.pool = true;
  df_status s = plan_program(base->rt, base->program, &o, po, true, out);
  return df_status_wrap(s, "plan: re-planning");
}

df_status df_rt_plan_patch_lengths(df_rt_plan *plan, const uint32_t *lengths, uint32_t count,
                                   uint32_t max_last_block, df_patch_result *out) {
  if (!plan || !out)
    return df_status_errorf(DF_EINVAL, "plan: NULL argument to df_rt_plan_patch_lengths");
  if (count == 0)
    return df_status_errorf(DF_EINVAL, "plan: patching range lengths: no lengths");
  df_allocator *a = &plan->rt->alloc;
  if (plan->last_count != count || !plan->last_blocks) {
    df_free(a, plan->last_blocks);
    plan->last_blocks = NULL;
    plan->last_count = 0;
    uint32_t *last = df_alloc(a, sizeof *last * count);
    if (!last)
      return df_status_errorf(DF_ENOMEM, "plan: out of memory indexing %u tasks", count);
    df_status s = df_packed_last_blocks(plan->packed, count, last, out);
    if (s.code != DF_OK || !out->patched) {
      df_free(a, last);
      return df_status_wrap(s, "plan: patching range lengths");
    }
    plan->last_blocks = last;
    plan->last_count = count;
  }
  return df_status_wrap(df_packed_patch_lengths_at(plan->packed, plan->last_blocks, lengths, count,
                                                   max_last_block, out),
                        "plan: patching range lengths");
}

void df_rt_plan_destroy(df_rt_plan *plan) {
  if (!plan)
    return;
  df_packed_destroy(plan->packed);
  df_program_destroy(plan->program);
  df_free(&plan->rt->alloc, plan->last_blocks);
  df_free(&plan->rt->alloc, plan);
}

const df_packed *df_rt_plan_packed(const df_rt_plan *plan) {
  return plan ? plan->packed : NULL;
}

const df_program *df_rt_plan_program(const df_rt_plan *plan) {
  return plan ? plan->program : NULL;
}

uint32_t df_rt_plan_block_size(const df_rt_plan *plan) { return plan ? plan->block_size : 0; }
