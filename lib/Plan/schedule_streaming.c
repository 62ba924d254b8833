/* Streaming reduce strategies of cluster_local (REFERENCE 2.5): default
   chunking of each task's blocks over its cluster's SMs, then a running
   accumulator chain (streaming) or a binary tree (streaming_tree). */
#include <stdlib.h>
#include <string.h>

#include "schedule_internal.h"

typedef struct chunk {
  uint32_t task, sm, b, e, part, parts;
} chunk;

/* Workspace of one streaming schedule, all from the plan allocator. */
typedef struct stream_ws {
  chunk *chunks;
  uint32_t chunk_count;
  uint32_t *task_first; /* first chunk of each task (chunks are contiguous) */
  uint64_t *scratch;    /* task order keys, then cluster lists */
  uint32_t *cluster_of; /* cluster of each task */
  /* groups: a run of consecutive instruction ids queued together */
  uint32_t *group_first, *group_count, *group_key;
  uint32_t group_total;
} stream_ws;

static void ws_free(df_sched *s, stream_ws *w) {
  df_allocator *a = &s->p->alloc;
  df_free(a, w->chunks);
  df_free(a, w->task_first);
  df_free(a, w->scratch);
  df_free(a, w->cluster_of);
  df_free(a, w->group_first);
  df_free(a, w->group_count);
  df_free(a, w->group_key);
}

/* Min-heap of clusters by load per SM (cross-multiplied), ties -> lower id. */
typedef struct cluster_heap {
  uint32_t *ids;
  uint64_t *load;
  const df_sched *s;
  uint32_t n;
} cluster_heap;

static uint32_t cluster_size_of(const df_sched *s, uint32_t c) {
  uint32_t first, count;
  df_sched_cluster_sms(s, c, &first, &count);
  return count;
}

static bool heap_less(const cluster_heap *h, uint32_t a, uint32_t b) {
  /* Equal cluster sizes (sm_count divisible by cluster_size): compare the
     loads directly; this runs T log C times per schedule. */
  if (h->s->topo.sm_count % h->s->topo.cluster_size == 0)
    return h->load[a] < h->load[b] || (h->load[a] == h->load[b] && a < b);
  unsigned __int128 la = (unsigned __int128)h->load[a] * cluster_size_of(h->s, b);
  unsigned __int128 lb = (unsigned __int128)h->load[b] * cluster_size_of(h->s, a);
  return la < lb || (la == lb && a < b);
}

static void heap_sift_down(cluster_heap *h, uint32_t i) {
  for (;;) {
    uint32_t l = 2 * i + 1, r = l + 1, m = i;
    if (l < h->n && heap_less(h, h->ids[l], h->ids[m]))
      m = l;
    if (r < h->n && heap_less(h, h->ids[r], h->ids[m]))
      m = r;
    if (m == i)
      return;
    uint32_t t = h->ids[i];
    h->ids[i] = h->ids[m];
    h->ids[m] = t;
    i = m;
  }
}

/* Longest first, ties by task id: the keys start in task order, so a
   stable LSD radix sort on their high 32 bits (UINT32_MAX - length) is
   enough; `tmp` holds n keys. Four passes leave the result in `key`. */
static void sort_longest_first(uint64_t *key, uint64_t *tmp, uint32_t n) {
  for (unsigned shift = 32; shift < 64; shift += 8) {
    uint32_t pos[257] = {0};
    for (uint32_t i = 0; i < n; i++)
      pos[((key[i] >> shift) & 255) + 1]++;
    for (int d = 0; d < 256; d++)
      pos[d + 1] += pos[d];
    for (uint32_t i = 0; i < n; i++)
      tmp[pos[(key[i] >> shift) & 255]++] = key[i];
    uint64_t *t = key;
    key = tmp;
    tmp = t;
  }
}

/* Tasks to clusters longest first, each to the least loaded cluster per SM;
   fills w->cluster_of and, in w->scratch, each cluster's tasks in
   assignment order (offsets in the returned `starts`). */
