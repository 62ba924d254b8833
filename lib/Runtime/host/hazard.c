/* Data hazards the device would turn into wrong numbers: a handler input
   nobody wrote, or whose bytes now hold another slot's value (owner
   shadow), and a transfer landing on bytes that an
   instruction of the destination CTA still needs before the transfer's
   own receive (a pending read, send or receive of the old contents, or a
   local write that would clobber the new ones). */
#include <stdio.h>

#include "host_internal.h"

static void describe_region(hb_region g, char *buf, size_t cap) {
  const char *name = g.space == HB_SPACE_ARENA     ? "shared arena"
                     : g.space == HB_SPACE_SCRATCH ? "scratch arena"
                                                   : "global staging";
  snprintf(buf, cap, "%s bytes [%u, %u)", name, g.off, g.off + g.len);
}

static const df_abi_args *args_of(const hb_run *r, uint32_t i) {
  return &r->k->args[r->k->instrs[i].arg_offset / sizeof(df_abi_args)];
}

static hb_region whole_slot(const hb_run *r, uint32_t cta, uint32_t slot) {
  return hb_slot_region(r, cta, slot, 0, r->k->slots[slot].bytes);
}

static df_status conflict(hb_run *r, uint32_t from, uint32_t send, uint32_t x, uint32_t recv,
                          hb_region g, uint32_t instr, const char *what) {
  uint32_t si = r->comm_instr[send];
  char at[256], victim[256], where[96];
  hb_describe_instr(r, si, at, sizeof at);
  hb_describe_instr(r, instr, victim, sizeof victim);
  describe_region(g, where, sizeof where);
  const df_abi_comm *c = &r->k->comms[send];
  hb_site s = hb_site_at(r, si, send);
  return hb_fail(r, DF_HOST_DIAG_OVERWRITE, s,
                 "transfer overwrites unconsumed data: %s: comm %u %s (CTA %u) writes slot %u "
                 "of CTA %u (%s) before its receive (comm %u at queue position %u), but %s %s",
                 at, send, hb_comm_kind_name(c->kind), from, c->dst_slot_id, x, where, recv,
                 r->instr_pos[r->comm_instr[recv]], victim, what);
}

df_status hb_check_landing(hb_run *r, uint32_t from, uint32_t send, uint32_t x, uint32_t recv,
                           hb_region g) {
  const df_packed *k = r->k;
  const hb_cta *X = &r->ctas[x];
  uint32_t ri = r->comm_instr[recv], rpos = r->instr_pos[ri];
  uint32_t dst = k->comms[recv].dst_slot_id;
  char what[160];
  for (uint32_t pos = X->pc; pos <= rpos && pos < X->qlen; pos++) {
    uint32_t i = X->q0 + pos;
    const df_abi_instr *in = &k->instrs[i];
    if (in->opcode == DF_ABI_OP_EXIT)
      break;
    if (in->opcode == DF_ABI_OP_POOL) /* its items write no slot of this CTA that a
                                         transfer lands in: pooled plans have no cluster
                                         pushes */
      continue;
    /* every part of a fused instruction; an input an earlier part writes
       (inner[]) is new contents, written after the instruction's receives */
    uint32_t inner[DF_FUSE_MAX_PARTS], ninner = 0;
    for (uint32_t part = 0; !r->handler_done[i] && part < hb_parts(k, i); part++) {
      const df_abi_args *a = hb_part_args(k, i, part);
      for (uint32_t n = 0; n < a->input_slot_count; n++) {
        uint32_t s = k->input_slots[a->input_slot_offset + n];
        bool written = false;
        for (uint32_t j = 0; j < ninner && !written; j++)
          written = inner[j] == s;
        if (written || (pos == rpos && s == dst) || !hb_regions_overlap(g, whole_slot(r, x, s)))
          continue;
        snprintf(what, sizeof what, "still has to read the old contents as input %u (slot %u)", n,
                 s);
        return conflict(r, from, send, x, recv, g, i, what);
      }
      if (pos < rpos && a->output_slot != HB_S &&
          hb_regions_overlap(g, whole_slot(r, x, a->output_slot))) {
        snprintf(what, sizeof what,
                 "writes its output slot %u over those bytes before the receive", a->output_slot);
        return conflict(r, from, send, x, recv, g, i, what);
      }
      if (a->output_slot != HB_S)
        inner[ninner++] = a->output_slot;
    }
    if (pos == rpos)
      break;
    for (uint32_t j = in->comm_offset; j < in->comm_offset + in->comm_count; j++) {
      const df_abi_comm *c = &k->comms[j];
      if (r->comm_done[j] || j == recv || j == send)
        continue;
      uint32_t off, len = hb_comm_span(k, c, &off);
      bool is_send = c->kind == DF_COMM_CLUSTER_SEND || c->kind == DF_COMM_HBM_SEND;
      bool is_recv = df_comm_kind_is_recv((df_comm_kind)c->kind);
      if (is_send && hb_regions_overlap(g, hb_slot_region(r, x, c->src_slot_id, off, len))) {
        snprintf(what, sizeof what, "still has to send the old contents (comm %u %s of slot %u)",
                 j, hb_comm_kind_name(c->kind), c->src_slot_id);
        return conflict(r, from, send, x, recv, g, i, what);
      }
      if (is_recv && hb_regions_overlap(g, hb_slot_region(r, x, c->dst_slot_id, off, len))) {
        snprintf(what, sizeof what,
                 "has not yet received an earlier transfer into those bytes (comm %u %s into "
                 "slot %u)",
                 j, hb_comm_kind_name(c->kind), c->dst_slot_id);
        return conflict(r, from, send, x, recv, g, i, what);
      }
    }
  }
  return df_status_ok();
}

