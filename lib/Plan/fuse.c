/* df_plan_fuse: mark queue neighbours that can run as one dispatched
   instruction (docs/fusion.md). Only `fused` flags change, so the data
   that crosses CTAs, slots, barriers and layout stay what they were. */
#include <string.h>

#include "df/fuse.h"

static bool runs_handler(df_instr_op op) {
  return op == DF_INSTR_ITER || op == DF_INSTR_MAP || op == DF_INSTR_REDUCE ||
         op == DF_INSTR_REDUCE_UPDATE || op == DF_INSTR_FINALIZE;
}

static bool is_reduce(df_instr_op op) {
  return op == DF_INSTR_REDUCE || op == DF_INSTR_REDUCE_UPDATE;
}

static bool is_map(df_instr_op op) { return op == DF_INSTR_ITER || op == DF_INSTR_MAP; }

/* Whether an instruction of this op may be part of a group. */
static bool groupable(const df_fuse_options *o, df_instr_op op) {
  return runs_handler(op) && !(o && o->no_iter && op == DF_INSTR_ITER);
}

void df_plan_unfuse(df_plan *p) {
  for (uint32_t i = 0; i < p->instr_count; i++)
    p->instrs[i].fused = false;
}

uint32_t df_plan_fused_parts(const df_plan *p, uint32_t sm, uint32_t pos) {
  uint32_t off = p->queue_offsets[sm], len = p->queue_lengths[sm], n = 1;
  while (pos + n < len && p->queue_ids[off + pos + n] < p->instr_count &&
         p->instrs[p->queue_ids[off + pos + n]].fused)
    n++;
  return n;
}

/* Per-plan facts the rule reads: readers per slot, slots named by comms,
   receives and other comms dispatched per instruction. */
typedef struct facts {
  uint32_t *readers;   /* per slot: instructions reading it */
  uint8_t *in_comm;    /* per slot: named by a comm (either end) */
  uint32_t *recv_at;   /* per instruction: receives dispatched at it */
  uint32_t *comms_at;  /* per instruction: comms dispatched at it */
} facts;

static df_status gather(const df_plan *p, const df_allocator *a, facts *f) {
  f->readers = df_alloc(a, sizeof(uint32_t) * (p->slot_count + 1));
  f->in_comm = df_alloc(a, p->slot_count + 1);
  f->recv_at = df_alloc(a, sizeof(uint32_t) * (p->instr_count + 1));
  f->comms_at = df_alloc(a, sizeof(uint32_t) * (p->instr_count + 1));
  if (!f->readers || !f->in_comm || !f->recv_at || !f->comms_at)
    return df_status_errorf(DF_ENOMEM, "out of memory fusing %u instructions", p->instr_count);
  memset(f->readers, 0, sizeof(uint32_t) * (p->slot_count + 1));
  memset(f->in_comm, 0, p->slot_count + 1);
  memset(f->recv_at, 0, sizeof(uint32_t) * (p->instr_count + 1));
  memset(f->comms_at, 0, sizeof(uint32_t) * (p->instr_count + 1));
  for (uint32_t i = 0; i < p->instr_count; i++) {
    const df_instr *in = &p->instrs[i];
    const uint32_t *ins = df_plan_instr_inputs(p, in);
    for (uint32_t j = 0; j < in->input_count; j++) {
      if (ins[j] >= p->slot_count)
        return df_status_errorf(DF_EINVAL, "fuse: instruction %u reads slot %u, plan has %u",
                                i, ins[j], p->slot_count);
      /* a slot read twice by one instruction counts once */
      bool seen = false;
      for (uint32_t q = 0; q < j && !seen; q++)
        seen = ins[q] == ins[j];
      f->readers[ins[j]] += !seen;
    }
  }
  for (uint32_t c = 0; c < p->comm_count; c++) {
    const df_comm *m = &p->comms[c];
    if (m->src_slot < p->slot_count)
      f->in_comm[m->src_slot] = 1;
    if (m->dst_slot < p->slot_count)
      f->in_comm[m->dst_slot] = 1;
    uint32_t d = df_comm_dispatch(m);
    if (d >= p->instr_count)
      return df_status_errorf(DF_EINVAL, "fuse: comm %u (%s) is dispatched at instruction %u, "
                                         "plan has %u",
                              c, df_comm_kind_name(m->kind), d, p->instr_count);
    f->comms_at[d]++;
    f->recv_at[d] += df_comm_kind_is_recv(m->kind);
  }
  return df_status_ok();
}

