/* Topological orders of the happens-before graph (REFERENCE 3.4): the
   reference's Kahn order popping the smallest ready id, and a cheaper
   queue-walking order; both report cycles. */
#include <string.h>

#include "happens_before.h"

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

static df_status cycle_error(const df_plan *p, const df_hb *h, uint32_t done) {
  uint32_t n = p->instr_count, first = 0;
  while (first < n && h->topo_pos[first] != DF_SENTINEL)
    first++;
  return df_status_errorf(DF_EINVAL,
                          "happens-before graph has a cycle: %u of %u instructions can "
                          "never run, the first is instruction %u (%s on SM %u)",
                          n - done, n, first, df_instr_op_name(p->instrs[first].op),
                          p->instrs[first].sm);
}

/* Kahn's algorithm popping the smallest ready id (REFERENCE 3.4). Only
   needed when some edge points from a higher to a lower id. */
df_status df_hb_min_heap_order(const df_plan *p, const uint32_t *in_off, const uint32_t *in_src,
                                df_arena *a, df_hb *h) {
  uint32_t n = p->instr_count, sms = p->topology.sm_count;
  uint32_t *off = df_arena_zero(a, (uint64_t)n + 1, sizeof(uint32_t));
  uint32_t *indeg = df_arena_zero(a, n, sizeof(uint32_t));
  uint32_t *out = df_arena_array(a, in_off[n], sizeof(uint32_t));
  uint32_t *fill = df_arena_array(a, n, sizeof(uint32_t));
  minset ready;
  if (!off || !indeg || !out || !fill || !minset_init(&ready, a, n ? n : 1))
    return DF_ARENA_OOM("the happens-before order");
  for (uint32_t t = 0; t < n; t++) { /* transpose into out-edges */
    for (uint32_t e = in_off[t]; e < in_off[t + 1]; e++)
      if (in_src[e] != DF_SENTINEL) {
        off[in_src[e] + 1]++;
        indeg[t]++;
      }
    indeg[t] += h->pos[t] > 0 && h->chain[t] < sms;
  }
  for (uint32_t i = 0; i < n; i++)
    off[i + 1] += off[i];
  memcpy(fill, off, sizeof(uint32_t) * n);
  for (uint32_t t = 0; t < n; t++)
    for (uint32_t e = in_off[t]; e < in_off[t + 1]; e++)
      if (in_src[e] != DF_SENTINEL)
        out[fill[in_src[e]]++] = t;
  for (uint32_t i = 0; i < n; i++)
    if (indeg[i] == 0)
      minset_insert(&ready, i);
  uint32_t done = 0;
  while (!minset_empty(&ready)) {
    uint32_t z = minset_pop(&ready);
    h->order[done] = z;
    h->topo_pos[z] = done++;
    uint32_t next = df_hb_queue_next(p, h, z);
    if (next != DF_SENTINEL && --indeg[next] == 0)
      minset_insert(&ready, next);
    for (uint32_t e = off[z]; e < off[z + 1]; e++)
      if (--indeg[out[e]] == 0)
        minset_insert(&ready, out[e]);
  }
  if (done < n) {
    return cycle_error(p, h, done);
  }
  return df_status_ok();
}

/* A topological order that walks the queues: each queue advances while
   its head has no unfinished predecessor on another queue. Linear and
   mostly sequential; a stall with instructions left is a cycle. Used
   when the exact min-heap order cannot change the result (see
   df_hb_build). */
df_status df_hb_chain_order(const df_plan *p, const uint32_t *in_off, const uint32_t *in_src,
                             df_arena *a, df_hb *h) {
  uint32_t n = p->instr_count, sms = p->topology.sm_count, chains = h->chain_count;
  uint32_t *left = df_arena_zero(a, n, sizeof(uint32_t));
  uint32_t *off = df_arena_zero(a, (uint64_t)n + 1, sizeof(uint32_t));
  uint32_t *head = df_arena_zero(a, chains, sizeof(uint32_t));
  uint32_t *single = df_arena_sentinels(a, chains - sms); /* unqueued chains' node */
  /* every chain once, plus once per unblocked head */
  uint32_t *stack = df_arena_array(a, (uint64_t)chains + n, sizeof(uint32_t));
  uint32_t *out = df_arena_array(a, in_off[n], sizeof(uint32_t));
  uint32_t *fill = df_arena_array(a, n, sizeof(uint32_t));
  if (!left || !off || !head || !single || !stack || !out || !fill)
    return DF_ARENA_OOM("the happens-before order");
  /* edges a queue does not already order: other chains, or backwards */
  for (uint32_t t = 0; t < n; t++) {
    if (h->chain[t] >= sms)
      single[h->chain[t] - sms] = t;
    for (uint32_t e = in_off[t]; e < in_off[t + 1]; e++) {
      uint32_t f = in_src[e];
      if (f != DF_SENTINEL && (h->chain[f] != h->chain[t] || h->pos[f] >= h->pos[t])) {
        off[f + 1]++;
        left[t]++;
      }
    }
  }
  for (uint32_t i = 0; i < n; i++)
    off[i + 1] += off[i];
  memcpy(fill, off, sizeof(uint32_t) * n);
  for (uint32_t t = 0; t < n; t++)
    for (uint32_t e = in_off[t]; e < in_off[t + 1]; e++) {
      uint32_t f = in_src[e];
      if (f != DF_SENTINEL && (h->chain[f] != h->chain[t] || h->pos[f] >= h->pos[t]))
        out[fill[f]++] = t;
    }
  uint32_t top = 0, done = 0;
  for (uint32_t c = chains; c-- > 0;)
    stack[top++] = c;
  while (top) {
    uint32_t c = stack[--top];
    uint32_t len = c < sms ? p->queue_lengths[c] : 1;
    const uint32_t *ids = c < sms ? p->queue_ids + p->queue_offsets[c] : &single[c - sms];
    while (head[c] < len && left[ids[head[c]]] == 0) {
      uint32_t z = ids[head[c]++];
      h->order[done] = z;
      h->topo_pos[z] = done++;
      for (uint32_t e = off[z]; e < off[z + 1]; e++) {
        uint32_t w = out[e], wc = h->chain[w];
        if (--left[w] == 0 && head[wc] == h->pos[w] && wc != c)
          stack[top++] = wc; /* its queue waited on w */
      }
    }
  }
  if (done < n) {
    return cycle_error(p, h, done);
  }
  return df_status_ok();
}
