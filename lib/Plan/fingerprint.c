/* Plan fingerprint (REFERENCE 5.6): SHA-256 of a canonical encoding of
   every scheduling-relevant field of a plan. Operator and stage names are
   excluded, so renaming operators keeps the fingerprint.

   Encoding (df's own, version 1): a magic string, then sections in a
   fixed order, each opened by a tag byte. Every u32 is written as
   LEB128 of (value + 1) mod 2^32, so the frequent DF_SENTINEL costs one
   byte; booleans are u32 0/1, strings are length + bytes, arrays are
   count + items. Task coordinates are not written: they are a function of
   the task id and the extents, both of which are. */
#include <string.h>

#include "df/plan.h"
#include "sha256.h"

typedef struct enc {
  df_sha256 sha;
  uint8_t buf[4096];
  uint32_t n;
} enc;

static void flush(enc *e) {
  df_sha256_update(&e->sha, e->buf, e->n);
  e->n = 0;
}

static void u32(enc *e, uint32_t v) {
  if (e->n > sizeof e->buf - 5)
    flush(e);
  v += 1;
  while (v >= 0x80) {
    e->buf[e->n++] = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  e->buf[e->n++] = (uint8_t)v;
}

static void tag(enc *e, char t) { u32(e, (uint32_t)(unsigned char)t); }

static void str(enc *e, const char *s) {
  size_t len = strnlen(s, DF_NAME_MAX);
  u32(e, (uint32_t)len);
  flush(e);
  df_sha256_update(&e->sha, s, len);
}

static void variant(enc *e, const df_variant *v) {
  u32(e, v->base.operator_id);
  u32(e, (uint32_t)v->base.kind);
  u32(e, v->schema_version);
  u32(e, v->has_iter);
  u32(e, v->has_iter ? (uint32_t)v->iter_mode : 0);
  u32(e, v->has_iter ? v->iter_value : 0);
  u32(e, v->has_arity);
  u32(e, v->has_arity ? (uint32_t)v->arity : 0);
}

static void instr(enc *e, const df_plan *p, const df_instr *in) {
  u32(e, in->id);
  u32(e, (uint32_t)in->op);
  u32(e, in->task);
  u32(e, in->sm);
  u32(e, in->has_range);
  u32(e, in->has_range ? in->range_begin : 0);
  u32(e, in->has_range ? in->range_end : 0);
  u32(e, in->input_count);
  const uint32_t *inputs = p->inputs + in->input_offset;
  for (uint32_t k = 0; k < in->input_count; k++)
    u32(e, inputs[k]);
  u32(e, in->output_slot);
  u32(e, (uint32_t)in->stage);
  u32(e, in->has_identity);
  if (in->has_identity) {
    u32(e, in->identity.operator_id);
    u32(e, (uint32_t)in->identity.kind);
  }
  u32(e, in->has_variant);
  if (in->has_variant)
    variant(e, &in->variant);
}

static void slot(enc *e, const df_slot *s) {
  u32(e, s->id);
  u32(e, s->task);
  u32(e, (uint32_t)s->type);
  u32(e, (uint32_t)s->role);
  u32(e, (uint32_t)s->stage);
  u32(e, s->producer);
  u32(e, s->shared_storage);
  u32(e, s->global_storage);
  u32(e, s->private_shared);
  u32(e, s->scratch_backed);
  u32(e, s->has_scratch_offset);
  u32(e, s->has_scratch_offset ? s->scratch_offset : 0);
  u32(e, s->owner);
  u32(e, s->gated);
}

static void comm(enc *e, const df_comm *c) {
  const uint32_t f[16] = {(uint32_t)c->kind, c->src_instr,  c->dst_instr,     c->src_slot,
                          c->dst_slot,       c->producer_sm, c->consumer_sm,  c->dispatch_instr,
                          c->peer_cta_rank,  c->flag_epoch,  c->barrier_phase, c->byte_offset,
                          c->byte_count,     c->segment_id,  c->segment_count, c->gate_id};
  for (int i = 0; i < 16; i++)
    u32(e, f[i]);
}

df_status df_plan_fingerprint(const df_plan *p, char hex[65]) {
  hex[0] = '\0';
  if (!p)
    return df_status_errorf(DF_EINVAL, "plan fingerprint expects a plan, got NULL");
  enc e;
  e.n = 0;
  df_sha256_init(&e.sha);
  df_sha256_update(&e.sha, "df.plan.fingerprint.v1", 22);
  tag(&e, 'T');
  u32(&e, p->topology.sm_count);
  u32(&e, p->topology.cluster_size);
  u32(&e, p->block_size);
  str(&e, p->range_axis);
  u32(&e, (uint32_t)p->policy);
  u32(&e, (uint32_t)p->strategy);
  tag(&e, 'X');
  u32(&e, p->extent_count);
  for (uint32_t i = 0; i < p->extent_count && i < DF_MAX_AXES; i++)
    u32(&e, p->extents[i]);
  u32(&e, p->task_count);
  for (uint32_t i = 0; i < p->task_count; i++)
    u32(&e, p->task_lengths[i]);
  tag(&e, 'Y'); /* intermediate types: slots refer to them */
  u32(&e, p->type_count);
  for (uint32_t i = 0; i < p->type_count; i++) {
    str(&e, p->types[i].name);
    u32(&e, p->types[i].bytes);
  }
  tag(&e, 'I');
  u32(&e, p->instr_count);
  for (uint32_t i = 0; i < p->instr_count; i++)
    instr(&e, p, &p->instrs[i]);
  tag(&e, 'Q');
  for (uint32_t s = 0; s < p->topology.sm_count; s++) {
    if ((uint64_t)p->queue_offsets[s] + p->queue_lengths[s] > p->queue_id_count)
      return df_status_errorf(DF_EINVAL,
                              "queue of SM %u exceeds the %u queued instruction ids", s,
                              p->queue_id_count);
    u32(&e, p->queue_lengths[s]);
    for (uint32_t k = 0; k < p->queue_lengths[s]; k++)
      u32(&e, p->queue_ids[p->queue_offsets[s] + k]);
  }
  tag(&e, 'S');
  u32(&e, p->slot_count);
  for (uint32_t i = 0; i < p->slot_count; i++)
    slot(&e, &p->slots[i]);
  tag(&e, 'C');
  u32(&e, p->comm_count);
  for (uint32_t i = 0; i < p->comm_count; i++)
    comm(&e, &p->comms[i]);
  flush(&e);
  uint8_t digest[32];
  df_sha256_final(&e.sha, digest);
  df_sha256_hex(digest, hex);
  return df_status_ok();
}
