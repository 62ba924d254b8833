/* Interference among the async-receive live ranges of one consumer SM
   (REFERENCE 3.5, 3.6). On one SM the receive dispatches sit on one
   queue, so a use is an interval (A, R] of queue positions: R is its
   receive's position + 1, A the latest position that happens before its
   send. Two uses overlap iff A_v < R_u and A_u < R_v; with the live ranges
   sorted by A and by R each bit row is one AND of two prefix sets. A
   decode step can put hundreds of receives on one SM, whose interference
   is nearly complete: rows keep that at L^2/64 words of work. Plans that
   do not fit the interval form fall back to testing pairs. */
#include <string.h>

#include "barrier_internal.h"
#include "sort_idx.h"
#include "vec.h"

#define KEY_FMT "(%u, %u, %u, %u, %u)"
#define KEY_ARGS(c) (c)->src_instr, (c)->dst_instr, (c)->src_slot, (c)->dst_slot, (c)->segment_id

enum { B_ROWS, B_PREFIX_A, B_PREFIX_R, B_DEG, B_A, B_R, B_ORDER, B_TMP };

void df_bar_graph_init(df_bar_graph *g, const df_allocator *alloc) {
  memset(g, 0, sizeof *g);
  g->alloc = alloc;
}

void df_bar_graph_free(df_bar_graph *g) {
  for (int i = 0; i < 8; i++)
    df_free(g->alloc, g->buf[i]);
  memset(g->buf, 0, sizeof g->buf);
}

static void *buffer(df_bar_graph *g, int which, uint64_t bytes) {
  if (bytes > UINT32_MAX)
    return NULL;
  if (df_vec_reserve(g->alloc, &g->buf[which], &g->cap[which], (uint32_t)bytes, 1).code !=
      DF_OK)
    return NULL;
  return g->buf[which];
}

/* Two transfers into one live range must not overlap; segments of one
   logical transfer never do. */
static df_status check_inside(const df_plan *p, const df_bar_analysis *an, uint32_t lr) {
  uint32_t a = an->lr_first[lr], b = an->lr_first[lr + 1];
  uint32_t same = a + 1; /* the common multi-use range: one transfer */
  while (same < b && df_comm_same_logical(&p->comms[an->uses[a].recv],
                                          &p->comms[an->uses[same].recv]))
    same++;
  if (same >= b)
    return df_status_ok();
  for (uint32_t u = a; u < b; u++)
    for (uint32_t v = u + 1; v < b; v++) {
      const df_comm *cu = &p->comms[an->uses[u].recv], *cv = &p->comms[an->uses[v].recv];
      if (!df_comm_same_logical(cu, cv) && df_bar_overlap(&an->probes[u], &an->probes[v]))
        return df_status_errorf(DF_EINVAL,
                                "target slot %u has overlapping async receive intervals on "
                                "SM %u: transfers " KEY_FMT " and " KEY_FMT,
                                an->uses[u].slot, an->uses[u].sm, KEY_ARGS(cu), KEY_ARGS(cv));
    }
  return df_status_ok();
}

/* The interval (A, R] of a use on queue column c. */
static void interval(const df_bar_probe *pr, uint32_t c, uint32_t *a, uint32_t *r) {
  uint32_t v = pr->send_row[c];
  if (pr->send_col == c && v < pr->send_pos1)
    v = pr->send_pos1;
  *a = v;
  *r = pr->recv_pos1;
}

/* Interval form: one receive column on the SM and one interval per live
   range (segments of a transfer share theirs). */
static bool intervals(const df_bar_analysis *an, uint32_t lr0, uint32_t lr1, uint32_t *A,
                      uint32_t *R) {
  uint32_t c = an->probes[an->lr_first[lr0]].recv_col;
  for (uint32_t x = lr0; x < lr1; x++)
    for (uint32_t u = an->lr_first[x]; u < an->lr_first[x + 1]; u++) {
      if (an->probes[u].recv_col != c)
        return false;
      uint32_t a, r;
      interval(&an->probes[u], c, &a, &r);
      if (u == an->lr_first[x]) {
        A[x - lr0] = a;
        R[x - lr0] = r;
      } else if (a != A[x - lr0] || r != R[x - lr0]) {
        return false;
      }
    }
  return true;
}

typedef struct by_value {
  const uint32_t *v;
} by_value;

static bool value_less(const void *ctx, uint32_t i, uint32_t j) {
  const by_value *b = ctx;
  return b->v[i] < b->v[j];
}

