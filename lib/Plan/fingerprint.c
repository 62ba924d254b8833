/* Plan fingerprint (REFERENCE 5.6): SHA-256 of a canonical encoding of
   every scheduling-relevant field of a plan. Operator and stage names are
   excluded, so renaming operators keeps the fingerprint; the names of
   chosen implementations (df/impl.h) are included.

   Encoding (df's own, version 1): a magic string, then sections in a
   fixed order, each opened by a tag. Every u32 is written as LEB128 of
   (value + 1) mod 2^32, so the frequent DF_SENTINEL costs one byte;
   booleans share a flag word per record and optional fields follow only
   when their flag is set; strings are length + bytes, arrays are count +
   items, and records are counted, so positions carry ids. Task
   coordinates are not written: they are a function of the task id and the
   extents, both of which are. The plan is hashed every decode step, so
   the encoding is kept short. */
#include <string.h>

#include "df/plan.h"
#include "sha256.h"

typedef struct enc {
  df_sha256 sha;
  uint32_t n;
  uint8_t buf[8192];
} enc;

static void flush(enc *e) {
  df_sha256_update(&e->sha, e->buf, e->n);
  e->n = 0;
}

/* Room for `words` u32s; records reserve once, then write unchecked. */
static inline void reserve(enc *e, uint32_t words) {
  if (e->n + 5 * words > sizeof e->buf)
    flush(e);
}

static inline void put(enc *e, uint32_t v) {
  uint8_t *b = e->buf + e->n;
  v += 1;
  while (v >= 0x80) {
    *b++ = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  *b++ = (uint8_t)v;
  e->n = (uint32_t)(b - e->buf);
}

static void u32(enc *e, uint32_t v) {
  reserve(e, 1);
  put(e, v);
}

static void tag(enc *e, char t) { u32(e, (uint32_t)(unsigned char)t); }

static void str(enc *e, const char *s) {
  size_t len = strnlen(s, DF_NAME_MAX);
  u32(e, (uint32_t)len);
  flush(e);
  df_sha256_update(&e->sha, s, len);
}

/* Instruction: a flag word (opcode, has_range, has_identity,
   has_variant), then the fields present; its id is its position. */
static void instr(enc *e, const df_plan *p, const df_instr *in) {
  reserve(e, 20);
  put(e, (uint32_t)in->op | (uint32_t)in->has_range << 4 | (uint32_t)in->has_identity << 5 |
             (uint32_t)in->has_variant << 6 | (uint32_t)(in->impl != 0) << 7 |
             (uint32_t)in->fused << 8);
  put(e, in->task);
  put(e, in->sm);
  if (in->has_range) {
    put(e, in->range_begin);
    put(e, in->range_end);
  }
  put(e, in->output_slot);
  put(e, (uint32_t)in->stage);
  if (in->has_identity) {
    put(e, in->identity.operator_id);
    put(e, (uint32_t)in->identity.kind);
  }
  if (in->has_variant) {
    const df_variant *v = &in->variant;
    put(e, v->base.operator_id);
    put(e, (uint32_t)v->base.kind);
    put(e, v->schema_version);
    put(e, (uint32_t)v->has_iter | (v->has_iter ? (uint32_t)v->iter_mode << 1 : 0) |
               (uint32_t)v->has_arity << 3 | (v->has_arity ? (uint32_t)v->arity << 4 : 0));
    put(e, v->has_iter ? v->iter_value : 0);
  }
  if (in->impl)
    put(e, in->impl);
  put(e, in->input_count);
  const uint32_t *inputs = p->inputs + in->input_offset;
  for (uint32_t k = 0; k < in->input_count; k++)
    u32(e, inputs[k]);
}

/* Slot: a flag word (role, private_shared, scratch_backed,
   has_scratch_offset, gated), then its fields; its id is its position. */
static void slot(enc *e, const df_slot *s) {
  reserve(e, 10);
  put(e, (uint32_t)s->role | (uint32_t)s->private_shared << 5 |
             (uint32_t)s->scratch_backed << 6 | (uint32_t)s->has_scratch_offset << 7 |
             (uint32_t)s->gated << 8);
  put(e, s->task);
  put(e, (uint32_t)s->type);
  put(e, (uint32_t)s->stage);
  put(e, s->producer);
  put(e, s->shared_storage);
  put(e, s->global_storage);
  put(e, s->owner);
  if (s->has_scratch_offset)
    put(e, s->scratch_offset);
}

static void comm(enc *e, const df_comm *c) {
  reserve(e, 16);
  const uint32_t f[16] = {(uint32_t)c->kind, c->src_instr,  c->dst_instr,     c->src_slot,
                          c->dst_slot,       c->producer_sm, c->consumer_sm,  c->dispatch_instr,
                          c->peer_cta_rank,  c->flag_epoch,  c->barrier_phase, c->byte_offset,
                          c->byte_count,     c->segment_id,  c->segment_count, c->gate_id};
  for (int i = 0; i < 16; i++)
    put(e, f[i]);
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
  /* Chosen implementations decide the kernel, unlike operator names;
     plans without them hash as before. */
  if (p->impl_count) {
    tag(&e, 'M');
    u32(&e, p->impl_count);
    for (uint32_t i = 0; i < p->impl_count; i++)
      str(&e, p->impl_names[i].name);
  }
  if (p->pool) /* plans without a pool hash as before */
    tag(&e, 'P');
  flush(&e);
  uint8_t digest[32];
  df_sha256_final(&e.sha, digest);
  df_sha256_hex(digest, hex);
  return df_status_ok();
}