static void release(const df_allocator *a, facts *f) {
  df_free(a, f->readers);
  df_free(a, f->in_comm);
  df_free(a, f->recv_at);
  df_free(a, f->comms_at);
}

static bool reads(const df_plan *p, const df_instr *b, uint32_t slot) {
  const uint32_t *ins = df_plan_instr_inputs(p, b);
  for (uint32_t j = 0; j < b->input_count; j++)
    if (ins[j] == slot)
      return true;
  return false;
}

/* Readers of `slot` among the group `g[0..n)` plus `b`. */
static uint32_t readers_inside(const df_plan *p, const uint32_t *g, uint32_t n,
                               const df_instr *b, uint32_t slot) {
  uint32_t count = reads(p, b, slot);
  for (uint32_t i = 0; i < n; i++)
    count += reads(p, &p->instrs[g[i]], slot);
  return count;
}

static void count_group(const df_plan *p, const uint32_t *g, uint32_t n, df_fuse_report *r) {
  if (n < 2)
    return;
  r->groups++;
  bool rf = false, rr = false, mm = false;
  for (uint32_t i = 1; i < n; i++) {
    df_instr_op a = p->instrs[g[i - 1]].op, b = p->instrs[g[i]].op;
    rf |= is_reduce(a) && b == DF_INSTR_FINALIZE;
    rr |= is_reduce(a) && is_reduce(b);
    mm |= is_map(a) && is_map(b);
  }
  r->reduce_finalize += rf;
  r->reduce_chains += rr;
  r->map_chains += mm;
}

df_status df_plan_fuse(df_plan *p, const df_fuse_options *o, df_fuse_report *report) {
  df_fuse_report r;
  memset(&r, 0, sizeof r);
  if (!p)
    return df_status_errorf(DF_EINVAL, "df_plan_fuse expects a plan, got NULL");
  uint32_t max = o && o->max_parts ? o->max_parts : DF_FUSE_MAX_PARTS;
  if (max < 2 || max > DF_FUSE_MAX_PARTS)
    return df_status_errorf(DF_EINVAL, "fuse: max_parts must be 2..%u, got %u",
                            DF_FUSE_MAX_PARTS, max);
  for (uint32_t s = 0; s < p->topology.sm_count; s++)
    DF_TRY(df_plan_check_queue(p, s));
  df_plan_unfuse(p);
  facts f;
  memset(&f, 0, sizeof f);
  df_status st = gather(p, &p->alloc, &f);
  uint32_t g[DF_FUSE_MAX_PARTS], n = 0;
  for (uint32_t s = 0; s < p->topology.sm_count && st.code == DF_OK; s++) {
    const uint32_t *q = p->queue_ids + p->queue_offsets[s];
    n = 0;
    for (uint32_t pos = 0; pos < p->queue_lengths[s] && st.code == DF_OK; pos++) {
      if (q[pos] >= p->instr_count) {
        st = df_status_errorf(DF_EINVAL, "fuse: queue of SM %u names instruction %u, plan has "
                                         "%u", s, q[pos], p->instr_count);
        break;
      }
      df_instr *b = &p->instrs[q[pos]];
      r.dispatches_before += b->op != DF_INSTR_EXIT;
      bool join = false;
      if (n > 0 && n < max && groupable(o, b->op)) {
        const df_instr *a = &p->instrs[g[n - 1]];
        bool edge = false;
        for (uint32_t i = 0; i < n && !edge; i++)
          edge = p->instrs[g[i]].output_slot != DF_SENTINEL &&
                 reads(p, b, p->instrs[g[i]].output_slot);
        uint32_t out = a->output_slot;
        if (edge && f.recv_at[b->id]) {
          r.refused_transfer++;
        } else if (edge) {
          bool internal = f.comms_at[a->id] == f.recv_at[a->id] &&
                          (out == DF_SENTINEL ||
                           (out < p->slot_count && !f.in_comm[out] &&
                            f.readers[out] == readers_inside(p, g, n, b, out)));
          if (internal)
            join = true;
          else
            r.refused_shared++;
        }
      }
      if (join) {
        b->fused = true;
        g[n++] = b->id;
      } else {
        count_group(p, g, n, &r);
        n = 0;
        if (groupable(o, b->op))
          g[n++] = b->id;
      }
      r.dispatches_after += b->op != DF_INSTR_EXIT && !b->fused;
    }
    count_group(p, g, n, &r);
  }
  release(&p->alloc, &f);
  if (st.code != DF_OK)
    df_plan_unfuse(p);
  if (report)
    *report = r;
  return st;
}
