/* Static barrier-phase check. Every transfer into a CTA's barrier
   completes one phase and every receive consumes one, in queue order, so
   the n-th receive on barrier b of a CTA must wait for parity n & 1. A
   receive waiting for the other parity would pass on the barrier's
   current phase before its transfer arrives (mbarrier.try_wait.parity
   succeeds once the phase with that parity has completed), or hang after
   it. A tiled bulk receive completes an odd number of phases (one per
   tile, plus an empty one for an even count, lib/Runtime/device/
   hbm_bulk.c), the last with the planned parity, so it counts as one. */
#include <stdio.h>

#include "host_internal.h"

/* Barrier and awaited parity of a receive group, or false when the comm
   waits on no barrier (sends, issues, signal-only HBM, receives without a
   barrier). Default-path HBM receives with a barrier count too: the
   device's leader arrives on it (phases are shared with cluster uses). */
static bool waits_on_barrier(const hb_run *r, const df_abi_comm *c, uint32_t *b,
                             uint32_t *parity) {
  const df_packed *k = r->k;
  if (c->kind == DF_COMM_CLUSTER_RECV) {
    *b = hb_comm_barrier(k, c);
    *parity = c->flag_epoch & 1u;
    return true;
  }
  bool recv = c->kind == DF_COMM_HBM_RECV || c->kind == DF_COMM_HBM_RECV_WAIT;
  if (!recv || hb_comm_signal_only(k, c) || hb_comm_barrier(k, c) == HB_S)
    return false;
  *b = hb_comm_barrier(k, c);
  *parity = c->barrier_phase & 1u;
  return true;
}

static df_status mismatch(hb_run *r, uint32_t i, uint32_t j, uint32_t b, uint32_t parity,
                          uint32_t n) {
  char at[256];
  hb_describe_instr(r, i, at, sizeof at);
  const df_abi_comm *c = &r->k->comms[j];
  return hb_fail(r, DF_HOST_DIAG_PHASE_MISMATCH, hb_site_at(r, i, j),
                 "barrier phase mismatch: %s: comm %u %s into slot %u waits on barrier %u for "
                 "parity %u, but it is receive #%u on that barrier of CTA %u, whose transfer "
                 "completes phase %u (parity %u): the wait would pass before the transfer "
                 "arrives",
                 at, j, hb_comm_kind_name(c->kind), c->dst_slot_id, b, parity, n,
                 r->instr_cta[i], n, n & 1u);
}

static df_status check_queue(hb_run *r, uint32_t s, uint32_t *count) {
  const df_packed *k = r->k;
  uint32_t q0 = k->queue_offsets[s], n = k->queue_lengths[s];
  for (uint32_t p = 0; p < n; p++) {
    const df_abi_instr *in = &k->instrs[q0 + p];
    if (in->opcode == DF_ABI_OP_EXIT)
      break;
    uint32_t end = in->comm_offset + in->comm_count;
    /* cluster receives first, then HBM receives/waits, as the device */
    for (int pass = 0; pass < 2; pass++)
      for (uint32_t j = in->comm_offset; j < end; j += hb_group_len(k, j)) {
        const df_abi_comm *c = &k->comms[j];
        if ((pass == 0) != (c->kind == DF_COMM_CLUSTER_RECV))
          continue;
        uint32_t b, parity;
        if (!waits_on_barrier(r, c, &b, &parity))
          continue;
        if (parity != (count[b] & 1u))
          return mismatch(r, q0 + p, j, b, parity, count[b]);
        count[b]++;
      }
  }
  return df_status_ok();
}

df_status hb_check_phases(hb_run *r) {
  uint32_t nb = r->pkg.barrier_count;
  uint32_t *count = df_alloc(&r->al, sizeof(uint32_t) * (nb + 1));
  if (!count)
    return hb_oom("barrier phase counters");
  df_status st = df_status_ok();
  for (uint32_t s = 0; s < r->cta_count && st.code == DF_OK; s++) {
    for (uint32_t b = 0; b < nb; b++)
      count[b] = 0;
    st = check_queue(r, s, count);
  }
  df_free(&r->al, count);
  return st;
}
