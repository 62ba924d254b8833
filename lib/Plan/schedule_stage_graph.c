/* The reshared stage graph map1 -> reshared -> map2 [-> finalize]: an
   all-gather of map1 shards inside each task's cluster (REFERENCE 2.6). */
#include <string.h>

#include "schedule_internal.h"

/* Ranges of one map stage for every task. */
typedef struct map_range {
  const df_range_lengths *r;
  const char *stage;
} map_range;

static df_status find_map_range(const df_sched *s, uint32_t stage, map_range *out) {
  const df_stage *st = &s->prog->stages[stage];
  out->stage = st->name;
  out->r = df_sched_find_range(s->o, st->range_axis);
  if (!out->r)
    return df_status_errorf(DF_EINVAL, "Dataflow range_lengths must include the range axis '%s'",
                            st->range_axis);
  return df_status_ok();
}

/* Shard `rank` of task t's range, offset applied; the length must split
   evenly over the cluster. */
static df_status shard(const df_sched *s, const map_range *m, uint32_t t, uint32_t rank,
                       uint32_t *b, uint32_t *e) {
  uint32_t cs = s->topo.cluster_size, len = m->r->lengths[t];
  if (len % cs)
    return df_status_errorf(DF_EINVAL,
                            "Dataflow stage graph stage '%s': range length %u of task %u must "
                            "be divisible by cluster_size %u",
                            m->stage, len, t, cs);
  uint32_t off = m->r->offsets ? m->r->offsets[t] : 0; /* checked: no overflow */
  uint32_t part = len / cs;
  *b = rank * part + off;
  *e = *b + part;
  return df_status_ok();
}

/* The three transports (REFERENCE 2.6 names them; df's semantics):
   hbm_all_gather and cluster_shared_all_gather emit one transfer per
   (consumer rank, remote producer rank) — cluster kinds inside the task's
   cluster unless force_hbm; cluster_shared_pull_ring forwards shards
   around the cluster in C-1 neighbour steps. A task's ranks are the SMs
   of one cluster by construction, so the cluster-only policies need only
   refuse force_hbm. */
typedef enum transport { T_HBM_ALL_GATHER, T_CLUSTER_ALL_GATHER, T_CLUSTER_RING } transport;

static df_status check_graph(const df_sched *s, const df_stage *re, transport *tr) {
  const df_topology *t = &s->topo;
  if (t->sm_count % t->cluster_size)
    return df_status_errorf(DF_EINVAL,
                            "Dataflow stage graph scheduler requires sm_count %u to be a "
                            "multiple of cluster_size %u",
                            t->sm_count, t->cluster_size);
  if (!strcmp(re->policy, "hbm_all_gather"))
    *tr = T_HBM_ALL_GATHER;
  else if (!strcmp(re->policy, "cluster_shared_all_gather"))
    *tr = T_CLUSTER_ALL_GATHER;
  else if (!strcmp(re->policy, "cluster_shared_pull_ring"))
    *tr = T_CLUSTER_RING;
  else /* df_program_validate refuses other names first */
    return df_status_errorf(DF_EINTERNAL,
                            "reshared stage '%s': policy '%s' is not one of hbm_all_gather, "
                            "cluster_shared_all_gather, cluster_shared_pull_ring",
                            re->name, re->policy);
  if (*tr != T_HBM_ALL_GATHER && s->o->force_hbm_comms)
    return df_status_errorf(DF_EINVAL,
                            "reshared stage '%s': policy '%s' moves shards through cluster "
                            "shared memory (DSMEM) only and cannot be combined with "
                            "force_hbm_comms; use policy 'hbm_all_gather'",
                            re->name, re->policy);
  /* one map1 tile per rank */
  if (re->output_arity != t->cluster_size)
    return df_status_errorf(DF_EINVAL,
                            "Dataflow reshared stage output_arity must match the number of map1 "
                            "output tiles: stage '%s' has output_arity %u, map1 produces %u",
                            re->name, re->output_arity, t->cluster_size);
  return df_status_ok();
}

/* Ring: in step k = 1..C-1 rank c receives from its left neighbour
   l = c-1 (mod C) the shard that started at rank c-k, which l received in
   step k-1 (its own map1 output in step 1). One RESHARED per (rank, step)
   receives that step's shard and forwards it to the right. `gather` holds
   the C*(C-1) RESHARED ids, rank-major; tg the targets, consumer-major. */
static void ring_transfers(df_sched *s, uint32_t first, const uint32_t *m1_instr,
                           const uint32_t *m1_slot, const uint32_t *tg, const uint32_t *gather,
                           uint32_t *epoch) {
  uint32_t cs = s->topo.cluster_size;
  for (uint32_t k = 1; k < cs; k++)
    for (uint32_t c = 0; c < cs; c++) {
      uint32_t l = (c + cs - 1) % cs, origin = (c + cs - k) % cs;
      uint32_t src_instr = k == 1 ? m1_instr[l] : gather[l * (cs - 1) + k - 2];
      uint32_t src_slot = k == 1 ? m1_slot[l] : tg[l * cs + origin];
      df_sched_transfer(s, src_instr, gather[c * (cs - 1) + k - 1], src_slot, tg[c * cs + origin],
                        first + l, first + c, *epoch, *epoch, false);
      (*epoch)++;
    }
}

