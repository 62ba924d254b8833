/* Out-of-line handler accessors. Handlers written in MLIR reach the
   handler ABI through the df.ctx_* ops, which the lowering
   (lib/Target/mlir_ctx_ops.c) turns into calls of these functions; they
   wrap the inline accessors of df/device.h, so C and MLIR handlers share
   one implementation. After linking everything but the kernel is
   internal, and O3 inlines them away. Index arguments are u32. */
#include "df/device.h"

uint32_t df_ctx_task_id_fn(const df_ctx *c) { return df_ctx_task_id(c); }
uint32_t df_ctx_task_coord_count_fn(const df_ctx *c) { return df_ctx_task_coord_count(c); }
uint32_t df_ctx_task_coord_fn(const df_ctx *c, uint32_t i) { return df_ctx_task_coord(c, i); }
uint32_t df_ctx_range_begin_fn(const df_ctx *c) { return df_ctx_range_begin(c); }
uint32_t df_ctx_range_end_fn(const df_ctx *c) { return df_ctx_range_end(c); }
uint32_t df_ctx_block_size_fn(const df_ctx *c) { return df_ctx_block_size(c); }
uint32_t df_ctx_tiles_fn(const df_ctx *c) { return df_ctx_tiles(c); }
uint32_t df_ctx_input_count_fn(const df_ctx *c) { return df_ctx_input_count(c); }
void *df_ctx_input_fn(const df_ctx *c, uint32_t i) { return df_ctx_input(c, i); }
void *df_ctx_output_fn(const df_ctx *c) { return df_ctx_output(c); }
void *df_ctx_tensor_fn(const df_ctx *c, uint32_t i) { return df_ctx_tensor(c, i); }
uint32_t df_ctx_tensor_dtype_fn(const df_ctx *c, uint32_t i) { return df_ctx_tensor_dtype(c, i); }
uint32_t df_ctx_tensor_bits_fn(const df_ctx *c, uint32_t i) { return df_ctx_tensor_bits(c, i); }
uint32_t df_ctx_tensor_ndim_fn(const df_ctx *c, uint32_t i) { return df_ctx_tensor_ndim(c, i); }
uint32_t df_ctx_thread_fn(const df_ctx *c) { return df_ctx_thread(c); }
uint32_t df_ctx_threads_fn(const df_ctx *c) { return df_ctx_threads(c); }
void df_ctx_barrier_fn(const df_ctx *c) { df_ctx_barrier(c); }
