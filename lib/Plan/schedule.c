/* df_schedule: option checks, plan set-up, the shared emission helpers and
   the all_at_once strategy (REFERENCE 2.2-2.4). Streaming strategies live
   in schedule_streaming.c, the reshared stage graph in
   schedule_stage_graph.c. */
#include <string.h>

#include "df/impl.h"
#include "schedule_internal.h"
#include "sort_idx.h"
#include "vec.h"

df_schedule_options df_schedule_options_default(void) {
  df_schedule_options o;
  memset(&o, 0, sizeof o);
  o.topology.cluster_size = 1;
  o.policy = DF_POLICY_ROUND_ROBIN;
  o.strategy = DF_REDUCE_ALL_AT_ONCE;
  o.include_exit = true;
  o.split = df_split_search_default();
  return o;
}

/* ---- emission helpers ---------------------------------------------------- */

df_status df_sched_buf(df_sched *s, uint32_t n) {
  return df_vec_reserve(&s->p->alloc, (void **)&s->buf, &s->buf_cap, n, sizeof *s->buf);
}

static df_status reserve_more(df_plan *p, void **data, uint32_t *cap, uint32_t count,
                              uint64_t more, size_t elem, const char *what) {
  if (count + more > UINT32_MAX)
    return df_status_errorf(DF_EINVAL, "Dataflow schedule needs more than 2^32 %s", what);
  return df_vec_reserve(&p->alloc, data, cap, (uint32_t)(count + more), elem);
}

df_status df_sched_reserve(df_sched *s, uint64_t instrs, uint64_t slots, uint64_t comms,
                           uint64_t inputs) {
  df_plan *p = s->p;
  DF_TRY(reserve_more(p, (void **)&p->instrs, &p->instr_cap, p->instr_count, instrs,
                      sizeof *p->instrs, "instructions"));
  DF_TRY(reserve_more(p, (void **)&p->slots, &p->slot_cap, p->slot_count, slots,
                      sizeof *p->slots, "slots"));
  DF_TRY(reserve_more(p, (void **)&p->comms, &p->comm_cap, p->comm_count, comms,
                      sizeof *p->comms, "comms"));
  return reserve_more(p, (void **)&p->inputs, &p->input_cap, p->input_count, inputs,
                      sizeof *p->inputs, "input slots");
}

uint32_t df_sched_slot(df_sched *s, uint32_t task, int32_t type, df_slot_role role,
                       uint32_t producer) {
  df_plan *p = s->p;
  if (p->slot_count == p->slot_cap) {
    s->overflow = true;
    return DF_SENTINEL;
  }
  uint32_t id = p->slot_count++;
  p->slots[id] = (df_slot){.id = id,
                           .task = task,
                           .type = type,
                           .role = role,
                           .stage = -1,
                           .producer = producer,
                           .shared_storage = DF_SENTINEL,
                           .global_storage = DF_SENTINEL,
                           .owner = DF_SENTINEL};
  return id;
}

/* Append an instruction; the caller fills the rest of the record. */
static df_instr *push_instr(df_sched *s, df_instr_op op, uint32_t task, uint32_t sm,
                            int32_t stage, const uint32_t *inputs, uint32_t n,
                            uint32_t output) {
  df_plan *p = s->p;
  if (p->instr_count == p->instr_cap || p->input_cap - p->input_count < n) {
    s->overflow = true;
    return NULL;
  }
  df_instr *in = &p->instrs[p->instr_count];
  *in = (df_instr){.id = p->instr_count,
                   .op = op,
                   .task = task,
                   .sm = sm,
                   .input_offset = p->input_count,
                   .input_count = n,
                   .output_slot = output,
                   .stage = stage};
  for (uint32_t i = 0; i < n; i++)
    p->inputs[p->input_count + i] = inputs[i];
  p->input_count += n;
  p->instr_count++;
  return in;
}

uint32_t df_sched_instr(df_sched *s, df_instr_op op, uint32_t task, uint32_t sm, int32_t stage,
                        const uint32_t *inputs, uint32_t n, uint32_t output) {
  df_instr *in = push_instr(s, op, task, sm, stage, inputs, n, output);
  return in ? in->id : DF_SENTINEL;
}

uint32_t df_sched_ranged(df_sched *s, df_instr_op op, uint32_t task, uint32_t sm,
                         int32_t stage, uint32_t b, uint32_t e, const uint32_t *inputs,
                         uint32_t n, uint32_t output) {
  df_instr *in = push_instr(s, op, task, sm, stage, inputs, n, output);
  if (!in)
    return DF_SENTINEL;
  in->has_range = true;
  in->range_begin = b;
  in->range_end = e;
  return in->id;
}

uint32_t df_sched_iter(df_sched *s, uint32_t task, uint32_t sm, uint32_t b, uint32_t e,
                       uint32_t output) {
  uint32_t off = s->range->offsets ? s->range->offsets[task] : 0; /* checked: no overflow */
  df_instr *in = push_instr(s, DF_INSTR_ITER, task, sm, s->partial, NULL, 0, output);
  if (!in)
    return DF_SENTINEL;
  in->has_range = true;
  in->range_begin = b + off;
  in->range_end = e + off;
  in->has_identity = true;
  in->identity = s->iter_identity;
  in->has_variant = true;
  df_variant *v = &in->variant;
  v->base = s->iter_identity;
  v->schema_version = DF_VARIANT_SCHEMA_VERSION;
  v->has_iter = true;
  df_iter_select(e - b, &s->o->buckets, s->bucket_size, &s->o->exact_lengths, &v->iter_mode,
                 &v->iter_value);
  return in->id;
}

