/* The happens-before relation (REFERENCE 3.4): topological order by a
   min-heap on instruction id, cycle detection, and vector clocks over the
   queue chains for O(1) reachability queries. */
#include "happens_before.h"

#include <string.h>

/* A 64-ary bit tree over node ids: insert and extract-min in a few word
   operations, which is all Kahn's algorithm with a min-heap needs. */
typedef struct minset {
  uint64_t *lv[4];
  uint32_t levels;
} minset;

static int minset_init(minset *m, df_arena *a, uint32_t n) {
  uint64_t words = ((uint64_t)n + 63) / 64;
  for (m->levels = 0;; m->levels++) {
    if (m->levels == 4)
      return 0; /* more than 2^24 instructions */
    m->lv[m->levels] = df_arena_zero(a, words ? words : 1, sizeof(uint64_t));
    if (!m->lv[m->levels])
      return 0;
    if (words <= 1)
      break;
    words = (words + 63) / 64;
  }
  m->levels++;
  return 1;
}

static void minset_insert(minset *m, uint32_t x) {
  for (uint32_t l = 0; l < m->levels; l++, x >>= 6)
    m->lv[l][x >> 6] |= 1ULL << (x & 63);
}

static bool minset_empty(const minset *m) { return m->lv[m->levels - 1][0] == 0; }

static uint32_t minset_pop(minset *m) {
  uint32_t x = 0;
  for (uint32_t l = m->levels; l-- > 0;)
    x = x * 64 + (uint32_t)__builtin_ctzll(m->lv[l][x]);
  uint32_t y = x;
  for (uint32_t l = 0; l < m->levels; l++, y >>= 6) {
    m->lv[l][y >> 6] &= ~(1ULL << (y & 63));
    if (m->lv[l][y >> 6])
      break;
  }
  return x;
}

