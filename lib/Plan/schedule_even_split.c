/* even_split (df extension, include/df/plan.h): stream-K style pieces for
   all_at_once. The tasks' range units, concatenated in emission order
   (longest first), are cut into chunks: `chunks` nearly equal ones at
   floor(i * total / chunks), or with even_split_taper batches of `chunks`
   equal ones, each batch taking a share of what is left, so chunks
   shrink from batch to batch. Each cut moves to the nearest multiple of
   the granularity from its task's start (or to the task's end, whichever
   is nearer), so the error of one cut never carries into the next. Each
   task counts `task_cost` extra units ahead of its range (its fixed
   costs: a partial, a reduce, a finalize), so chunks of many short tasks
   hold fewer keys. Positions are 128-bit: tasks x (length + cost) may
   pass 2^64. */
#include "schedule_internal.h"

typedef unsigned __int128 u128;

/* The cuts between chunks, in order: batch by batch, cut i of a batch at
   start + i * span / n (i = 1..n; the last is the batch's end). */
typedef struct cutter {
  u128 total, start, span;
  uint32_t i, n;       /* the next cut is the batch's i-th of n */
  uint32_t per, taper; /* chunks per batch; percent per batch (0: one batch) */
  uint32_t min;        /* with taper: the shortest chunk of a tapered batch */
  u128 last;           /* the last tapered batch's chunk length; 0: none yet */
} cutter;

/* The batch starting at k->start. */
static void batch(cutter *k) {
  u128 rest = k->total - k->start;
  k->i = 1;
  if (!k->taper) {
    k->span = rest, k->n = k->per;
    return;
  }
  u128 share = rest * k->taper / 100;
  if (share / k->per >= k->min) {
    k->span = share, k->n = k->per, k->last = share / k->per;
    return;
  }
  /* the last batch: the rest in chunks of at least min, at most per of
     them, but never longer than the batch before (a taper under 50 %
     leaves more than a batch took) */
  u128 n = rest / k->min; /* min >= 1: DF_EVEN_SPLIT_TAPER_MIN when unset */
  n = n < 1 ? 1 : n > k->per ? k->per : n;
  if (k->last && n * k->last < rest)
    n = (rest + k->last - 1) / k->last;
  k->span = rest;
  /* past the chunk limit either way: chunk_count refuses it */
  k->n = n > 2u * DF_EVEN_SPLIT_MAX_CHUNKS ? 2u * DF_EVEN_SPLIT_MAX_CHUNKS : (uint32_t)n;
}

static cutter cutter_make(u128 total, uint32_t per, uint32_t taper, uint32_t min) {
  cutter k = {total, 0, 0, 0, 0, per, taper, min, 0};
  batch(&k);
  return k;
}

/* Whether a cut is left (the current chunk does not end at total). */
static bool cut_left(const cutter *k) { return k->start + k->span < k->total || k->i < k->n; }

static u128 cut_pos(const cutter *k) { return k->start + k->span * k->i / k->n; }

static void cut_pass(cutter *k) {
  if (k->i < k->n) {
    k->i++;
    return;
  }
  k->start += k->span;
  batch(k);
}

/* Chunks the cutter makes, counted up to one past the limit. */
static uint64_t chunk_count(cutter k) {
  uint64_t n = 1;
  for (; cut_left(&k) && n <= DF_EVEN_SPLIT_MAX_CHUNKS; cut_pass(&k))
    n++;
  return n;
}

/* Chunk c's SM: in turn when there are more chunks than SMs (waves, and
   every tapered split), else spread over the SMs. */
static uint32_t chunk_sm(const df_sched *s, uint32_t c, uint64_t chunks) {
  uint32_t n = s->topo.sm_count;
  return chunks > n || s->o->even_split_taper ? c % n : (uint32_t)((uint64_t)c * n / chunks);
}

/* Local cut `cut` (0 < cut < len) moved to the nearest multiple of g or to
   len (ties: the multiple). */
static uint32_t snap(uint64_t cut, uint32_t len, uint32_t g) {
  uint64_t down = cut / g * g, up = down + g;
  uint64_t m = cut - down <= up - cut ? down : up;
  uint64_t dm = m > cut ? m - cut : cut - m;
  if (m >= len || len - cut < dm)
    return len;
  return (uint32_t)m;
}

df_status df_sched_even_split(df_sched *s, const uint32_t *order, df_sched_piece **pieces_out,
                              uint32_t **first_out) {
  const df_range_lengths *r = s->range;
  uint32_t T = r->count;
  uint32_t per = s->o->even_split_chunks ? s->o->even_split_chunks : s->topo.sm_count;
  uint32_t g = s->o->even_split_granularity ? s->o->even_split_granularity : 1;
  uint32_t cost = s->o->even_split_task_cost;
  uint32_t min = s->o->even_split_taper_min ? s->o->even_split_taper_min : DF_EVEN_SPLIT_TAPER_MIN;
  u128 total = 0;
  for (uint32_t t = 0; t < T; t++)
    total += (u128)r->lengths[t] + cost;
  cutter cuts = cutter_make(total, per, s->o->even_split_taper, min);
  uint64_t chunks = s->o->even_split_taper ? chunk_count(cuts) : per;
  if (chunks > DF_EVEN_SPLIT_MAX_CHUNKS)
    return df_status_errorf(DF_EINVAL,
                            "Dataflow even_split_taper %u (batches of %u, chunks of at least "
                            "%u units) cuts more than %u chunks",
                            s->o->even_split_taper, per, min, DF_EVEN_SPLIT_MAX_CHUNKS);
  /* every cut inside a task adds one piece: at most T + chunks - 1 */
  uint64_t cap = (uint64_t)T + chunks;
  df_sched_piece *pieces = df_alloc(&s->p->alloc, sizeof *pieces * cap);
  uint32_t *first = df_alloc(&s->p->alloc, sizeof *first * ((uint64_t)T + 1));
  if (!pieces || !first) {
    df_free(&s->p->alloc, pieces);
    df_free(&s->p->alloc, first);
    return df_status_errorf(DF_ENOMEM, "out of memory splitting %u tasks into %llu chunks", T,
                            (unsigned long long)chunks);
  }
  u128 pos = 0; /* start of the task (its cost units) in the concatenation */
  uint32_t c = 0, n = 0;
  for (uint32_t k = 0; k < T; k++) {
    uint32_t len = r->lengths[order[k]], cur = 0;
    first[k] = n;
    while (cut_left(&cuts) && cut_pos(&cuts) <= pos)
      c++, cut_pass(&cuts);
    while (cur < len) {
      uint32_t e = len;
      bool inside = false;
      if (cut_left(&cuts)) {
        u128 cut = cut_pos(&cuts) - pos; /* > 0: c is past pos */
        if (cut < (u128)cost + len) {
          inside = true;
          e = cut <= cost ? 0 : snap((uint64_t)(cut - cost), len, g);
        }
      }
      if (e > cur) {
        pieces[n++] = (df_sched_piece){cur, e, chunk_sm(s, c, chunks)};
        cur = e;
      }
      if (inside)
        c++, cut_pass(&cuts); /* the rest of the task starts the next chunk */
    }
    pos += (u128)cost + len;
  }
  first[T] = n;
  *pieces_out = pieces;
  *first_out = first;
  return df_status_ok();
}
