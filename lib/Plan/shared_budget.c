/* The dynamic shared-memory budget (df extension): what each CTA of a
   packed plan needs (control area + the slots it touches), the target's
   limit, and the `auto` reduce strategy that takes the first candidate
   that fits. */
#include <stdio.h>
#include <string.h>

#include "df/kernel_plan.h"
#include "df/plan.h"

df_status df_target_shared_limit(const char *target, uint32_t *out) {
  if (!target)
    return df_status_errorf(DF_EINVAL, "shared-memory target: no name given");
  if (!strcmp(target, "sm_90") || !strcmp(target, "sm_90a")) {
    *out = DF_SHARED_LIMIT_SM90;
    return df_status_ok();
  }
  if (!strcmp(target, "sm_80")) {
    *out = DF_SHARED_LIMIT_SM80;
    return df_status_ok();
  }
  return df_status_errorf(DF_EINVAL,
                          "shared-memory target '%s' is unknown; expected sm_90, sm_90a or "
                          "sm_80 (or give shared-memory-limit=BYTES)",
                          target);
}

static bool in_arena(const df_abi_slot *s) {
  return !(s->flags & (DF_SLOT_FLAG_SCRATCH_BACKED | DF_SLOT_FLAG_HBM_DIRECT_GLOBAL));
}

/* Grow CTA sm's arena end to cover slot id. */
static void touch(const df_packed *k, uint32_t *end, uint32_t sm, uint32_t id) {
  if (sm >= k->topology.sm_count || id >= k->slot_count || !in_arena(&k->slots[id]))
    return;
  uint32_t e = k->slots[id].shared_offset + k->slots[id].bytes;
  if (e > end[sm])
    end[sm] = e;
}

df_status df_shared_need_of(const df_plan *p, const df_packed *k, uint32_t workspace,
                            df_shared_need *out) {
  memset(out, 0, sizeof *out);
  uint32_t n = k->topology.sm_count;
  uint32_t *end = df_alloc(&k->alloc, sizeof *end * (size_t)(n ? n : 1));
  if (!end)
    return df_status_errorf(DF_ENOMEM, "out of memory sizing shared memory of %u CTAs", n);
  memset(end, 0, sizeof *end * (size_t)n);
  /* A slot occupies its bytes in every CTA that produces, receives or
     reads it (as the per-CTA layout counts them). */
  for (uint32_t i = 0; i < p->instr_count; i++) {
    const df_instr *in = &p->instrs[i];
    const uint32_t *ins = df_plan_instr_inputs(p, in);
    for (uint32_t j = 0; j < in->input_count; j++)
      touch(k, end, in->sm, ins[j]);
    if (in->output_slot != DF_SENTINEL)
      touch(k, end, in->sm, in->output_slot);
  }
  for (uint32_t i = 0; i < p->comm_count; i++) {
    touch(k, end, p->comms[i].producer_sm, p->comms[i].src_slot);
    touch(k, end, p->comms[i].consumer_sm, p->comms[i].dst_slot);
  }
  const df_launch_package *l = &k->launch;
  out->control_bytes = l->shared_control_bytes;
  out->slot_base = l->shared_slot_base_offset;
  for (uint32_t s = 0; s < n; s++) {
    uint32_t slots = (end[s] + DF_SHARED_ALIGN - 1) / DF_SHARED_ALIGN * DF_SHARED_ALIGN;
    if (s == 0 || slots > out->slot_bytes) {
      out->cta = s;
      out->slot_bytes = slots;
    }
  }
  out->workspace_bytes = df_workspace_launch_bytes(workspace);
  out->total = out->slot_base + out->slot_bytes + out->workspace_bytes;
  df_free(&k->alloc, end);
  return df_status_ok();
}

df_status df_shared_budget_check(const df_plan *p, const df_packed *k, uint32_t workspace,
                                 uint32_t limit, df_shared_need *need) {
  df_shared_need local;
  if (!need)
    need = &local;
  DF_TRY(df_shared_need_of(p, k, workspace, need));
  if (limit == 0 || need->total <= limit)
    return df_status_ok();
  char ws[96] = "";
  if (need->workspace_bytes)
    snprintf(ws, sizeof ws, " + handler workspace %u (%u declared + %u alignment)",
             need->workspace_bytes, workspace, DF_WORKSPACE_ALIGN);
  return df_status_errorf(DF_EINVAL,
                          "shared memory budget: CTA %u needs %u bytes of dynamic shared memory "
                          "(control %u + slots %u%s, slot arena at offset %u), over the limit "
                          "of %u bytes",
                          need->cta, need->total, need->control_bytes, need->slot_bytes, ws,
                          need->slot_base, limit);
}

