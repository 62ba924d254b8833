/* Internal to the device runtime: the per-CTA state the loop carries and
   the small record helpers every phase uses. All threads hold the same
   copy of df_rt and make the same decisions from the same records, so
   every bar.sync below is reached uniformly; only the leader (thread 0)
   writes control state (barriers, bits, flags) and issues bulk copies. */
#ifndef DF_DEVICE_RUNTIME_INTERNAL_H
#define DF_DEVICE_RUNTIME_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "df/abi.h"
#include "df/device.h"
#include "df/kernel_plan.h"
#include "df/progress.h"
#include "df/rt_trace.h"
#include "ptx.h"

#define DF_RT static inline __attribute__((always_inline))
#define DF_KIND_BIT(k) (1u << (k))

/* Defined by the generated module (lib/Target): the plan's feature bits
   and, with DF_FEATURE_EMBEDDED_PLAN, its records. Both are constants
   after linking, so O3 folds every DF_HAS test and drops unused paths. */
extern const uint32_t df_plan_features;
extern const df_plan_records df_embedded_plan;
/* The handlers' largest df.workspace_bytes (docs/workspace.md). */
extern const uint32_t df_handler_workspace_bytes;
#define DF_HAS(f) ((df_plan_features & (f)) != 0)

typedef struct df_rt {
  const df_abi_slot *slots;
  const df_abi_comm *comms;
  uint8_t *staging; /* global staging base (HBM slots, direct-global slots) */
  uint32_t *flags;  /* HBM flags, one u32 epoch each */
  uint8_t *smem;    /* dynamic shared memory, generic pointer */
  uint32_t smem_addr; /* the same as a shared-window address */
  uint32_t slot_base; /* shared_slot_base_offset */
  uint32_t scratch_offset;
  uint32_t barrier_count, ack_count, cluster_size;
  uint32_t ack_bits, issued_bits; /* byte offsets of the two bit-word arrays */
  uint32_t tid, threads;
  /* Shared byte ranges [lo, hi) that cluster bulk sends may still read:
     all outstanding groups, and the newest group alone. Empty: lo >= hi. */
  uint32_t pend_lo, pend_hi, new_lo, new_hi;
  /* Watchdog (df/progress.h): this CTA's progress words and the array's
     abort word, both NULL without a watchdog. */
  volatile uint32_t *progress;
  volatile uint32_t *abort_req;
  bool marks; /* progress != NULL and this thread is the leader */
#ifdef DF_RT_TRACE
  /* This instruction's stamps in df_rt_trace_buf, NULL past the traced
     CTAs and instructions (df/rt_trace.h). */
  uint64_t *trace;
#endif
#ifdef DF_RT_TRACE_DIAG
  uint64_t *diag; /* this instruction's df_rt_diag_buf stamps, or NULL */
#endif
} df_rt;

DF_RT bool df_rt_leader(const df_rt *rt) { return rt->tid == 0; }
/* Whether the launch has clusters (plan-wide: every CTA agrees). */
DF_RT bool df_rt_clustered(const df_rt *rt) {
  return DF_HAS(DF_FEATURE_CLUSTER) && rt->cluster_size > 1;
}

/* ---- watchdog progress (df/progress.h) ------------------------------------ */

/* Leader only, plain volatile stores; nothing without a watchdog. The
   stores are out of line (progress.c), so that an unwatched launch pays
   one untaken branch per mark rather than their address arithmetic: the
   dispatch loop is latency bound, and the stores predicated inline were
   85 of its 187 ns per instruction (bench/overhead run I). */
void df_rt_mark_store(volatile uint32_t *progress, uint32_t phase, uint32_t comm,
                      uint32_t wait);
void df_rt_mark_pc_store(volatile uint32_t *progress, uint32_t pc);
DF_RT void df_rt_mark(const df_rt *rt, uint32_t phase, uint32_t comm, uint32_t wait) {
  if (__builtin_expect(rt->marks, 0))
    df_rt_mark_store(rt->progress, phase, comm, wait);
}
DF_RT void df_rt_mark_pc(const df_rt *rt, uint32_t pc) {
  if (__builtin_expect(rt->marks, 0))
    df_rt_mark_pc_store(rt->progress, pc);
}
/* Global index of a comm record (the dump names it). */
DF_RT uint32_t df_rt_comm_index(const df_rt *rt, const df_abi_comm *c) {
  return (uint32_t)(c - rt->comms);
}
/* Spinning loops call this every so often: after the host's abort request
   (watchdog timeout) the CTA traps, which ends the whole kernel. */