void df_sched_transfer(df_sched *s, uint32_t src_instr, uint32_t dst_instr, uint32_t src_slot,
                       uint32_t dst_slot, uint32_t producer_sm, uint32_t consumer_sm,
                       uint32_t cluster_epoch, uint32_t hbm_epoch, bool pull) {
  df_plan *p = s->p;
  if (p->comm_cap - p->comm_count < 2) {
    s->overflow = true;
    return;
  }
  bool cluster = !pull && !s->o->force_hbm_comms && !s->o->pool &&
                 df_topology_same_cluster(&s->topo, producer_sm, consumer_sm);
  df_comm *c = &p->comms[p->comm_count];
  c[0] = (df_comm){.kind = cluster ? DF_COMM_CLUSTER_SEND : DF_COMM_HBM_SEND,
                   .src_instr = src_instr,
                   .dst_instr = dst_instr,
                   .src_slot = src_slot,
                   .dst_slot = dst_slot,
                   .producer_sm = producer_sm,
                   .consumer_sm = consumer_sm,
                   .dispatch_instr = DF_SENTINEL,
                   .peer_cta_rank = cluster ? df_topology_cluster_rank(&s->topo, consumer_sm)
                                            : DF_SENTINEL,
                   .flag_epoch = cluster ? cluster_epoch : hbm_epoch,
                   .segment_count = 1,
                   .gate_id = DF_SENTINEL};
  c[1] = c[0];
  c[1].kind = cluster ? DF_COMM_CLUSTER_RECV : DF_COMM_HBM_RECV;
  if (cluster)
    c[1].peer_cta_rank = df_topology_cluster_rank(&s->topo, producer_sm);
  p->comm_count += 2;
}

/* ---- all_at_once (REFERENCE 2.4) ------------------------------------------ */

/* ---- balance_iters: SMs by load (a binary min-heap of (units, sm)) ---- */

typedef struct sm_load {
  uint64_t units;
  uint32_t sm;
} sm_load;

static bool sm_load_less(sm_load a, sm_load b) {
  return a.units != b.units ? a.units < b.units : a.sm < b.sm;
}

/* Restore the heap below i after h[i] grew. */
static void sm_heap_down(sm_load *h, uint32_t n, uint32_t i) {
  for (;;) {
    uint32_t l = 2 * i + 1, m = i;
    if (l < n && sm_load_less(h[l], h[m]))
      m = l;
    if (l + 1 < n && sm_load_less(h[l + 1], h[m]))
      m = l + 1;
    if (m == i)
      return;
    sm_load t = h[i];
    h[i] = h[m];
    h[m] = t;
    i = m;
  }
}

static bool longer_task(const void *ctx, uint32_t a, uint32_t b) {
  const uint32_t *len = ctx;
  return len[a] != len[b] ? len[a] > len[b] : a < b;
}

/* Task emission order: ids, or longest first with balance_iters or
   even_split. */
static df_status task_order(df_sched *s, uint32_t **out) {
  const df_range_lengths *r = s->range;
  uint32_t n = r->count ? r->count : 1;
  uint32_t *v = df_alloc(&s->p->alloc, sizeof(uint32_t) * 2 * n);
  if (!v)
    return df_status_errorf(DF_ENOMEM, "out of memory ordering %u tasks", r->count);
  for (uint32_t t = 0; t < r->count; t++)
    v[t] = t;
  if (s->o->balance_iters || s->o->even_split)
    df_sort_idx(v, r->count, v + n, longer_task, r->lengths);
  *out = v;
  return df_status_ok();
}

/* Whether instruction id stays in the first pass of defer_reduces: an
   ITER, or an instruction whose every input is produced earlier on its
   own SM by a first-pass instruction. Such an instruction receives
   nothing, so it never waits, and running it right after its producers
   frees its inputs' slots early and leaves it adjacent to them for
   df-fuse (a one-block task's ITER -> REDUCE -> FINALIZE). */
static bool first_pass(const df_plan *p, const bool *first, uint32_t id) {
  const df_instr *in = &p->instrs[id];
  if (in->op == DF_INSTR_ITER)
    return true;
  if (!in->input_count)
    return false;
  for (uint32_t i = 0; i < in->input_count; i++) {
    uint32_t prod = p->slots[p->inputs[in->input_offset + i]].producer;
    if (prod >= id || !first[prod] || p->instrs[prod].sm != in->sm)
      return false;
  }
  return true;
}

/* Queue order with every ITER first (defer_reduces): ids 0..n in two
   passes, the ITERs (and what reads only them on their SM, first_pass)
   then the rest. */
