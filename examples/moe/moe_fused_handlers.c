/* Handlers of examples/moe/moe_fused.mlir: a fused MoE layer with bf16
   weights and activations, fp32 accumulation, written once for the GPU
   (clang --target=nvptx64-nvidia-cuda -march=sm_90a: tensor cores through
   mma.sync.m16n8k16 bf16 inline PTX, 16-byte vector loads) and the host
   backend (the same warp code; the mma is emulated lane by lane with the
   PTX fragment layout, so the host test checks the fragment indexing the
   GPU runs).

   Tensors (row-major), indices in the program's order:
     0 X       bf16 [T][H]           token activations
     1 Wgu     bf16 [E][2][I][H]     gate rows (0) and up rows (1) per expert
     2 Tasks   int32 [tasks][4]      expert, first row in Tokens, token count, 0
     3 Tokens  int32 [2T]            token ids grouped by expert
     4 Output  f32 [T][H]            must be zero before the launch (built
                                     with -DMOE_ZERO_OUTPUT=1 the kernel
                                     zeroes it, moe_zero_output.h); every
                                     element receives exactly two additions
                                     (top-2) onto zero, so the result does
                                     not depend on their order: bitwise
                                     deterministic
     5 Sync    int32 [8]             -DMOE_ZERO_OUTPUT=1's words: T, the Tasks
                                     rows, the first-round rows, two counters
                                     that are zero between launches
     6 Wd      bf16 [E][H][I]        down projection
     7 Weights f32 [2T]              routing weight of each Tokens row
   H = MOE_HIDDEN (2048), I = MOE_INTER (768), a task covers at most
   MOE_TT (64) tokens, the cluster size is MOE_CS (4).
   Built with -DMOE_PACKED, Wgu and Wd hold the same values in the
   fragment-packed layout: Wgu [E][I/8][H/32][2][32][8] (m-tile of 8
   columns, k step of 32, gate/up, lane L = 4g + t, then row 8m + g's k
   32s + 8t .. +7) and Wd [E][H/16][I/32][2][32][8] (m-tile of 16 rows,
   k step, half h: row 16m + 8h + g, lane, 8 k); moe_fused_gen --packed
   writes them.

   GEMM mapping (one warp = 16-row m-tiles of a weight matrix times the
   task's tokens as the n dimension, 8 tokens per n-tile): weights are the
   A operand (row-major, K contiguous) and are read exactly once per task;
   tokens are the B operand (K contiguous per token). Each lane loads 16
   bytes of a row (8 consecutive k) and the k order inside a 32-wide step
   is permuted identically for A and B (logical k 2t..2t+1 / 2t+8..2t+9 of
   the two mma halves = physical 8t..8t+3 / 8t+4..8t+7), which a reduction
   may do. The number of n-tiles is specialised (1, 2, 4 or 8; more
   variants by flag, see ntiles()) so that lightly routed experts do not
   pay for 64 tokens. gate_up's m-tile pairs
   8 gate rows with the 8 up rows of the same columns; both GEMMs stream
   their weights through register rings (moe_gate_up_ring.h).
   Built with -DMOE_WGMMA both GEMMs run on warpgroup wgmma's from shared
   memory instead (moe_wgmma.h).

   This file holds the two handlers; the rest are its parts, included in
   this order (each names what it covers): moe_common.h (shapes, lanes,
   loads, the warp mma, tasks), moe_bulk_ring.h, moe_wgmma.h,
   moe_zero_output.h, gate_up's paths (moe_gate_up_ring.h,
   moe_gate_up_staged.h, moe_gate_up_wg.h), the Output additions
   (moe_output.h) and down's paths (moe_down_ring.h, moe_down_wg.h). */
#include "df/device.h"

#include "moe_common.h"

#include "moe_bulk_ring.h"
#include "moe_wgmma.h"
#include "moe_zero_output.h"

/* The smallest n-tile count a staged build (MOE_GU_STAGE) stages (default
   5: fewer rows stay in L1 next to the slots). */
#ifndef MOE_GU_STAGE_MIN_NT
#define MOE_GU_STAGE_MIN_NT 5
#endif

#include "moe_gate_up_ring.h"
#include "moe_gate_up_staged.h"
#include "moe_gate_up_wg.h"

/* The workspace when it holds every warp's bulk ring, else NULL (the
   weights then load into registers; the host rings are on its stack). */
