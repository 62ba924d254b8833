/* Setup and teardown of a run: the static maps over the packed records
   (queue of each instruction, dispatcher and bytes of each comm) and the
   machine's memory (CTA arenas with guard zones, shadows, barrier state,
   global staging, flags). */
#include <string.h>

#include "host_internal.h"

#define ALLOC_ARRAY(r, ptr, n, what)                                                 \
  do {                                                                               \
    (ptr) = df_alloc(&(r)->al, sizeof(*(ptr)) * (size_t)((n) ? (n) : 1));            \
    if (!(ptr))                                                                      \
      return hb_oom(what);                                                           \
    memset((ptr), 0, sizeof(*(ptr)) * (size_t)((n) ? (n) : 1));                      \
  } while (0)

static df_status map_comms(hb_run *r) {
  const df_packed *k = r->k;
  for (uint32_t j = 0; j < k->comm_count; j++)
    r->comm_instr[j] = HB_S;
  for (uint32_t i = 0; i < k->instr_count; i++) {
    const df_abi_instr *in = &k->instrs[i];
    for (uint32_t j = in->comm_offset; j < in->comm_offset + in->comm_count; j++) {
      if (r->comm_instr[j] != HB_S)
        return hb_fail(r, DF_HOST_DIAG_INVALID_PLAN, hb_site_at(r, i, j),
                       "packed comm %u is dispatched by both packed instruction %u and %u; "
                       "each comm record belongs to one instruction's comm block",
                       j, r->comm_instr[j], i);
      r->comm_instr[j] = i;
    }
  }
  for (uint32_t j = 0; j < k->comm_count; j++) {
    const df_abi_comm *c = &k->comms[j];
    uint32_t off, n = hb_comm_span(k, c, &off);
    if (c->kind == DF_COMM_CLUSTER_RELEASE || hb_comm_signal_only(k, c))
      n = 0;
    r->comm_bytes[j] = n;
    if (r->comm_instr[j] != HB_S)
      r->instr_bytes[r->comm_instr[j]] += n;
    if (c->kind == DF_COMM_HBM_RECV_ISSUE || c->kind == DF_COMM_HBM_RECV_WAIT ||
        c->segment_count > 1)
      r->bulk_hbm = true;
  }
  return df_status_ok();
}

df_status hb_setup_maps(hb_run *r) {
  const df_packed *k = r->k;
  uint32_t ni = k->instr_count, nc = k->comm_count;
  ALLOC_ARRAY(r, r->instr_cta, ni, "instruction map");
  ALLOC_ARRAY(r, r->instr_pos, ni, "instruction map");
  ALLOC_ARRAY(r, r->instr_bytes, ni, "instruction bytes");
  ALLOC_ARRAY(r, r->handler_done, ni, "instruction state");
  ALLOC_ARRAY(r, r->instr_finish, ni, "instruction times");
  ALLOC_ARRAY(r, r->comm_instr, nc, "comm map");
  ALLOC_ARRAY(r, r->comm_bytes, nc, "comm bytes");
  ALLOC_ARRAY(r, r->comm_match, nc, "comm matches");
  ALLOC_ARRAY(r, r->comm_done, nc, "comm state");
  ALLOC_ARRAY(r, r->slot_produced, k->slot_count, "slot map");
  for (uint32_t s = 0; s < r->cta_count; s++)
    for (uint32_t p = 0; p < k->queue_lengths[s]; p++) {
      r->instr_cta[k->queue_offsets[s] + p] = s;
      r->instr_pos[k->queue_offsets[s] + p] = p;
    }
  for (uint32_t j = 0; j < nc; j++) {
    r->comm_match[j] = HB_S;
    if (k->comms[j].kind != DF_COMM_CLUSTER_RELEASE && k->comms[j].dst_slot_id < k->slot_count)
      r->slot_produced[k->comms[j].dst_slot_id] = 1;
  }
  for (uint32_t i = 0; i < ni; i++) {
    if (k->instrs[i].opcode == DF_ABI_OP_EXIT || k->instrs[i].opcode == DF_ABI_OP_POOL)
      continue;
    for (uint32_t part = 0; part < hb_parts(k, i); part++) {
      uint32_t out = hb_part_args(k, i, part)->output_slot;
      if (out < k->slot_count)
        r->slot_produced[out] = 1;
    }
  }
  return map_comms(r);
}

