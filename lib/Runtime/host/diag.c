/* Diagnoses: where a failure happened, its report, and the status that
   carries it. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "host_internal.h"

const char *df_host_diag_kind_name(df_host_diag_kind k) {
  switch (k) {
  case DF_HOST_DIAG_NONE: return "none";
  case DF_HOST_DIAG_INVALID_PLAN: return "invalid_plan";
  case DF_HOST_DIAG_ARENA: return "arena";
  case DF_HOST_DIAG_MISSING_HANDLER: return "missing_handler";
  case DF_HOST_DIAG_PHASE_MISMATCH: return "phase_mismatch";
  case DF_HOST_DIAG_DEADLOCK: return "deadlock";
  case DF_HOST_DIAG_UNWRITTEN_READ: return "unwritten_read";
  case DF_HOST_DIAG_OVERWRITE: return "overwrite";
  case DF_HOST_DIAG_STALE_FLAG: return "stale_flag";
  case DF_HOST_DIAG_STEP_LIMIT: return "step_limit";
  }
  return "unknown";
}

const char *hb_opcode_name(uint32_t opcode) {
  switch (opcode) {
  case DF_ABI_OP_EXIT: return "exit";
  case DF_ABI_OP_ITER: return "iter";
  case DF_ABI_OP_REDUCE: return "reduce";
  case DF_ABI_OP_FINALIZE: return "finalize";
  case DF_ABI_OP_CLUSTER_SYNC: return "cluster_sync";
  case DF_ABI_OP_POOL: return "pool";
  }
  return "unknown";
}

const char *hb_comm_kind_name(uint32_t kind) {
  if (kind >= DF_COMM_CLUSTER_SEND && kind <= DF_COMM_HBM_RECV_WAIT)
    return df_comm_kind_name((df_comm_kind)kind);
  return kind == DF_COMM_NONE ? "none" : "unknown";
}

hb_site hb_site_none(void) {
  hb_site s = {HB_S, HB_S, HB_S, HB_S, HB_S, HB_S};
  return s;
}

hb_site hb_site_at(const hb_run *r, uint32_t instr, uint32_t comm) {
  hb_site s = hb_site_none();
  if (instr != HB_S && r->instr_cta) {
    s.instr = instr;
    s.cta = r->instr_cta[instr];
    s.queue_pos = r->instr_pos[instr];
  }
  if (comm != HB_S) {
    s.comm = comm;
    s.slot = r->k->comms[comm].dst_slot_id;
  }
  return s;
}

void hb_describe_instr(const hb_run *r, uint32_t instr, char *buf, size_t cap) {
  const df_packed *k = r->k;
  const df_abi_instr *in = &k->instrs[instr];
  int n = snprintf(buf, cap, "CTA %u queue position %u (packed instruction %u, %s",
                   r->instr_cta[instr], r->instr_pos[instr], instr, hb_opcode_name(in->opcode));
  if (n < 0 || (size_t)n >= cap)
    return;
  if (in->handler_id != HB_S) {
    const char *name = in->handler_id < k->handler_count && k->handlers
                           ? k->handlers[in->handler_id].name
                           : "?";
    snprintf(buf + n, cap - (size_t)n, ", handler %u '%s')", in->handler_id, name);
  } else {
    snprintf(buf + n, cap - (size_t)n, ")");
  }
}

df_status hb_fail_report(hb_run *r, df_host_diag_kind kind, hb_site site, char *report) {
  df_host_diag *d = &r->out->diag;
  df_free(&r->al, d->report);
  d->kind = kind;
  d->cta = site.cta;
  d->queue_pos = site.queue_pos;
  d->instr = site.instr;
  d->comm = site.comm;
  d->slot = site.slot;
  d->input = site.input;
  d->report = report;
  if (!report)
    return df_status_errorf(DF_ENOMEM, "host backend: out of memory writing a %s report",
                            df_host_diag_kind_name(kind));
  return df_status_errorf(DF_EINVAL, "%s", report);
}

df_status hb_fail(hb_run *r, df_host_diag_kind kind, hb_site site, const char *fmt, ...) {
  hb_text t;
  hb_text_init(&t, &r->al);
  va_list ap;
  va_start(ap, fmt);
  hb_text_vprintf(&t, fmt, ap);
  va_end(ap);
  return hb_fail_report(r, kind, site, hb_text_take(&t));
}

df_status hb_oom(const char *what) {
  return df_status_errorf(DF_ENOMEM, "host backend: out of memory allocating %s", what);
}
