/* Outstanding HBM deliveries: staging bytes an HBM send wrote that its
   receive has not read yet. A second send over them is an overwrite. */
#include <stdio.h>

#include "host_internal.h"

df_status hb_delivery_check(hb_run *r, uint32_t cta, uint32_t send, uint32_t off, uint32_t len) {
  hb_region g = hb_staging_region(off, len);
  for (uint32_t d = 0; d < r->delivery_count; d++) {
    const hb_delivery *v = &r->deliveries[d];
    if (r->comm_done[v->recv_comm] || !hb_regions_overlap(g, hb_staging_region(v->off, v->len)))
      continue;
    uint32_t instr = r->comm_instr[send], ri = r->comm_instr[v->recv_comm];
    char at[256], rat[256];
    hb_describe_instr(r, instr, at, sizeof at);
    hb_describe_instr(r, ri, rat, sizeof rat);
    return hb_fail(r, DF_HOST_DIAG_OVERWRITE, hb_site_at(r, instr, send),
                   "%s: comm %u hbm_send (CTA %u) overwrites global staging bytes [%u, %u) "
                   "before their receive read them: comm %u at %s still needs the data of comm "
                   "%u (CTA %u)",
                   at, send, cta, off, off + len, v->recv_comm, rat, v->send_comm, v->send_cta);
  }
  return df_status_ok();
}

df_status hb_delivery_add(hb_run *r, uint32_t cta, uint32_t send, uint32_t recv, uint32_t off,
                          uint32_t len) {
  if (recv == HB_S || len == 0)
    return df_status_ok();
  /* drop the consumed ones first */
  uint32_t n = 0;
  for (uint32_t d = 0; d < r->delivery_count; d++)
    if (!r->comm_done[r->deliveries[d].recv_comm])
      r->deliveries[n++] = r->deliveries[d];
  r->delivery_count = n;
  if (n == r->delivery_cap) {
    uint32_t cap = r->delivery_cap ? 2 * r->delivery_cap : 16;
    hb_delivery *p = df_realloc(&r->al, r->deliveries, sizeof(hb_delivery) * cap);
    if (!p)
      return hb_oom("HBM deliveries");
    r->deliveries = p;
    r->delivery_cap = cap;
  }
  hb_delivery v = {off, len, send, cta, recv};
  r->deliveries[r->delivery_count++] = v;
  return df_status_ok();
}

void hb_delivery_consume(hb_run *r, uint32_t recv) {
  uint32_t n = 0;
  for (uint32_t d = 0; d < r->delivery_count; d++)
    if (r->deliveries[d].recv_comm != recv)
      r->deliveries[n++] = r->deliveries[d];
  r->delivery_count = n;
}