DF_RT void df_rt_check_abort(const df_rt *rt, uint32_t spins) {
  if (rt->abort_req && (spins & 255u) == 0 && *rt->abort_req)
    __builtin_trap();
}
/* mbarrier wait for `parity` (cluster-scope acquire when `cluster`), with
   the abort check when a watchdog is on. */
DF_RT void df_rt_bar_wait(const df_rt *rt, uint32_t bar, uint32_t parity, bool cluster) {
  if (!rt->abort_req) {
    if (cluster)
      df_ptx_mbar_wait_cluster(bar, parity);
    else
      df_ptx_mbar_wait(bar, parity);
    return;
  }
  for (uint32_t n = 1;; n++) {
    if (cluster ? df_ptx_mbar_try_wait_cluster(bar, parity) : df_ptx_mbar_try_wait(bar, parity))
      return;
    df_rt_check_abort(rt, n);
  }
}

/* ---- per-phase trace (df/rt_trace.h; -DDF_RT_TRACE builds only) ---------- */

#ifdef DF_RT_TRACE
extern uint64_t df_rt_trace_buf[DF_RT_TRACE_WORDS];
/* Leader only: %globaltimer and %clock64 at `point` of this instruction.
   Volatile with a memory clobber, so the stamps stay where they are
   written relative to the barriers and waits around them. */
DF_RT void df_rt_trace_at(const df_rt *rt, uint32_t point) {
  if (rt->trace && df_rt_leader(rt)) {
    uint64_t g, c;
    __asm__ __volatile__("mov.u64 %0, %%globaltimer;" : "=l"(g) : : "memory");
    __asm__ __volatile__("mov.u64 %0, %%clock64;" : "=l"(c) : : "memory");
    rt->trace[2 * point] = g;
    rt->trace[2 * point + 1] = c;
  }
}
#define DF_RT_TRACE_AT(rt, point) df_rt_trace_at((rt), (point))
#else
#define DF_RT_TRACE_AT(rt, point) ((void)0)
#endif

#ifdef DF_RT_TRACE_DIAG
extern uint64_t df_rt_diag_buf[DF_RT_DIAG_WORDS];
/* Leader only: %globaltimer at diagnostic `point` (df/rt_trace.h). */
DF_RT void df_rt_diag_at(const df_rt *rt, uint32_t point) {
  if (rt->diag && df_rt_leader(rt)) {
    uint64_t g;
    __asm__ __volatile__("mov.u64 %0, %%globaltimer;" : "=l"(g) : : "memory");
    rt->diag[point] = g;
  }
}
#define DF_RT_DIAG_AT(rt, point) df_rt_diag_at((rt), (point))
#else
#define DF_RT_DIAG_AT(rt, point) ((void)0)
#endif

/* ---- control area of dynamic shared memory ---------------------------- */

DF_RT uint32_t df_rt_bar_addr(const df_rt *rt, uint32_t idx) {
  return rt->smem_addr + idx * DF_BARRIER_BYTES;
}
DF_RT uint32_t df_rt_ack_addr(const df_rt *rt, uint32_t idx) {
  return rt->smem_addr + (rt->barrier_count + idx) * DF_BARRIER_BYTES;
}
DF_RT uint32_t *df_rt_words(const df_rt *rt, uint32_t byte_offset) {
  return (uint32_t *)(rt->smem + byte_offset);
}
DF_RT bool df_rt_bit(const df_rt *rt, uint32_t words, uint32_t i) {
  return (df_rt_words(rt, words)[i >> 5] >> (i & 31)) & 1u;
}
DF_RT void df_rt_bit_put(const df_rt *rt, uint32_t words, uint32_t i, bool on) {
  uint32_t *w = &df_rt_words(rt, words)[i >> 5];
  *w = on ? (*w | (1u << (i & 31))) : (*w & ~(1u << (i & 31)));
}

/* ---- slots ------------------------------------------------------------------ */