/* ACK barriers a queue initialises: one per ACK index of its cluster
   sends (REFERENCE 6 start-up). */
static void init_acks(hb_run *r, hb_cta *c) {
  const df_packed *k = r->k;
  for (uint32_t p = 0; p < c->qlen; p++) {
    const df_abi_instr *in = &k->instrs[c->q0 + p];
    if (in->opcode == DF_ABI_OP_EXIT)
      break;
    for (uint32_t j = in->comm_offset; j < in->comm_offset + in->comm_count; j++) {
      const df_abi_comm *m = &k->comms[j];
      if (m->kind == DF_COMM_CLUSTER_SEND && m->flag_index != HB_S &&
          m->flag_index < r->pkg.cluster_ack_count)
        c->acks[m->flag_index].init = true;
    }
  }
}

/* The handler workspace: aligned as on the GPU, with guard zones. */
static df_status setup_workspace(hb_run *r, hb_cta *c) {
  const uint32_t w = r->o.workspace_bytes;
  if (!w)
    return df_status_ok();
  _Static_assert(HB_GUARD_BYTES <= DF_WORKSPACE_ALIGN, "the guard fits the alignment pad");
  c->workspace_mem = df_alloc(&r->al, (size_t)w + 3 * DF_WORKSPACE_ALIGN);
  if (!c->workspace_mem)
    return hb_oom("a handler workspace");
  uintptr_t start = ((uintptr_t)c->workspace_mem + 2 * DF_WORKSPACE_ALIGN - 1) &
                    ~(uintptr_t)(DF_WORKSPACE_ALIGN - 1);
  c->workspace = (uint8_t *)start;
  hb_fill_guards(c->workspace - HB_GUARD_BYTES, w);
  return df_status_ok();
}

static df_status setup_cta(hb_run *r, uint32_t s) {
  const df_packed *k = r->k;
  const df_launch_package *l = &r->pkg;
  hb_cta *c = &r->ctas[s];
  c->id = s;
  c->q0 = k->queue_offsets[s];
  c->qlen = k->queue_lengths[s];
  c->phase = HB_PH_FETCH;
  size_t shm = l->shared_memory_bytes;
  c->smem = df_alloc(&r->al, shm + 2 * HB_GUARD_BYTES);
  c->scratch_mem = df_alloc(&r->al, (size_t)r->scratch_bytes + 2 * HB_GUARD_BYTES);
  c->arena_owner = df_alloc(&r->al, sizeof(uint32_t) * l->shared_slot_bytes);
  c->scratch_owner = df_alloc(&r->al, sizeof(uint32_t) * r->scratch_bytes);
  c->bars = df_alloc(&r->al, sizeof(hb_barrier) * (l->barrier_count + 1));
  c->issues = df_alloc(&r->al, sizeof(hb_issue) * (l->barrier_count + 1));
  c->acks = df_alloc(&r->al, sizeof(hb_ack) * (l->cluster_ack_count + 1));
  if (!c->smem || !c->scratch_mem || !c->arena_owner || !c->scratch_owner || !c->bars ||
      !c->issues || !c->acks)
    return hb_oom("a virtual CTA");
  /* the control region is never touched by the host: it stays guard
     pattern so that a handler writing into it is caught */
  memset(c->smem, HB_GUARD_BYTE, shm + 2 * HB_GUARD_BYTES);
  c->arena = c->smem + HB_GUARD_BYTES + l->shared_slot_base_offset;
  memset(c->arena, 0, l->shared_slot_bytes);
  hb_fill_guards(c->scratch_mem, r->scratch_bytes);
  c->scratch = c->scratch_mem + HB_GUARD_BYTES;
  memset(c->scratch, 0, r->scratch_bytes);
  memset(c->arena_owner, 0xFF, sizeof(uint32_t) * l->shared_slot_bytes);
  memset(c->scratch_owner, 0xFF, sizeof(uint32_t) * r->scratch_bytes);
  memset(c->bars, 0, sizeof(hb_barrier) * (l->barrier_count + 1));
  memset(c->issues, 0, sizeof(hb_issue) * (l->barrier_count + 1));
  memset(c->acks, 0, sizeof(hb_ack) * (l->cluster_ack_count + 1));
  for (uint32_t i = 0; i < l->barrier_init_lengths[s]; i++)
    c->bars[l->barrier_init_indices[l->barrier_init_offsets[s] + i]].init = true;
  init_acks(r, c);
  return setup_workspace(r, c);
}

