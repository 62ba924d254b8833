/* The handler ABI: the context every handler receives and the accessors it
   uses. One definition serves the persistent kernel (compiled by clang for
   nvptx64) and the host backend (compiled for the CPU), so handler code is
   written once. Freestanding: only <stdint.h> and abi.h. */
#ifndef DF_DEVICE_H
#define DF_DEVICE_H

#include <stdint.h>

#include "df/abi.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__NVPTX__)
#define DF_DEVICE_INLINE static inline __attribute__((always_inline))
#else
#define DF_DEVICE_INLINE static inline
#endif

/* What one dispatched instruction sees. The runtime fills it before each
   handler call; handlers read it only through the accessors below. */
typedef struct df_ctx {
  const df_abi_args *args;          /* this instruction's handler args */
  const df_abi_slot *slots;         /* slot records of the plan */
  const uint32_t *input_slots;      /* the plan's input slot list */
  const uint32_t *task_coords;      /* the plan's task coordinate list */
  const df_abi_tensor_arg *tensors; /* tensor arguments */
  uint8_t *shared_slots;            /* slot arena (shared_slot_base_offset) */
  uint8_t *scratch;                 /* compiler scratch base */
  uint8_t *global_staging;          /* HBM staging / direct-global slots */
  uint32_t block_size;              /* the plan's range block size */
  uint32_t thread, threads;         /* this thread and the CTA's count */
  /* Host backend only: CTA barrier among the virtual CTA's threads. */
  void (*host_barrier)(void *user);
  void *host_user;
  /* Handler workspace: shared memory of this CTA that only the running
     handler uses (docs/workspace.md); NULL / 0 when the kernel's handlers
     declare none. */
  uint8_t *workspace;
  uint32_t workspace_bytes;
  /* Input 0's and the output's addresses, resolved from the records ahead
     of the call (the device runtime does it for cluster-receiving
     instructions while the receive waits, so the handler does not chase
     args -> input list -> slot record after the data lands; the host
     backend for every call). Valid only while
     `resolved_for` equals `args`: a composite handler's later parts, and
     every call that was not resolved, read the records. */
  const df_abi_args *resolved_for;
  void *resolved_input0; /* NULL when the instruction has no input */
  void *resolved_output; /* NULL when it has no output slot */
} df_ctx;

/* A handler: one function per handler id (variants included). */
typedef void (*df_handler_fn)(const df_ctx *ctx);

DF_DEVICE_INLINE uint32_t df_ctx_task_id(const df_ctx *c) { return c->args->task_id; }
DF_DEVICE_INLINE uint32_t df_ctx_task_coord_count(const df_ctx *c) {
  return c->args->task_coord_count;
}
DF_DEVICE_INLINE uint32_t df_ctx_task_coord(const df_ctx *c, uint32_t i) {
  return c->task_coords[c->args->task_coord_offset + i];
}
DF_DEVICE_INLINE uint32_t df_ctx_range_begin(const df_ctx *c) { return c->args->range_begin; }
DF_DEVICE_INLINE uint32_t df_ctx_range_end(const df_ctx *c) { return c->args->range_end; }
/* The plan's range block size (range units per block). */
DF_DEVICE_INLINE uint32_t df_ctx_block_size(const df_ctx *c) { return c->block_size; }
/* Range blocks this call covers: ceil((end - begin) / block_size). */
DF_DEVICE_INLINE uint32_t df_ctx_tiles(const df_ctx *c) {
  uint32_t n = c->args->range_end - c->args->range_begin;
  return c->block_size ? (n + c->block_size - 1) / c->block_size : 0;
}

/* Address of a slot's bytes: direct-global slots live in global staging,
   scratch-backed slots at the compiler scratch base, the rest in the
   shared arena. */
DF_DEVICE_INLINE void *df_slot_ptr(const df_ctx *c, uint32_t slot) {
  const df_abi_slot *s = &c->slots[slot];
  if (s->flags & DF_SLOT_FLAG_HBM_DIRECT_GLOBAL)
    return c->global_staging + s->global_offset;
  if (s->flags & DF_SLOT_FLAG_SCRATCH_BACKED)
    return c->scratch + s->shared_offset;
  return c->shared_slots + s->shared_offset;
}

DF_DEVICE_INLINE uint32_t df_ctx_input_count(const df_ctx *c) {
  return c->args->input_slot_count;
}
DF_DEVICE_INLINE void *df_ctx_input(const df_ctx *c, uint32_t i) {
  if (i == 0 && c->resolved_for == c->args)
    return c->resolved_input0;
  return df_slot_ptr(c, c->input_slots[c->args->input_slot_offset + i]);
}
/* NULL when the instruction has no output slot. */
DF_DEVICE_INLINE void *df_ctx_output(const df_ctx *c) {
  if (c->resolved_for == c->args)
    return c->resolved_output;
  return c->args->output_slot == DF_SENTINEL ? (void *)0 : df_slot_ptr(c, c->args->output_slot);
}
/* Fills the resolved addresses of df_ctx for the call over `args`, from
   the records `c` points at now. */
DF_DEVICE_INLINE void df_ctx_resolve(df_ctx *c, const df_abi_args *args) {
  c->resolved_input0 =
      args->input_slot_count ? df_slot_ptr(c, c->input_slots[args->input_slot_offset]) : (void *)0;
  c->resolved_output =
      args->output_slot == DF_SENTINEL ? (void *)0 : df_slot_ptr(c, args->output_slot);
  c->resolved_for = args;
}

DF_DEVICE_INLINE void *df_ctx_tensor(const df_ctx *c, uint32_t i) {
  return (void *)(uintptr_t)c->tensors[i].data_ptr;
}
DF_DEVICE_INLINE uint32_t df_ctx_tensor_dtype(const df_ctx *c, uint32_t i) {
  return c->tensors[i].dtype_code;
}
DF_DEVICE_INLINE uint32_t df_ctx_tensor_bits(const df_ctx *c, uint32_t i) {
  return c->tensors[i].dtype_bits;
}
DF_DEVICE_INLINE uint32_t df_ctx_tensor_ndim(const df_ctx *c, uint32_t i) {
  return c->tensors[i].ndim;
}

DF_DEVICE_INLINE uint32_t df_ctx_thread(const df_ctx *c) { return c->thread; }
DF_DEVICE_INLINE uint32_t df_ctx_threads(const df_ctx *c) { return c->threads; }
/* CTA-wide barrier: bar.sync 0 on the device, the backend's on the host. */
DF_DEVICE_INLINE void df_ctx_barrier(const df_ctx *c) {
#if defined(__NVPTX__)
  (void)c;
  __nvvm_bar_sync(0);
#else
  if (c->host_barrier)
    c->host_barrier(c->host_user);
#endif
}

/* The handler workspace: df_ctx_workspace_bytes bytes of this CTA's
   shared memory (on the host, a per-CTA buffer), at least 128-byte
   aligned, private to the handler running now: contents are undefined at
   entry and not kept between instructions. A kernel has the largest
   workspace its handlers declare (`df.workspace_bytes` on a handler
   declaration); NULL and 0 when none does. */
DF_DEVICE_INLINE void *df_ctx_workspace(const df_ctx *c) { return c->workspace; }
DF_DEVICE_INLINE uint32_t df_ctx_workspace_bytes(const df_ctx *c) { return c->workspace_bytes; }

/* Field offsets inside a slot follow REFERENCE 1.4: each field aligned to
   min(element bytes, 16) in declaration order. Handlers use the offsets
   the compiler emits for their intermediate types. */

#ifdef __cplusplus
}
#endif

#endif
