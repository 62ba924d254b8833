/* Barrier allocation (REFERENCE 3): colour the interference graph of
   async-receive live ranges, give each logical transfer its barrier
   phase, and number cluster ACK barriers for released transfers. */
#include <stdlib.h>
#include <string.h>

#include "barrier_internal.h"
#include "sort_idx.h"

/* Visit live ranges by (-degree, id); smallest colour no neighbour has
   (REFERENCE 3.6). Interference only joins live ranges of one consumer
   SM, so each SM is coloured on its own with the same result. */
static df_status colour(const df_plan *p, df_arena *a, const df_bar_analysis *an,
                        const df_allocator *al, uint32_t *lr_colour, uint32_t *count) {
  *count = 0;
  for (uint32_t i = 0; i < an->lr_count; i++)
    lr_colour[i] = DF_SENTINEL;
  if (an->lr_count == 0)
    return df_status_ok();
  uint32_t *order = df_arena_array(a, an->lr_count, sizeof(uint32_t));
  uint32_t *cnt = df_arena_array(a, (uint64_t)an->lr_count + 2, sizeof(uint32_t));
  uint32_t *stamp = df_arena_sentinels(a, (uint64_t)an->lr_count + 1);
  uint64_t *done = df_arena_array(a, (DF_BAR_DENSE_MAX + 63) / 64, sizeof(uint64_t));
  if (!order || !cnt || !stamp || !done)
    return DF_ARENA_OOM("barrier colouring");
  df_bar_graph g;
  df_bar_graph_init(&g, al);
  df_status st = df_status_ok();
  for (uint32_t lr0 = 0; lr0 < an->lr_count && st.code == DF_OK;) {
    uint32_t lr1 = df_bar_sm_end(an, lr0);
    st = df_bar_graph_build(p, an, lr0, lr1, &g);
    if (st.code != DF_OK)
      break;
    uint32_t n = g.n, maxdeg = g.max_deg;
    if (g.words) /* only coloured neighbours matter: mask the others out */
      memset(done, 0, (size_t)g.words * 8);
    memset(cnt, 0, sizeof(uint32_t) * (maxdeg + 2));
    for (uint32_t i = 0; i < n; i++)
      cnt[maxdeg - g.deg[i] + 1]++;
    for (uint32_t b = 0; b <= maxdeg; b++)
      cnt[b + 1] += cnt[b];
    for (uint32_t i = 0; i < n; i++)
      order[cnt[maxdeg - g.deg[i]]++] = i;
    for (uint32_t k = 0; k < n; k++) {
      uint32_t x = order[k];
      if (g.words) {
        const uint64_t *row = g.rows + (uint64_t)x * g.words;
        for (uint32_t w = 0; w < g.words; w++)
          for (uint64_t bits = row[w] & done[w]; bits; bits &= bits - 1)
            stamp[lr_colour[lr0 + w * 64 + (uint32_t)__builtin_ctzll(bits)]] = lr0 + x;
        done[x / 64] |= 1ULL << (x % 64);
      } else {
        DF_BAR_FOR_NEIGHBOUR(&g, x, y, {
          uint32_t c = lr_colour[lr0 + y];
          if (c != DF_SENTINEL)
            stamp[c] = lr0 + x;
        });
      }
      uint32_t c = 0;
      while (stamp[c] == lr0 + x)
        c++;
      lr_colour[lr0 + x] = c;
      if (c + 1 > *count)
        *count = c + 1;
    }
    lr0 = lr1;
  }
  df_bar_graph_free(&g);
  return st;
}

/* A logical transfer on one (consumer SM, colour). */
typedef struct phase_group {
  uint32_t sm, colour;
  uint32_t min_send, max_recv; /* topological positions */
  uint32_t rep;                /* comm index carrying the key */
  uint32_t phase;
} phase_group;

typedef struct group_ctx {
  const df_plan *p;
  const phase_group *g;
} group_ctx;

