/* df_split_choose: the automatic block size and placement of all_at_once
   schedules (df-schedule block-size=auto). The placement mirrors
   schedule.c (round_robin / balance_iters, defer_reduces); the cost model
   is the one of bench/attention/cases.py, documented in df/split.h. */
#include <stdlib.h>
#include <string.h>

#include "df/alloc.h"
#include "df/split.h"
#include "sort_idx.h"

df_split_search df_split_search_default(void) {
  df_split_search s;
  memset(&s, 0, sizeof s);
  s.step = 256;
  /* 512 B per unit (one fp16 K row + V row of one KV head) at an SM's
     share of ~4 TB/s over 132 SMs */
  s.cost.per_unit_us = 512.0 / (4.0e12 / 132 / 1e6);
  s.cost.per_partial_us = 3.0;
  s.cost.reduce_us = 1.0;
  s.cost.reduce_per_input_us = 0.05;
  s.cost.finalize_us = 0.3;
  s.cost.hbm_edge_us = 1.0;
  s.cost.slot_bytes = 1040;
  s.cost.slot_budget = 150 * 1024;
  return s;
}

/* Scratch of one model run, sized for the smallest block. */
typedef struct split_work {
  df_allocator a;
  uint32_t *block_sm, *block_rows; /* per block */
  uint32_t *task_first;                        /* per emitted task: first block */
  uint32_t *order, *longest, *sort_tmp;        /* id order, longest first, scratch */
  uint32_t *emit;      /* ops in emission order: block id, or blocks + task */
  uint32_t *queue_ids; /* per SM, CSR */
  uint32_t *queue_off, *queue_pos, *heap;
  uint64_t *load, *held;
  double *clock, *done_at;
  unsigned char *done;
} split_work;

static void work_free(split_work *w) {
  void *ps[] = {w->block_sm, w->block_rows, w->task_first, w->order, w->longest, w->sort_tmp,
                w->emit, w->queue_ids, w->queue_off, w->queue_pos, w->heap,
                w->load, w->held, w->clock, w->done_at, w->done};
  for (size_t i = 0; i < sizeof ps / sizeof *ps; i++)
    df_free(&w->a, ps[i]);
}

static df_status work_alloc(split_work *w, uint64_t blocks, uint32_t tasks, uint32_t sms) {
  memset(w, 0, sizeof *w);
  w->a = df_allocator_default();
  uint64_t ops = blocks + tasks;
  if (ops >= (1u << 31))
    return df_status_errorf(DF_EINVAL, "automatic split: %llu range blocks are too many",
                            (unsigned long long)blocks);
#define ALLOC(f, n) ((w->f = df_alloc(&w->a, (size_t)(n) * sizeof *w->f)) != NULL)
  bool ok = ALLOC(block_sm, blocks) && ALLOC(block_rows, blocks) &&
            ALLOC(task_first, tasks + 1) && ALLOC(order, tasks) && ALLOC(longest, tasks) && ALLOC(sort_tmp, tasks) && ALLOC(emit, ops) &&
            ALLOC(queue_ids, ops) && ALLOC(queue_off, sms + 1) && ALLOC(queue_pos, sms) &&
            ALLOC(heap, sms) && ALLOC(load, sms) && ALLOC(held, sms) && ALLOC(clock, sms) &&
            ALLOC(done_at, blocks) && ALLOC(done, blocks);
#undef ALLOC
  if (!ok) {
    work_free(w);
    return df_status_errorf(DF_ENOMEM, "automatic split: out of memory");
  }
  return df_status_ok();
}

static bool longer_task(const void *ctx, uint32_t a, uint32_t b) {
  const uint32_t *len = ctx;
  return len[a] > len[b];
}

/* Both emission orders: id order, and longest first (ties: lower id). */
static void task_orders(split_work *w, const uint32_t *len, uint32_t tasks) {
  for (uint32_t t = 0; t < tasks; t++) w->order[t] = w->longest[t] = t;
  df_sort_idx(w->longest, tasks, w->sort_tmp, longer_task, len);
}

static bool heap_less(const split_work *w, uint32_t a, uint32_t b) {
  return w->load[a] < w->load[b] || (w->load[a] == w->load[b] && a < b);
}

/* Restore the min-heap (load, sm) below position i. */
static void heap_down(split_work *w, uint32_t n, uint32_t i) {
  for (;;) {
    uint32_t m = i, l = 2 * i + 1, r = l + 1;
    if (l < n && heap_less(w, w->heap[l], w->heap[m])) m = l;
    if (r < n && heap_less(w, w->heap[r], w->heap[m])) m = r;
    if (m == i) return;
    uint32_t t = w->heap[i];
    w->heap[i] = w->heap[m];
    w->heap[m] = t;
    i = m;
  }
}

