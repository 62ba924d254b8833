/* The structural dispatch-cost model (include/df/cost.h, docs/fusion.md):
   per dispatched instruction F + R x (record bytes + payload bytes), and
   the longest path through queue order and transfer edges. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "df/cost.h"

df_cost_params df_cost_params_default(void) {
  return (df_cost_params){40.0, 0.0625, 200.0, 1000.0};
}

df_status df_cost_params_check(const df_cost_params *p) {
  const struct {
    double v;
    const char *name;
  } f[] = {{p->instr_cycles, "instr_cycles (F)"},
           {p->byte_cycles, "byte_cycles (R)"},
           {p->cluster_latency, "cluster_latency"},
           {p->hbm_latency, "hbm_latency"}};
  for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
    if (!isfinite(f[i].v) || f[i].v < 0)
      return df_status_errorf(DF_EINVAL, "cost model parameter %s must be finite and >= 0, "
                                         "got %g",
                              f[i].name, f[i].v);
  return df_status_ok();
}

/* A transfer end: family (0 cluster, 1 HBM), slots, segment, and the CTA
   pair (cluster) or epoch (HBM); `instr` is its packed instruction. */
typedef struct end {
  uint32_t key[6];
  uint32_t instr;
} end;

static int end_cmp(const void *a, const void *b) {
  const end *x = a, *y = b;
  for (int i = 0; i < 6; i++)
    if (x->key[i] != y->key[i])
      return x->key[i] < y->key[i] ? -1 : 1;
  return x->instr < y->instr ? -1 : x->instr > y->instr;
}

static uint64_t transfer_bytes(const df_packed *k, const df_abi_comm *c) {
  if (c->kind == DF_COMM_CLUSTER_RELEASE)
    return 0;
  const df_abi_slot *s = &k->slots[c->src_slot_id], *d = &k->slots[c->dst_slot_id];
  bool direct = (s->flags & d->flags & DF_SLOT_FLAG_HBM_DIRECT_GLOBAL) &&
                s->global_offset == d->global_offset;
  if (direct && df_comm_kind_is_hbm((df_comm_kind)c->kind))
    return 0; /* signal-only */
  if (c->byte_count)
    return c->byte_count;
  return s->bytes < d->bytes ? s->bytes : d->bytes;
}

/* Key of a send or a blocking receive; false for other kinds. */
static bool end_key(const df_packed *k, const df_abi_comm *c, uint32_t cta, end *e) {
  uint32_t cs = k->topology.cluster_size, base = cta / cs * cs;
  memset(e->key, 0, sizeof e->key);
  e->key[1] = c->src_slot_id;
  e->key[2] = c->dst_slot_id;
  e->key[3] = c->segment_id;
  switch (c->kind) {
  case DF_COMM_CLUSTER_SEND:
    e->key[4] = cta;
    e->key[5] = base + c->peer_cta_rank;
    return true;
  case DF_COMM_CLUSTER_RECV:
    e->key[4] = base + c->peer_cta_rank;
    e->key[5] = cta;
    return true;
  case DF_COMM_HBM_SEND:
  case DF_COMM_HBM_RECV:
  case DF_COMM_HBM_RECV_WAIT:
    e->key[0] = 1;
    e->key[4] = c->flag_epoch;
    return true;
  default:
    return false; /* releases, non-blocking issues */
  }
}

typedef struct graph {
  uint32_t n;
  uint32_t *cta, *queue_pred;
  uint32_t *edge_first, *edge_from; /* incoming transfer edges, CSR */
  double *edge_latency;
  double *cycles, *start, *finish;
  uint32_t *pred; /* predecessor deciding the start, S at a root */
} graph;

static bool is_send(uint32_t kind) {
  return kind == DF_COMM_CLUSTER_SEND || kind == DF_COMM_HBM_SEND;
}