static bool group_less(const void *ctx, uint32_t i, uint32_t j) {
  const group_ctx *c = ctx;
  const phase_group *x = &c->g[i], *y = &c->g[j];
  if (x->min_send != y->min_send)
    return x->min_send < y->min_send;
  if (x->max_recv != y->max_recv)
    return x->max_recv < y->max_recv;
  const df_comm *a = &c->p->comms[x->rep], *b = &c->p->comms[y->rep];
  const uint32_t ka[4] = {a->src_instr, a->dst_instr, a->src_slot, a->dst_slot};
  const uint32_t kb[4] = {b->src_instr, b->dst_instr, b->src_slot, b->dst_slot};
  for (int i = 0; i < 4; i++)
    if (ka[i] != kb[i])
      return ka[i] < kb[i];
  return false;
}

/* REFERENCE 3.7: per (consumer SM, colour), logical transfers ordered by
   (min send position, max receive position, key) alternate 0, 1, 0, ... */
static df_status phases(const df_plan *p, df_arena *a, const df_bar_analysis *an,
                        const uint32_t *lr_colour, uint32_t colours, uint32_t *use_phase) {
  uint32_t n = an->use_count;
  if (n == 0)
    return df_status_ok();
  phase_group *g = df_arena_array(a, n, sizeof *g);
  uint32_t *use_group = df_arena_array(a, n, sizeof(uint32_t));
  if (!g || !use_group)
    return DF_ARENA_OOM("barrier phases");
  const df_hb *h = &an->hb;
  uint32_t gc = 0;
  for (uint32_t lr = 0; lr < an->lr_count; lr++) {
    uint32_t first_group = gc;
    for (uint32_t u = an->lr_first[lr]; u < an->lr_first[lr + 1]; u++) {
      const df_bar_use *use = &an->uses[u];
      const df_comm *rc = &p->comms[use->recv];
      uint32_t k = first_group;
      while (k < gc && !df_comm_same_logical(&p->comms[g[k].rep], rc))
        k++;
      uint32_t sp = h->topo_pos[use->send_node], rp = h->topo_pos[use->recv_node];
      if (k == gc) {
        g[gc++] = (phase_group){use->sm, lr_colour[lr], sp, rp, use->recv, 0};
      } else {
        g[k].min_send = sp < g[k].min_send ? sp : g[k].min_send;
        g[k].max_recv = rp > g[k].max_recv ? rp : g[k].max_recv;
      }
      use_group[u] = k;
    }
  }
  /* Bucket groups by (sm, colour); live ranges are already in sm order,
     so a stable counting sort by colour then by sm keeps it cheap. */
  uint32_t *idx = df_arena_array(a, gc, sizeof(uint32_t));
  uint32_t *tmp = df_arena_array(a, gc, sizeof(uint32_t));
  uint32_t range = colours > p->topology.sm_count ? colours : p->topology.sm_count;
  uint32_t *cnt = df_arena_array(a, (uint64_t)range + 1, sizeof(uint32_t));
  if (!idx || !tmp || !cnt)
    return DF_ARENA_OOM("barrier phases");
  for (uint32_t i = 0; i < gc; i++)
    idx[i] = i;
  for (int pass = 0; pass < 2; pass++) {
    uint32_t r = pass == 0 ? colours : p->topology.sm_count;
    memset(cnt, 0, sizeof(uint32_t) * (r + 1));
    for (uint32_t i = 0; i < gc; i++)
      cnt[(pass == 0 ? g[idx[i]].colour : g[idx[i]].sm) + 1]++;
    for (uint32_t b = 0; b < r; b++)
      cnt[b + 1] += cnt[b];
    for (uint32_t i = 0; i < gc; i++)
      tmp[cnt[pass == 0 ? g[idx[i]].colour : g[idx[i]].sm]++] = idx[i];
    uint32_t *t = idx;
    idx = tmp;
    tmp = t;
  }
  group_ctx gctx = {p, g};
  for (uint32_t b0 = 0; b0 < gc;) {
    uint32_t b1 = b0 + 1;
    while (b1 < gc && g[idx[b1]].sm == g[idx[b0]].sm && g[idx[b1]].colour == g[idx[b0]].colour)
      b1++;
    df_sort_idx(idx + b0, b1 - b0, tmp, group_less, &gctx);
    for (uint32_t i = b0; i < b1; i++)
      g[idx[i]].phase = (i - b0) & 1;
    b0 = b1;
  }
  for (uint32_t u = 0; u < n; u++)
    use_phase[u] = g[use_group[u]].phase;
  return df_status_ok();
}

/* REFERENCE 3.10: transfers (or gate groups) with a CLUSTER_RELEASE get
   an ACK index, counted per producer SM of the matching send. */
