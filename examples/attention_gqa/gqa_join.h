/* Part of attention_gqa_handlers.c (included by it after gqa_inter, G, D,
   HQ, HKV, GQA_LMAX and LOG2E): the handler-level join (-DGQA_JOIN; the
   GPU's register path and the host backend). README.md, "Handler join".

   On a plan df schedules with `partial-only=true` (ITERs only, no REDUCE
   or FINALIZE), each partial writes its result into its task's region of
   the Join tensor instead of its output slot, publishes its blocks'
   ready flags (a release store), adds the blocks it covers to the task's
   counter (a relaxed add, in flight with that store and with acquire
   loads of the other blocks' flags), and the partial whose add completes
   the task waits for any flag not yet seen, combines the task's slots in
   block order and writes its O rows. The flags carry the ordering, so no
   add waits for the partial's stores (one L2 round trip less than a
   release-acquire add; bench/attention run AG). The combine order is the
   blocks' order, so the result does not depend on which partial arrives
   last: bitwise deterministic. The last one also resets the counter and
   the flags, so a Join tensor that is zero before the first launch is
   zero between launches (a launch that stops part-way leaves it dirty:
   zero it again). -DGQA_JOIN_ACQ_REL (an A/B switch): the earlier
   protocol, one release-acquire add and no flags.

   Tensors beyond the program's Q (0), K (1), V (2), O (3):
     4 SeqLens int32 [B]   each sequence's key count, as the plan's lengths
     5 Join    bytes       per task (seq * HKV + kv_head) a region of
                           join_header(block) bytes (the counter, uint32,
                           in 16 bytes, then one uint32 ready flag per
                           slot, padded to 16 bytes) and
                           ceil(GQA_LMAX / block) slots of gqa_inter
   The plan's pieces must start on block boundaries (every schedule but
   even-split's): a piece covering several blocks writes its first block's
   slot and marks the others empty (lse = -inf, weight 0). A piece that is
   its whole task writes its O rows directly and counts nothing
   (join_whole). */
#ifdef GQA_JOIN
#ifdef KV_STAGES
#error "GQA_JOIN is for the register path, not with KV_STAGES"
#endif

enum { T_SEQ_LENS = 4, T_JOIN = 5 };
#define JOIN_HEADER 16u
#define JOIN_CHUNK 16u /* slots whose loads are in flight together */
#if defined(__clang__)
#define JOIN_UNROLL _Pragma("unroll") /* register arrays need constant indices */
#else
#define JOIN_UNROLL /* gcc: the host build */
#endif

/* Slots per task, and the header before them: the counter's 16 bytes,
   then the slots' ready flags padded to 16 bytes. */
static inline uint32_t join_slots(uint32_t block) { return (GQA_LMAX + block - 1) / block; }
static inline uint32_t join_header(uint32_t block) {
  return JOIN_HEADER + (4u * join_slots(block) + 15u) / 16u * 16u;
}
static inline uint64_t join_stride(uint32_t block) {
  return join_header(block) + (uint64_t)join_slots(block) * sizeof(gqa_inter);
}
static inline uint32_t *join_flags(uint8_t *region) { return (uint32_t *)(region + JOIN_HEADER); }

static inline uint8_t *join_region(const df_ctx *ctx) {
  const uint32_t task = df_ctx_task_coord(ctx, 0) * HKV + df_ctx_task_coord(ctx, 1);
  return (uint8_t *)df_ctx_tensor(ctx, T_JOIN) + task * join_stride(df_ctx_block_size(ctx));
}

/* The partial's result: its first block's slot in the task's region. */
static inline gqa_inter *join_out(const df_ctx *ctx) {
  const uint32_t block = df_ctx_block_size(ctx), begin = df_ctx_range_begin(ctx);
  if (block == 0 || begin % block != 0)
    __builtin_trap(); /* pieces off the block grid: not a plan for the join */
  return (gqa_inter *)(join_region(ctx) + join_header(block)) + begin / block;
}

/* The task's sequence length (SeqLens[seq]). */
static inline uint32_t join_len(const df_ctx *ctx) {
  return (uint32_t)((const int32_t *)df_ctx_tensor(ctx, T_SEQ_LENS))[df_ctx_task_coord(ctx, 0)];
}

/* The task's O rows (f32 [G][D]). */
static inline float *join_o(const df_ctx *ctx) {
  return (float *)df_ctx_tensor(ctx, 3) +
         ((uint64_t)df_ctx_task_coord(ctx, 0) * HQ + df_ctx_task_coord(ctx, 1) * G) * D;
}

/* The task's O rows when this piece is the whole task, else NULL: the
   partial then writes its result there itself (f32, no staging, no
   count), as the plan's FINALIZE of a one-block task would. Read at the
   partial's start, so the load's latency hides under the stream. */
static inline float *join_whole(const df_ctx *ctx) {
  if (df_ctx_range_begin(ctx) != 0 || df_ctx_range_end(ctx) < join_len(ctx))
    return (float *)0;
  return join_o(ctx);
}

