/* The op log: one record per executed instruction (at dispatch; EXIT when
   reached) and per executed comm, in execution order, and its text form. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "host_internal.h"

static df_status push(hb_run *r, const df_host_op *op) {
  df_host_result *o = r->out;
  if (o->op_count == r->op_cap) {
    uint32_t cap = r->op_cap ? 2 * r->op_cap : 64;
    df_host_op *p = df_realloc(&r->al, o->ops, sizeof(df_host_op) * cap);
    if (!p)
      return hb_oom("the op log");
    o->ops = p;
    r->op_cap = cap;
  }
  df_host_op rec = *op;
  rec.seq = o->op_count;
  o->ops[o->op_count++] = rec;
  return df_status_ok();
}

df_status hb_log_instr(hb_run *r, const hb_cta *c, uint32_t instr, uint32_t handler) {
  if (!r->o.op_log)
    return df_status_ok();
  df_host_op op;
  memset(&op, 0, sizeof op);
  op.kind = DF_HOST_OP_INSTR;
  op.cta = c->id;
  op.queue_pos = r->instr_pos[instr];
  op.instr = instr;
  op.opcode = r->k->instrs[instr].opcode;
  op.handler_id = handler;
  op.comm = HB_S;
  op.comm_kind = DF_COMM_NONE;
  op.src_slot = op.dst_slot = HB_S;
  op.bytes = r->instr_bytes[instr];
  op.peer_cta = HB_S;
  return push(r, &op);
}

df_status hb_log_comm(hb_run *r, const hb_cta *c, uint32_t comm, uint32_t peer_cta) {
  if (!r->o.op_log)
    return df_status_ok();
  const df_abi_comm *m = &r->k->comms[comm];
  uint32_t instr = r->comm_instr[comm];
  df_host_op op;
  memset(&op, 0, sizeof op);
  op.kind = DF_HOST_OP_COMM;
  op.cta = c->id;
  op.queue_pos = r->instr_pos[instr];
  op.instr = instr;
  op.opcode = r->k->instrs[instr].opcode;
  op.handler_id = r->k->instrs[instr].handler_id;
  op.comm = comm;
  op.comm_kind = m->kind;
  op.src_slot = m->src_slot_id;
  op.dst_slot = m->dst_slot_id;
  op.bytes = r->comm_bytes[comm];
  op.peer_cta = peer_cta;
  return push(r, &op);
}

static const char *num(uint32_t v, char *buf, size_t cap) {
  if (v == HB_S)
    return "-";
  snprintf(buf, cap, "%u", v);
  return buf;
}

df_status df_host_op_log_write(const df_host_result *r, FILE *out) {
  if (!r || !out)
    return df_status_errorf(DF_EINVAL, "op log write expects a result and a stream, got NULL");
  for (uint32_t i = 0; i < r->op_count; i++) {
    const df_host_op *op = &r->ops[i];
    char a[16], b[16], c[16];
    int n;
    if (op->kind == DF_HOST_OP_INSTR)
      n = fprintf(out, "%llu instr cta=%u pos=%u instr=%u opcode=%s handler=%s bytes=%u\n",
                  (unsigned long long)op->seq, op->cta, op->queue_pos, op->instr,
                  hb_opcode_name(op->opcode), num(op->handler_id, a, sizeof a), op->bytes);
    else
      n = fprintf(out,
                  "%llu comm cta=%u pos=%u instr=%u comm=%u kind=%s src_slot=%s dst_slot=%s "
                  "bytes=%u peer=%s\n",
                  (unsigned long long)op->seq, op->cta, op->queue_pos, op->instr, op->comm,
                  hb_comm_kind_name(op->comm_kind), num(op->src_slot, a, sizeof a),
                  num(op->dst_slot, b, sizeof b), op->bytes, num(op->peer_cta, c, sizeof c));
    if (n < 0)
      return df_status_errorf(DF_EIO, "op log: write failed: %s", strerror(errno));
  }
  return df_status_ok();
}
