/* The mbarrier model. A barrier with arrival count 1 completes one phase
   per transfer (arrive.expect_tx + the transfer's bytes); a parity wait
   for p succeeds once the phase with parity p has completed, i.e. while
   (completed & 1) != p. The host additionally counts consumed phases so
   that a wait passing without its transfer, or a second transfer
   completing a phase before the first was consumed, is reported. */
#include <stdio.h>

#include "host_internal.h"

df_status hb_barrier_complete(hb_run *r, uint32_t x, uint32_t b, uint32_t from_cta,
                              uint32_t from_instr, uint32_t comm) {
  hb_barrier *bar = &r->ctas[x].bars[b];
  char at[256];
  hb_describe_instr(r, from_instr, at, sizeof at);
  if (!bar->init)
    return hb_fail(r, DF_HOST_DIAG_INVALID_PLAN, hb_site_at(r, from_instr, comm),
                   "%s: comm %u %s completes a phase of barrier %u of CTA %u, which that CTA "
                   "never initialises (no receive of its queue before EXIT uses barrier %u)",
                   at, comm, hb_comm_kind_name(r->k->comms[comm].kind), b, x, b);
  if (bar->completed > bar->consumed)
    return hb_fail(r, DF_HOST_DIAG_PHASE_MISMATCH, hb_site_at(r, from_instr, comm),
                   "barrier overrun: %s: comm %u %s completes phase %u of barrier %u of CTA %u "
                   "while phase %u (completed by CTA %u, packed instruction %u) has not been "
                   "consumed by its receive",
                   at, comm, hb_comm_kind_name(r->k->comms[comm].kind), bar->completed, b, x,
                   bar->consumed, bar->set_cta, bar->set_instr);
  bar->completed++;
  bar->set_cta = from_cta;
  bar->set_instr = from_instr;
  return df_status_ok();
}

df_status hb_barrier_consume(hb_run *r, hb_cta *c, uint32_t b, uint32_t parity, uint32_t comm,
                             bool *passed) {
  hb_barrier *bar = &c->bars[b];
  *passed = false;
  uint32_t instr = r->comm_instr[comm];
  if (bar->completed > bar->consumed) {
    if (parity != (bar->consumed & 1u)) {
      char at[256];
      hb_describe_instr(r, instr, at, sizeof at);
      return hb_fail(r, DF_HOST_DIAG_PHASE_MISMATCH, hb_site_at(r, instr, comm),
                     "barrier phase mismatch: %s: comm %u waits on barrier %u for parity %u, "
                     "but the transfer that arrived completed phase %u (parity %u)",
                     at, comm, b, parity, bar->consumed, bar->consumed & 1u);
    }
    bar->consumed++;
    *passed = true;
    return df_status_ok();
  }
  if ((bar->completed & 1u) != parity) {
    char at[256];
    hb_describe_instr(r, instr, at, sizeof at);
    return hb_fail(r, DF_HOST_DIAG_PHASE_MISMATCH, hb_site_at(r, instr, comm),
                   "barrier phase mismatch: %s: comm %u waits on barrier %u for parity %u, "
                   "which the barrier's %u completed phases already satisfy: the wait passes "
                   "before its transfer arrives",
                   at, comm, b, parity, bar->completed);
  }
  return df_status_ok();
}
