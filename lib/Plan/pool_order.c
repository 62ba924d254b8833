/* The claim order of a pool (docs/pool.md): a list schedule of the items
   on the plan's CTAs under the automatic split's cost model (df/split.h),
   recorded in the order its CTAs take them. Each free CTA takes, among
   the items whose producers were all taken, the most urgent one that
   could start now (the longest remaining chain: its cost plus its
   longest chain of consumers), else the one ready soonest. At run time
   the CTAs claim the items in that order as they come free, so a slow
   SM takes fewer; the order is topological, so an item only ever waits
   for items claimed before it. */
#include <string.h>

#include "pack_internal.h"

#define S DF_SENTINEL

typedef struct order_state {
  const df_pool_items *it;
  df_arena *a;
  uint32_t *cons_off, *cons;  /* consumers, CSR */
  uint32_t *waiting;          /* producers not yet taken */
  double *chain, *ready, *finish;
} order_state;

static df_status consumers(order_state *o) {
  const df_pool_items *it = o->it;
  uint32_t n = it->count, np = it->prod_off[n];
  o->cons_off = df_arena_array(o->a, (uint64_t)n + 1, sizeof(uint32_t));
  o->cons = df_arena_array(o->a, np ? np : 1, sizeof(uint32_t));
  o->waiting = df_arena_array(o->a, n, sizeof(uint32_t));
  if (!o->cons_off || !o->cons || !o->waiting)
    return DF_ARENA_OOM("the pool's consumers");
  memset(o->cons_off, 0, sizeof(uint32_t) * ((size_t)n + 1));
  for (uint32_t g = 0; g < n; g++) {
    o->waiting[g] = it->prod_off[g + 1] - it->prod_off[g];
    for (uint32_t j = it->prod_off[g]; j < it->prod_off[g + 1]; j++)
      o->cons_off[it->prods[j] + 1]++;
  }
  for (uint32_t g = 0; g < n; g++)
    o->cons_off[g + 1] += o->cons_off[g];
  uint32_t *at = df_arena_array(o->a, n ? n : 1, sizeof(uint32_t));
  if (!at)
    return DF_ARENA_OOM("the pool's consumers");
  memcpy(at, o->cons_off, sizeof(uint32_t) * n);
  for (uint32_t g = 0; g < n; g++)
    for (uint32_t j = it->prod_off[g]; j < it->prod_off[g + 1]; j++)
      o->cons[at[it->prods[j]]++] = g;
  return df_status_ok();
}

/* chain[g] = cost + edge + the longest chain of a consumer, over a
   topological order (Kahn on the producers); a cycle is an error. */
static df_status chains(order_state *o) {
  const df_pool_items *it = o->it;
  uint32_t n = it->count;
  uint32_t *topo = df_arena_array(o->a, n, sizeof(uint32_t));
  uint32_t *left = df_arena_array(o->a, n, sizeof(uint32_t));
  o->chain = df_arena_array(o->a, n, sizeof(double));
  if (!topo || !left || !o->chain)
    return DF_ARENA_OOM("the pool's chains");
  uint32_t head = 0, tail = 0;
  for (uint32_t g = 0; g < n; g++) {
    left[g] = o->waiting[g];
    if (!left[g])
      topo[tail++] = g;
  }
  while (head < tail) {
    uint32_t g = topo[head++];
    for (uint32_t j = o->cons_off[g]; j < o->cons_off[g + 1]; j++)
      if (!--left[o->cons[j]])
        topo[tail++] = o->cons[j];
  }
  if (tail != n)
    return df_status_errorf(DF_EINVAL, "pool: the items' inputs form a cycle (%u of %u ordered)",
                            tail, n);
  for (uint32_t i = n; i-- > 0;) {
    uint32_t g = topo[i];
    double after = 0;
    for (uint32_t j = o->cons_off[g]; j < o->cons_off[g + 1]; j++)
      if (o->chain[o->cons[j]] > after)
        after = o->chain[o->cons[j]];
    o->chain[g] = it->cost[g] + (after > 0 ? it->edge_us + after : 0);
  }
  return df_status_ok();
}

/* A binary heap of indices under a context comparator (top = the least). */
typedef bool (*heap_less)(const order_state *o, uint32_t a, uint32_t b);
typedef struct heap {
  uint32_t *v, n;
  heap_less less;
} heap;