DF_RT const df_abi_slot *df_rt_slot(const df_rt *rt, uint32_t id) { return &rt->slots[id]; }
DF_RT bool df_slot_in_shared(const df_abi_slot *s) {
  return !(DF_HAS(DF_FEATURE_DIRECT_GLOBAL) && (s->flags & DF_SLOT_FLAG_HBM_DIRECT_GLOBAL));
}
/* Byte offset of a shared (arena or scratch-backed) slot in dynamic smem. */
DF_RT uint32_t df_rt_slot_smem(const df_rt *rt, const df_abi_slot *s) {
  return ((DF_HAS(DF_FEATURE_SCRATCH) && (s->flags & DF_SLOT_FLAG_SCRATCH_BACKED))
              ? rt->scratch_offset
              : rt->slot_base) +
         s->shared_offset;
}
/* Generic pointer to a slot's bytes, wherever they live (as df_slot_ptr). */
DF_RT uint8_t *df_rt_slot_ptr(const df_rt *rt, const df_abi_slot *s) {
  if (!df_slot_in_shared(s))
    return rt->staging + s->global_offset;
  return rt->smem + df_rt_slot_smem(rt, s);
}

/* ---- comm records ----------------------------------------------------------- */

/* byte_count 0 = the whole slot: the smaller of both ends, past the offset. */
DF_RT uint32_t df_comm_bytes(const df_abi_comm *c, const df_abi_slot *src,
                             const df_abi_slot *dst) {
  if (c->byte_count)
    return c->byte_count;
  uint32_t n = src->bytes < dst->bytes ? src->bytes : dst->bytes;
  return n > c->byte_offset ? n - c->byte_offset : 0;
}
DF_RT uint32_t df_comm_flag(const df_abi_comm *c, const df_abi_slot *dst) {
  return c->flag_index != DF_SENTINEL ? c->flag_index : dst->flag_index;
}
DF_RT uint32_t df_comm_barrier(const df_abi_comm *c, const df_abi_slot *dst) {
  return c->barrier_index != DF_SENTINEL ? c->barrier_index : dst->barrier_index;
}
/* Records of one segmented transfer are adjacent and in segment order
   (the packer sorts by segment last); a group is handled at segment 0. */
DF_RT uint32_t df_comm_group(const df_abi_comm *c, uint32_t i, uint32_t n) {
  uint32_t g = c->segment_count > 1 ? c->segment_count : 1;
  return g < n - i ? g : n - i;
}
/* An instruction's comms as the loop needs them before its phases: the
   kinds, limited to what this kernel was built for (a protocol kind 1-7
   outside its features traps: the plan needs a kernel built for it, or
   one built with every feature), and its HBM receive heads split into
   one-segment HBM_RECVs (the batch's members, df_rt_hbm_recv) and the
   others. */
typedef struct df_comm_scan {
  uint32_t kinds;
  uint32_t recv_simple;
  uint32_t recv_other;
} df_comm_scan;

/* Whether a comm with these fields heads an HBM receive or wait (kinds
   4, 7; a segmented transfer is handled at its segment 0). */
DF_RT bool df_comm_recv_head(uint32_t kind, uint32_t segment_count, uint32_t segment_id) {
  return (kind == DF_COMM_HBM_RECV || kind == DF_COMM_HBM_RECV_WAIT) &&
         !(segment_count > 1 && segment_id);
}

/* One record's share of the scan (a record past the end: none). */
DF_RT void df_comm_scan_one(const df_abi_comm *r, bool have, uint32_t *bit, bool *simple,
                            bool *other) {
  uint32_t kind = 0, count = 0, id = 0;
  if (have) {
    kind = r->kind;
    count = r->segment_count;
    id = r->segment_id;
  }
  const bool head = have && df_comm_recv_head(kind, count, id);
  *bit = have ? DF_KIND_BIT(kind & 31) : 0;
  *simple = head && kind == DF_COMM_HBM_RECV && count <= 1;
  *other = head && !*simple;
}

/* Warp-wide: lane l reads record l (32 at a time), so the records cost
   one round trip per 32 of them instead of one per record; every warp
   computes the same. The bench/attention timelines of run O put 0.45-0.9
   us on each serial walk over a reduce's records after a long handler.
   A CTA with a partial warp walks them serially. */