static inline uint8_t *bk_workspace(const df_ctx *ctx) {
#if defined(__NVPTX__)
  uint32_t need = BK_OFFSET + df_ctx_threads(ctx) / 32 * BK_WARP_BYTES;
  if (!BULK || df_ctx_workspace_bytes(ctx) < need)
    return (uint8_t *)0;
  return (uint8_t *)df_ctx_workspace(ctx) + BK_OFFSET;
#else
  (void)ctx;
  return BULK ? (uint8_t *)1 : (uint8_t *)0; /* on: BK_MEM takes the stack ring */
#endif
}

static inline __attribute__((always_inline)) void gate_up_task(const df_ctx *ctx) {
  moe_task tk = task_of(ctx);
  if (tk.count == 0 || (MOE_PROBE & 2) != 0)
    return;
  uint32_t col0 = df_ctx_range_begin(ctx); /* first intermediate column of this shard */
  const uint16_t *x = df_ctx_tensor(ctx, T_X);
  const int32_t *tokens = (const int32_t *)df_ctx_tensor(ctx, T_TOKENS) + tk.start;
  const uint16_t *wgu = (const uint16_t *)df_ctx_tensor(ctx, T_WGU) +
                        ((uint64_t)tk.expert * 2 * MOE_INTER + (PACKED ? 2 : 1) * col0) *
                            MOE_HIDDEN; /* packed: the shard's m-tiles hold gate and up rows */
  uint16_t *out = df_ctx_output(ctx);
  uint32_t nt = ntiles(tk.count), lane_ = LANE_ID(ctx);
  (void)lane_;
#if WGMMA
  if (nt >= MOE_WG_MIN_NT && wg_usable(ctx, GU_WG_BYTES)) {
#if defined(__NVPTX__)
    uint8_t *ws = df_ctx_workspace(ctx);
    FOR_WARPS(ctx, w, nw)
    gate_up_wg(nt, ctx, wgu, x, tokens, tk.count, sm_of(ws) + w / 4 * GU_WG_BYTES, out, w, nw,
               df_ctx_thread(ctx) % 128, 128);
#else
    FOR_WARPS(ctx, w, nw) {
      uint8_t ring[GU_WG_BYTES] __attribute__((aligned(16)));
      gate_up_wg(nt, ctx, wgu, x, tokens, tk.count, ring, out, w, nw, 0, 1);
    }
#endif
    df_ctx_barrier(ctx); /* the workspace is free for the next handler */
    return;
  }
#endif
#ifdef MOE_GU_STAGE
  /* Staged only with the workspace to hold the ring; without it (a
     program that does not declare it) the register-ring path. */
#if defined(__NVPTX__)
  uint8_t *ring = df_ctx_workspace(ctx);
  const uint32_t first = df_ctx_thread(ctx), stride = df_ctx_threads(ctx);
  if (nt >= MOE_GU_STAGE_MIN_NT && ring && df_ctx_workspace_bytes(ctx) >= GS_BYTES) {
    FOR_WARPS(ctx, w, nw)
    gate_up_staged(nt, ctx, wgu, x, tokens, tk.count, sm_of(ring), out, bk_workspace(ctx), w, nw,
                   first, stride);
    return;
  }
#else
  if (nt >= MOE_GU_STAGE_MIN_NT) {
    FOR_WARPS(ctx, w, nw) {
      uint8_t ring[GS_BYTES] __attribute__((aligned(16)));
      gate_up_staged(nt, ctx, wgu, x, tokens, tk.count, ring, out, bk_workspace(ctx), w, nw, 0,
                     1);
    }
    return;
  }
#endif
#endif
  /* Token row of each lane's B operand; rows past the count repeat the
     last token (their columns are computed but never used). */
  uint32_t xoff[LANES][8];
  FOR_LANES(L, Li)
  UNROLL for (uint32_t j = 0; j < 8; j++) {
    uint32_t i = 8 * j + (L >> 2);
    xoff[Li][j] = (uint32_t)tokens[i < tk.count ? i : tk.count - 1] * MOE_HIDDEN;
  }
  uint8_t *ws = bk_workspace(ctx);
  FOR_WARPS(ctx, w, nw)
  switch (nt) {
  case 1: gate_up_run_1(ctx, wgu, x, xoff, out, ws, w, nw); break;
  case 2: gate_up_run_2(ctx, wgu, x, xoff, out, ws, w, nw); break;
  case 4: gate_up_run_4(ctx, wgu, x, xoff, out, ws, w, nw); break;
#if GU_NT3_RING
  case 3: gate_up_run_3(ctx, wgu, x, xoff, out, ws, w, nw); break;
#endif
#if defined(MOE_NT6) && !defined(MOE_GU_STAGE)
  case 6: gate_up_run_6(ctx, wgu, x, xoff, out, ws, w, nw); break;
#endif
#if defined(MOE_NT_FINE) && !defined(MOE_GU_STAGE)
  case 5: gate_up_run_5(ctx, wgu, x, xoff, out, ws, w, nw); break;
  case 7: gate_up_run_7(ctx, wgu, x, xoff, out, ws, w, nw); break;
#endif
  default: gate_up_run_8(ctx, wgu, x, xoff, out, ws, w, nw); break;
  }
}