static df_status defer_reduces(df_sched *s) {
  const df_plan *p = s->p;
  const uint32_t n = p->instr_count ? p->instr_count : 1;
  s->order = df_alloc(&s->p->alloc, sizeof(uint32_t) * n);
  bool *first = df_alloc(&s->p->alloc, sizeof(bool) * n);
  if (!s->order || !first) {
    df_free(&s->p->alloc, first);
    return df_status_errorf(DF_ENOMEM, "out of memory ordering %u instructions", p->instr_count);
  }
  for (uint32_t id = 0; id < p->instr_count; id++)
    first[id] = first_pass(p, first, id);
  s->order_count = 0;
  for (int pass = 0; pass < 2; pass++)
    for (uint32_t id = 0; id < p->instr_count; id++)
      if (first[id] == (pass == 0))
        s->order[s->order_count++] = id;
  df_free(&s->p->alloc, first);
  return df_status_ok();
}

/* reduce_spread: the partials' SMs of one task (in range order), the
   partials under each current input of its tree, and the SMs that already
   run one of its reduces. */
typedef struct tree_spread {
  uint32_t *leaf;
  uint32_t *lo, *hi; /* input i covers leaf[lo[i]..hi[i]) */
  uint32_t *hosted;
  uint32_t hosted_count;
} tree_spread;

/* The SM of a reduce over leaves [lo, hi): the first of their SMs that
   runs no other reduce of the task, else `fallback`; recorded as hosting
   one. */
static uint32_t spread_sm(tree_spread *t, uint32_t lo, uint32_t hi, uint32_t fallback) {
  uint32_t sm = fallback;
  for (uint32_t i = lo; i < hi; i++) {
    bool used = false;
    for (uint32_t j = 0; j < t->hosted_count && !used; j++)
      used = t->hosted[j] == t->leaf[i];
    if (!used) {
      sm = t->leaf[i];
      break;
    }
  }
  t->hosted[t->hosted_count++] = sm;
  return sm;
}

/* reduce_fan_in: while a task has more than fan_in inputs, consecutive
   runs of them (ceil(n / fan_in) runs, sizes within one) are combined by a
   REDUCE on the SM of the run's first input (reduce_spread: on the first
   SM under the run that runs no other reduce of the task); a run of one
   passes through. Rewrites slots/instrs/sms (and the spread's spans) in
   place and returns the final input count. */
static uint32_t reduce_levels(df_sched *s, uint32_t t, int32_t rtype, uint32_t *slots,
                              uint32_t *instrs, uint32_t *sms, uint32_t n, tree_spread *spread) {
  uint32_t fan_in = s->o->reduce_fan_in;
  while (n > fan_in) {
    uint32_t groups = (n + fan_in - 1) / fan_in;
    for (uint32_t g = 0; g < groups; g++) {
      uint32_t b = (uint32_t)((uint64_t)g * n / groups);
      uint32_t e = (uint32_t)((uint64_t)(g + 1) * n / groups);
      uint32_t sm = sms[b], slot = slots[b], instr = instrs[b];
      if (e - b > 1) {
        if (spread)
          sm = spread_sm(spread, spread->lo[b], spread->hi[e - 1], sm);
        slot = df_sched_slot(s, t, rtype, DF_ROLE_REDUCED, s->p->instr_count);
        instr = df_sched_instr(s, DF_INSTR_REDUCE, t, sm, s->reduce, slots + b, e - b, slot);
        for (uint32_t i = b; i < e; i++)
          if (sms[i] != sm || s->o->pool) /* a pooled instruction runs anywhere */
            df_sched_transfer(s, instrs[i], instr, slots[i], slots[i], sms[i], sm, 1, t + 1,
                              false);
      }
      slots[g] = slot, instrs[g] = instr, sms[g] = sm; /* g <= b: read already */
      if (spread)
        spread->lo[g] = spread->lo[b], spread->hi[g] = spread->hi[e - 1];
    }
    n = groups;
  }
  return n;
}

/* Pieces of each task: its blocks, or the even split's pieces. */
typedef struct task_pieces {
  df_sched_piece *pieces; /* even_split only */
  uint32_t *first;        /* by emission position */
} task_pieces;

static uint32_t piece_count(const df_sched *s, const task_pieces *tp, uint32_t k, uint32_t t) {
  return tp->pieces ? tp->first[k + 1] - tp->first[k] : df_sched_blocks(s, s->range->lengths[t]);
}