DF_RT df_comm_scan df_comm_scan_checked(const df_rt *rt, const df_abi_comm *c, uint32_t n) {
  df_comm_scan s = {0, 0, 0};
  uint32_t bit;
  bool simple, other;
  if (rt->threads & 31u) {
    for (uint32_t i = 0; i < n; i++) {
      df_comm_scan_one(&c[i], true, &bit, &simple, &other);
      s.kinds |= bit;
      s.recv_simple += simple;
      s.recv_other += other;
    }
  } else {
    const uint32_t lane = rt->tid & 31u;
    for (uint32_t base = 0; base < n; base += 32) {
      df_comm_scan_one(&c[base + lane], base + lane < n, &bit, &simple, &other);
      s.kinds |= (uint32_t)__nvvm_redux_sync_or((int)bit, -1);
      s.recv_simple += (uint32_t)__builtin_popcount(__nvvm_vote_ballot_sync(0xffffffffu, simple));
      s.recv_other += (uint32_t)__builtin_popcount(__nvvm_vote_ballot_sync(0xffffffffu, other));
    }
  }
  const uint32_t allowed = df_plan_features_kinds(df_plan_features);
  if (s.kinds & ~allowed & 0xFEu)
    __builtin_trap();
  s.kinds &= allowed;
  return s;
}


/* Global-space address of a generic pointer into global memory. */
DF_RT uint64_t df_gaddr(const void *p) {
  return (uint64_t)(uintptr_t)(const __attribute__((address_space(1))) void *)p;
}

/* ---- phases (one file each) --------------------------------------------------- */

/* The phases, inlined into each of the kernel's two entries (kernel.c):
   out of line, the per-CTA state they take by pointer would live in
   local memory. */
#define DF_RT_PHASE __attribute__((always_inline))
DF_RT_PHASE bool df_rt_stage_records(const df_rt *rt, df_ctx *ctx, const df_abi_args *a);
DF_RT_PHASE void df_rt_use_stage(df_ctx *ctx);
DF_RT_PHASE void df_rt_startup(const df_rt *rt, const uint32_t *init_indices, uint32_t init_count);
DF_RT_PHASE void df_rt_finish(const df_rt *rt);
DF_RT_PHASE void df_rt_copy(const df_rt *rt, uint8_t *dst, const uint8_t *src, uint32_t n);
DF_RT_PHASE void df_rt_source_guard(df_rt *rt, const df_abi_args *a, const df_abi_comm *c, uint32_t n);
DF_RT_PHASE void df_rt_track_sends(df_rt *rt, const df_abi_comm *c, uint32_t n);
DF_RT_PHASE void df_rt_cluster_recv(const df_rt *rt, const df_abi_comm *c, uint32_t n);
DF_RT_PHASE void df_rt_hbm_recv(const df_rt *rt, const df_abi_comm *c, uint32_t n,
                                const df_comm_scan *scan);
DF_RT_PHASE void df_rt_hbm_issue(const df_rt *rt, const df_abi_comm *c, uint32_t n);
DF_RT_PHASE bool df_rt_hbm_bulk_ok(const df_rt *rt, const df_abi_comm *c, uint32_t g);
DF_RT_PHASE bool df_rt_hbm_bulk_post(const df_rt *rt, const df_abi_comm *c, uint32_t g, bool block);
DF_RT_PHASE void df_rt_hbm_bulk_tiled(const df_rt *rt, const df_abi_comm *c, uint32_t g);
DF_RT_PHASE void df_rt_poll_flag(const df_rt *rt, uint32_t flag, uint32_t epoch);
DF_RT_PHASE void df_rt_cluster_send(const df_rt *rt, const df_abi_comm *c, uint32_t n);
DF_RT_PHASE uint32_t df_rt_hbm_send_preparable(const df_rt *rt, const df_abi_comm *c, uint32_t n);
DF_RT_PHASE void df_rt_hbm_send_prepare(const df_rt *rt, const df_abi_comm *c, uint32_t n);
DF_RT_PHASE void df_rt_hbm_send(const df_rt *rt, const df_abi_comm *c, uint32_t n, uint32_t prepared);

#endif