/* Marks the later blocks of a multi-block piece empty: weight 0. */
static inline void join_mark_empty(gqa_inter *mine, uint32_t cover, uint32_t first,
                                   uint32_t stride) {
  for (uint32_t i = first; i < (cover - 1) * G; i += stride)
    mine[1 + i / G].lse[i % G] = -__builtin_inff();
}

/* The task's block count: ceil(SeqLens[seq] / block). */
static inline uint32_t join_total(const df_ctx *ctx) {
  return (join_len(ctx) + df_ctx_block_size(ctx) - 1) / df_ctx_block_size(ctx);
}

/* The slots' loads, exp2 and max of each backend: L2 loads on the GPU
   (the slots were written by other SMs), plain ones on the host. */
#if defined(__NVPTX__)
static inline float join_ld_f(const float *p) {
  float v;
  __asm__ volatile("ld.global.cg.f32 %0, [%1];" : "=f"(v) : "l"(p));
  return v;
}
static inline uint32_t join_ld_u32(const void *p) {
  uint32_t v;
  __asm__ volatile("ld.global.cg.u32 %0, [%1];" : "=r"(v) : "l"(p));
  return v;
}
static inline float join_ex2(float x) { return ex2(x); }
static inline float join_max(float a, float b) { return fmaxf_(a, b); }
#else
static inline float join_ld_f(const float *p) { return *p; }
static inline uint32_t join_ld_u32(const void *p) {
  uint32_t v;
  __builtin_memcpy(&v, p, 4);
  return v;
}
static inline float join_ex2(float x) { return exp2f(x); }
static inline float join_max(float a, float b) { return a > b ? a : b; }
#endif

/* One head's element pair (h, d..d+1) of the task's O from its `total`
   slots: an online LSE combine over chunks of JOIN_CHUNK slots in block
   order, the loads of a chunk issued before their first use. */
static inline void join_combine_pair(const gqa_inter *in, uint32_t total, uint32_t h, uint32_t d,
                                     float *O) {
  float M = -__builtin_inff(), S = 0.0f, a0 = 0.0f, a1 = 0.0f;
  for (uint32_t c = 0; c < total; c += JOIN_CHUNK) {
    float l[JOIN_CHUNK];
    uint32_t o2[JOIN_CHUNK];
    JOIN_UNROLL for (uint32_t i = 0; i < JOIN_CHUNK; i++) {
      const bool in_task = c + i < total;
      l[i] = in_task ? join_ld_f(&in[c + i].lse[h]) : -__builtin_inff();
      o2[i] = in_task ? join_ld_u32(&in[c + i].o[h][d]) : 0u;
    }
    float m = M;
    JOIN_UNROLL for (uint32_t i = 0; i < JOIN_CHUNK; i++) m = join_max(m, l[i]);
    /* slot 0 is a piece's first block, so m is finite from the first chunk */
    const float s = join_ex2((M - m) * LOG2E);
    S *= s;
    a0 *= s;
    a1 *= s;
    JOIN_UNROLL for (uint32_t i = 0; i < JOIN_CHUNK; i++) {
      const float w = join_ex2((l[i] - m) * LOG2E);
      _Float16 lo, hi;
      __builtin_memcpy(&lo, &o2[i], 2);
      __builtin_memcpy(&hi, (const char *)&o2[i] + 2, 2);
      S += w;
      a0 += w * (float)lo;
      a1 += w * (float)hi;
    }
    M = m;
  }
  O[h * D + d] = a0 / S;
  O[h * D + d + 1] = a1 / S;
}

/* The task's O rows from its `total` slots in `region`: the element pairs
   first, first + stride, ... (a CTA's threads share them out). */
static inline void join_combine(const df_ctx *ctx, uint8_t *region, uint32_t total,
                                uint32_t first, uint32_t stride) {
  const gqa_inter *in = (const gqa_inter *)(region + join_header(df_ctx_block_size(ctx)));
  float *O = join_o(ctx);
  for (uint32_t pair = first; pair < G * D / 2; pair += stride) {
    const uint32_t h = pair / (D / 2), d = 2 * (pair % (D / 2));
    join_combine_pair(in, total, h, d, O);
  }
}

#if defined(__NVPTX__)
static __attribute__((address_space(3))) uint32_t join_last;
#ifdef GQA_JOIN_ACQ_REL
/* After the partial's result is in `mine` (every thread's stores): count
   the partial, and if it completes its task, combine the task into O. */