static df_status cluster_acks(const df_plan *p, df_arena *a, const df_bar_analysis *an,
                              df_barrier_alloc *out) {
  uint32_t releases = 0;
  for (uint32_t i = 0; i < p->comm_count; i++)
    releases += p->comms[i].kind == DF_COMM_CLUSTER_RELEASE;
  for (uint32_t i = 0; i < p->comm_count; i++)
    out->comm_ack[i] = DF_SENTINEL;
  out->ack_count = 0;
  if (releases == 0)
    return df_status_ok();
  uint32_t *next = df_arena_zero(a, p->topology.sm_count, sizeof(uint32_t));
  uint32_t *send_ack = df_arena_sentinels(a, p->comm_count);
  df_u32map gate_ack, gate_send;
  if (!next || !send_ack || !df_u32map_init(&gate_ack, a, p->comm_count) ||
      !df_u32map_init(&gate_send, a, p->comm_count))
    return DF_ARENA_OOM("cluster ACK indices");
  for (uint32_t i = 0; i < p->comm_count; i++) {
    const df_comm *c = &p->comms[i];
    if (c->kind == DF_COMM_CLUSTER_SEND && c->gate_id != DF_SENTINEL)
      df_u32map_put(&gate_send, c->gate_id, i);
  }
  for (uint32_t i = 0; i < p->comm_count; i++) {
    const df_comm *r = &p->comms[i];
    if (r->kind != DF_COMM_CLUSTER_RELEASE)
      continue;
    df_key5 k = df_comm_key(r);
    uint32_t s = df_key5map_get(&an->sends, &k);
    if (s != DF_SENTINEL && p->comms[s].kind != DF_COMM_CLUSTER_SEND)
      s = DF_SENTINEL;
    if (s == DF_SENTINEL && r->gate_id != DF_SENTINEL)
      s = df_u32map_get(&gate_send, r->gate_id);
    if (s == DF_SENTINEL)
      return df_status_errorf(DF_EINVAL,
                              "cluster release comm %u has no matching cluster send: "
                              "transfer (%u, %u, %u, %u, %u)",
                              i, r->src_instr, r->dst_instr, r->src_slot, r->dst_slot,
                              r->segment_id);
    uint32_t sm = p->comms[s].producer_sm;
    if (r->gate_id != DF_SENTINEL) {
      if (df_u32map_get(&gate_ack, r->gate_id) == DF_SENTINEL)
        df_u32map_put(&gate_ack, r->gate_id, next[sm]++);
    } else if (send_ack[s] == DF_SENTINEL) {
      send_ack[s] = next[sm]++;
    }
  }
  for (uint32_t i = 0; i < p->comm_count; i++) {
    const df_comm *c = &p->comms[i];
    if (!df_comm_kind_is_cluster(c->kind))
      continue;
    uint32_t ack = DF_SENTINEL;
    if (c->gate_id != DF_SENTINEL) {
      ack = df_u32map_get(&gate_ack, c->gate_id);
    } else {
      df_key5 k = df_comm_key(c);
      uint32_t s = df_key5map_get(&an->sends, &k);
      if (s != DF_SENTINEL)
        ack = send_ack[s];
    }
    out->comm_ack[i] = ack;
    if (ack != DF_SENTINEL && ack + 1 > out->ack_count)
      out->ack_count = ack + 1;
  }
  return df_status_ok();
}

/* Slot barrier: its cluster-lane live range if any, else its HBM one
   (the first in live-range order when a slot is received on several
   SMs). */
static void slot_barriers(const df_plan *p, const df_bar_analysis *an, const uint32_t *lr_colour,
                          uint32_t *slot_barrier) {
  for (uint32_t s = 0; s < p->slot_count; s++)
    slot_barrier[s] = DF_SENTINEL;
  for (int lane = 1; lane >= 0; lane--)
    for (uint32_t lr = an->lr_count; lr-- > 0;) {
      const df_bar_use *u = &an->uses[an->lr_first[lr]];
      if ((int)u->lane == lane)
        slot_barrier[u->slot] = lr_colour[lr];
    }
}

