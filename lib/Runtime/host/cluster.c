/* Cluster (DSMEM) transfers: receives wait on their barrier's parity;
   sends copy the source slot into the destination slot of the peer CTA
   (cluster base + peer_cta_rank) and complete one phase of the
   destination barrier; releases arrive on the producer's ACK barrier.
   Segments of one transfer move as one bulk group: one phase. */
#include <stdio.h>

#include "host_internal.h"

static void finish_comms(hb_run *r, hb_cta *c, uint32_t j, uint32_t n, uint32_t peer,
                         df_status *st) {
  for (uint32_t g = 0; g < n && st->code == DF_OK; g++) {
    r->comm_done[j + g] = 1;
    hb_cost_comm(r, c, j + g);
    *st = hb_log_comm(r, c, j + g, peer);
  }
}

df_status hb_cluster_recv(hb_run *r, hb_cta *c, uint32_t j, hb_step_result *res) {
  const df_abi_comm *m = &r->k->comms[j];
  uint32_t instr = r->comm_instr[j];
  uint32_t b = hb_comm_barrier(r->k, m), parity = m->flag_epoch & 1u;
  bool passed;
  DF_TRY(hb_barrier_consume(r, c, b, parity, j, &passed));
  if (!passed) {
    hb_block(c, DF_HOST_WAIT_BARRIER, instr, j, m->dst_slot_id, b, parity,
             c->bars[b].completed, r);
    *res = HB_STEP_BLOCKED;
    return df_status_ok();
  }
  const hb_barrier *bar = &c->bars[b];
  hb_cost_edge(r, c, bar->set_instr, true);
  df_status st = df_status_ok();
  finish_comms(r, c, j, hb_group_len(r->k, j), bar->set_cta, &st);
  *res = HB_STEP_PROGRESS;
  return st;
}

/* A gated push waits for the consumer's release on its own ACK barrier. */
static bool gate_open(hb_run *r, hb_cta *c, uint32_t j, hb_step_result *res) {
  const df_abi_comm *m = &r->k->comms[j];
  if (m->flag_index == HB_S || !(r->k->slots[m->dst_slot_id].flags & DF_SLOT_FLAG_CLUSTER_GATED_PUSH))
    return true;
  hb_ack *a = &c->acks[m->flag_index];
  if (a->completed > a->consumed) {
    a->consumed++;
    hb_cost_edge(r, c, a->set_instr, true);
    return true;
  }
  hb_block(c, DF_HOST_WAIT_ACK, r->comm_instr[j], j, m->dst_slot_id, m->flag_index, a->consumed,
           a->completed, r);
  *res = HB_STEP_BLOCKED;
  return false;
}

df_status hb_cluster_send(hb_run *r, hb_cta *c, uint32_t j, hb_step_result *res) {
  const df_packed *k = r->k;
  const df_abi_comm *m = &k->comms[j];
  uint32_t instr = r->comm_instr[j], n = hb_group_len(k, j);
  uint32_t x = hb_peer_cta(r, c->id, m);
  if (!gate_open(r, c, j, res))
    return df_status_ok();
  for (uint32_t g = 0; g < n; g++) {
    uint32_t seg = j + g, recv = r->comm_match[seg];
    if (recv == HB_S) {
      char at[256];
      hb_describe_instr(r, instr, at, sizeof at);
      return hb_fail(r, DF_HOST_DIAG_INVALID_PLAN, hb_site_at(r, instr, seg),
                     "%s: comm %u cluster_send (slot %u -> %u, segment %u) to CTA %u has no "
                     "matching cluster_recv in CTA %u's queue",
                     at, seg, m->src_slot_id, m->dst_slot_id, k->comms[seg].segment_id, x, x);
    }
    uint32_t off, len = hb_comm_span(k, &k->comms[seg], &off);
    DF_TRY(hb_check_landing(r, c->id, seg, x, recv, hb_slot_region(r, x, m->dst_slot_id, off, len)));
  }
  DF_TRY(hb_barrier_complete(r, x, hb_comm_barrier(k, m), c->id, instr, j));
  for (uint32_t g = 0; g < n; g++) {
    uint32_t off, len = hb_comm_span(k, &k->comms[j + g], &off);
    hb_copy(r, hb_slot_region(r, x, m->dst_slot_id, off, len),
            hb_slot_region(r, c->id, m->src_slot_id, off, len), m->dst_slot_id, instr);
  }
  if (m->flag_index != HB_S && !(k->slots[m->dst_slot_id].flags & DF_SLOT_FLAG_CLUSTER_GATED_PUSH))
    c->acks[m->flag_index].pending = true;
  df_status st = df_status_ok();
  finish_comms(r, c, j, n, x, &st);
  *res = HB_STEP_PROGRESS;
  return st;
}

df_status hb_cluster_release(hb_run *r, hb_cta *c, uint32_t j) {
  const df_abi_comm *m = &r->k->comms[j];
  uint32_t instr = r->comm_instr[j], y = hb_peer_cta(r, c->id, m);
  hb_ack *a = &r->ctas[y].acks[m->flag_index];
  if (!a->init) {
    char at[256];
    hb_describe_instr(r, instr, at, sizeof at);
    return hb_fail(r, DF_HOST_DIAG_INVALID_PLAN, hb_site_at(r, instr, j),
                   "%s: comm %u cluster_release arrives on ACK barrier %u of CTA %u, which has "
                   "no cluster send with that ACK index (never initialised)",
                   at, j, m->flag_index, y);
  }
  a->completed++;
  a->set_cta = c->id;
  a->set_instr = instr;
  df_status st = df_status_ok();
  finish_comms(r, c, j, 1, y, &st);
  return st;
}

df_status hb_exit_acks(hb_run *r, hb_cta *c, hb_step_result *res) {
  for (uint32_t i = 0; i < r->pkg.cluster_ack_count; i++) {
    hb_ack *a = &c->acks[i];
    if (!a->pending)
      continue;
    if (a->completed > a->consumed) {
      a->consumed++;
      a->pending = false;
      continue;
    }
    uint32_t instr = c->pc < c->qlen ? c->q0 + c->pc : HB_S; /* EXIT or the queue's end */
    hb_block(c, DF_HOST_WAIT_ACK, instr, HB_S, HB_S, i, a->consumed, a->completed, r);
    *res = HB_STEP_BLOCKED;
    return df_status_ok();
  }
  *res = HB_STEP_PROGRESS;
  return df_status_ok();
}