static df_status assign_clusters(df_sched *s, stream_ws *w, uint32_t *starts) {
  const df_range_lengths *r = s->range;
  uint32_t T = r->count, C = df_topology_cluster_count(&s->topo);
  uint64_t *key = w->scratch; /* [0, T): order keys; [T, 2T): cluster lists */
  for (uint32_t t = 0; t < T; t++)
    key[t] = ((uint64_t)(UINT32_MAX - r->lengths[t]) << 32) | t;
  sort_longest_first(key, key + T, T);
  cluster_heap h = {.s = s, .n = C};
  h.ids = df_alloc(&s->p->alloc, sizeof(uint32_t) * C);
  h.load = df_alloc(&s->p->alloc, sizeof(uint64_t) * C);
  if (!h.ids || !h.load) {
    df_free(&s->p->alloc, h.ids);
    df_free(&s->p->alloc, h.load);
    return df_status_errorf(DF_ENOMEM, "out of memory assigning tasks to clusters");
  }
  for (uint32_t c = 0; c < C; c++)
    h.ids[c] = c, h.load[c] = 0; /* already a heap: equal loads, ids ascending */
  memset(starts, 0, sizeof(uint32_t) * (C + 1));
  for (uint32_t i = 0; i < T; i++) {
    uint32_t t = (uint32_t)key[i], c = h.ids[0];
    w->cluster_of[t] = c;
    starts[c + 1]++;
    h.load[c] += df_sched_blocks(s, r->lengths[t]);
    heap_sift_down(&h, 0);
  }
  for (uint32_t c = 0; c < C; c++)
    starts[c + 1] += starts[c];
  /* counting placement keeps assignment order inside each cluster */
  uint32_t *fill = h.ids;
  memcpy(fill, starts, sizeof(uint32_t) * C);
  for (uint32_t i = 0; i < T; i++) {
    uint32_t t = (uint32_t)key[i];
    key[T + fill[w->cluster_of[t]]++] = t;
  }
  df_free(&s->p->alloc, h.ids);
  df_free(&s->p->alloc, h.load);
  return df_status_ok();
}

/* Fill a cluster's SMs in order up to ceil(blocks / SMs) each; a task spills
   to the next SM, the last SM takes the remainder. */
static void chunk_cluster(df_sched *s, stream_ws *w, uint32_t c, const uint64_t *tasks,
                          uint32_t n_tasks) {
  uint32_t first, n;
  df_sched_cluster_sms(s, c, &first, &n);
  uint64_t total = 0;
  for (uint32_t i = 0; i < n_tasks; i++)
    total += df_sched_blocks(s, s->range->lengths[tasks[i]]);
  uint64_t target = (total + n - 1) / n, fill = 0;
  uint32_t sm = 0;
  for (uint32_t i = 0; i < n_tasks; i++) {
    uint32_t t = (uint32_t)tasks[i], len = s->range->lengths[t];
    uint64_t nb = df_sched_blocks(s, len), blk = 0;
    uint32_t start = w->chunk_count;
    w->task_first[t] = start;
    while (blk < nb) {
      uint64_t take = sm == n - 1 ? nb - blk : target - fill;
      if (take > nb - blk)
        take = nb - blk;
      if (take == 0) {
        sm++, fill = 0;
        continue;
      }
      uint64_t b = blk * s->block, e = (blk + take) * s->block;
      w->chunks[w->chunk_count++] = (chunk){t, first + sm, (uint32_t)b,
                                            (uint32_t)(e < len ? e : len), 0, 0};
      blk += take;
      fill += take;
      if (sm < n - 1 && fill >= target)
        sm++, fill = 0;
    }
    for (uint32_t k = start; k < w->chunk_count; k++) {
      w->chunks[k].part = k - start;
      w->chunks[k].parts = w->chunk_count - start;
    }
  }
}

static df_status make_chunks(df_sched *s, stream_ws *w) {
  df_allocator *a = &s->p->alloc;
  uint32_t T = s->range->count, C = df_topology_cluster_count(&s->topo);
  /* each SM switch splits at most one task: chunks <= tasks + SMs */
  uint64_t max_chunks = (uint64_t)T + s->topo.sm_count;
  w->chunks = df_alloc(a, sizeof(chunk) * max_chunks);
  w->task_first = df_alloc(a, sizeof(uint32_t) * T);
  w->scratch = df_alloc(a, sizeof(uint64_t) * 2 * T);
  w->cluster_of = df_alloc(a, sizeof(uint32_t) * T);
  uint32_t *starts = df_alloc(a, sizeof(uint32_t) * (C + 1));
  if (!w->chunks || !w->task_first || !w->scratch || !w->cluster_of || !starts) {
    df_free(a, starts);
    return df_status_errorf(DF_ENOMEM, "out of memory chunking %u tasks", T);
  }
  df_status st = assign_clusters(s, w, starts);
  for (uint32_t c = 0; c < C && !df_failed(&st); c++)
    chunk_cluster(s, w, c, w->scratch + T + starts[c], starts[c + 1] - starts[c]);
  df_free(a, starts);
  return st;
}

static df_status alloc_groups(df_sched *s, stream_ws *w, uint64_t max_groups) {
  df_allocator *a = &s->p->alloc;
  w->group_first = df_alloc(a, sizeof(uint32_t) * max_groups);
  w->group_count = df_alloc(a, sizeof(uint32_t) * max_groups);
  w->group_key = df_alloc(a, sizeof(uint32_t) * max_groups);
  if (!w->group_first || !w->group_count || !w->group_key)
    return df_status_errorf(DF_ENOMEM, "out of memory ordering streaming queues");
  return df_status_ok();
}