/* Assign chains: queue s is chain s, each unqueued instruction its own. */
static df_status assign_chains(const df_plan *p, df_hb *h) {
  uint32_t n = p->instr_count, sms = p->topology.sm_count;
  memset(h->chain, 0xFF, sizeof(uint32_t) * n);
  for (uint32_t s = 0; s < sms; s++) {
    uint64_t off = p->queue_offsets[s], len = p->queue_lengths[s];
    if (off + len > p->queue_id_count)
      return df_status_errorf(DF_EINVAL,
                              "queue of SM %u (offset %llu, length %llu) exceeds the %u "
                              "queued instruction ids",
                              s, (unsigned long long)off, (unsigned long long)len,
                              p->queue_id_count);
    for (uint32_t i = 0; i < len; i++) {
      uint32_t id = p->queue_ids[off + i];
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

/* Ids named by edges are checked once up front so the walks need not. */
typedef struct edge_walk {
  const df_plan *p;
  const df_hb_edge *extra;
  uint32_t extra_count;
} edge_walk;

static df_status check_edges(const edge_walk *w) {
  const df_plan *p = w->p;
  uint32_t n = p->instr_count;
  for (uint32_t i = 0; i < p->comm_count; i++) {
    const df_comm *c = &p->comms[i];
    if (c->src_instr >= n || c->dst_instr >= n)
      return df_status_errorf(DF_EINVAL,
                              "comm %u (%s) names instruction %u -> %u, plan has %u", i,
                              df_comm_kind_name(c->kind), c->src_instr, c->dst_instr, n);
  }
  for (uint32_t i = 0; i < w->extra_count; i++)
    if (w->extra[i].from >= n || w->extra[i].to >= n)
      return df_status_errorf(DF_EINTERNAL, "happens-before edge %u -> %u out of range",
                              w->extra[i].from, w->extra[i].to);
  for (uint32_t id = 0; id < n; id++) {
    const df_instr *in = &p->instrs[id];
    if ((uint64_t)in->input_offset + in->input_count > p->input_count)
      return df_status_errorf(DF_EINVAL, "instruction %u input slots exceed the plan's %u",
                              id, p->input_count);
    const uint32_t *inputs = df_plan_instr_inputs(p, in);
    for (uint32_t k = 0; k < in->input_count; k++) {
      if (inputs[k] >= p->slot_count)
        return df_status_errorf(DF_EINVAL, "instruction %u reads slot %u, plan has %u slots",
                                id, inputs[k], p->slot_count);
      uint32_t prod = p->slots[inputs[k]].producer;
      if (prod != DF_SENTINEL && prod >= n)
        return df_status_errorf(DF_EINVAL,
                                "slot %u names producer instruction %u, plan has %u",
                                inputs[k], prod, n);
    }
  }
  return df_status_ok();
}

/* Visits every explicit edge: pass 0 counts out-degrees, pass 1 fills. */
#define FOR_EACH_EDGE(p, extra, extra_count, FROM, TO, BODY)                   \
  do {                                                                         \
    for (uint32_t e_ = 0; e_ < (p)->comm_count; e_++) {                        \
      uint32_t FROM = (p)->comms[e_].src_instr, TO = (p)->comms[e_].dst_instr; \
      if (FROM != TO) { BODY }                                                 \
    }                                                                          \
    for (uint32_t e_ = 0; e_ < (extra_count); e_++) {                          \
      uint32_t FROM = (extra)[e_].from, TO = (extra)[e_].to;                   \
      if (FROM != TO) { BODY }                                                 \
    }                                                                          \
    for (uint32_t i_ = 0; i_ < (p)->instr_count; i_++) {                       \
      const df_instr *in_ = &(p)->instrs[i_];                                  \
      const uint32_t *ins_ = df_plan_instr_inputs((p), in_);                   \
      for (uint32_t k_ = 0; k_ < in_->input_count; k_++) {                     \
        uint32_t FROM = (p)->slots[ins_[k_]].producer, TO = i_;                \
        if (FROM != DF_SENTINEL && FROM != TO) { BODY }                        \
      }                                                                        \
    }                                                                          \
  } while (0)

typedef struct graph {
  uint32_t *out_off, *out; /* CSR of explicit out-edges */
  uint32_t *indeg;
  uint32_t *row;         /* clock row of nodes with a cross-chain in-edge */
  uint32_t *last_merged; /* per row: last version merged whole */
  uint32_t rows;
} graph;

static df_status build_graph(const df_plan *p, const df_hb_edge *extra, uint32_t extra_count,
                             df_arena *a, const df_hb *h, graph *g) {
  uint32_t n = p->instr_count;
  g->out_off = df_arena_zero(a, (uint64_t)n + 1, sizeof(uint32_t));
  g->indeg = df_arena_zero(a, n, sizeof(uint32_t));
  g->row = df_arena_zero(a, n, sizeof(uint32_t));
  if (!g->out_off || !g->indeg || !g->row)
    return DF_ARENA_OOM("the happens-before graph");
  uint64_t total = 0;
  FOR_EACH_EDGE(p, extra, extra_count, f, t, {
    g->out_off[f + 1]++;
    g->indeg[t]++;
    total++;
    if (h->chain[f] != h->chain[t])
      g->row[t] = 1;
  });
  if (total > UINT32_MAX)
    return df_status_errorf(DF_EINVAL, "happens-before graph has too many edges (%llu)",
                            (unsigned long long)total);
  for (uint32_t i = 0; i < n; i++)
    g->out_off[i + 1] += g->out_off[i];
  g->out = df_arena_array(a, total, sizeof(uint32_t));
  uint32_t *fill = df_arena_array(a, n, sizeof(uint32_t));
  if (!g->out || !fill)
    return DF_ARENA_OOM("the happens-before graph");
  memcpy(fill, g->out_off, sizeof(uint32_t) * n);
  FOR_EACH_EDGE(p, extra, extra_count, f, t, { g->out[fill[f]++] = t; });
  /* Rows: 0 is the empty clock; nodes with cross in-edges own one each. */
  g->rows = 1;
  for (uint32_t i = 0; i < n; i++) {
    if (h->pos[i] > 0)
      g->indeg[i]++; /* the queue predecessor */
    g->row[i] = g->row[i] ? g->rows++ : 0;
  }
  g->last_merged = df_arena_zero(a, g->rows, sizeof(uint32_t));
  if (!g->last_merged)
    return DF_ARENA_OOM("the happens-before clocks");
  return df_status_ok();
}

/* dst |= clock(y). Rows are final once their node is ordered, so merging
   the same row twice in a row adds nothing and is skipped. */
static void merge(df_hb *h, graph *g, uint32_t dst_row, uint32_t y) {
  uint32_t cols = h->col_count;
  uint32_t v = h->version[y];
  if (v != 0 && g->last_merged[dst_row] != v) {
    uint32_t *d = h->clocks + (uint64_t)dst_row * cols;
    const uint32_t *s = h->clocks + (uint64_t)v * cols;
    for (uint32_t c = 0; c < cols; c++)
      d[c] = d[c] > s[c] ? d[c] : s[c];
    g->last_merged[dst_row] = v;
  }
  uint32_t oc = h->col[h->chain[y]];
  if (oc != DF_SENTINEL) {
    uint32_t *d = h->clocks + (uint64_t)dst_row * cols + oc;
    if (*d < h->pos[y] + 1)
      *d = h->pos[y] + 1;
  }
}

df_status df_hb_build(const df_plan *p, const df_hb_edge *extra, uint32_t extra_count,
                      const uint32_t *query_nodes, uint32_t query_count, df_arena *a,
                      df_hb *h) {
  memset(h, 0, sizeof *h);
  uint32_t n = p->instr_count;
  h->node_count = n;
  edge_walk w = {p, extra, extra_count};
  DF_TRY(check_edges(&w));
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
  DF_TRY(assign_chains(p, h));
  h->col = df_arena_sentinels(a, h->chain_count);
  if (!h->col)
    return DF_ARENA_OOM("the happens-before columns");
  for (uint32_t i = 0; i < query_count; i++) {
    uint32_t ch = h->chain[query_nodes[i]];
    if (h->col[ch] == DF_SENTINEL)
      h->col[ch] = h->col_count++;
  }
  graph g;
  DF_TRY(build_graph(p, extra, extra_count, a, h, &g));
  h->clocks = df_arena_zero(a, (uint64_t)g.rows * (h->col_count ? h->col_count : 1),
                            sizeof(uint32_t));
  minset ready;
  if (!h->clocks || !minset_init(&ready, a, n ? n : 1))
    return DF_ARENA_OOM("the happens-before clocks");
  for (uint32_t i = 0; i < n; i++)
    if (g.indeg[i] == 0)
      minset_insert(&ready, i);
  const uint32_t sms = p->topology.sm_count;
  uint32_t done = 0;
  while (!minset_empty(&ready)) {
    uint32_t z = minset_pop(&ready);
    h->order[done] = z;
    h->topo_pos[z] = done++;
    uint32_t ch = h->chain[z];
    uint32_t next = DF_SENTINEL, prev = DF_SENTINEL;
    if (ch < sms) {
      uint32_t off = p->queue_offsets[ch];
      if (h->pos[z] > 0)
        prev = p->queue_ids[off + h->pos[z] - 1];
      if (h->pos[z] + 1 < p->queue_lengths[ch])
        next = p->queue_ids[off + h->pos[z] + 1];
    }
    if (g.row[z]) {
      if (prev != DF_SENTINEL)
        merge(h, &g, g.row[z], prev);
      h->version[z] = g.row[z];
      if (h->col[ch] != DF_SENTINEL) /* own entry, as merge would add it */
        h->clocks[(uint64_t)g.row[z] * h->col_count + h->col[ch]] = h->pos[z] + 1;
    } else {
      h->version[z] = prev != DF_SENTINEL ? h->version[prev] : 0;
    }
    if (next != DF_SENTINEL && --g.indeg[next] == 0)
      minset_insert(&ready, next);
    for (uint32_t e = g.out_off[z]; e < g.out_off[z + 1]; e++) {
      uint32_t t = g.out[e];
      if (h->chain[t] != ch)
        merge(h, &g, g.row[t], z);
      if (--g.indeg[t] == 0)
        minset_insert(&ready, t);
    }
  }
  if (done < n) {
    uint32_t first = 0;
    while (first < n && h->topo_pos[first] != DF_SENTINEL)
      first++;
    return df_status_errorf(DF_EINVAL,
                            "happens-before graph has a cycle: %u of %u instructions can "
                            "never run, the first is instruction %u (%s on SM %u)",
                            n - done, n, first, df_instr_op_name(p->instrs[first].op),
                            p->instrs[first].sm);
  }
  return df_status_ok();
}
