/* Tile-granular transfers (df extension of REFERENCE 5.3): a transfer of
   more than `tile` bytes becomes ceil(S / tile) segment records per
   direction (byte_offset / byte_count / segment_id / segment_count), so
   no single copy moves more than one tile. */
#include "df/plan.h"
#include "vec.h"

/* Bytes a comm moves: byte_count, else the smaller slot past the offset. */
static uint32_t transfer_bytes(const df_plan *p, const df_comm *c) {
  if (c->byte_count)
    return c->byte_count;
  int32_t ta = p->slots[c->src_slot].type, tb = p->slots[c->dst_slot].type;
  uint32_t a = ta >= 0 && (uint32_t)ta < p->type_count ? p->types[ta].bytes : 0;
  uint32_t b = tb >= 0 && (uint32_t)tb < p->type_count ? p->types[tb].bytes : 0;
  uint32_t n = a < b ? a : b;
  return n > c->byte_offset ? n - c->byte_offset : 0;
}

static bool splittable(const df_comm *c) {
  return c->kind != DF_COMM_CLUSTER_RELEASE && c->kind != DF_COMM_NONE &&
         c->segment_count <= 1;
}

uint32_t df_transfer_segment_count(uint32_t bytes, uint32_t tile) {
  if (tile == 0 || bytes <= tile)
    return 1;
  return (uint32_t)(((uint64_t)bytes + tile - 1) / tile);
}

df_status df_plan_segment_transfers(df_plan *p, uint32_t tile) {
  if (tile == 0)
    return df_status_ok();
  if (tile % DF_SLOT_ALIGN)
    return df_status_errorf(DF_EINVAL,
                            "transfer-tile-bytes %u must be a positive multiple of %u (the "
                            "bulk-copy granule)",
                            tile, DF_SLOT_ALIGN);
  /* HBM epochs are rescaled so that every segment has its own epoch and
     the order of epochs on a shared flag is kept: e -> (e-1)*m + i + 1,
     m = the most segments of any HBM transfer. */
  uint64_t total = 0;
  uint32_t m = 1;
  for (uint32_t i = 0; i < p->comm_count; i++) {
    const df_comm *c = &p->comms[i];
    if (c->src_slot >= p->slot_count || c->dst_slot >= p->slot_count)
      return df_status_errorf(DF_EINVAL, "comm %u names slot %u -> %u, outside the plan's %u slots",
                              i, c->src_slot, c->dst_slot, p->slot_count);
    uint32_t n = splittable(c) ? df_transfer_segment_count(transfer_bytes(p, c), tile) : 1;
    total += n;
    if (df_comm_kind_is_hbm(c->kind) && n > m)
      m = n;
  }
  if (total == p->comm_count)
    return df_status_ok();
  if (total > UINT32_MAX)
    return df_status_errorf(DF_EINVAL, "transfer-tile-bytes %u makes more than 2^32 comm records",
                            tile);
  df_comm *out = df_alloc(&p->alloc, sizeof *out * (size_t)total);
  if (!out)
    return df_status_errorf(DF_ENOMEM, "out of memory segmenting %llu comm records",
                            (unsigned long long)total);
  uint32_t w = 0;
  for (uint32_t i = 0; i < p->comm_count; i++) {
    const df_comm *c = &p->comms[i];
    uint32_t bytes = transfer_bytes(p, c);
    uint32_t n = splittable(c) ? df_transfer_segment_count(bytes, tile) : 1;
    bool hbm = df_comm_kind_is_hbm(c->kind) && m > 1 && c->flag_epoch > 0;
    if (hbm && (uint64_t)(c->flag_epoch - 1) * m + m > UINT32_MAX) {
      df_free(&p->alloc, out);
      return df_status_errorf(DF_EINVAL,
                              "transfer-tile-bytes %u: epoch %u of comm %u times %u segments "
                              "does not fit uint32",
                              tile, c->flag_epoch, i, m);
    }
    for (uint32_t s = 0; s < n; s++) {
      df_comm d = *c;
      if (n > 1) {
        d.byte_offset = c->byte_offset + s * tile;
        d.byte_count = s + 1 < n ? tile : bytes - s * tile;
        d.segment_id = s;
        d.segment_count = n;
      }
      if (hbm)
        d.flag_epoch = (c->flag_epoch - 1) * m + s + 1;
      out[w++] = d;
    }
  }
  df_free(&p->alloc, p->comms);
  p->comms = out;
  p->comm_count = p->comm_cap = w;
  return df_status_ok();
}
