/* The per-SM read-rate probe's harness around the real GQA partial
   (examples/attention_gqa, built with GQA_LMAX = 131072): each CTA runs
   gqa_partial over its table range (split at head boundaries) with a
   df_ctx of its own, so the handler's stream can be timed next to the
   probe's plain loops in one process (README.md). Same parameters and
   records as sm_rate_kernel.c (the end stamped after the partial's
   merge, which waits for its last loads); Q is read from K, outputs go
   to SINK (1040 bytes per CTA and piece). */
#define GQA_LMAX 131072u
#include "../../examples/attention_gqa/attention_gqa_handlers.c"
#include "sm_rate_device.h"

/* flatten: gqa_partial inlined, as in df's kernels (df_dispatch's switch
   and its handlers are inlined into the persistent kernel). Called through
   the ABI instead, the partial took 5-6 us longer per 8192 keys on the
   H200 (README.md, run Z). */
__attribute__((flatten, nvptx_kernel)) void sm_rate_gqa(const _Float16 *K, const _Float16 *V,
                                                const uint32_t *table, uint32_t mode,
                                                uint64_t *rec, uint8_t *sink, uint32_t spin) {
  (void)spin;
  const uint32_t tid = __nvvm_read_ptx_sreg_tid_x(), b = __nvvm_read_ptx_sreg_ctaid_x();
  const uint32_t sm = smr_smid(), idx = mode & 1u ? sm : b; /* head-major units only */
  const uint32_t begin = table[2 * idx], count = table[2 * idx + 1];
  df_abi_tensor_arg tensors[3] = {{0}};
  tensors[0].data_ptr = (uint64_t)(uintptr_t)K; /* Q: any finite values */
  tensors[1].data_ptr = (uint64_t)(uintptr_t)K;
  tensors[2].data_ptr = (uint64_t)(uintptr_t)V;
  uint32_t coords[2] = {0, 0};
  df_abi_args args = {0};
  args.task_coord_count = 2;
  args.output_slot = 0;
  df_ctx ctx = {0};
  ctx.args = &args;
  ctx.task_coords = coords;
  ctx.tensors = tensors;
  ctx.thread = tid;
  ctx.threads = __nvvm_read_ptx_sreg_ntid_x();
  ctx.resolved_for = &args;
  __nvvm_bar_sync(0);
  const uint64_t t0 = smr_now();
  for (uint32_t u = begin, piece = 0; u < begin + count; piece++) {
    const uint32_t h = u / GQA_LMAX, row = u % GQA_LMAX;
    const uint32_t n = GQA_LMAX - row < begin + count - u ? GQA_LMAX - row : begin + count - u;
    coords[1] = h;
    args.range_begin = row;
    args.range_end = row + n;
    ctx.resolved_output = sink + ((uint64_t)b * 2 + (piece & 1)) * sizeof(gqa_inter);
    gqa_partial(&ctx);
    u += n;
  }
  smr_record(rec, sm, t0, (uint64_t)count * 512u);
}