/* Place every block and reduce as df_schedule all_at_once does; *nb gets
   the block count. Tasks are emitted in id order, or longest first. */
static void place(split_work *w, const uint32_t *len, uint32_t tasks, uint32_t sms,
                  uint32_t block, bool balance, uint32_t *nb) {
  const uint32_t *order = balance ? w->longest : w->order;
  for (uint32_t s = 0; s < sms; s++) {
    w->load[s] = 0;
    w->heap[s] = s;
  }
  uint32_t b = 0, e = 0, next = 0;
  for (uint32_t i = 0; i < tasks; i++) {
    uint32_t t = order[i];
    w->task_first[i] = b;
    for (uint32_t at = 0; at < len[t]; at += block) {
      uint32_t rows = len[t] - at < block ? len[t] - at : block, sm;
      if (balance) {
        sm = w->heap[0];
        w->load[sm] += rows;
        heap_down(w, sms, 0);
      } else {
        sm = next++ % sms;
      }
      w->block_sm[b] = sm;
      w->block_rows[b] = rows;
      w->emit[e++] = b++;
      if (at > UINT32_MAX - block) break;
    }
    w->emit[e++] = UINT32_MAX - i; /* the reduce of emitted task i */
  }
  w->task_first[tasks] = b;
  *nb = b;
}

static uint32_t op_sm(const split_work *w, uint32_t op) {
  return op >= (1u << 31) ? w->block_sm[w->task_first[UINT32_MAX - op]]
                                              : w->block_sm[op];
}

static df_status check_inputs(const uint32_t *lengths, uint32_t tasks, uint32_t sms) {
  if (!lengths || tasks == 0)
    return df_status_errorf(DF_EINVAL, "automatic split: no range lengths");
  if (tasks > (1u << 30))
    return df_status_errorf(DF_EINVAL, "automatic split: %u tasks, at most 2^30", tasks);
  if (sms == 0)
    return df_status_errorf(DF_EINVAL, "automatic split: sm_count must be positive");
  for (uint32_t t = 0; t < tasks; t++)
    if (lengths[t] == 0)
      return df_status_errorf(DF_EINVAL, "automatic split: task %u has range length 0", t);
  return df_status_ok();
}

static uint64_t block_count(const uint32_t *len, uint32_t tasks, uint32_t block) {
  uint64_t n = 0;
  for (uint32_t t = 0; t < tasks; t++) n += (len[t] + (uint64_t)block - 1) / block;
  return n;
}

/* Whether task op's REDUCE reads only ITERs of its own SM: the scheduler's
   defer_reduces leaves it right after them (schedule.c, first_pass). */
static bool local_reduce(const split_work *w, uint32_t op) {
  uint32_t t = UINT32_MAX - op;
  for (uint32_t b = w->task_first[t]; b < w->task_first[t + 1]; b++)
    if (w->block_sm[b] != op_sm(w, op)) return false;
  return true;
}

/* Replay the queues; returns the makespan, *held the fullest SM's bytes. */
static double replay(split_work *w, uint32_t tasks, uint32_t sms, uint32_t nb, bool defer,
                     const df_split_cost *c, uint64_t *held) {
  uint32_t ops = nb + tasks;
  /* CSR queues in emission order (ITERs first with defer) */
  memset(w->queue_off, 0, (sms + 1) * sizeof *w->queue_off);
  for (uint32_t i = 0; i < ops; i++) w->queue_off[op_sm(w, w->emit[i]) + 1]++;
  for (uint32_t s = 0; s < sms; s++) w->queue_off[s + 1] += w->queue_off[s];
  for (uint32_t s = 0; s < sms; s++) w->queue_pos[s] = w->queue_off[s];
  for (int pass = defer ? 0 : 2; pass < (defer ? 2 : 3); pass++)
    for (uint32_t i = 0; i < ops; i++) {
      uint32_t op = w->emit[i];
      if (pass != 2 && (op < nb || local_reduce(w, op)) != (pass == 0)) continue;
      w->queue_ids[w->queue_pos[op_sm(w, op)]++] = op;
    }
  uint64_t most = 0;
  for (uint32_t s = 0; s < sms; s++) {
    uint64_t h = 0;
    for (uint32_t k = w->queue_off[s]; k < w->queue_off[s + 1]; k++) {
      uint32_t op = w->queue_ids[k];
      h += op < nb ? 1 : w->task_first[UINT32_MAX - op + 1] - w->task_first[UINT32_MAX - op] + 1;
    }
    h *= c->slot_bytes;
    if (h > most) most = h;
    w->queue_pos[s] = w->queue_off[s];
    w->clock[s] = 0.0;
  }
  *held = most;
  memset(w->done, 0, nb);
  bool progress = true;
  while (progress) {
    progress = false;
    for (uint32_t s = 0; s < sms; s++)
      for (; w->queue_pos[s] < w->queue_off[s + 1]; w->queue_pos[s]++, progress = true) {
        uint32_t op = w->queue_ids[w->queue_pos[s]];
        if (op < nb) {
          w->clock[s] += c->per_partial_us + w->block_rows[op] * c->per_unit_us;
          w->done_at[op] = w->clock[s];
          w->done[op] = 1;
          continue;
        }
        uint32_t t = UINT32_MAX - op, b0 = w->task_first[t], b1 = w->task_first[t + 1];
        bool ready = true;
        for (uint32_t b = b0; b < b1 && ready; b++) ready = w->done[b];
        if (!ready) break;
        double start = w->clock[s];
        for (uint32_t b = b0; b < b1; b++) {
          double at = w->done_at[b] + (w->block_sm[b] != s ? c->hbm_edge_us : 0.0);
          if (at > start) start = at;
        }
        w->clock[s] = start + c->reduce_us + c->reduce_per_input_us * (b1 - b0) + c->finalize_us;
      }
  }
  double span = 0.0;
  for (uint32_t s = 0; s < sms; s++)
    if (w->clock[s] > span) span = w->clock[s];
  return span; /* every queue drains: a REDUCE waits only for ITERs */
}