df_status df_schedule_all_at_once(df_sched *s) {
  const df_range_lengths *r = s->range;
  bool rr = s->o->policy == DF_POLICY_ROUND_ROBIN;
  bool reduce = !s->o->partial_only && s->reduce >= 0;
  bool fin = reduce && s->finalize >= 0;
  uint32_t *order = NULL;
  task_pieces tp = {NULL, NULL};
  DF_TRY(task_order(s, &order));
  if (rr && s->o->even_split) {
    df_status st = df_sched_even_split(s, order, &tp.pieces, &tp.first);
    if (df_failed(&st)) {
      df_free(&s->p->alloc, order);
      return st;
    }
  }
  uint64_t blocks = 0;
  uint32_t max_blocks = 0;
  for (uint32_t k = 0; k < r->count; k++) {
    uint32_t nb = piece_count(s, &tp, k, order[k]);
    blocks += nb;
    max_blocks = nb > max_blocks ? nb : max_blocks;
  }
  uint64_t tasks = r->count;
  /* reduce_fan_in: fewer inner reduces than inputs, each input moved once */
  uint64_t inner = reduce && s->o->reduce_fan_in ? blocks : 0;
  df_status st = df_sched_reserve(s, blocks + inner + (reduce ? tasks * (1 + fin) : 0),
                                  blocks + inner + (reduce ? tasks : 0),
                                  reduce ? 2 * (blocks + inner) : 0,
                                  reduce ? blocks + inner + tasks * fin : 0);
  const bool spread_on = reduce && s->o->reduce_spread;
  if (!df_failed(&st))
    st = df_sched_buf(s, (spread_on ? 7 : 3) * max_blocks);
  int32_t ptype = s->prog->stages[s->partial].type;
  int32_t rtype = reduce ? s->prog->stages[s->reduce].type : -1;
  uint32_t cluster_count = df_topology_cluster_count(&s->topo);
  uint32_t next_iter_sm = 0; /* not reset between tasks */
  /* reduce_sms: ITERs on the first iter_sms SMs, the roots on the rest */
  const uint32_t iter_sms = s->topo.sm_count - s->o->reduce_sms;
  bool balance = rr && s->o->balance_iters;
  sm_load *heap = NULL;
  if (balance && !df_failed(&st)) {
    heap = df_alloc(&s->p->alloc, sizeof *heap * iter_sms);
    if (!heap)
      st = df_status_errorf(DF_ENOMEM, "out of memory balancing %u SMs", iter_sms);
    for (uint32_t sm = 0; heap && sm < iter_sms; sm++)
      heap[sm] = (sm_load){0, sm}; /* sorted, hence a heap */
  }
  for (uint32_t k = 0; k < r->count && !df_failed(&st); k++) {
    uint32_t t = order[k];
    uint32_t len = r->lengths[t], nb = piece_count(s, &tp, k, t);
    uint32_t *slots = s->buf, *iters = s->buf + nb, *sms = s->buf + 2 * nb;
    uint32_t first, size;
    df_sched_cluster_sms(s, t % cluster_count, &first, &size);
    for (uint32_t i = 0; i < nb; i++) {
      uint32_t sm;
      uint32_t b = i * s->block, e = len - b < s->block ? len : b + s->block;
      if (tp.pieces) {
        const df_sched_piece *pc = &tp.pieces[tp.first[k] + i];
        b = pc->b, e = pc->e, sm = pc->sm;
      } else if (balance) {
        sm = heap[0].sm;
        heap[0].units += e - b;
        sm_heap_down(heap, iter_sms, 0);
      } else if (rr) {
        sm = next_iter_sm;
        next_iter_sm = next_iter_sm + 1 == iter_sms ? 0 : next_iter_sm + 1;
      } else {
        sm = first + i % size;
      }
      slots[i] = df_sched_slot(s, t, ptype, DF_ROLE_PARTIAL, s->p->instr_count);
      iters[i] = df_sched_iter(s, t, sm, b, e, slots[i]);
      sms[i] = sm;
    }
    if (!reduce)
      continue;
    const uint32_t leaves = nb;
    tree_spread spread = {0};
    if (spread_on) {
      spread.leaf = s->buf + 3 * nb, spread.lo = s->buf + 4 * nb, spread.hi = s->buf + 5 * nb;
      spread.hosted = s->buf + 6 * nb;
      for (uint32_t i = 0; i < nb; i++)
        spread.leaf[i] = sms[i], spread.lo[i] = i, spread.hi[i] = i + 1;
    }
    if (s->o->reduce_fan_in)
      nb = reduce_levels(s, t, rtype, slots, iters, sms, nb, spread_on ? &spread : NULL);
    if (nb == 1 && s->o->skip_unary_reduce) { /* checked: fin; the program model gives
                                                  the reducer the partial's type */
      df_sched_instr(s, DF_INSTR_FINALIZE, t, sms[0], s->finalize, slots, 1, DF_SENTINEL);
      continue;
    }
    uint32_t red_sm = s->o->reduce_sms ? iter_sms + k % s->o->reduce_sms
                      : spread_on     ? spread_sm(&spread, 0, leaves, sms[0])
                                      : sms[0];
    uint32_t red_slot = df_sched_slot(s, t, rtype, DF_ROLE_REDUCED, s->p->instr_count);
    uint32_t red = df_sched_instr(s, DF_INSTR_REDUCE, t, red_sm, s->reduce, slots, nb, red_slot);
    for (uint32_t i = 0; i < nb; i++)
      if (sms[i] != red_sm || s->o->pool) /* a pooled instruction runs anywhere */
        df_sched_transfer(s, iters[i], red, slots[i], slots[i], sms[i], red_sm, 1, t + 1, false);
    if (fin)
      df_sched_instr(s, DF_INSTR_FINALIZE, t, red_sm, s->finalize, &red_slot, 1, DF_SENTINEL);
  }
  df_free(&s->p->alloc, heap);
  df_free(&s->p->alloc, order);
  df_free(&s->p->alloc, tp.pieces);
  df_free(&s->p->alloc, tp.first);
  DF_TRY(st);
  if (s->o->defer_reduces && reduce)
    return defer_reduces(s);
  return df_status_ok();
}

