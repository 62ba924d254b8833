/* Part of moe_fused_handlers.c (included after its common definitions:
   MOE_HIDDEN, MOE_CS, u32x4, the tensor indices): with -DMOE_ZERO_OUTPUT=1
   the kernel zeroes its own Output, so a launch needs no memset before it
   (examples/moe/README.md, "Output zeroing"). Off by default: measured
   as fast as the memset it replaces, not faster (bench/moe run V).

   Sync (int32 [8], shared by every launch of one routing) holds the
   protocol's words: SY_ROWS (Output's rows T), SY_TASKS (the Tasks
   table's rows) and SY_FIRST (the positions that are their cluster's
   first task: min(tasks, clusters), moe_fused_gen's round-robin table),
   written by the host once; SY_ZEROED and SY_PASSED (counters), zero
   before the first launch and zero again after each one. Instances
   below are (position, rank) pairs: MOE_CS of each handler per task.

   * gate_up of a first-round position, first: the CTA stores zeros into
     its slice of Output's rows (instance i of Z = SY_FIRST x MOE_CS
     zeroes rows [i T / Z, (i + 1) T / Z)); no atomics on the way in.
   * the same gate_up, last: every thread fences its stores, the CTA
     syncs, one thread fences again (cumulative) and adds 1 to SY_ZEROED
     without waiting for the result. The stores are long done by then, so
     the fences are cheap.
   * down, first, one thread: waits until SY_ZEROED reaches Z (acquire),
     counts the instance on SY_PASSED, and the CTA syncs, so the two
     red.add's per element land on zeros: 0 + a + b in either order,
     bitwise deterministic as with a memset. The last instance of all
     (SY_TASKS x MOE_CS) resets both counters: no one reads them after
     that in this launch, and the next launch is ordered after this one on
     the stream. No wait is forever: a first-round position is its
     cluster's first task, so its gate_ups run before any down of their
     CTAs, and gate_ups wait on nothing (a task table whose first round
     is not the positions below the cluster count would hang until the
     watchdog stops it, never add onto stale values).
   * The host runs one virtual CTA at a time and cannot wait: its first
     gate_up (SY_ZEROED still 0) zeroes every slice and sets SY_ZEROED to
     Z; the downs count and reset as on the GPU.

   Measured variants (run V, bench/moe/README.md): each warp claiming
   chunks of rows through one atomic counter, published by its down: up
   to 8 us slower than the memset (claims and counts contending on one
   address; 1 us faster at 1024 tokens); the slices published by the
   downs: 1-6 us slower (a fence and an atomic round trip before each
   down's first load). */
#ifndef MOE_ZERO_OUTPUT_H
#define MOE_ZERO_OUTPUT_H

#ifndef MOE_ZERO_OUTPUT
#define MOE_ZERO_OUTPUT 0
#endif

enum { SY_ROWS, SY_TASKS, SY_FIRST, SY_ZEROED, SY_PASSED, SY_WORDS = 8 };