void moe_gate_up(const df_ctx *ctx) {
  if (MOE_ZERO_OUTPUT)
    zero_begin(ctx, df_ctx_range_begin(ctx) / ISHARD);
  gate_up_task(ctx);
#if WGMMA
  WG_PROXY_FENCE(); /* the h stores, to the tensor cores' reads of them in down */
#endif
  if (MOE_ZERO_OUTPUT)
    zero_publish(ctx);
}

#include "moe_output.h"
#include "moe_down_ring.h"
#include "moe_down_wg.h"

void moe_down(const df_ctx *ctx) {
  moe_task tk = task_of(ctx);
  uint32_t col0 = df_ctx_range_begin(ctx); /* first output column of this shard */
  if (MOE_ZERO_OUTPUT)
    zero_wait(ctx);
  int32_t *done = df_ctx_output(ctx);
  if (df_ctx_thread(ctx) == 0)
    UNROLL for (int i = 0; i < 4; i++)
      done[i] = i == 0 ? (int32_t)tk.count : i == 1 ? (int32_t)col0 : 0;
  if (tk.count == 0 || df_ctx_input_count(ctx) != MOE_CS || (MOE_PROBE & 1) != 0)
    return;
  const uint16_t *wd = (const uint16_t *)df_ctx_tensor(ctx, T_WD) +
                       ((uint64_t)tk.expert * MOE_HIDDEN + col0) * MOE_INTER;
  const uint16_t *parts[MOE_CS];
  UNROLL for (uint32_t p = 0; p < MOE_CS; p++)
    parts[p] = df_ctx_input(ctx, p);
  out_rows rows = {(const int32_t *)df_ctx_tensor(ctx, T_TOKENS) + tk.start,
                   (const float *)df_ctx_tensor(ctx, T_WEIGHTS) + tk.start,
                   (float *)df_ctx_tensor(ctx, T_OUTPUT) + col0, tk.count,
                   HSHARD_EVEN || col0 + HSHARD <= MOE_HIDDEN ? DN_MTILES
                   : col0 < MOE_HIDDEN                        ? (MOE_HIDDEN - col0) / 16
                                                              : 0};
  uint32_t nt = ntiles(tk.count);
#if WGMMA
  if (nt >= MOE_WG_MIN_NT && wg_usable(ctx, DN_WG_BYTES)) {
    /* the gathered h (the peers' copies and this CTA's own stores), to the
       tensor cores' reads */
    WG_PROXY_FENCE();
    df_ctx_barrier(ctx);
#if defined(__NVPTX__)
    uint8_t *ring = df_ctx_workspace(ctx);
    FOR_WARPS(ctx, w, nw)
    down_wg(nt, ctx, wd, parts, &rows, sm_of(ring) + w / 4 * DN_WG_BYTES, w, nw);
#else
    FOR_WARPS(ctx, w, nw) {
      uint8_t ring[DN_WG_BYTES] __attribute__((aligned(16)));
      down_wg(nt, ctx, wd, parts, &rows, ring, w, nw);
    }
#endif
    df_ctx_barrier(ctx); /* the workspace is free for the next handler */
    return;
  }
#endif
  uint8_t *ws = bk_workspace(ctx);
  FOR_WARPS(ctx, w, nw)
  switch (nt) {
  case 1: down_run_1(ctx, wd, parts, &rows, ws, w, nw); break;
  case 2: down_run_2(ctx, wd, parts, &rows, ws, w, nw); break;
  case 4: down_run_4(ctx, wd, parts, &rows, ws, w, nw); break;
#ifdef MOE_NT3
  case 3: down_run_3(ctx, wd, parts, &rows, ws, w, nw); break;
#endif
#ifdef MOE_NT6
  case 6: down_run_6(ctx, wd, parts, &rows, ws, w, nw); break;
#endif
#ifdef MOE_NT_FINE
  case 5: down_run_5(ctx, wd, parts, &rows, ws, w, nw); break;
  case 7: down_run_7(ctx, wd, parts, &rows, ws, w, nw); break;
#endif
  default: down_run_8(ctx, wd, parts, &rows, ws, w, nw); break;
  }
}
