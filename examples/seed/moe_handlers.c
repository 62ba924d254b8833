/* C handlers of examples/seed/moe_reshared.mlir: a small two-layer MoE
   expert MLP per (expert, token) task, GEMV-sized, written once for the
   GPU (clang --target=nvptx64-nvidia-cuda) and the host backend.

   Types: UpShard / HiddenShard f16[2][4] = 8 values, UpFull = the 16
   values of both shards (map2 receives the two UpShards in tile order).
   Tensors (row-major): Input f16[TOKENS][KIN], W1 f16[EXPERTS][16][KIN],
   W2 f16[EXPERTS][16][16], Output f32[EXPERTS][TOKENS][16]. KIN and
   TOKENS are the compile-time MOE_KIN and MOE_TOKENS (defaults 64 and 16;
   TOKENS must be the task domain's second extent: handlers see
   coordinates, not extents).
   Each map range is split into MOE_SHARDS equal shards (the cluster size,
   default 2: one tile per rank); shard r = range_begin / (range_end -
   range_begin) computes columns SHARD*r..SHARD*r+SHARD-1 of the MOE_FULL
   hidden columns (default 16; SHARD = MOE_FULL / MOE_SHARDS must match the
   UpShard / HiddenShard element count: the ring example of
   scripts/gpu/make_ring_carry.sh builds MOE_FULL=64 MOE_SHARDS=4 with
   f16[2,8] shards):
     map1:     up[c]     = relu(sum_k Input[token][k] * W1[expert][c][k])
     map2:     hidden[c] = sum_j up[j] * W2[expert][c][j]     (j < MOE_FULL)
     finalize: Output[expert][token][c] = hidden[c]
   Thread 0 computes (SHARD dot products), the CTA waits at a barrier.
   W1 is [EXPERTS][MOE_FULL][KIN], W2 [EXPERTS][MOE_FULL][MOE_FULL],
   Output [EXPERTS][TOKENS][MOE_FULL]. */
#include "df/device.h"

#ifndef MOE_KIN
#define MOE_KIN 64
#endif
#ifndef MOE_TOKENS
#define MOE_TOKENS 16
#endif
#ifndef MOE_FULL
#define MOE_FULL 16
#endif
#ifndef MOE_SHARDS
#define MOE_SHARDS 2
#endif
#define FULL MOE_FULL
#define SHARD (MOE_FULL / MOE_SHARDS)

static inline uint32_t shard_col(const df_ctx *ctx) {
  uint32_t b = df_ctx_range_begin(ctx), e = df_ctx_range_end(ctx);
  return e > b ? SHARD * (b / (e - b)) : 0;
}

void moe_map1(const df_ctx *ctx) {
  if (df_ctx_thread(ctx) == 0) {
    uint32_t expert = df_ctx_task_coord(ctx, 0), token = df_ctx_task_coord(ctx, 1);
    const _Float16 *in = (const _Float16 *)df_ctx_tensor(ctx, 0) + (uint64_t)token * MOE_KIN;
    const _Float16 *w1 = (const _Float16 *)df_ctx_tensor(ctx, 1) +
                         ((uint64_t)expert * FULL + shard_col(ctx)) * MOE_KIN;
    _Float16 *up = df_ctx_output(ctx);
    for (int c = 0; c < SHARD; c++) {
      float acc = 0.0f;
      for (int k = 0; k < MOE_KIN; k++)
        acc += (float)in[k] * (float)w1[c * MOE_KIN + k];
      up[c] = (_Float16)(acc > 0.0f ? acc : 0.0f);
    }
  }
  df_ctx_barrier(ctx);
}

void moe_map2(const df_ctx *ctx) {
  if (df_ctx_thread(ctx) == 0) {
    uint32_t expert = df_ctx_task_coord(ctx, 0);
    const _Float16 *w2 = (const _Float16 *)df_ctx_tensor(ctx, 2) +
                         ((uint64_t)expert * FULL + shard_col(ctx)) * FULL;
    float up[FULL];
    for (uint32_t p = 0; p < MOE_SHARDS && p < df_ctx_input_count(ctx); p++) {
      const _Float16 *part = df_ctx_input(ctx, p);
      for (int i = 0; i < SHARD; i++)
        up[p * SHARD + i] = (float)part[i];
    }
    _Float16 *hidden = df_ctx_output(ctx);
    for (int c = 0; c < SHARD; c++) {
      float acc = 0.0f;
      for (int j = 0; j < FULL; j++)
        acc += up[j] * (float)w2[c * FULL + j];
      hidden[c] = (_Float16)acc;
    }
  }
  df_ctx_barrier(ctx);
}

void finalize_hidden(const df_ctx *ctx) {
  uint32_t expert = df_ctx_task_coord(ctx, 0), token = df_ctx_task_coord(ctx, 1);
  const _Float16 *hidden = df_ctx_input(ctx, 0);
  float *out = (float *)df_ctx_tensor(ctx, 3) +
               ((uint64_t)expert * MOE_TOKENS + token) * FULL + shard_col(ctx);
  for (uint32_t c = df_ctx_thread(ctx); c < SHARD; c += df_ctx_threads(ctx))
    out[c] = (float)hidden[c];
}