df_status df_schedule_stage_graph(df_sched *s) {
  const df_program *g = s->prog;
  df_plan *p = s->p;
  const df_stage *re = &g->stages[1];
  transport how = T_HBM_ALL_GATHER;
  DF_TRY(check_graph(s, re, &how));
  map_range m1, m2;
  DF_TRY(find_map_range(s, 0, &m1));
  DF_TRY(find_map_range(s, 2, &m2));
  uint32_t tasks = m1.r->count;
  if (m2.r->count != tasks)
    return df_status_errorf(DF_EINVAL,
                            "Dataflow stage graph stages '%s' and '%s' must have equal task "
                            "counts, got %u and %u",
                            m1.stage, m2.stage, tasks, m2.r->count);
  DF_TRY(df_sched_check_extents(s->o, tasks));
  memcpy(p->range_axis, g->stages[0].range_axis, sizeof p->range_axis);
  DF_TRY(df_plan_set_tasks(p, tasks, m1.r->lengths));
  bool fin = g->stage_count == 4;
  uint32_t cs = s->topo.cluster_size, clusters = df_topology_cluster_count(&s->topo);
  bool ring = how == T_CLUSTER_RING;
  /* ring: C-1 RESHARED per rank with one input each; else one with C */
  uint64_t gathers = ring ? (uint64_t)cs * (cs - 1) : cs;
  uint64_t per_task_instr = (uint64_t)cs * (2 + fin) + gathers,
           per_task_slots = (uint64_t)cs * (cs + 2);
  DF_TRY(df_sched_reserve(s, per_task_instr * tasks, per_task_slots * tasks,
                          2ull * cs * (cs - 1) * tasks, (uint64_t)cs * (2 * cs + fin) * tasks));
  /* buf: map1 instr[cs], map1 slot[cs], reshared targets[cs*cs],
     RESHARED ids[gathers] */
  DF_TRY(df_sched_buf(s, (uint32_t)(2 * cs + cs * cs + gathers)));
  uint32_t *m1_instr = s->buf, *m1_slot = s->buf + cs, *target = s->buf + 2 * cs,
           *gather_ids = s->buf + 2 * cs + cs * cs;
  int32_t t1 = g->stages[0].type, tr = re->type, t2 = g->stages[2].type;
  uint32_t epoch = 1;
  for (uint32_t t = 0; t < tasks; t++) {
    uint32_t first = (t % clusters) * cs, b = 0, e = 0;
    for (uint32_t r = 0; r < cs; r++) {
      DF_TRY(shard(s, &m1, t, r, &b, &e));
      m1_instr[r] = p->instr_count;
      m1_slot[r] = df_sched_slot(s, t, t1, DF_ROLE_STAGE_OUTPUT, m1_instr[r]);
      df_sched_ranged(s, DF_INSTR_MAP, t, first + r, 0, b, e, NULL, 0, m1_slot[r]);
      if (s->overflow)
        return df_status_ok(); /* reported by the caller */
      df_slot *sl = &p->slots[m1_slot[r]];
      sl->stage = 0;
      sl->shared_storage = sl->global_storage = m1_slot[r];
    }
    for (uint32_t c = 0; c < cs; c++) {
      uint32_t *tg = target + c * cs;
      for (uint32_t q = 0; q < cs; q++) {
        bool local = q == c;
        tg[q] = df_sched_slot(s, t, tr, DF_ROLE_RESHARED_FULL, local ? m1_instr[q] : DF_SENTINEL);
        if (s->overflow)
          return df_status_ok();
        df_slot *sl = &p->slots[tg[q]];
        sl->shared_storage = local ? m1_slot[q] : DF_SENTINEL;
        sl->private_shared = !local;
        sl->global_storage = m1_slot[q];
      }
      if (ring) {
        for (uint32_t k = 1; k < cs; k++)
          gather_ids[c * (cs - 1) + k - 1] = df_sched_instr(
              s, DF_INSTR_RESHARED, t, first + c, 1, &tg[(c + cs - k) % cs], 1, DF_SENTINEL);
        continue;
      }
      uint32_t gather = df_sched_instr(s, DF_INSTR_RESHARED, t, first + c, 1, tg, cs, DF_SENTINEL);
      for (uint32_t q = 0; q < cs; q++)
        if (q != c) {
          df_sched_transfer(s, m1_instr[q], gather, m1_slot[q], tg[q], first + q, first + c,
                            epoch, epoch, false);
          epoch++;
        }
    }
    if (ring)
      ring_transfers(s, first, m1_instr, m1_slot, target, gather_ids, &epoch);
    uint32_t shared = p->slot_count;
    for (uint32_t r = 0; r < cs; r++) {
      DF_TRY(shard(s, &m2, t, r, &b, &e));
      uint32_t out = df_sched_slot(s, t, t2, DF_ROLE_STAGE_OUTPUT, p->instr_count);
      if (s->overflow)
        return df_status_ok();
      p->slots[out].stage = 2;
      p->slots[out].shared_storage = shared;
      df_sched_ranged(s, DF_INSTR_MAP, t, first + r, 2, b, e, target + r * cs, cs, out);
      if (fin)
        df_sched_ranged(s, DF_INSTR_FINALIZE, t, first + r, 3, b, e, &out, 1, DF_SENTINEL);
    }
  }
  return df_status_ok();
}