static df_status foreign(hb_run *r, uint32_t instr, uint32_t n, uint32_t s, hb_region g,
                         uint32_t b, uint32_t e, uint32_t owner) {
  char at[256], where[96], by[300];
  hb_describe_instr(r, instr, at, sizeof at);
  describe_region(g, where, sizeof where);
  uint32_t w = owner == HB_PREV ? HB_S : hb_slot_writer(r, g, owner);
  if (owner == HB_PREV) {
    snprintf(by, sizeof by, "data left in global staging by a previous launch");
  } else if (w != HB_S) {
    char wat[256];
    hb_describe_instr(r, w, wat, sizeof wat);
    snprintf(by, sizeof by, "slot %u, written by %s", owner, wat);
  } else {
    snprintf(by, sizeof by, "slot %u", owner);
  }
  hb_site site = hb_site_at(r, instr, HB_S);
  site.slot = s;
  site.input = n;
  return hb_fail(r, DF_HOST_DIAG_OVERWRITE, site,
                 "read of overwritten data: %s reads input %u, slot %u (%s), but bytes [%u, %u) "
                 "of it now hold %s, which overwrote slot %u before this read",
                 at, n, s, where, b, e, by, s);
}

df_status hb_check_inputs(hb_run *r, hb_cta *c, uint32_t instr) {
  return hb_check_part_inputs(r, c, instr, args_of(r, instr), NULL, 0);
}

df_status hb_check_part_inputs(hb_run *r, hb_cta *c, uint32_t instr, const df_abi_args *a,
                               const uint32_t *skip, uint32_t nskip) {
  const df_packed *k = r->k;
  for (uint32_t n = 0; n < a->input_slot_count; n++) {
    uint32_t s = k->input_slots[a->input_slot_offset + n];
    bool inner = false;
    for (uint32_t j = 0; j < nskip && !inner; j++)
      inner = skip[j] == s;
    if (inner)
      continue;
    hb_region g = whole_slot(r, c->id, s);
    uint32_t b, e, owner;
    if (hb_find_unwritten(r, g, &b, &e)) {
      char at[256], where[96];
      hb_describe_instr(r, instr, at, sizeof at);
      describe_region(g, where, sizeof where);
      hb_site site = hb_site_at(r, instr, HB_S);
      site.slot = s;
      site.input = n;
      return hb_fail(r, DF_HOST_DIAG_UNWRITTEN_READ, site,
                     "read of a slot nobody wrote: %s reads input %u, slot %u (%s), but bytes "
                     "[%u, %u) of it were never written by a handler or a transfer",
                     at, n, s, where, b, e);
    }
    /* a slot nothing writes is an alias (a reshared local target): it
       reads whatever its storage holds */
    if (r->slot_produced[s] && hb_find_foreign(r, g, s, &b, &e, &owner))
      return foreign(r, instr, n, s, g, b, e, owner);
  }
  return df_status_ok();
}