/* ---- option checks ---------------------------------------------------------- */

static df_status check_range(const df_range_lengths *r, uint32_t index) {
  if (!r->axis)
    return df_status_errorf(DF_EINVAL, "Dataflow range_lengths entry %u has no axis name",
                            index);
  if (r->count == 0 || !r->lengths)
    return df_status_errorf(DF_EINVAL,
                            "Dataflow range_lengths['%s'] must contain at least one length",
                            r->axis);
  for (uint32_t t = 0; t < r->count; t++)
    if (r->lengths[t] == 0)
      return df_status_errorf(DF_EINVAL,
                              "Dataflow range_lengths['%s'] must contain positive integers, "
                              "got 0 at index %u",
                              r->axis, t);
  for (uint32_t t = 0; r->offsets && t < r->count; t++)
    if ((uint64_t)r->lengths[t] + r->offsets[t] > UINT32_MAX)
      return df_status_errorf(DF_EINVAL,
                              "Dataflow range_offsets['%s'][%u]=%u moves the range end %u past "
                              "uint32",
                              r->axis, t, r->offsets[t], r->lengths[t]);
  return df_status_ok();
}

static df_status check_sorted_list(const uint32_t *v, uint32_t n, const char *what) {
  if (n > 64)
    return df_status_errorf(DF_EINVAL, "Dataflow %s has %u entries, at most 64", what, n);
  for (uint32_t i = 0; i < n; i++)
    if (v[i] == 0 || (i && v[i] <= v[i - 1]))
      return df_status_errorf(DF_EINVAL,
                              "Dataflow %s must be sorted unique positive integers; entry %u "
                              "is %u",
                              what, i, v[i]);
  return df_status_ok();
}

static df_status check_options(const df_schedule_options *o) {
  DF_TRY(df_topology_check(&o->topology));
  if (o->block_size == 0 && !o->auto_split)
    return df_status_errorf(DF_EINVAL, "Dataflow block_size must be positive, got 0");
  if (o->range_count == 0)
    return df_status_errorf(DF_EINVAL, "Dataflow range_lengths must not be empty");
  if (o->range_count > DF_MAX_AXES)
    return df_status_errorf(DF_EINVAL, "Dataflow range_lengths has %u axes, at most %u",
                            o->range_count, DF_MAX_AXES);
  for (uint32_t i = 0; i < o->range_count; i++) {
    DF_TRY(check_range(&o->ranges[i], i));
    for (uint32_t j = 0; j < i; j++)
      if (strcmp(o->ranges[i].axis, o->ranges[j].axis) == 0)
        return df_status_errorf(DF_EINVAL, "Dataflow range_lengths names axis '%s' twice",
                                o->ranges[i].axis);
  }
  if (o->extent_count > DF_MAX_AXES)
    return df_status_errorf(DF_EINVAL, "Dataflow task_extents has %u entries, at most %u",
                            o->extent_count, DF_MAX_AXES);
  for (uint32_t i = 0; i < o->extent_count; i++)
    if (o->extents[i] == 0)
      return df_status_errorf(DF_EINVAL,
                              "Dataflow task_extents must contain positive integers, got 0 "
                              "at index %u",
                              i);
  if (o->transfer_tile_bytes % DF_SLOT_ALIGN)
    return df_status_errorf(DF_EINVAL,
                            "Dataflow transfer_tile_bytes %u must be a multiple of %u (the "
                            "bulk-copy granule)",
                            o->transfer_tile_bytes, DF_SLOT_ALIGN);
  if (o->reduce_fan_in == 1)
    return df_status_errorf(DF_EINVAL, "Dataflow reduce_fan_in must be 0 (no limit) or at least "
                                       "2, got 1");
  if (o->even_split && o->balance_iters)
    return df_status_errorf(DF_EINVAL, "Dataflow schedule options even_split and balance_iters "
                                       "exclude each other (both place the ITERs)");
  if (!o->even_split &&
      (o->even_split_granularity || o->even_split_chunks || o->even_split_task_cost))
    return df_status_errorf(DF_EINVAL,
                            "Dataflow schedule options even_split_granularity (%u), "
                            "even_split_chunks (%u) and even_split_task_cost (%u) need even_split",
                            o->even_split_granularity, o->even_split_chunks,
                            o->even_split_task_cost);
  if (!o->even_split && o->even_split_taper)
    return df_status_errorf(DF_EINVAL, "Dataflow schedule option even_split_taper (%u) needs "
                                       "even_split",
                            o->even_split_taper);
  if (o->even_split_taper > 99)
    return df_status_errorf(DF_EINVAL,
                            "Dataflow even_split_taper is the percent of the rest each batch "
                            "takes, 1 to 99 (0: off), got %u",
                            o->even_split_taper);
  if (!o->even_split_taper && o->even_split_taper_min)
    return df_status_errorf(DF_EINVAL, "Dataflow schedule option even_split_taper_min (%u) "
                                       "needs even_split_taper",
                            o->even_split_taper_min);
  if (o->even_split_chunks > DF_EVEN_SPLIT_MAX_CHUNKS)
    return df_status_errorf(DF_EINVAL, "Dataflow even_split_chunks %u exceeds %u",
                            o->even_split_chunks, DF_EVEN_SPLIT_MAX_CHUNKS);
  if (o->buckets.enabled)
    DF_TRY(check_sorted_list(o->buckets.values, o->buckets.count, "iter_range_buckets"));
  return check_sorted_list(o->exact_lengths.values, o->exact_lengths.count,
                           "iter_range_exact_lengths");
}