static void add_group(stream_ws *w, uint32_t first, uint32_t count, uint32_t key) {
  w->group_first[w->group_total] = first;
  w->group_count[w->group_total] = count;
  w->group_key[w->group_total++] = key;
}

/* Queue order: groups stably bucketed by key (groups are emitted in (task,
   part) order, so each bucket is already sorted by the rest of the key). */
static df_status order_groups(df_sched *s, stream_ws *w, uint32_t keys) {
  df_allocator *a = &s->p->alloc;
  uint32_t n = s->p->instr_count;
  uint32_t *pos = df_alloc(a, sizeof(uint32_t) * (keys + 1));
  s->order = df_alloc(a, sizeof(uint32_t) * (n ? n : 1));
  if (!s->order || !pos) {
    df_free(a, pos);
    return df_status_errorf(DF_ENOMEM, "out of memory ordering streaming queues");
  }
  memset(pos, 0, sizeof(uint32_t) * (keys + 1));
  for (uint32_t g = 0; g < w->group_total; g++)
    pos[w->group_key[g] + 1] += w->group_count[g];
  for (uint32_t k = 0; k < keys; k++)
    pos[k + 1] += pos[k];
  for (uint32_t g = 0; g < w->group_total; g++)
    for (uint32_t i = 0; i < w->group_count[g]; i++)
      s->order[pos[w->group_key[g]]++] = w->group_first[g] + i;
  s->order_count = pos[keys - 1];
  df_free(a, pos);
  return df_status_ok();
}

/* A partial (storage 1) or accumulator slot with a fixed shared storage. */
static uint32_t slot_in(df_sched *s, uint32_t task, df_slot_role role, uint32_t producer,
                        uint32_t storage) {
  int32_t type = s->prog->stages[role == DF_ROLE_PARTIAL ? s->partial : s->reduce].type;
  uint32_t id = df_sched_slot(s, task, type, role, producer);
  if (id != DF_SENTINEL)
    s->p->slots[id].shared_storage = storage;
  return id;
}

/* ITER of a chunk into a partial slot of the given shared storage. */
static uint32_t chunk_iter(df_sched *s, const chunk *c, uint32_t storage) {
  uint32_t slot = slot_in(s, c->task, DF_ROLE_PARTIAL, s->p->instr_count, storage);
  df_sched_iter(s, c->task, c->sm, c->b, c->e, slot);
  return slot;
}

/* REDUCE_UPDATE into a new accumulator; returns its instruction id. */
static uint32_t reduce_update(df_sched *s, uint32_t task, uint32_t sm, const uint32_t *in,
                              uint32_t n, uint32_t storage, uint32_t *slot) {
  *slot = slot_in(s, task, DF_ROLE_ACCUMULATOR, s->p->instr_count, storage);
  return df_sched_instr(s, DF_INSTR_REDUCE_UPDATE, task, sm, s->reduce, in, n, *slot);
}

static void finalize(df_sched *s, uint32_t task, uint32_t sm, uint32_t acc) {
  if (s->finalize >= 0)
    df_sched_instr(s, DF_INSTR_FINALIZE, task, sm, s->finalize, &acc, 1, DF_SENTINEL);
}

static df_status streaming(df_sched *s, stream_ws *w) {
  DF_TRY(make_chunks(s, w));
  uint64_t C = w->chunk_count, T = s->range->count;
  DF_TRY(df_sched_reserve(s, 2 * C + T, 2 * C, 2 * C, 2 * C + T));
  DF_TRY(alloc_groups(s, w, C));
  /* Every CTA keeps one accumulator region (REFERENCE 4). A cluster push
     lands whenever its sender runs, so into a CTA that runs chunks of
     several tasks it could overwrite another chain's accumulator; such
     transfers are pulled through HBM instead, when the receiver is ready. */
  uint32_t *chunks_on = df_alloc(&s->p->alloc, sizeof(uint32_t) * s->topo.sm_count);
  if (!chunks_on)
    return df_status_errorf(DF_ENOMEM, "out of memory counting chunks per SM");
  memset(chunks_on, 0, sizeof(uint32_t) * s->topo.sm_count);
  for (uint32_t i = 0; i < w->chunk_count; i++)
    chunks_on[w->chunks[i].sm]++;
  bool fin = s->finalize >= 0;
  for (uint32_t t = 0; t < T; t++) {
    const chunk *ch = &w->chunks[w->task_first[t]];
    uint32_t acc = DF_SENTINEL, acc_instr = DF_SENTINEL, acc_sm = 0;
    for (uint32_t k = 0; k < ch[0].parts; k++) {
      const chunk *c = &ch[k];
      uint32_t first = s->p->instr_count, in[2], n = 0, prev = acc;
      uint32_t part = chunk_iter(s, c, 1);
      if (k)
        in[n++] = acc;
      in[n++] = part;
      uint32_t ru = reduce_update(s, t, c->sm, in, n, 0, &acc);
      if (k && acc_sm != c->sm)
        df_sched_transfer(s, acc_instr, ru, prev, prev, acc_sm, c->sm, 1, t + 1,
                          chunks_on[c->sm] > 1);
      acc_instr = ru, acc_sm = c->sm;
      bool last = k + 1 == c->parts;
      if (last)
        finalize(s, t, c->sm, acc);
      /* first part of a multi-part task first, single-part tasks next,
         later parts last */
      uint32_t prio = c->parts == 1 ? 1 : k == 0 ? 0 : 2;
      add_group(w, first, 2 + (last && fin), prio);
    }
  }
  df_free(&s->p->alloc, chunks_on);
  if (s->overflow)
    return df_status_ok(); /* reported by the caller */
  return order_groups(s, w, 3);
}

