// A probe kernel with df's kernel signature (include/df/runtime.h), for
// checking libdfrt on a real GPU: every CTA reports what it received
// (cluster rank and size, dynamic shared size, block shape, the six u32
// parameters, its queue and barrier-init entries, the flag it found) into
// tensor 0, marks its flag and a staging byte so the next launch can tell
// whether the runtime reset the flags, and CTA 0 of df_probe_tma loads a
// 16x4 float16 tile through the by-value tensor map with TMA.
// Build: nvcc -arch=sm_90a -ptx probe_kernel.cu -o probe.ptx
#include <cuda.h>
#include <stdint.h>

struct TensorArg {
  unsigned long long data_ptr;
  unsigned ndim, dtype_code, dtype_bits, flags;
  unsigned long long reserved;
};

enum { REPORT_WORDS = 32, MAX_REPORT_CTAS = 64, FLAG_CTAS = 4 };

__device__ __forceinline__ unsigned smem_u32(const void *p) {
  return (unsigned)__cvta_generic_to_shared(p);
}

__device__ void report(const unsigned *instructions, const unsigned *queue_offsets,
                       const unsigned *queue_lengths, const unsigned *slots,
                       const unsigned *barrier_init_lengths, const TensorArg *tensor_args,
                       unsigned char *global_staging, unsigned *flags, unsigned base,
                       unsigned barriers, unsigned acks, unsigned cluster_size,
                       unsigned block_size, unsigned scratch) {
  extern __shared__ __align__(1024) unsigned char dyn[];
  unsigned cta = blockIdx.x, rank, nrank, dsmem;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(nrank));
  asm volatile("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dsmem));
  unsigned threads = blockDim.x * blockDim.y * blockDim.z;
  unsigned tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  // Touch all of dynamic shared memory: it must really be there.
  for (unsigned i = tid; i < dsmem; i += threads)
    dyn[i] = (unsigned char)(i * 7 + cta);
  __syncthreads();
  __shared__ unsigned bad;
  if (tid == 0)
    bad = 0;
  __syncthreads();
  for (unsigned i = tid; i < dsmem; i += threads)
    if (dyn[i] != (unsigned char)(i * 7 + cta))
      atomicAdd(&bad, 1u);
  __syncthreads();
  if (tid != 0 || cta >= MAX_REPORT_CTAS)
    return;
  unsigned *out = (unsigned *)tensor_args[0].data_ptr + cta * REPORT_WORDS;
  out[0] = cta;
  out[1] = rank;
  out[2] = nrank;
  out[3] = dsmem;
  out[4] = threads;
  out[5] = base;
  out[6] = barriers;
  out[7] = acks;
  out[8] = cluster_size;
  out[9] = block_size;
  out[10] = scratch;
  out[11] = queue_offsets[cta];
  out[12] = queue_lengths[cta];
  out[13] = cta < FLAG_CTAS ? flags[cta] : 0;
  out[14] = queue_lengths[cta] ? instructions[queue_offsets[cta] * 8] : 0xffffffffu;
  out[15] = gridDim.x;
  out[16] = barrier_init_lengths[cta];
  out[17] = tensor_args[1].ndim;
  out[18] = tensor_args[1].dtype_bits;
  out[19] = slots[2]; // slot 0's bytes
  out[20] = bad;
  out[21] = 0x600d;
  if (cta < FLAG_CTAS) {
    flags[cta] = 0xdead0000u | cta; // the next launch must find 0 again
    global_staging[cta] = (unsigned char)(cta + 1);
  }
}

#define PARAMS                                                                              \
  const unsigned *instructions, const unsigned *queue_offsets, const unsigned *queue_lengths, \
      const unsigned *slots, const unsigned *comms, const unsigned *barrier_init_offsets,    \
      const unsigned *barrier_init_lengths, const unsigned *barrier_init_indices,            \
      const unsigned *args, const TensorArg *tensor_args, const unsigned *input_slots,       \
      const unsigned *task_coords, unsigned char *global_staging, unsigned *flags,           \
      unsigned shared_slot_base_offset, unsigned barrier_count, unsigned cluster_ack_count,  \
      unsigned cluster_size, unsigned block_size, unsigned scratch_offset,                   \
      unsigned *progress

#define REPORT                                                                               \
  report(instructions, queue_offsets, queue_lengths, slots, barrier_init_lengths,           \
         tensor_args, global_staging, flags, shared_slot_base_offset, barrier_count,        \
         cluster_ack_count, cluster_size, block_size, scratch_offset)

extern "C" __global__ void df_persistent_kernel(PARAMS) { REPORT; }

// As above, plus one tensor map: CTA 0 loads box (16,4) at (0,0) of
// tensor 1 and writes the 128 bytes after the reports.
extern "C" __global__ void df_probe_tma(PARAMS, const __grid_constant__ CUtensorMap desc) {
  REPORT;
  __shared__ __align__(128) unsigned char tile[128];
  __shared__ __align__(8) unsigned long long bar;
  if (blockIdx.x != 0 || threadIdx.x != 0)
    return;
  unsigned b = smem_u32(&bar), t = smem_u32(tile);
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(b));
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(b), "r"(128u)
               : "memory");
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%2, %3}], [%4];" ::"r"(t),
               "l"(reinterpret_cast<uint64_t>(&desc)), "r"(0), "r"(0), "r"(b)
               : "memory");
  asm volatile("{\n\t.reg .pred p;\n"
               "WAIT_%=:\n\t"
               "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], 0;\n\t"
               "@!p bra WAIT_%=;\n}" ::"r"(b)
               : "memory");
  unsigned char *out =
      (unsigned char *)tensor_args[0].data_ptr + MAX_REPORT_CTAS * REPORT_WORDS * 4;
  for (int i = 0; i < 128; i++)
    out[i] = tile[i];
}