df_status df_sched_check_extents(const df_schedule_options *o, uint32_t task_count) {
  if (o->extent_count == 0)
    return df_status_ok();
  uint64_t product = 1;
  for (uint32_t i = 0; i < o->extent_count; i++) {
    product *= o->extents[i];
    if (product > UINT32_MAX)
      break;
  }
  if (product != task_count)
    return df_status_errorf(DF_EINVAL,
                            "Dataflow task_extents product %llu must equal the task count %u",
                            (unsigned long long)product, task_count);
  return df_status_ok();
}

const df_range_lengths *df_sched_find_range(const df_schedule_options *o, const char *axis) {
  for (uint32_t i = 0; i < o->range_count; i++)
    if (strcmp(o->ranges[i].axis, axis) == 0)
      return &o->ranges[i];
  return NULL;
}

/* Options that place round_robin all_at_once blocks themselves: not with
   an automatic split, nor with even_split unless `even_ok` (the pool only
   needs pieces, whoever placed them). */
static df_status fixed_round_robin(const df_schedule_options *o, const char *option,
                                   bool even_ok) {
  if (o->policy == DF_POLICY_ROUND_ROBIN && o->strategy == DF_REDUCE_ALL_AT_ONCE &&
      (even_ok || !o->even_split) && !o->auto_split)
    return df_status_ok();
  return df_status_errorf(DF_EINVAL,
                          "Dataflow schedule option %s needs scheduler policy 'round_robin' "
                          "and reduce strategy 'all_at_once' without %san automatic split, "
                          "got '%s' and '%s'%s",
                          option, even_ok ? "" : "even_split or ", df_policy_name(o->policy),
                          df_reduce_strategy_name(o->strategy),
                          o->even_split && !even_ok ? " with even_split"
                          : o->auto_split           ? " with block-size=auto"
                                                    : "");
}

static df_status check_policy(const df_sched *s) {
  const df_schedule_options *o = s->o;
  if (o->policy != DF_POLICY_ROUND_ROBIN && o->policy != DF_POLICY_CLUSTER_LOCAL)
    return df_status_errorf(DF_EINVAL,
                            "Dataflow scheduler_policy must be one of ('round_robin', "
                            "'cluster_local'), got '%s'",
                            df_policy_name(o->policy));
  if ((unsigned)o->strategy > DF_REDUCE_STREAMING_TREE)
    return df_status_errorf(DF_EINVAL,
                            "Dataflow reduce_strategy must be one of ('all_at_once', "
                            "'streaming', 'streaming_tree'), got '%s'",
                            df_reduce_strategy_name(o->strategy));
  if ((o->defer_reduces || o->balance_iters) && o->strategy != DF_REDUCE_ALL_AT_ONCE)
    return df_status_errorf(DF_EINVAL,
                            "Dataflow schedule options defer_reduces and balance_iters need reduce "
                            "strategy 'all_at_once', got '%s'",
                            df_reduce_strategy_name(o->strategy));
  if (o->reduce_spread && !o->reduce_fan_in)
    return df_status_errorf(DF_EINVAL, "Dataflow schedule option reduce_spread needs "
                                       "reduce_fan_in (reduce trees)");
  if (o->skip_unary_reduce && !o->partial_only) {
    if (o->strategy != DF_REDUCE_ALL_AT_ONCE)
      return df_status_errorf(DF_EINVAL,
                              "Dataflow schedule option skip_unary_reduce needs reduce strategy "
                              "'all_at_once', got '%s'",
                              df_reduce_strategy_name(o->strategy));
    if (s->reduce < 0 || s->finalize < 0)
      return df_status_errorf(DF_EINVAL,
                              "Dataflow schedule option skip_unary_reduce needs a reduce and a "
                              "finalize stage; program '%s' lacks a %s stage",
                              s->prog->name, s->reduce < 0 ? "reduce" : "finalize");
  }
  if (o->reduce_fan_in && o->strategy != DF_REDUCE_ALL_AT_ONCE)
    return df_status_errorf(DF_EINVAL,
                            "Dataflow schedule option reduce_fan_in needs reduce strategy "
                            "'all_at_once', got '%s'",
                            df_reduce_strategy_name(o->strategy));
  if (o->balance_iters && o->policy != DF_POLICY_ROUND_ROBIN)
    return df_status_errorf(DF_EINVAL,
                            "Dataflow schedule option balance_iters needs scheduler policy "
                            "'round_robin', got '%s'",
                            df_policy_name(o->policy));
  if (o->even_split && (o->policy != DF_POLICY_ROUND_ROBIN ||
                        o->strategy != DF_REDUCE_ALL_AT_ONCE))
    return df_status_errorf(DF_EINVAL,
                            "Dataflow schedule option even_split needs scheduler policy "
                            "'round_robin' and reduce strategy 'all_at_once', got '%s' and '%s'",
                            df_policy_name(o->policy), df_reduce_strategy_name(o->strategy));
  if (o->policy == DF_POLICY_ROUND_ROBIN && o->strategy != DF_REDUCE_ALL_AT_ONCE)
    return df_status_errorf(DF_EINVAL,
                            "Dataflow scheduler policy 'round_robin' supports reduce strategies "
                            "('all_at_once',), got '%s'",
                            df_reduce_strategy_name(o->strategy));
  if (o->strategy == DF_REDUCE_STREAMING_TREE) {
    if (s->reduce < 0)
      return df_status_errorf(DF_EINVAL,
                              "Dataflow reduce_strategy 'streaming_tree' needs a reduce stage; "
                              "program '%s' has none",
                              s->prog->name);
    const df_operator *op = &s->prog->ops[s->prog->stages[s->reduce].op];
    if (!df_operator_is_associative(op))
      return df_status_errorf(DF_EINVAL,
                              "Dataflow reduce_strategy 'streaming_tree' requires an "
                              "associative reducer; '%s' takes a collection, not two "
                              "intermediates",
                              op->name);
  }
  if (o->pool)
    DF_TRY(fixed_round_robin(o, "pool", true));
  if (o->reduce_sms) {
    DF_TRY(fixed_round_robin(o, "reduce_sms", false));
    if (o->reduce_sms >= s->topo.sm_count)
      return df_status_errorf(DF_EINVAL,
                              "Dataflow schedule option reduce_sms %u must leave SMs for the "
                              "partials: the topology has %u",
                              o->reduce_sms, s->topo.sm_count);
    if (s->reduce < 0 || o->partial_only)
      return df_status_errorf(DF_EINVAL,
                              "Dataflow schedule option reduce_sms needs a reduce stage to place; "
                              "program '%s' has %s",
                              s->prog->name, o->partial_only ? "partial_only set" : "none");
  }
  return df_status_ok();
}