static void join_arrive(const df_ctx *ctx, gqa_inter *mine) {
  const uint32_t tid = df_ctx_thread(ctx), threads = df_ctx_threads(ctx);
  const uint32_t cover = df_ctx_tiles(ctx);
  uint8_t *region = join_region(ctx);
  join_mark_empty(mine, cover, tid, threads);
  df_ctx_barrier(ctx); /* the CTA's stores before thread 0's release */
  if (tid == 0) {
    const uint32_t total = join_total(ctx);
    uint32_t *count = (uint32_t *)region, old;
    __asm__ volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], %2;"
                     : "=r"(old)
                     : "l"(count), "r"(cover)
                     : "memory");
    join_last = old + cover == total ? total : 0;
    if (join_last)
      *count = 0; /* every piece has counted: zero for the next launch */
  }
  df_ctx_barrier(ctx); /* thread 0's acquire before everyone's loads */
  const uint32_t total = join_last;
  if (total == 0)
    return;
  join_combine(ctx, region, total, tid, threads);
  /* No barrier needed for join_last: a later call writes it only after
     its own first barrier, which every thread reaches after reading it. */
}
#else
static inline uint32_t join_ld_acquire(const uint32_t *p) {
  uint32_t v;
  __asm__ volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
/* After the partial's result is in `mine` (every thread's stores): publish
   its blocks, count them, and if they complete the task, combine the task
   into O. Thread 0 adds (relaxed: the flags order the data), warp 1's
   lanes publish this piece's flags (release: after the barrier, so they
   cover every thread's stores), and the threads of the task's other
   blocks read those blocks' flags (acquire) meanwhile: the add's, the
   stores' and the flags' round trips overlap. */
static void join_arrive(const df_ctx *ctx, gqa_inter *mine) {
  const uint32_t tid = df_ctx_thread(ctx), threads = df_ctx_threads(ctx);
  const uint32_t cover = df_ctx_tiles(ctx), block = df_ctx_block_size(ctx);
  const uint32_t first = df_ctx_range_begin(ctx) / block, total = join_total(ctx);
  uint8_t *region = join_region(ctx);
  uint32_t *flags = join_flags(region);
  join_mark_empty(mine, cover, tid, threads);
  df_ctx_barrier(ctx); /* the CTA's stores before the release stores */
  if (tid == 0) {
    uint32_t old;
    __asm__ volatile("atom.relaxed.gpu.global.add.u32 %0, [%1], %2;"
                     : "=r"(old)
                     : "l"((uint32_t *)region), "r"(cover)
                     : "memory");
    join_last = old + cover == total;
  }
  /* warp 1, or warp 0 in a one-warp CTA (thread 0 then waits for the
     stores before its add leaves; only slower) */
  const uint32_t pub = threads > 32u ? tid - 32u : tid;
  for (uint32_t i = pub; i < cover; i += 32u)
    __asm__ volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(flags + first + i), "r"(1u)
                     : "memory");
  /* the other blocks' flags, one thread each, read while the add flies */
  uint32_t missing = 0;
  for (uint32_t i = tid; i < total; i += threads)
    if ((i < first || i >= first + cover) && join_ld_acquire(flags + i) == 0u)
      missing = 1;
  /* thread 0's count and every thread's flag reads */
  missing = (uint32_t)__nvvm_bar0_or((int)missing);
  if (!join_last)
    return;
  if (missing) { /* a piece that counted has not published yet: wait */
    for (uint32_t i = tid; i < total; i += threads)
      if (i < first || i >= first + cover)
        while (join_ld_acquire(flags + i) == 0u)
          ;
    df_ctx_barrier(ctx);
  }
  join_combine(ctx, region, total, tid, threads);
  /* Every piece has counted and published: zero the counter and the flags
     for the next launch (which starts after this grid ends). */
  if (tid == 0)
    *(uint32_t *)region = 0;
  for (uint32_t i = tid; i < total; i += threads)
    flags[i] = 0;
  /* No barrier needed for join_last: a later call writes it only after
     its own first barrier, which every thread reaches after reading it. */
}
#endif
#else /* host backend: thread 0 runs the partial; CTAs may run at once */

/* The GPU's protocol with C11 atomics: a relaxed add, release stores of
   this piece's flags, acquire loads (waiting) of the others'. */
static void join_arrive(const df_ctx *ctx, gqa_inter *mine) {
  const uint32_t cover = df_ctx_tiles(ctx), block = df_ctx_block_size(ctx);
  const uint32_t first = df_ctx_range_begin(ctx) / block, total = join_total(ctx);
  uint8_t *region = join_region(ctx);
  uint32_t *count = (uint32_t *)region, *flags = join_flags(region);
  join_mark_empty(mine, cover, 0, 1);
  const uint32_t old = __atomic_fetch_add(count, cover, __ATOMIC_RELAXED);
  for (uint32_t i = 0; i < cover; i++)
    __atomic_store_n(flags + first + i, 1u, __ATOMIC_RELEASE);
  if (old + cover != total)
    return;
  for (uint32_t i = 0; i < total; i++)
    if (i < first || i >= first + cover)
      while (__atomic_load_n(flags + i, __ATOMIC_ACQUIRE) == 0u)
        ;
  join_combine(ctx, region, total, 0, 1);
  __atomic_store_n(count, 0u, __ATOMIC_RELAXED);
  for (uint32_t i = 0; i < total; i++)
    __atomic_store_n(flags + i, 0u, __ATOMIC_RELAXED);
}
#endif
#endif