void df_barrier_alloc_free(df_barrier_alloc *b, const df_allocator *alloc) {
  if (!b)
    return;
  df_allocator a = df_allocator_or_default(alloc);
  df_free(&a, b->slot_barrier);
  df_free(&a, b->comm_barrier);
  df_free(&a, b->comm_phase);
  df_free(&a, b->comm_ack);
  memset(b, 0, sizeof *b);
}

static df_status allocate(const df_plan *p, const uint8_t *direct, const df_allocator *al,
                          df_arena *a, df_barrier_alloc *out) {
  uint8_t *skip = NULL;
  if (direct) {
    skip = df_arena_zero(a, p->comm_count, 1);
    if (!skip)
      return DF_ARENA_OOM("signal-only receives");
    for (uint32_t i = 0; i < p->comm_count; i++)
      skip[i] = df_recv_signal_only(p, &p->comms[i], direct);
  }
  df_bar_analysis an;
  DF_TRY(df_bar_analyse(p, skip, a, &an));
  uint32_t *lr_colour = df_arena_array(a, an.lr_count, sizeof(uint32_t));
  uint32_t *use_phase = df_arena_array(a, an.use_count, sizeof(uint32_t));
  if (!lr_colour || !use_phase)
    return DF_ARENA_OOM("barrier colours");
  DF_TRY(colour(p, a, &an, al, lr_colour, &out->barrier_count));
  DF_TRY(phases(p, a, &an, lr_colour, out->barrier_count, use_phase));
  uint32_t *use_colour = df_arena_array(a, an.use_count, sizeof(uint32_t));
  if (!use_colour)
    return DF_ARENA_OOM("barrier colours");
  for (uint32_t lr = 0; lr < an.lr_count; lr++)
    for (uint32_t u = an.lr_first[lr]; u < an.lr_first[lr + 1]; u++)
      use_colour[u] = lr_colour[lr];
  /* every comm of a used transfer key (send, receive, issue, release)
     shares the use's barrier and phase (REFERENCE 3.9) */
  for (uint32_t i = 0; i < p->comm_count; i++) {
    uint32_t u = an.use_of[i];
    df_comm_kind kd = p->comms[i].kind;
    if (u == DF_SENTINEL && kd != DF_COMM_CLUSTER_SEND && kd != DF_COMM_HBM_SEND) {
      df_key5 k = df_comm_key(&p->comms[i]); /* releases, issues, skipped receives */
      uint32_t s = df_key5map_get(&an.sends, &k);
      u = s == DF_SENTINEL ? DF_SENTINEL : an.use_of[s];
    }
    out->comm_barrier[i] = u == DF_SENTINEL ? DF_SENTINEL : use_colour[u];
    out->comm_phase[i] = u == DF_SENTINEL ? 0 : use_phase[u];
  }
  slot_barriers(p, &an, lr_colour, out->slot_barrier);
  return cluster_acks(p, a, &an, out);
}

df_status df_allocate_barriers_ex(const df_plan *p, const uint8_t *direct_global,
                                  const df_allocator *alloc, df_barrier_alloc *out) {
  memset(out, 0, sizeof *out);
  if (!p)
    return df_status_errorf(DF_EINVAL, "barrier allocation expects a plan, got NULL");
  df_allocator al = df_allocator_or_default(alloc);
  out->slot_count = p->slot_count;
  out->comm_count = p->comm_count;
  out->slot_barrier = df_alloc(&al, sizeof(uint32_t) * p->slot_count);
  out->comm_barrier = df_alloc(&al, sizeof(uint32_t) * p->comm_count);
  out->comm_phase = df_alloc(&al, sizeof(uint32_t) * p->comm_count);
  out->comm_ack = df_alloc(&al, sizeof(uint32_t) * p->comm_count);
  df_status st = df_status_ok();
  if (!out->slot_barrier || !out->comm_barrier || !out->comm_phase || !out->comm_ack) {
    st = df_status_errorf(DF_ENOMEM, "out of memory allocating barriers");
  } else {
    df_arena a;
    df_arena_init(&a, &al);
    st = allocate(p, direct_global, &al, &a, out);
    df_arena_release(&a);
  }
  if (st.code != DF_OK)
    df_barrier_alloc_free(out, &al);
  return st;
}

df_status df_allocate_barriers(const df_plan *p, const df_allocator *alloc,
                               df_barrier_alloc *out) {
  return df_allocate_barriers_ex(p, NULL, alloc, out);
}
