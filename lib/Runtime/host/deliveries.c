/* Outstanding HBM deliveries: staging bytes an HBM send wrote that its
   receive has not read yet. A second send over them is an overwrite. */
#include <stdio.h>
#include <string.h>

#include "host_internal.h"

/* Outstanding deliveries are found through a map from 16-byte staging
   granules to the delivery that last wrote them, so checks cost the bytes
   moved rather than the number of transfers in flight. (Two deliveries
   sharing one granule at sub-16-byte offsets keep only the later owner.) */
static bool outstanding(const hb_run *r, uint32_t owner) {
  return owner && !r->comm_done[r->deliveries[owner - 1].recv_comm];
}

static df_status ensure_maps(hb_run *r) {
  if (r->delivery_of_recv)
    return df_status_ok();
  uint64_t staging = r->pkg.global_staging_bytes;
  r->granule_count = (uint32_t)((staging + 15) / 16);
  r->granule = df_alloc(&r->al, sizeof(uint32_t) * (r->granule_count ? r->granule_count : 1));
  r->delivery_of_recv = df_alloc(&r->al, sizeof(uint32_t) * (r->k->comm_count ? r->k->comm_count : 1));
  if (!r->granule || !r->delivery_of_recv)
    return hb_oom("HBM delivery maps");
  memset(r->granule, 0, sizeof(uint32_t) * r->granule_count);
  memset(r->delivery_of_recv, 0, sizeof(uint32_t) * r->k->comm_count);
  return df_status_ok();
}

df_status hb_delivery_check(hb_run *r, uint32_t cta, uint32_t send, uint32_t off, uint32_t len) {
  DF_TRY(ensure_maps(r));
  hb_region g = hb_staging_region(off, len);
  uint32_t g1 = (uint32_t)(((uint64_t)off + len + 15) / 16);
  for (uint32_t q = off / 16; q < g1 && q < r->granule_count; q++) {
    uint32_t owner = r->granule[q];
    if (!outstanding(r, owner))
      continue;
    const hb_delivery *v = &r->deliveries[owner - 1];
    if (!hb_regions_overlap(g, hb_staging_region(v->off, v->len)))
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
  DF_TRY(ensure_maps(r));
  if (r->delivery_count == r->delivery_cap) {
    uint32_t cap = r->delivery_cap ? 2 * r->delivery_cap : 16;
    hb_delivery *p = df_realloc(&r->al, r->deliveries, sizeof(hb_delivery) * cap);
    if (!p)
      return hb_oom("HBM deliveries");
    r->deliveries = p;
    r->delivery_cap = cap;
  }
  hb_delivery v = {off, len, send, cta, recv};
  r->deliveries[r->delivery_count++] = v;
  uint32_t id = r->delivery_count;
  uint32_t g1 = (uint32_t)(((uint64_t)off + len + 15) / 16);
  for (uint32_t q = off / 16; q < g1 && q < r->granule_count; q++)
    r->granule[q] = id;
  if (recv < r->k->comm_count)
    r->delivery_of_recv[recv] = id;
  return df_status_ok();
}

void hb_delivery_consume(hb_run *r, uint32_t recv) {
  if (!r->delivery_of_recv || recv >= r->k->comm_count || !r->delivery_of_recv[recv])
    return;
  uint32_t id = r->delivery_of_recv[recv];
  const hb_delivery *v = &r->deliveries[id - 1];
  uint32_t g1 = (uint32_t)(((uint64_t)v->off + v->len + 15) / 16);
  for (uint32_t q = v->off / 16; q < g1 && q < r->granule_count; q++)
    if (r->granule[q] == id)
      r->granule[q] = 0;
  r->delivery_of_recv[recv] = 0;
}
