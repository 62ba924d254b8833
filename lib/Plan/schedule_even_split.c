/* even_split (df extension, include/df/plan.h): stream-K style pieces for
   all_at_once. The tasks' range units, concatenated in emission order
   (longest first), are cut into `chunks` nearly equal chunks at
   floor(i * total / chunks); each cut moves to the nearest multiple of the
   granularity from its task's start (or to the task's end, whichever is
   nearer), so the error of one cut never carries into the next. Each task
   counts `task_cost` extra units ahead of its range (its fixed costs: a
   partial, a reduce, a finalize), so chunks of many short tasks hold fewer
   keys. Positions are 128-bit: tasks x (length + cost) may pass 2^64. */
#include "schedule_internal.h"

typedef unsigned __int128 u128;

static u128 cut_at(u128 total, uint32_t chunks, uint32_t i) { return total * i / chunks; }

/* Chunk c's SM: in turn when there are more chunks than SMs (waves), else
   spread over the SMs. */
static uint32_t chunk_sm(const df_sched *s, uint32_t c, uint32_t chunks) {
  uint32_t n = s->topo.sm_count;
  return chunks > n ? c % n : (uint32_t)((uint64_t)c * n / chunks);
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
  uint32_t chunks = s->o->even_split_chunks ? s->o->even_split_chunks : s->topo.sm_count;
  uint32_t g = s->o->even_split_granularity ? s->o->even_split_granularity : 1;
  uint32_t cost = s->o->even_split_task_cost;
  u128 total = 0;
  for (uint32_t t = 0; t < T; t++)
    total += (u128)r->lengths[t] + cost;
  /* every cut inside a task adds one piece: at most T + chunks - 1 */
  uint64_t cap = (uint64_t)T + chunks;
  df_sched_piece *pieces = df_alloc(&s->p->alloc, sizeof *pieces * cap);
  uint32_t *first = df_alloc(&s->p->alloc, sizeof *first * ((uint64_t)T + 1));
  if (!pieces || !first) {
    df_free(&s->p->alloc, pieces);
    df_free(&s->p->alloc, first);
    return df_status_errorf(DF_ENOMEM, "out of memory splitting %u tasks into %u chunks", T,
                            chunks);
  }
  u128 pos = 0; /* start of the task (its cost units) in the concatenation */
  uint32_t c = 0, n = 0;
  for (uint32_t k = 0; k < T; k++) {
    uint32_t len = r->lengths[order[k]], cur = 0;
    first[k] = n;
    while (c + 1 < chunks && cut_at(total, chunks, c + 1) <= pos)
      c++;
    while (cur < len) {
      uint32_t e = len;
      bool inside = false;
      if (c + 1 < chunks) {
        u128 cut = cut_at(total, chunks, c + 1) - pos; /* > 0: c is past pos */
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
        c++; /* the rest of the task starts the next chunk */
    }
    pos += (u128)cost + len;
  }
  first[T] = n;
  *pieces_out = pieces;
  *first_out = first;
  return df_status_ok();
}