df_status hb_setup_memory(hb_run *r) {
  const df_launch_package *l = &r->pkg;
  ALLOC_ARRAY(r, r->ctas, r->cta_count, "virtual CTAs");
  for (uint32_t s = 0; s < r->cta_count; s++)
    DF_TRY(setup_cta(r, s));
  uint32_t stg = l->global_staging_bytes;
  r->staging_mem = df_alloc(&r->al, (size_t)stg + 2 * HB_GUARD_BYTES);
  r->staging_owner = df_alloc(&r->al, sizeof(uint32_t) * stg);
  size_t writers = (size_t)(r->cta_count + 1) * r->k->slot_count;
  r->slot_writer = df_alloc(&r->al, sizeof(uint32_t) * writers);
  if (!r->staging_mem || !r->staging_owner || !r->slot_writer)
    return hb_oom("global staging");
  memset(r->slot_writer, 0xFF, sizeof(uint32_t) * writers);
  hb_fill_guards(r->staging_mem, stg);
  r->staging = r->staging_mem + HB_GUARD_BYTES;
  if (r->o.initial_staging) {
    memcpy(r->staging, r->o.initial_staging, stg);
    for (uint32_t i = 0; i < stg; i++)
      r->staging_owner[i] = HB_PREV;
  } else {
    memset(r->staging, 0, stg);
    memset(r->staging_owner, 0xFF, sizeof(uint32_t) * stg);
  }
  uint32_t nf = l->flag_count;
  ALLOC_ARRAY(r, r->flags, nf, "flags");
  ALLOC_ARRAY(r, r->flag_set, nf, "flag state");
  ALLOC_ARRAY(r, r->flag_set_cta, nf, "flag state");
  ALLOC_ARRAY(r, r->flag_set_instr, nf, "flag state");
  /* flags are zeroed by the host only when the package needs a reset */
  if (r->o.initial_flags && !l->needs_flag_reset)
    memcpy(r->flags, r->o.initial_flags, sizeof(uint32_t) * nf);
  for (uint32_t f = 0; f < nf; f++)
    r->flag_set_cta[f] = r->flag_set_instr[f] = HB_S;
  return df_status_ok();
}

void hb_teardown(hb_run *r) {
  df_allocator *al = &r->al;
  if (r->ctas)
    for (uint32_t s = 0; s < r->cta_count; s++) {
      hb_cta *c = &r->ctas[s];
      df_free(al, c->smem);
      df_free(al, c->scratch_mem);
      df_free(al, c->workspace_mem);
      df_free(al, c->arena_owner);
      df_free(al, c->scratch_owner);
      df_free(al, c->bars);
      df_free(al, c->issues);
      df_free(al, c->acks);
    }
  df_free(al, r->ctas);
  df_free(al, r->staging_mem);
  df_free(al, r->staging_owner);
  df_free(al, r->slot_writer);
  df_free(al, r->slot_produced);
  df_free(al, r->flags);
  df_free(al, r->flag_set);
  df_free(al, r->flag_set_cta);
  df_free(al, r->flag_set_instr);
  df_free(al, r->instr_cta);
  df_free(al, r->instr_pos);
  df_free(al, r->instr_bytes);
  df_free(al, r->handler_done);
  df_free(al, r->instr_finish);
  df_free(al, r->comm_instr);
  df_free(al, r->comm_bytes);
  df_free(al, r->comm_match);
  df_free(al, r->comm_done);
  df_free(al, r->deliveries);
  df_free(al, r->granule);
  df_free(al, r->delivery_of_recv);
  df_launch_package_free(&r->pkg, al);
  memset(r, 0, sizeof *r);
}