/* Stage indices, the scheduled range and the partial's identity of a
   canonical pipeline. */
static df_status resolve_pipeline(df_sched *s) {
  const df_program *g = s->prog;
  s->partial = df_program_partial_stage(g);
  s->reduce = s->finalize = -1;
  for (uint32_t i = 0; i < g->stage_count; i++) {
    if (g->stages[i].kind == DF_STAGE_REDUCE)
      s->reduce = (int32_t)i;
    if (g->stages[i].kind == DF_STAGE_FINALIZE)
      s->finalize = (int32_t)i;
  }
  if (s->partial < 0)
    return df_status_errorf(DF_EINVAL, "Dataflow program '%s' has no partial stage", g->name);
  if (s->finalize >= 0 && s->reduce < 0 && !s->o->partial_only)
    return df_status_errorf(DF_EUNSUPPORTED,
                            "Dataflow program '%s': finalize without a reduce stage is not "
                            "supported by the scheduler",
                            g->name);
  const char *axis = g->stages[s->partial].range_axis;
  if (axis[0]) {
    s->range = df_sched_find_range(s->o, axis);
    if (!s->range)
      return df_status_errorf(DF_EINVAL, "Dataflow range_lengths must include the range axis "
                                         "'%s'",
                              axis);
  } else {
    if (s->o->range_count != 1)
      return df_status_errorf(DF_EINVAL,
                              "Dataflow range_lengths must have exactly one entry when the "
                              "partial stage has no range_axis, got %u",
                              s->o->range_count);
    s->range = &s->o->ranges[0];
  }
  s->iter_identity.operator_id = (uint32_t)df_program_operator_id(g, (uint32_t)s->partial);
  s->iter_identity.kind = df_program_identity_kind(g, (uint32_t)s->partial);
  return df_status_ok();
}

/* df_schedule_options.auto_split: choose block size and placement, then
   schedule with them (s->o points at the chosen options). */
static df_status apply_auto_split(df_sched *s) {
  const df_schedule_options *o = s->o;
  if (o->policy != DF_POLICY_ROUND_ROBIN || o->strategy != DF_REDUCE_ALL_AT_ONCE)
    return df_status_errorf(DF_EINVAL,
                            "Dataflow automatic split (block-size=auto) needs scheduler policy "
                            "'round_robin' and reduce strategy 'all_at_once', got '%s' and '%s'",
                            df_policy_name(o->policy), df_reduce_strategy_name(o->strategy));
  if (o->even_split || o->balance_iters || o->defer_reduces)
    return df_status_errorf(DF_EINVAL,
                            "Dataflow automatic split (block-size=auto) chooses the placement "
                            "itself; even_split, balance_iters and defer_reduces must be off");
  df_split_choice c;
  df_status st = df_split_choose(s->range->lengths, s->range->count, s->topo.sm_count,
                                 &o->split, &c);
  if (df_failed(&st))
    return df_status_errorf(st.code, "Dataflow range axis '%s': %s", s->range->axis,
                            st.message);
  s->chosen = *o;
  s->chosen.block_size = c.block_size;
  s->chosen.balance_iters = c.balance_iters;
  s->chosen.defer_reduces = c.defer_reduces;
  s->o = &s->chosen;
  s->block = c.block_size;
  s->bucket_size = o->bucket_size ? o->bucket_size : c.block_size;
  df_plan *p = s->p;
  p->block_size = c.block_size;
  p->split_auto = true;
  p->split_balance_iters = c.balance_iters;
  p->split_defer_reduces = c.defer_reduces;
  p->split_model_us = c.makespan_us;
  return df_status_ok();
}

