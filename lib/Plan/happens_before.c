/* The happens-before relation (REFERENCE 3.4): its edges, the queue
   chains, and vector clocks over the chains for O(1) reachability; the
   topological orders live in hb_order.c. */
#include "happens_before.h"

#include <string.h>

/* Assign chains: queue s is chain s, each unqueued instruction its own.
   *increasing reports whether every queue lists ids in increasing order. */
static df_status assign_chains(const df_plan *p, df_hb *h, bool *increasing) {
  uint32_t n = p->instr_count, sms = p->topology.sm_count;
  memset(h->chain, 0xFF, sizeof(uint32_t) * n);
  *increasing = true;
  for (uint32_t s = 0; s < sms; s++) {
    uint64_t off = p->queue_offsets[s], len = p->queue_lengths[s];
    DF_TRY(df_plan_check_queue(p, s));
    const uint32_t *q = p->queue_ids + off;
    for (uint32_t i = 0; i < len; i++) {
      uint32_t id = q[i];
      if (id >= n)
        return df_status_errorf(DF_EINVAL,
                                "queue of SM %u names instruction %u, plan has %u", s, id, n);
      if (h->chain[id] != DF_SENTINEL)
        return df_status_errorf(DF_EINVAL,
                                "instruction %u appears more than once in the queues "
                                "(SM %u and SM %u)",
                                id, h->chain[id], s);
      h->chain[id] = s;
      h->pos[id] = i;
      *increasing &= i == 0 || q[i - 1] < id;
    }
  }
  uint32_t chains = sms;
  for (uint32_t id = 0; id < n; id++)
    if (h->chain[id] == DF_SENTINEL) {
      h->chain[id] = chains++;
      h->pos[id] = 0;
    }
  h->chain_count = chains;
  return df_status_ok();
}

/* All explicit edges as one CSR by target: comm and extra edges, then
   the producer of each input (DF_SENTINEL holes for inputs without a
   producer or produced by the reader itself). Checks every id an edge
   names; *forward reports whether every edge goes from a lower to a
   higher id (then id order is the min-heap order). */
static df_status in_edges(const df_plan *p, const df_hb_edge *extra, uint32_t extra_count,
                          df_arena *a, uint32_t **off_out, uint32_t **src_out, bool *forward) {
  uint32_t n = p->instr_count;
  uint32_t *off = df_arena_zero(a, (uint64_t)n + 1, sizeof(uint32_t));
  if (!off)
    return DF_ARENA_OOM("the happens-before graph");
  for (uint32_t i = 0; i < p->comm_count; i++) {
    const df_comm *c = &p->comms[i];
    if (c->src_instr >= n || c->dst_instr >= n)
      return df_status_errorf(DF_EINVAL,
                              "comm %u (%s) names instruction %u -> %u, plan has %u", i,
                              df_comm_kind_name(c->kind), c->src_instr, c->dst_instr, n);
    off[c->dst_instr + 1] += c->src_instr != c->dst_instr;
  }
  for (uint32_t i = 0; i < extra_count; i++) {
    if (extra[i].from >= n || extra[i].to >= n)
      return df_status_errorf(DF_EINTERNAL, "happens-before edge %u -> %u out of range",
                              extra[i].from, extra[i].to);
    off[extra[i].to + 1] += extra[i].from != extra[i].to;
  }
  uint64_t total = 0;
  for (uint32_t id = 0; id < n; id++) {
    const df_instr *in = &p->instrs[id];
    if ((uint64_t)in->input_offset + in->input_count > p->input_count)
      return df_status_errorf(DF_EINVAL, "instruction %u input slots exceed the plan's %u",
                              id, p->input_count);
    off[id + 1] += in->input_count;
    total += off[id + 1];
    off[id + 1] = (uint32_t)total;
  }
  uint32_t *src = df_arena_array(a, total, sizeof(uint32_t));
  uint32_t *fill = df_arena_array(a, n, sizeof(uint32_t));
  if (!src || !fill)
    return DF_ARENA_OOM("the happens-before graph");
  memcpy(fill, off, sizeof(uint32_t) * n);
  bool fwd = true;
  for (uint32_t i = 0; i < p->comm_count; i++) {
    const df_comm *c = &p->comms[i];
    if (c->src_instr != c->dst_instr)
      src[fill[c->dst_instr]++] = c->src_instr;
    fwd &= c->src_instr <= c->dst_instr;
  }
  for (uint32_t i = 0; i < extra_count; i++) {
    if (extra[i].from != extra[i].to)
      src[fill[extra[i].to]++] = extra[i].from;
    fwd &= extra[i].from <= extra[i].to;
  }
  for (uint32_t id = 0; id < n; id++) {
    const df_instr *in = &p->instrs[id];
    const uint32_t *inputs = df_plan_instr_inputs(p, in);
    uint32_t *dst = src + fill[id];
    for (uint32_t k = 0; k < in->input_count; k++) {
      if (inputs[k] >= p->slot_count)
        return df_status_errorf(DF_EINVAL, "instruction %u reads slot %u, plan has %u slots",
                                id, inputs[k], p->slot_count);
      uint32_t prod = p->slots[inputs[k]].producer;
      if (prod != DF_SENTINEL && prod >= n)
        return df_status_errorf(DF_EINVAL,
                                "slot %u names producer instruction %u, plan has %u",
                                inputs[k], prod, n);
      fwd &= prod == DF_SENTINEL || prod <= id;
      dst[k] = prod == id ? DF_SENTINEL : prod;
    }
  }
  *off_out = off;
  *src_out = src;
  *forward = fwd;
  return df_status_ok();
}