#if defined(__NVPTX__)
static inline uint32_t sy_add(uint32_t *p, uint32_t v) {
  uint32_t old;
  __asm__ volatile("atom.relaxed.gpu.global.add.u32 %0, [%1], %2;"
                   : "=r"(old)
                   : "l"(p), "r"(v)
                   : "memory");
  return old;
}
static inline uint32_t sy_acquire(const uint32_t *p) {
  uint32_t v;
  __asm__ volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
static inline void sy_store(uint32_t *p, uint32_t v) {
  __asm__ volatile("st.relaxed.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
static inline void sy_red(uint32_t *p, uint32_t v) {
  __asm__ volatile("red.relaxed.gpu.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
static inline void sy_fence(void) { __asm__ volatile("fence.acq_rel.gpu;" ::: "memory"); }
static inline void sy_pause(void) { __asm__ volatile("nanosleep.u32 64;"); }
#else
static inline uint32_t sy_add(uint32_t *p, uint32_t v) {
  return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}
static inline uint32_t sy_acquire(const uint32_t *p) {
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}
static inline void sy_store(uint32_t *p, uint32_t v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }
static inline void sy_red(uint32_t *p, uint32_t v) { (void)sy_add(p, v); }
static inline void sy_fence(void) { __atomic_thread_fence(__ATOMIC_ACQ_REL); }
#endif

static inline uint32_t *sync_words(const df_ctx *ctx) {
  return (uint32_t *)df_ctx_tensor(ctx, T_SYNC);
}

/* The instance's task position (a row of Tasks). */
static inline uint32_t zero_position(const df_ctx *ctx) { return df_ctx_task_coord(ctx, 0); }

/* Instance i of z zeroes its slice of the rows, the CTA's threads
   striding over 16-byte words. */
static inline void zero_slice(const df_ctx *ctx, float *out, uint32_t rows, uint32_t i,
                              uint32_t z) {
  uint32_t r0 = (uint32_t)((uint64_t)i * rows / z), r1 = (uint32_t)((uint64_t)(i + 1) * rows / z);
  u32x4 *p = (u32x4 *)(out + (uint64_t)r0 * MOE_HIDDEN);
  for (uint32_t j = df_ctx_thread(ctx); j < (r1 - r0) * (MOE_HIDDEN / 4); j += df_ctx_threads(ctx))
    p[j] = (u32x4){0, 0, 0, 0};
}

/* gate_up's first step. `rank`: the instance's shard of the task. */
static inline void zero_begin(const df_ctx *ctx, uint32_t rank) {
  const uint32_t *sy = sync_words(ctx);
  uint32_t first = sy[SY_FIRST], z = first * MOE_CS, pos = zero_position(ctx);
  float *out = (float *)df_ctx_tensor(ctx, T_OUTPUT);
#if defined(__NVPTX__)
  if (pos < first)
    zero_slice(ctx, out, sy[SY_ROWS], pos * MOE_CS + rank, z);
#else
  (void)pos, (void)rank;
  /* The first gate_up of the launch: every thread reads the word before
     the first barrier, thread 0 sets it after the second. */
  uint32_t *word = (uint32_t *)&sy[SY_ZEROED];
  if (sy_acquire(word) == 0) {
    df_ctx_barrier(ctx);
    for (uint32_t i = 0; i < z; i++)
      zero_slice(ctx, out, sy[SY_ROWS], i, z);
    df_ctx_barrier(ctx);
    if (df_ctx_thread(ctx) == 0)
      sy_store(word, z); /* every slice: no instance publishes on the host */
  }
#endif
}

/* gate_up's last step (the GPU): publish the slice. */
static inline void zero_publish(const df_ctx *ctx) {
#if defined(__NVPTX__)
  uint32_t *sy = sync_words(ctx);
  if (zero_position(ctx) >= sy[SY_FIRST])
    return;
  sy_fence(); /* this thread's zero stores */
  df_ctx_barrier(ctx);
  if (df_ctx_thread(ctx) == 0) {
    sy_fence(); /* cumulative: the CTA's stores, ordered before by the barrier */
    sy_red(&sy[SY_ZEROED], 1);
  }
#else
  (void)ctx;
#endif
}

/* down's first step. */
static inline void zero_wait(const df_ctx *ctx) {
  uint32_t *sy = sync_words(ctx);
  if (df_ctx_thread(ctx) == 0) {
    uint32_t first = sy[SY_FIRST], z = first * MOE_CS;
#if defined(__NVPTX__)
    while (sy_acquire(&sy[SY_ZEROED]) < z)
      sy_pause();
#else
    (void)z;
#endif
    if (sy_add(&sy[SY_PASSED], 1) + 1 == sy[SY_TASKS] * MOE_CS) {
      sy_store(&sy[SY_ZEROED], 0);
      sy_store(&sy[SY_PASSED], 0);
    }
  }
  df_ctx_barrier(ctx); /* every thread's additions after thread 0's acquire */
}

#endif
