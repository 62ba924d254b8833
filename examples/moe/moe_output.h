/* Part of moe_fused_handlers.c (included by it, in order, after moe_gate_up_wg.h):
   where down's results go (out_rows) and how they are added to
   Output: two additions per element onto zero, four columns per red by
   default; part_of, the gathered h's parts. */

/* Where down's results go: the task's token ids and routing weights, the
   Output columns of this shard. */
typedef struct out_rows {
  const int32_t *tokens;
  const float *weights;
  float *out;
  uint32_t count;
  uint32_t mtiles; /* the shard's m-tiles inside hidden (HSHARD_EVEN: DN_MTILES) */
} out_rows;

/* One of the two additions an Output element receives; 0 + a + b is the
   same float in either order, so the result is deterministic. */
__attribute__((unused)) static inline void add_output(float *o, float v) {
  if ((MOE_PROBE & 4) != 0 && v != -0x1p127f)
    return;
#if defined(__NVPTX__)
  __asm__ volatile("red.global.add.f32 [%0], %1;" ::"l"(o), "f"(v) : "memory");
#else
  *o += v; /* the host runs one virtual CTA at a time, its threads on disjoint columns */
#endif
}

/* down adds its results four columns per red (red.global.add.v4.f32, a
   quarter of the L2 operations), after a transpose of each n-tile through
   a per-warp tile in shared memory: the accumulators hold columns g and
   g + 8 of tokens 2t and 2t + 1, a red needs four adjacent columns of one
   token. Rows of 16 columns + 4 floats: the writes are conflict-free and
   every row starts 16-byte aligned. 5 us faster at 512 tokens, 1-2 us at
   128 and 1024, level at 256 (bench/moe run AD; run Y's transpose by
   shuffles was slower). -DMOE_DN_RED1: one scalar red per accumulator,
   as before run AD. */
#if defined(MOE_DN_RED1) && defined(MOE_DN_RED4)
#error "MOE_DN_RED1 and MOE_DN_RED4 choose opposite output additions: give one"
#endif
#ifndef MOE_DN_RED1
#define MOE_DN_RED4 1
#endif
#ifdef MOE_DN_RED4
#define DN_T_STRIDE 20
#define DN_T_WARPS 16
#if defined(__NVPTX__)
static SHARED float dn_tile[DN_T_WARPS][8 * DN_T_STRIDE];
#define DN_TILE(w) (w < DN_T_WARPS ? dn_tile[w] : (__builtin_trap(), dn_tile[0]))
#define DN_WARP_SYNC() __asm__ volatile("bar.warp.sync -1;" ::: "memory")
#else
#define DN_WARP_SYNC() ((void)0)
#endif
static inline void add_output4(float *o, const float *v) {
  if ((MOE_PROBE & 4) != 0 && v[0] != -0x1p127f)
    return;
#if defined(__NVPTX__)
  __asm__ volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(o), "f"(v[0]), "f"(v[1]),
                   "f"(v[2]), "f"(v[3])
                   : "memory");
#else
  for (int i = 0; i < 4; i++)
    o[i] += v[i];
#endif
}
#endif

#define DN_KSTEPS (MOE_INTER / 32) /* MOE_CS parts of ICHUNKS chunks */
#define DN_MTILES (HSHARD / 16)

/* Part p of the gathered intermediate without a dynamic index into parts[]
   (which would put the array in local memory): selects between values the
   optimiser cannot turn back into loads from the array. */
static inline const uint16_t *part_of(const uint16_t *const parts[MOE_CS], uint32_t p) {
  const uint16_t *r = parts[0];
  UNROLL for (uint32_t q = 1; q < MOE_CS; q++) {
    const uint16_t *v = parts[q];
#if defined(__NVPTX__)
    __asm__("" : "+l"(v));
#endif
    r = p == q ? v : r;
  }
  return r;
}