/* Number of sorted entries (order over v) with v < bound. */
static uint32_t count_below(const uint32_t *order, const uint32_t *v, uint32_t n,
                            uint32_t bound) {
  uint32_t lo = 0, hi = n;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (v[order[mid]] < bound)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/* Rows from prefix sets: P_i = the i live ranges of smallest A, Q_i the
   i of smallest R; row x = P_{#(A < R_x)} minus Q_{#(R <= A_x)}. */
static df_status rows_from_intervals(df_bar_graph *g, const uint32_t *A, const uint32_t *R) {
  uint32_t n = g->n, w = g->words;
  uint64_t *pa = buffer(g, B_PREFIX_A, ((uint64_t)n + 1) * w * 8);
  uint64_t *pr = buffer(g, B_PREFIX_R, ((uint64_t)n + 1) * w * 8);
  uint32_t *oa = buffer(g, B_ORDER, (uint64_t)n * 8);
  uint32_t *tmp = buffer(g, B_TMP, (uint64_t)n * 4);
  if (!pa || !pr || !oa || !tmp)
    return df_status_errorf(DF_ENOMEM, "out of memory building barrier interference");
  uint32_t *orr = oa + n;
  for (uint32_t i = 0; i < n; i++)
    oa[i] = orr[i] = i;
  by_value va = {A}, vr = {R};
  df_sort_idx(oa, n, tmp, value_less, &va);
  df_sort_idx(orr, n, tmp, value_less, &vr);
  memset(pa, 0, (size_t)w * 8);
  memset(pr, 0, (size_t)w * 8);
  for (uint32_t i = 0; i < n; i++) {
    memcpy(pa + (uint64_t)(i + 1) * w, pa + (uint64_t)i * w, (size_t)w * 8);
    memcpy(pr + (uint64_t)(i + 1) * w, pr + (uint64_t)i * w, (size_t)w * 8);
    pa[(uint64_t)(i + 1) * w + oa[i] / 64] |= 1ULL << (oa[i] % 64);
    pr[(uint64_t)(i + 1) * w + orr[i] / 64] |= 1ULL << (orr[i] % 64);
  }
  for (uint32_t x = 0; x < n; x++) {
    const uint64_t *p = pa + (uint64_t)count_below(oa, A, n, R[x]) * w;
    const uint64_t *q = pr + (uint64_t)count_below(orr, R, n, A[x] + 1) * w;
    uint64_t *row = g->rows + (uint64_t)x * w;
    for (uint32_t k = 0; k < w; k++)
      row[k] = p[k] & ~q[k];
    row[x / 64] &= ~(1ULL << (x % 64));
  }
  return df_status_ok();
}

/* Live ranges a and b interfere when any use of one overlaps any use of
   the other. */
static bool ranges_overlap(const df_bar_analysis *an, uint32_t a, uint32_t b) {
  for (uint32_t u = an->lr_first[a]; u < an->lr_first[a + 1]; u++)
    for (uint32_t v = an->lr_first[b]; v < an->lr_first[b + 1]; v++)
      if (df_bar_overlap(&an->probes[u], &an->probes[v]))
        return true;
  return false;
}

/* Any two uses of different live ranges that overlap connect them. */
static void rows_from_pairs(df_bar_graph *g, const df_bar_analysis *an) {
  uint32_t w = g->words;
  for (uint32_t x = 0; x < g->n; x++)
    for (uint32_t y = x + 1; y < g->n; y++) {
      bool hit = ranges_overlap(an, g->lr0 + x, g->lr0 + y);
      if (hit) {
        g->rows[(uint64_t)x * w + y / 64] |= 1ULL << (y % 64);
        g->rows[(uint64_t)y * w + x / 64] |= 1ULL << (x % 64);
      }
    }
}

static df_status push_pair(df_bar_graph *g, uint32_t **pairs, uint32_t *cap, uint32_t *edges,
                           uint32_t x, uint32_t y) {
  DF_TRY(df_vec_reserve(g->alloc, (void **)pairs, cap, 2 * (*edges + 1), sizeof(uint32_t)));
  (*pairs)[2 * *edges] = x;
  (*pairs)[2 * *edges + 1] = y;
  (*edges)++;
  return df_status_ok();
}

/* Edge pairs of an interval graph in O(n log n + edges): each edge is
   found from the interval that starts first, among those starting inside
   it (in (A, R) order, ties by id). */
static df_status pairs_from_intervals(df_bar_graph *g, const uint32_t *A, const uint32_t *R,
                                      uint32_t **pairs, uint32_t *cap, uint32_t *edges) {
  uint32_t n = g->n;
  uint32_t *oa = buffer(g, B_ORDER, (uint64_t)n * 8);
  uint32_t *tmp = buffer(g, B_TMP, (uint64_t)n * 4);
  if (!oa || !tmp)
    return df_status_errorf(DF_ENOMEM, "out of memory building barrier interference");
  for (uint32_t i = 0; i < n; i++)
    oa[i] = i;
  by_value va = {A};
  df_sort_idx(oa, n, tmp, value_less, &va); /* stable: ties stay in id order */
  for (uint32_t i = 0; i < n; i++) {
    uint32_t x = oa[i];
    for (uint32_t j = i + 1; j < n && A[oa[j]] < R[x]; j++)
      if (A[x] < R[oa[j]]) /* fails only for an empty (A = R) interval */
        DF_TRY(push_pair(g, pairs, cap, edges, x, oa[j]));
  }
  return df_status_ok();
}

static df_status pairs_from_uses(df_bar_graph *g, const df_bar_analysis *an, uint32_t **pairs,
                                 uint32_t *cap, uint32_t *edges) {
  for (uint32_t x = 0; x < g->n; x++)
    for (uint32_t y = x + 1; y < g->n; y++) {
      bool hit = ranges_overlap(an, g->lr0 + x, g->lr0 + y);
      if (hit)
        DF_TRY(push_pair(g, pairs, cap, edges, x, y));
    }
  return df_status_ok();
}

/* Beyond DF_BAR_DENSE_MAX live ranges: adjacency lists. */
static df_status lists(df_bar_graph *g, const df_bar_analysis *an, bool interval,
                       const uint32_t *A, const uint32_t *R) {
  uint32_t n = g->n, edges = 0, cap = 0;
  uint32_t *pairs = NULL;
  df_status st = interval ? pairs_from_intervals(g, A, R, &pairs, &cap, &edges)
                          : pairs_from_uses(g, an, &pairs, &cap, &edges);
  if (st.code == DF_OK) {
    g->off = buffer(g, B_ROWS, ((uint64_t)n + 1) * 4 + (uint64_t)edges * 8);
    if (!g->off)
      st = df_status_errorf(DF_ENOMEM, "out of memory building barrier interference");
  }
  if (st.code != DF_OK) {
    df_free(g->alloc, pairs);
    return st;
  }
  g->adj = g->off + n + 1;
  memset(g->off, 0, ((size_t)n + 1) * 4);
  for (uint32_t i = 0; i < 2 * edges; i++)
    g->off[pairs[i] + 1]++;
  for (uint32_t i = 0; i < n; i++)
    g->off[i + 1] += g->off[i];
  for (uint32_t i = 0; i < n; i++)
    g->deg[i] = 0;
  for (uint32_t i = 0; i < edges; i++) {
    uint32_t x = pairs[2 * i], y = pairs[2 * i + 1];
    g->adj[g->off[x] + g->deg[x]++] = y;
    g->adj[g->off[y] + g->deg[y]++] = x;
  }
  df_free(g->alloc, pairs);
  return df_status_ok();
}

df_status df_bar_graph_build(const df_plan *p, const df_bar_analysis *an, uint32_t lr0,
                             uint32_t lr1, df_bar_graph *g) {
  for (uint32_t x = lr0; x < lr1; x++)
    DF_TRY(check_inside(p, an, x));
  g->lr0 = lr0;
  g->n = lr1 - lr0;
  g->max_deg = 0;
  g->deg = buffer(g, B_DEG, (uint64_t)g->n * 4);
  if (!g->deg)
    return df_status_errorf(DF_ENOMEM, "out of memory building barrier interference");
  uint32_t *A = buffer(g, B_A, (uint64_t)g->n * 4), *R = buffer(g, B_R, (uint64_t)g->n * 4);
  if (!A || !R)
    return df_status_errorf(DF_ENOMEM, "out of memory building barrier interference");
  bool interval = intervals(an, lr0, lr1, A, R);
  if (g->n > DF_BAR_DENSE_MAX) {
    g->words = 0;
    DF_TRY(lists(g, an, interval, A, R));
  } else {
    g->words = (g->n + 63) / 64;
    g->rows = buffer(g, B_ROWS, (uint64_t)g->n * g->words * 8);
    if (!g->rows)
      return df_status_errorf(DF_ENOMEM, "out of memory building barrier interference");
    memset(g->rows, 0, (size_t)g->n * g->words * 8);
    if (interval)
      DF_TRY(rows_from_intervals(g, A, R));
    else
      rows_from_pairs(g, an);
    for (uint32_t x = 0; x < g->n; x++) {
      uint32_t d = 0;
      for (uint32_t k = 0; k < g->words; k++)
        d += (uint32_t)__builtin_popcountll(g->rows[(uint64_t)x * g->words + k]);
      g->deg[x] = d;
    }
  }
  for (uint32_t x = 0; x < g->n; x++)
    g->max_deg = g->deg[x] > g->max_deg ? g->deg[x] : g->max_deg;
  return df_status_ok();
}