/* Four clock entries at a time: baseline x86-64 (SSE2) has no unsigned
   32-bit max instruction, so gcc leaves the scalar loop alone; the vector
   extension lowers the compare-and-select to a few SSE2 operations. The
   merge is one of a re-plan's hottest loops (clock rows x up to 132
   columns). */
typedef uint32_t df_hb_v4 __attribute__((vector_size(16)));

static void max_into(uint32_t *d, const uint32_t *s, uint32_t n) {
  uint32_t c = 0;
  for (; c + 4 <= n; c += 4) {
    df_hb_v4 x, y;
    memcpy(&x, d + c, sizeof x);
    memcpy(&y, s + c, sizeof y);
    df_hb_v4 more = (df_hb_v4)(y > x);
    x = (x & ~more) | (y & more);
    memcpy(d + c, &x, sizeof x);
  }
  for (; c < n; c++)
    d[c] = d[c] > s[c] ? d[c] : s[c];
}

/* dst |= clock(y). Rows are final once their node is ordered, so merging
   the same row twice in a row adds nothing and is skipped. */
static void merge(df_hb *h, uint32_t *last_merged, uint32_t dst_row, uint32_t y) {
  uint32_t cols = h->col_count;
  uint32_t v = h->version[y];
  if (v != 0 && last_merged[dst_row] != v) {
    max_into(h->clocks + (uint64_t)dst_row * cols, h->clocks + (uint64_t)v * cols, cols);
    last_merged[dst_row] = v;
  }
  uint32_t oc = h->col[h->chain[y]];
  if (oc != DF_SENTINEL) {
    uint32_t *d = h->clocks + (uint64_t)dst_row * cols + oc;
    if (*d < h->pos[y] + 1)
      *d = h->pos[y] + 1;
  }
}

/* Vector clocks in topological order, pulling from predecessors: a node
   with a cross-chain predecessor owns a clock row, others share their
   queue predecessor's. */