static df_status add_exits(df_sched *s) {
  DF_TRY(df_sched_reserve(s, s->topo.sm_count, 0, 0, 0));
  for (uint32_t sm = 0; sm < s->topo.sm_count; sm++)
    df_sched_instr(s, DF_INSTR_EXIT, DF_SENTINEL, sm, -1, NULL, 0, DF_SENTINEL);
  return df_status_ok();
}

/* Queues: the strategy's order (or id order) then the EXITs. */
static df_status build_queues(df_sched *s, uint32_t first_exit) {
  df_plan *p = s->p;
  if (!s->order)
    return df_plan_build_queues(p, NULL, 0);
  uint32_t cap = s->order_count;
  DF_TRY(df_vec_reserve(&p->alloc, (void **)&s->order, &cap,
                        s->order_count + (p->instr_count - first_exit), sizeof *s->order));
  for (uint32_t id = first_exit; id < p->instr_count; id++)
    s->order[s->order_count++] = id;
  return df_plan_build_queues(p, s->order, s->order_count);
}

static df_status run(df_sched *s) {
  const df_program *g = s->prog;
  const df_schedule_options *o = s->o;
  df_plan *p = s->p;
  DF_TRY(df_plan_adopt_program(p, g));
  p->block_size = o->block_size;
  p->extent_count = o->extent_count;
  memcpy(p->extents, o->extents, sizeof p->extents);
  if (df_program_is_stage_graph(g)) {
    if (o->auto_split)
      return df_status_errorf(DF_EINVAL,
                              "Dataflow automatic split (block-size=auto) needs a "
                              "partial/reduce program; '%s' is a stage graph",
                              g->name);
    if (o->reduce_sms || o->pool)
      return df_status_errorf(DF_EINVAL,
                              "Dataflow schedule option %s needs a partial/reduce "
                              "program; '%s' is a stage graph",
                              o->reduce_sms ? "reduce_sms" : "pool", g->name);
    p->policy = DF_POLICY_STAGE_GRAPH;
    p->strategy = DF_REDUCE_NONE;
    DF_TRY(df_schedule_stage_graph(s));
  } else {
    DF_TRY(resolve_pipeline(s));
    DF_TRY(check_policy(s));
    if (o->auto_split)
      DF_TRY(apply_auto_split(s));
    DF_TRY(df_sched_check_extents(o, s->range->count));
    p->policy = o->policy;
    p->strategy = o->strategy;
    p->pool = o->pool;
    DF_TRY(df_name_copy(p->range_axis, sizeof p->range_axis, s->range->axis, "range axis"));
    DF_TRY(df_plan_set_tasks(p, s->range->count, s->range->lengths));
    if (o->strategy == DF_REDUCE_ALL_AT_ONCE || o->partial_only || s->reduce < 0)
      DF_TRY(df_schedule_all_at_once(s));
    else if (o->strategy == DF_REDUCE_STREAMING)
      DF_TRY(df_schedule_streaming(s));
    else
      DF_TRY(df_schedule_streaming_tree(s));
  }
  uint32_t first_exit = p->instr_count;
  if (o->include_exit)
    DF_TRY(add_exits(s));
  if (s->overflow)
    return df_status_errorf(DF_EINTERNAL,
                            "Dataflow scheduler emitted more records than it reserved for "
                            "program '%s'",
                            g->name);
  DF_TRY(build_queues(s, first_exit));
  DF_TRY(df_plan_segment_transfers(p, o->transfer_tile_bytes));
  DF_TRY(df_plan_attach_handlers(p));
  /* implementations by capability region (df/impl.h): the same rules for
     compile-time plans and run-time re-plans */
  if (o->defer_select || !df_program_has_impls(g))
    return df_status_ok();
  return df_plan_select_impls(p, g, o->select);
}

df_status df_schedule(const df_program *prog, const df_schedule_options *o, df_plan **out) {
  if (!out)
    return df_status_errorf(DF_EINVAL, "df_schedule: no output plan pointer");
  *out = NULL;
  if (!prog || !o)
    return df_status_errorf(DF_EINVAL, "df_schedule: program and options are required");
  DF_TRY(df_program_validate(prog));
  DF_TRY(check_options(o));
  df_sched s;
  memset(&s, 0, sizeof s);
  s.prog = prog;
  s.o = o;
  s.topo = o->topology;
  s.block = o->block_size;
  s.bucket_size = o->bucket_size ? o->bucket_size : o->block_size;
  s.partial = s.reduce = s.finalize = -1;
  DF_TRY(df_plan_create(&prog->alloc, o->topology, &s.p));
  df_status st = run(&s);
  df_free(&s.p->alloc, s.buf);
  df_free(&s.p->alloc, s.order);
  if (df_failed(&st)) {
    df_plan_destroy(s.p);
    return st;
  }
  *out = s.p;
  return df_status_ok();
}