df_status df_schedule_streaming(df_sched *s) {
  stream_ws w;
  memset(&w, 0, sizeof w);
  df_status st = streaming(s, &w);
  ws_free(s, &w);
  return st;
}

/* One tree node waiting to be paired. */
typedef struct node {
  uint32_t slot, instr, sm, group;
} node;

/* Tree partials share one region keyed by a slot id (the plan's first
   slot, always a partial) so the key cannot collide with an accumulator's
   own-id key; accumulators each keep their own region because leaves must
   live until their tree node runs. */
static void tree_task(df_sched *s, stream_ws *w, uint32_t t, node *nodes) {
  const chunk *ch = &w->chunks[w->task_first[t]];
  uint32_t n = ch[0].parts;
  for (uint32_t k = 0; k < n; k++) {
    uint32_t first = s->p->instr_count, acc;
    uint32_t part = chunk_iter(s, &ch[k], 0);
    uint32_t ru = reduce_update(s, t, ch[k].sm, &part, 1, DF_SENTINEL, &acc);
    nodes[k] = (node){acc, ru, ch[k].sm, w->group_total};
    add_group(w, first, 2, 0);
  }
  for (uint32_t level = 1; n > 1; level++) {
    uint32_t m = 0;
    for (uint32_t i = 0; i + 1 < n; i += 2) {
      node l = nodes[i], r = nodes[i + 1];
      uint32_t in[2] = {l.slot, r.slot}, acc;
      uint32_t ru = reduce_update(s, t, l.sm, in, 2, DF_SENTINEL, &acc);
      if (r.sm != l.sm)
        df_sched_transfer(s, r.instr, ru, r.slot, r.slot, r.sm, l.sm, 1, t + 1, false);
      nodes[m++] = (node){acc, ru, l.sm, w->group_total};
      add_group(w, ru, 1, level);
    }
    if (n % 2)
      nodes[m++] = nodes[n - 1]; /* odd node carried up */
    n = m;
  }
  if (s->finalize >= 0) {
    finalize(s, t, nodes[0].sm, nodes[0].slot);
    w->group_count[nodes[0].group]++; /* FINALIZE follows the root's instructions */
  }
}

static df_status streaming_tree(df_sched *s, stream_ws *w) {
  DF_TRY(make_chunks(s, w));
  uint64_t C = w->chunk_count, T = s->range->count;
  /* leaves: ITER + REDUCE_UPDATE each; C - T inner nodes; T finalizes */
  DF_TRY(df_sched_reserve(s, 3 * C, 3 * C, 2 * C, 3 * C + T));
  DF_TRY(alloc_groups(s, w, 2 * C));
  uint32_t max_parts = 1, max_level = 0;
  for (uint32_t t = 0; t < T; t++) {
    uint32_t parts = w->chunks[w->task_first[t]].parts, levels = 0;
    max_parts = parts > max_parts ? parts : max_parts;
    while ((1ull << levels) < parts)
      levels++;
    max_level = levels > max_level ? levels : max_level;
  }
  node *nodes = df_alloc(&s->p->alloc, sizeof(node) * max_parts);
  if (!nodes)
    return df_status_errorf(DF_ENOMEM, "out of memory building reduce trees");
  for (uint32_t t = 0; t < T; t++)
    tree_task(s, w, t, nodes);
  df_free(&s->p->alloc, nodes);
  if (s->overflow)
    return df_status_ok(); /* reported by the caller */
  return order_groups(s, w, max_level + 1);
}

df_status df_schedule_streaming_tree(df_sched *s) {
  stream_ws w;
  memset(&w, 0, sizeof w);
  df_status st = streaming_tree(s, &w);
  ws_free(s, &w);
  return st;
}