static df_status clocks(const df_plan *p, const uint32_t *in_off, const uint32_t *in_src,
                        df_arena *a, df_hb *h) {
  uint32_t n = p->instr_count, rows = 1;
  uint32_t *row = df_arena_array(a, n, sizeof(uint32_t));
  if (!row)
    return DF_ARENA_OOM("the happens-before clocks");
  for (uint32_t z = 0; z < n; z++) {
    bool cross = false;
    for (uint32_t e = in_off[z]; e < in_off[z + 1] && !cross; e++)
      cross = in_src[e] != DF_SENTINEL && h->chain[in_src[e]] != h->chain[z];
    row[z] = cross ? rows++ : 0;
  }
  uint32_t cols = h->col_count ? h->col_count : 1;
  h->clocks = df_arena_zero(a, (uint64_t)rows * cols, sizeof(uint32_t));
  uint32_t *last_merged = df_arena_zero(a, rows, sizeof(uint32_t));
  if (!h->clocks || !last_merged)
    return DF_ARENA_OOM("the happens-before clocks");
  for (uint32_t k = 0; k < n; k++) {
    uint32_t z = h->order[k], prev = df_hb_queue_prev(p, h, z), r = row[z];
    if (!r) {
      h->version[z] = prev != DF_SENTINEL ? h->version[prev] : 0;
      continue;
    }
    if (prev != DF_SENTINEL)
      merge(h, last_merged, r, prev);
    for (uint32_t e = in_off[z]; e < in_off[z + 1]; e++)
      if (in_src[e] != DF_SENTINEL && h->chain[in_src[e]] != h->chain[z])
        merge(h, last_merged, r, in_src[e]);
    h->version[z] = r;
    uint32_t oc = h->col[h->chain[z]];
    if (oc != DF_SENTINEL) /* own entry */
      h->clocks[(uint64_t)r * h->col_count + oc] = h->pos[z] + 1;
  }
  return df_status_ok();
}

df_status df_hb_build(const df_plan *p, const df_hb_edge *extra, uint32_t extra_count,
                      const uint32_t *query_nodes, uint32_t query_count, bool exact,
                      df_arena *a, df_hb *h) {
  memset(h, 0, sizeof *h);
  uint32_t n = p->instr_count;
  h->node_count = n;
  bool forward = false, increasing = false;
  uint32_t *in_off = NULL, *in_src = NULL;
  DF_TRY(in_edges(p, extra, extra_count, a, &in_off, &in_src, &forward));
  for (uint32_t i = 0; i < query_count; i++)
    if (query_nodes[i] >= n)
      return df_status_errorf(DF_EINTERNAL, "happens-before query node %u out of range",
                              query_nodes[i]);
  h->chain = df_arena_array(a, n, sizeof(uint32_t));
  h->pos = df_arena_array(a, n, sizeof(uint32_t));
  h->topo_pos = df_arena_sentinels(a, n);
  h->order = df_arena_array(a, n, sizeof(uint32_t));
  h->version = df_arena_zero(a, n, sizeof(uint32_t));
  if (!h->chain || !h->pos || !h->topo_pos || !h->order || !h->version)
    return DF_ARENA_OOM("the happens-before relation");
  DF_TRY(assign_chains(p, h, &increasing));
  h->col = df_arena_sentinels(a, h->chain_count);
  if (!h->col)
    return DF_ARENA_OOM("the happens-before columns");
  for (uint32_t i = 0; i < query_count; i++) {
    uint32_t ch = h->chain[query_nodes[i]];
    if (h->col[ch] == DF_SENTINEL)
      h->col[ch] = h->col_count++;
  }
  if (forward && increasing) { /* every edge goes up in id: id order */
    for (uint32_t i = 0; i < n; i++)
      h->order[i] = h->topo_pos[i] = i;
  } else if (exact) {
    DF_TRY(df_hb_min_heap_order(p, in_off, in_src, a, h));
  } else {
    DF_TRY(df_hb_chain_order(p, in_off, in_src, a, h));
  }
  return clocks(p, in_off, in_src, a, h);
}