static void heap_push(const order_state *o, heap *h, uint32_t x) {
  uint32_t i = h->n++;
  while (i && h->less(o, x, h->v[(i - 1) / 2])) {
    h->v[i] = h->v[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  h->v[i] = x;
}

static uint32_t heap_pop(const order_state *o, heap *h) {
  uint32_t top = h->v[0], x = h->v[--h->n], i = 0;
  for (;;) {
    uint32_t l = 2 * i + 1, m = l;
    if (l >= h->n)
      break;
    if (l + 1 < h->n && h->less(o, h->v[l + 1], h->v[l]))
      m = l + 1;
    if (!h->less(o, h->v[m], x))
      break;
    h->v[i] = h->v[m];
    i = m;
  }
  if (h->n)
    h->v[i] = x;
  return top;
}

/* Items that can start now: the longest chain, then the plan's order. */
static bool more_urgent(const order_state *o, uint32_t a, uint32_t b) {
  if (o->chain[a] != o->chain[b])
    return o->chain[a] > o->chain[b];
  return a < b;
}

/* Items not ready yet: the soonest ready, then as above. */
static bool sooner(const order_state *o, uint32_t a, uint32_t b) {
  if (o->ready[a] != o->ready[b])
    return o->ready[a] < o->ready[b];
  return more_urgent(o, a, b);
}

/* The CTAs by free time, then index: the first free is the top. */
typedef struct cta_heap {
  double *free_at;
  uint32_t *v, n;
} cta_heap;

static void cta_sift(cta_heap *h, uint32_t i) {
  uint32_t x = h->v[i];
  for (;;) {
    uint32_t l = 2 * i + 1, m = l;
    if (l >= h->n)
      break;
    if (l + 1 < h->n && (h->free_at[h->v[l + 1]] < h->free_at[h->v[l]] ||
                         (h->free_at[h->v[l + 1]] == h->free_at[h->v[l]] &&
                          h->v[l + 1] < h->v[l])))
      m = l + 1;
    if (h->free_at[h->v[m]] > h->free_at[x] ||
        (h->free_at[h->v[m]] == h->free_at[x] && h->v[m] > x))
      break;
    h->v[i] = h->v[m];
    i = m;
  }
  h->v[i] = x;
}

df_status df_pool_order(const df_pool_items *it, df_arena *a, uint32_t *order) {
  order_state o = {.it = it, .a = a};
  uint32_t n = it->count, ctas = it->ctas ? it->ctas : 1;
  DF_TRY(consumers(&o));
  DF_TRY(chains(&o));
  o.ready = df_arena_array(a, n, sizeof(double));
  o.finish = df_arena_array(a, n, sizeof(double));
  double *free_at = df_arena_array(a, ctas, sizeof(double));
  uint32_t *cv = df_arena_array(a, ctas, sizeof(uint32_t));
  heap now = {df_arena_array(a, n, sizeof(uint32_t)), 0, more_urgent};
  heap later = {df_arena_array(a, n, sizeof(uint32_t)), 0, sooner};
  if (!o.ready || !o.finish || !free_at || !cv || !now.v || !later.v)
    return DF_ARENA_OOM("the pool's order");
  memset(free_at, 0, sizeof(double) * ctas);
  cta_heap ch = {free_at, cv, ctas};
  for (uint32_t i = 0; i < ctas; i++)
    cv[i] = i; /* all free at 0: a heap in index order */
  for (uint32_t g = 0; g < n; g++) {
    o.ready[g] = 0;
    if (!o.waiting[g])
      heap_push(&o, &now, g);
  }
  for (uint32_t k = 0; k < n; k++) {
    uint32_t c = cv[0];
    double t = free_at[c]; /* never decreases: a heap item stays ready */
    while (later.n && o.ready[later.v[0]] <= t)
      heap_push(&o, &now, heap_pop(&o, &later));
    if (!now.n && !later.n) /* chains() found no cycle, so something is available */
      return df_status_errorf(DF_EINTERNAL, "pool: no item to order at %u of %u", k, n);
    uint32_t g = now.n ? heap_pop(&o, &now) : heap_pop(&o, &later);
    double start = o.ready[g] > t ? o.ready[g] : t;
    o.finish[g] = start + it->cost[g];
    free_at[c] = o.finish[g];
    cta_sift(&ch, 0);
    order[k] = g;
    for (uint32_t j = o.cons_off[g]; j < o.cons_off[g + 1]; j++) {
      uint32_t d = o.cons[j];
      double r = o.finish[g] + it->edge_us;
      if (r > o.ready[d])
        o.ready[d] = r;
      if (!--o.waiting[d])
        heap_push(&o, o.ready[d] <= t ? &now : &later, d);
    }
  }
  return df_status_ok();
}