/* ---- auto: the first strategy that fits ------------------------------------ */

static void candidate(df_fit_result *r, df_policy policy, df_reduce_strategy strategy) {
  df_fit_candidate *c = &r->c[r->count++];
  memset(c, 0, sizeof *c);
  c->policy = policy;
  c->strategy = strategy;
}

/* Schedule and pack one candidate; *plan kept only when it fits. */
static df_status try_one(const df_program *g, const df_schedule_options *base,
                         const df_pack_options *po, uint32_t limit, df_fit_candidate *c,
                         df_plan **plan) {
  df_schedule_options o = *base;
  o.policy = c->policy;
  o.strategy = c->strategy;
  df_plan *p = NULL;
  df_status st = df_schedule(g, &o, &p);
  if (st.code == DF_EINVAL || st.code == DF_EUNSUPPORTED) {
    snprintf(c->why, sizeof c->why, "%s", st.message);
    return df_status_ok();
  }
  DF_TRY(st);
  df_pack_options pk = *po;
  pk.skip_fingerprint = true;
  df_packed *k = NULL;
  st = df_pack(p, &pk, &g->alloc, &k);
  if (df_failed(&st)) {
    df_plan_destroy(p);
    if (st.code != DF_EINVAL && st.code != DF_EUNSUPPORTED)
      return st;
    snprintf(c->why, sizeof c->why, "%s", st.message);
    return df_status_ok();
  }
  st = df_shared_need_of(p, k, df_program_workspace_bytes(g), &c->need);
  df_packed_destroy(k);
  if (df_failed(&st)) {
    df_plan_destroy(p);
    return st;
  }
  c->scheduled = true;
  c->fits = limit == 0 || c->need.total <= limit;
  if (c->fits)
    *plan = p;
  else
    df_plan_destroy(p);
  return df_status_ok();
}

df_status df_schedule_fitting(const df_program *g, const df_schedule_options *o,
                              const df_pack_options *po, uint32_t limit, df_plan **out,
                              df_fit_result *res) {
  *out = NULL;
  memset(res, 0, sizeof *res);
  res->chosen = -1;
  df_pack_options none;
  memset(&none, 0, sizeof none);
  if (!po)
    po = &none;
  /* all_at_once under the requested policy; the streaming strategies
     exist only under cluster_local (REFERENCE 2.3). Stage graphs have no
     reduce strategy: one candidate. */
  candidate(res, o->policy, DF_REDUCE_ALL_AT_ONCE);
  if (!df_program_is_stage_graph(g)) {
    candidate(res, DF_POLICY_CLUSTER_LOCAL, DF_REDUCE_STREAMING);
    candidate(res, DF_POLICY_CLUSTER_LOCAL, DF_REDUCE_STREAMING_TREE);
  }
  for (uint32_t i = 0; i < res->count; i++) {
    DF_TRY(try_one(g, o, po, limit, &res->c[i], out));
    if (*out) {
      res->chosen = (int32_t)i;
      return df_status_ok();
    }
  }
  char msg[DF_STATUS_MESSAGE_MAX];
  int n = snprintf(msg, sizeof msg, "reduce-strategy=auto: no strategy fits the shared memory "
                                    "limit of %u bytes:",
                   limit);
  for (uint32_t i = 0; i < res->count && n > 0 && (size_t)n < sizeof msg; i++) {
    const df_fit_candidate *c = &res->c[i];
    if (c->scheduled)
      n += snprintf(msg + n, sizeof msg - (size_t)n, " %s/%s needs %u (CTA %u);",
                    df_policy_name(c->policy), df_reduce_strategy_name(c->strategy),
                    c->need.total, c->need.cta);
    else
      n += snprintf(msg + n, sizeof msg - (size_t)n, " %s/%s refused (%.120s);",
                    df_policy_name(c->policy), df_reduce_strategy_name(c->strategy), c->why);
  }
  return df_status_errorf(DF_EINVAL, "%s", msg);
}

int df_fit_suggestion(const df_fit_result *r, df_reduce_strategy current, char *buf, size_t cap) {
  for (uint32_t i = 0; i < r->count; i++) {
    const df_fit_candidate *c = &r->c[i];
    if (c->fits && c->strategy != current)
      return snprintf(buf, cap, "reduce-strategy=%s policy=%s fits (CTA %u needs %u bytes)",
                      df_reduce_strategy_name(c->strategy), df_policy_name(c->policy),
                      c->need.cta, c->need.total);
  }
  return snprintf(buf, cap, "no reduce strategy fits either (streaming, streaming_tree)");
}