static df_status build(const df_packed *k, const df_cost_params *prm, const df_allocator *a,
                       graph *g, df_cost *out) {
  uint32_t n = k->instr_count;
  g->n = n;
  for (uint32_t s = 0; s < k->topology.sm_count; s++)
    for (uint32_t p = 0; p < k->queue_lengths[s]; p++) {
      uint32_t i = k->queue_offsets[s] + p;
      g->cta[i] = s;
      g->queue_pred[i] = p ? i - 1 : DF_SENTINEL;
    }
  /* A pool's items (docs/pool.md) run where they are claimed: counted
     round-robin over the CTAs, each item modelled as free to start (the
     model has no dynamic claims; it does not order an item after its
     CTA's previous one). */
  df_pool_desc pool;
  DF_TRY(df_packed_pool_find(k, &pool));
  for (uint32_t i = pool.present ? pool.first : n; i < n; i++) {
    uint32_t item = (i - pool.first) / pool.stride, m = (i - pool.first) % pool.stride;
    g->cta[i] = item % k->topology.sm_count;
    g->queue_pred[i] = m ? i - 1 : DF_SENTINEL;
  }
  /* node costs and per-CTA sums */
  for (uint32_t i = 0; i < n; i++) {
    const df_abi_instr *in = &k->instrs[i];
    g->cycles[i] = 0;
    if (in->opcode == DF_ABI_OP_EXIT || in->opcode == DF_ABI_OP_POOL)
      continue;
    uint32_t first = in->arg_offset / sizeof(df_abi_args);
    uint32_t parts = k->args[first].reserved1 ? k->args[first].reserved1 : 1;
    uint64_t rec = sizeof(df_abi_instr) + (uint64_t)parts * sizeof(df_abi_args) +
                   (uint64_t)in->comm_count * sizeof(df_abi_comm), pay = 0;
    for (uint32_t q = 0; q < parts; q++)
      rec += 4ull * (k->args[first + q].input_slot_count + k->args[first + q].task_coord_count);
    for (uint32_t j = in->comm_offset; j < in->comm_offset + in->comm_count; j++)
      pay += transfer_bytes(k, &k->comms[j]);
    g->cycles[i] = prm->instr_cycles + prm->byte_cycles * (double)(rec + pay);
    df_cost_cta *c = &out->ctas[g->cta[i]];
    c->instructions++;
    c->parts += parts;
    c->comms += in->comm_count;
    c->record_bytes += rec;
    c->payload_bytes += pay;
    c->cycles += g->cycles[i];
  }
  /* transfer edges: every blocking receive from its matching send */
  end *sends = df_alloc(a, sizeof(end) * (k->comm_count + 1));
  if (!sends)
    return df_status_errorf(DF_ENOMEM, "out of memory costing %u comms", k->comm_count);
  uint32_t ns = 0;
  for (uint32_t i = 0; i < n; i++) {
    const df_abi_instr *in = &k->instrs[i];
    for (uint32_t j = in->comm_offset; j < in->comm_offset + in->comm_count; j++)
      if (is_send(k->comms[j].kind) && end_key(k, &k->comms[j], g->cta[i], &sends[ns]))
        sends[ns++].instr = i;
  }
  qsort(sends, ns, sizeof(end), end_cmp);
  memset(g->edge_first, 0, sizeof(uint32_t) * (n + 1));
  uint32_t ne = 0;
  for (int pass = 0; pass < 2; pass++) {
    ne = 0;
    for (uint32_t i = 0; i < n; i++) {
      const df_abi_instr *in = &k->instrs[i];
      if (pass == 1)
        g->edge_first[i] = ne;
      for (uint32_t j = in->comm_offset; j < in->comm_offset + in->comm_count; j++) {
        const df_abi_comm *c = &k->comms[j];
        end e;
        if (is_send(c->kind) || !end_key(k, c, g->cta[i], &e))
          continue;
        e.instr = 0;
        /* first send with the key (instr 0 sorts first among equal keys) */
        uint32_t lo = 0, hi = ns;
        while (lo < hi) {
          uint32_t mid = (lo + hi) / 2;
          if (end_cmp(&sends[mid], &e) < 0)
            lo = mid + 1;
          else
            hi = mid;
        }
        if (lo == ns || memcmp(sends[lo].key, e.key, sizeof e.key))
          continue;
        if (pass == 1) {
          g->edge_from[ne] = sends[lo].instr;
          g->edge_latency[ne] = e.key[0] ? prm->hbm_latency : prm->cluster_latency;
        }
        ne++;
      }
    }
    if (pass == 0) {
      g->edge_from = df_alloc(a, sizeof(uint32_t) * (ne + 1));
      g->edge_latency = df_alloc(a, sizeof(double) * (ne + 1));
      if (!g->edge_from || !g->edge_latency) {
        df_free(a, sends);
        return df_status_errorf(DF_ENOMEM, "out of memory costing %u transfer edges", ne);
      }
    }
  }
  g->edge_first[n] = ne;
  df_free(a, sends);
  return df_status_ok();
}

