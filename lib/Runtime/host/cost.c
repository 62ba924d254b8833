/* The structural cost model: each dispatched instruction costs
   F + R * (bytes moved by its comms); it starts after the previous
   instruction of its queue and `latency` after every instruction whose
   transfer or release it waited for (edges observed during the run). The
   makespan is the latest finish. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "host_internal.h"

df_status hb_check_cost_params(const df_host_cost_params *p) {
  const double v[4] = {p->instr_cycles, p->byte_cycles, p->cluster_latency, p->hbm_latency};
  const char *names[4] = {"instr_cycles", "byte_cycles", "cluster_latency", "hbm_latency"};
  for (int i = 0; i < 4; i++)
    if (!isfinite(v[i]) || v[i] < 0)
      return df_status_errorf(DF_EINVAL, "host cost parameter %s must be finite and >= 0, got %g",
                              names[i], v[i]);
  return df_status_ok();
}

void hb_cost_edge(hb_run *r, hb_cta *c, uint32_t from_instr, bool cluster) {
  if (from_instr == HB_S)
    return;
  double t = r->instr_finish[from_instr] +
             (cluster ? r->o.cost.cluster_latency : r->o.cost.hbm_latency);
  if (c->phase == HB_PH_ISSUE || c->phase == HB_PH_SEND) {
    /* a late edge (gated push): the instruction cannot finish before it */
    uint32_t cur = c->cur;
    if (t > r->instr_finish[cur]) {
      r->instr_finish[cur] = t;
      c->t_free = t;
      c->cost.finish_cycles = t;
    }
    return;
  }
  if (t > c->t_ready)
    c->t_ready = t;
}

void hb_cost_dispatch(hb_run *r, hb_cta *c, uint32_t instr) {
  double dur = r->o.cost.instr_cycles + r->o.cost.byte_cycles * (double)r->instr_bytes[instr];
  double start = c->t_free > c->t_ready ? c->t_free : c->t_ready;
  double finish = start + dur;
  r->instr_finish[instr] = finish;
  c->t_free = finish;
  c->cost.instructions++;
  c->cost.busy_cycles += dur;
  c->cost.finish_cycles = finish;
}

void hb_cost_comm(hb_run *r, hb_cta *c, uint32_t comm) {
  c->cost.comms++;
  c->cost.comm_bytes += r->comm_bytes[comm];
  if (r->comm_bytes[comm] > c->cost.max_copy_bytes)
    c->cost.max_copy_bytes = r->comm_bytes[comm];
}

df_status hb_cost_finish(hb_run *r) {
  df_host_cost *o = &r->out->cost;
  o->params = r->o.cost;
  if (!r->ctas)
    return df_status_ok();
  o->ctas = df_alloc(&r->al, sizeof(df_host_cta_cost) * r->cta_count);
  if (!o->ctas)
    return hb_oom("the cost estimate");
  o->cta_count = r->cta_count;
  for (uint32_t s = 0; s < r->cta_count; s++) {
    const df_host_cta_cost *c = &r->ctas[s].cost;
    o->ctas[s] = *c;
    o->instructions += c->instructions;
    o->comm_bytes += c->comm_bytes;
    o->busy_cycles += c->busy_cycles;
    if (s == 0 || c->finish_cycles > o->makespan_cycles) {
      o->makespan_cycles = c->finish_cycles;
      o->critical_cta = s;
    }
  }
  return df_status_ok();
}

df_status df_host_cost_write(const df_host_result *r, FILE *out) {
  if (!r || !out)
    return df_status_errorf(DF_EINVAL, "cost write expects a result and a stream, got NULL");
  const df_host_cost *c = &r->cost;
  int n = fprintf(out,
                  "cost model: F=%g cycles/instruction R=%g cycles/byte cluster_latency=%g "
                  "hbm_latency=%g\n",
                  c->params.instr_cycles, c->params.byte_cycles, c->params.cluster_latency,
                  c->params.hbm_latency);
  for (uint32_t s = 0; s < c->cta_count && n >= 0; s++) {
    const df_host_cta_cost *t = &c->ctas[s];
    n = fprintf(out,
                "cta %u: instructions=%u comms=%u comm_bytes=%llu busy=%.2f finish=%.2f\n", s,
                t->instructions, t->comms, (unsigned long long)t->comm_bytes, t->busy_cycles,
                t->finish_cycles);
  }
  if (n >= 0)
    n = fprintf(out,
                "total: instructions=%u comm_bytes=%llu busy=%.2f makespan=%.2f critical_cta=%u\n",
                c->instructions, (unsigned long long)c->comm_bytes, c->busy_cycles,
                c->makespan_cycles, c->critical_cta);
  if (n < 0)
    return df_status_errorf(DF_EIO, "cost: write failed: %s", strerror(errno));
  return df_status_ok();
}