df_status df_split_model(const uint32_t *lengths, uint32_t task_count, uint32_t sm_count,
                         uint32_t block, bool balance_iters, bool defer_reduces,
                         const df_split_cost *cost, double *makespan_us,
                         uint64_t *held_bytes) {
  DF_TRY(check_inputs(lengths, task_count, sm_count));
  if (block == 0 || !cost || !makespan_us || !held_bytes)
    return df_status_errorf(DF_EINVAL, "automatic split: block 0 or a missing argument");
  split_work w;
  DF_TRY(work_alloc(&w, block_count(lengths, task_count, block), task_count, sm_count));
  uint32_t nb;
  task_orders(&w, lengths, task_count);
  place(&w, lengths, task_count, sm_count, block, balance_iters, &nb);
  *makespan_us = replay(&w, task_count, sm_count, nb, defer_reduces, cost, held_bytes);
  work_free(&w);
  return df_status_ok();
}

df_status df_split_choose(const uint32_t *lengths, uint32_t task_count, uint32_t sm_count,
                          const df_split_search *search, df_split_choice *out) {
  DF_TRY(check_inputs(lengths, task_count, sm_count));
  if (!search || !out)
    return df_status_errorf(DF_EINVAL, "automatic split: search and output are required");
  memset(out, 0, sizeof *out);
  uint32_t step = search->step ? search->step : 256;
  uint32_t longest = 0;
  for (uint32_t t = 0; t < task_count; t++)
    if (lengths[t] > longest) longest = lengths[t];
  uint64_t lo = search->min_block ? search->min_block : step;
  uint64_t hi = search->max_block ? search->max_block
                                  : ((uint64_t)longest + step - 1) / step * step;
  lo = (lo + step - 1) / step * step;
  if (hi > UINT32_MAX) hi = UINT32_MAX / step * step;
  if (lo > hi)
    return df_status_errorf(DF_EINVAL,
                            "automatic split: no multiple of step %u in [%llu, %llu]", step,
                            (unsigned long long)(search->min_block ? search->min_block : step),
                            (unsigned long long)hi);
  split_work w;
  DF_TRY(work_alloc(&w, block_count(lengths, task_count, (uint32_t)lo), task_count, sm_count));
  task_orders(&w, lengths, task_count);
  static const bool placements[3][2] = {{false, false}, {false, true}, {true, true}};
  bool found = false;
  uint64_t least_held = UINT64_MAX;
  for (int p = 0; p < 3; p++)
    for (uint64_t b = lo; b <= hi; b += step) {
      uint32_t nb;
      uint64_t held;
      place(&w, lengths, task_count, sm_count, (uint32_t)b, placements[p][0], &nb);
      double t = replay(&w, task_count, sm_count, nb, placements[p][1], &search->cost, &held);
      out->candidates++;
      if (held < least_held) least_held = held;
      if (search->cost.slot_budget && held > search->cost.slot_budget) continue;
      if (!found || t < out->makespan_us - 1e-9) {
        found = true;
        out->block_size = (uint32_t)b;
        out->balance_iters = placements[p][0];
        out->defer_reduces = placements[p][1];
        out->makespan_us = t;
      }
    }
  work_free(&w);
  if (!found)
    return df_status_errorf(DF_EINVAL,
                            "automatic split: none of %u candidate plans fits the slot budget "
                            "of %u bytes per SM (the least needs %llu)",
                            out->candidates, search->cost.slot_budget,
                            (unsigned long long)least_held);
  return df_status_ok();
}