/* Longest path: Kahn over queue and transfer edges. */
static df_status longest_path(const df_allocator *a, graph *g) {
  uint32_t n = g->n;
  uint32_t *indeg = df_alloc(a, sizeof(uint32_t) * (n + 1));
  uint32_t *out_first = df_alloc(a, sizeof(uint32_t) * (n + 2));
  uint32_t *out_to = df_alloc(a, sizeof(uint32_t) * (g->edge_first[n] + 1));
  uint32_t *ready = df_alloc(a, sizeof(uint32_t) * (n + 1));
  df_status st = df_status_ok();
  if (!indeg || !out_first || !out_to || !ready) {
    st = df_status_errorf(DF_ENOMEM, "out of memory costing %u instructions", n);
    goto done;
  }
  memset(out_first, 0, sizeof(uint32_t) * (n + 2));
  for (uint32_t v = 0; v < n; v++) {
    indeg[v] = (g->queue_pred[v] != DF_SENTINEL) + g->edge_first[v + 1] - g->edge_first[v];
    for (uint32_t e = g->edge_first[v]; e < g->edge_first[v + 1]; e++)
      out_first[g->edge_from[e] + 2]++;
  }
  for (uint32_t v = 0; v < n; v++)
    out_first[v + 2] += out_first[v + 1];
  for (uint32_t v = 0; v < n; v++)
    for (uint32_t e = g->edge_first[v]; e < g->edge_first[v + 1]; e++)
      out_to[out_first[g->edge_from[e] + 1]++] = v;
  uint32_t head = 0, tail = 0, done_count = 0;
  for (uint32_t v = 0; v < n; v++) {
    g->start[v] = 0;
    g->pred[v] = DF_SENTINEL;
    if (!indeg[v])
      ready[tail++] = v;
  }
  while (head < tail) {
    uint32_t v = ready[head++];
    done_count++;
    uint32_t q = g->queue_pred[v];
    if (q != DF_SENTINEL && g->finish[q] >= g->start[v]) {
      g->start[v] = g->finish[q];
      g->pred[v] = q;
    }
    for (uint32_t e = g->edge_first[v]; e < g->edge_first[v + 1]; e++) {
      double t = g->finish[g->edge_from[e]] + g->edge_latency[e];
      if (t > g->start[v]) {
        g->start[v] = t;
        g->pred[v] = g->edge_from[e];
      }
    }
    g->finish[v] = g->start[v] + g->cycles[v];
    uint32_t next = v + 1; /* queue successor */
    if (next < n && g->queue_pred[next] == v && !--indeg[next])
      ready[tail++] = next;
    for (uint32_t e = out_first[v]; e < out_first[v + 1]; e++)
      if (!--indeg[out_to[e]])
        ready[tail++] = out_to[e];
  }
  if (done_count != n)
    st = df_status_errorf(DF_EINVAL, "cost: queue order and transfers form a cycle (%u of %u "
                                     "instructions ordered)",
                          done_count, n);
done:
  df_free(a, indeg);
  df_free(a, out_first);
  df_free(a, out_to);
  df_free(a, ready);
  return st;
}

static df_status trace(const df_allocator *a, const graph *g, df_cost *out) {
  uint32_t n = g->n, best = DF_SENTINEL;
  for (uint32_t v = 0; v < n; v++) {
    double f = g->finish[v];
    if (f > out->ctas[g->cta[v]].finish)
      out->ctas[g->cta[v]].finish = f;
    if (best == DF_SENTINEL || f > g->finish[best])
      best = v;
  }
  out->critical_path = best == DF_SENTINEL ? 0 : g->finish[best];
  out->total.finish = out->critical_path;
  out->critical_cta = best == DF_SENTINEL ? DF_SENTINEL : g->cta[best];
  uint32_t len = 0;
  for (uint32_t v = best; v != DF_SENTINEL; v = g->pred[v])
    len++;
  out->critical = df_alloc(a, sizeof(uint32_t) * (len + 1));
  if (!out->critical)
    return df_status_errorf(DF_ENOMEM, "out of memory tracing the critical path");
  out->critical_count = len;
  for (uint32_t v = best, i = len; v != DF_SENTINEL; v = g->pred[v])
    out->critical[--i] = v;
  return df_status_ok();
}

df_status df_plan_cost(const df_packed *k, const df_cost_params *params,
                       const df_allocator *alloc, df_cost *out) {
  memset(out, 0, sizeof *out);
  if (!k)
    return df_status_errorf(DF_EINVAL, "df_plan_cost expects a packed plan, got NULL");
  df_cost_params prm = params ? *params : df_cost_params_default();
  DF_TRY(df_cost_params_check(&prm));
  df_launch_package chk;
  DF_TRY(df_launch_package_build(k, &chk)); /* record checks */
  df_allocator a = df_allocator_or_default(alloc);
  df_launch_package_free(&chk, &k->alloc);
  out->params = prm;
  out->cta_count = k->topology.sm_count;
  uint32_t n = k->instr_count;
  graph g;
  memset(&g, 0, sizeof g);
  out->ctas = df_alloc(&a, sizeof(df_cost_cta) * (out->cta_count + 1));
  g.cta = df_alloc(&a, sizeof(uint32_t) * (n + 1));
  g.queue_pred = df_alloc(&a, sizeof(uint32_t) * (n + 1));
  g.edge_first = df_alloc(&a, sizeof(uint32_t) * (n + 1));
  g.pred = df_alloc(&a, sizeof(uint32_t) * (n + 1));
  g.cycles = df_alloc(&a, sizeof(double) * (n + 1));
  g.start = df_alloc(&a, sizeof(double) * (n + 1));
  g.finish = df_alloc(&a, sizeof(double) * (n + 1));
  df_status st = df_status_ok();
  if (!out->ctas || !g.cta || !g.queue_pred || !g.edge_first || !g.pred || !g.cycles ||
      !g.start || !g.finish)
    st = df_status_errorf(DF_ENOMEM, "out of memory costing %u instructions", n);
  if (st.code == DF_OK) {
    memset(out->ctas, 0, sizeof(df_cost_cta) * (out->cta_count + 1));
    st = build(k, &prm, &a, &g, out);
  }
  if (st.code == DF_OK)
    st = longest_path(&a, &g);
  if (st.code == DF_OK)
    st = trace(&a, &g, out);
  if (st.code == DF_OK)
    for (uint32_t s = 0; s < out->cta_count; s++) {
      const df_cost_cta *c = &out->ctas[s];
      out->total.instructions += c->instructions;
      out->total.parts += c->parts;
      out->total.comms += c->comms;
      out->total.record_bytes += c->record_bytes;
      out->total.payload_bytes += c->payload_bytes;
      out->total.cycles += c->cycles;
    }
  df_free(&a, g.cta);
  df_free(&a, g.queue_pred);
  df_free(&a, g.edge_first);
  df_free(&a, g.edge_from);
  df_free(&a, g.edge_latency);
  df_free(&a, g.pred);
  df_free(&a, g.cycles);
  df_free(&a, g.start);
  df_free(&a, g.finish);
  if (st.code != DF_OK)
    df_cost_free(out, &a);
  return st;
}

void df_cost_free(df_cost *c, const df_allocator *alloc) {
  if (!c)
    return;
  df_allocator a = df_allocator_or_default(alloc);
  df_free(&a, c->ctas);
  df_free(&a, c->critical);
  c->ctas = NULL;
  c->critical = NULL;
  c->critical_count = 0;
}

static void cta_line(FILE *f, const char *label, const df_cost_cta *c) {
  fprintf(f,
          "%s: instructions=%u parts=%u comms=%u record_bytes=%llu payload_bytes=%llu "
          "cycles=%.2f finish=%.2f\n",
          label, c->instructions, c->parts, c->comms, (unsigned long long)c->record_bytes,
          (unsigned long long)c->payload_bytes, c->cycles, c->finish);
}

void df_cost_write(const df_cost *c, const df_packed *k, FILE *f) {
  fprintf(f, "dispatch cost: F=%g cycles/instruction R=%g cycles/byte cluster_latency=%g "
             "hbm_latency=%g\n",
          c->params.instr_cycles, c->params.byte_cycles, c->params.cluster_latency,
          c->params.hbm_latency);
  char label[32];
  for (uint32_t s = 0; s < c->cta_count; s++) {
    snprintf(label, sizeof label, "cta %u", s);
    cta_line(f, label, &c->ctas[s]);
  }
  cta_line(f, "total", &c->total);
  fprintf(f, "critical_path: cycles=%.2f cta=%u instructions=%u:", c->critical_path,
          c->critical_cta, c->critical_count);
  for (uint32_t i = 0; i < c->critical_count; i++) {
    uint32_t pi = c->critical[i], cta = 0;
    while (cta + 1 < k->topology.sm_count && k->queue_offsets[cta + 1] <= pi)
      cta++;
    uint32_t parts = k->instrs[pi].arg_offset == DF_SENTINEL
                         ? 1
                         : k->args[k->instrs[pi].arg_offset / sizeof(df_abi_args)].reserved1;
    fprintf(f, "%s I%u@%u", i ? " ->" : "", k->pack_order[pi], cta);
    if (parts > 1)
      fprintf(f, "+%u", parts - 1);
  }
  fputc('\n', f);
}
