/* Composite handlers (docs/fusion.md): one per distinct sequence of part
   handlers among the fused instructions, numbered after every ordinary
   handler in order of first appearance in pack order, so fusion never
   renumbers the handlers of the unfused plan. */
#include <stdio.h>
#include <string.h>

#include "pack_internal.h"

static void composite_name(const df_packed *k, const uint32_t *parts, uint32_t n, char *buf,
                           size_t cap) {
  size_t at = 0;
  buf[0] = '\0';
  for (uint32_t i = 0; i < n && at + 1 < cap; i++) {
    int w = snprintf(buf + at, cap - at, "%s%s", i ? "+" : "", k->handlers[parts[i]].name);
    at = w < 0 ? at : at + (size_t)w < cap ? at + (size_t)w : cap - 1;
  }
}

df_status df_pack_composites(df_pack_ctx *c) {
  df_packed *k = c->k;
  const df_plan *p = c->p;
  c->composite_of = df_arena_sentinels(c->a, k->instr_count ? k->instr_count : 1);
  if (!c->composite_of)
    return DF_ARENA_OOM("composite handlers");
  uint32_t base = k->handler_count, count = 0;
  for (uint32_t pi = 0; pi < k->instr_count; pi++) {
    uint32_t id = k->pack_order[pi];
    if (c->next_part[id] == DF_SENTINEL)
      continue;
    uint32_t parts[DF_FUSE_MAX_PARTS], n = 0;
    for (uint32_t part = id; part != DF_SENTINEL; part = c->next_part[part]) {
      uint32_t h = c->handler_of[part];
      if (h == DF_SENTINEL || n == DF_FUSE_MAX_PARTS)
        return df_status_errorf(DF_EINVAL,
                                "fused instruction %u: part %u (%s) has no handler", id, part,
                                df_instr_op_name(p->instrs[part].op));
      parts[n++] = h;
    }
    uint32_t found = DF_SENTINEL;
    for (uint32_t j = 0; j < count && found == DF_SENTINEL; j++) {
      const df_handler *h = &k->handlers[base + j];
      if (h->part_count == n && !memcmp(h->parts, parts, sizeof(uint32_t) * n))
        found = base + j;
    }
    if (found == DF_SENTINEL) {
      df_handler *grown = df_realloc(&k->alloc, k->handlers,
                                     sizeof(df_handler) * (base + count + 1));
      if (!grown)
        return df_status_errorf(DF_ENOMEM, "out of memory packing composite handlers");
      k->handlers = grown;
      df_handler *h = &k->handlers[base + count];
      memset(h, 0, sizeof *h);
      h->id = base + count;
      composite_name(k, parts, n, h->name, sizeof h->name);
      h->kind = k->handlers[parts[0]].kind;
      h->part_count = n;
      memcpy(h->parts, parts, sizeof(uint32_t) * n);
      df_pack_handler_symbol(h->symbol, sizeof h->symbol, h->id, h->name);
      found = base + count++;
    }
    c->composite_of[pi] = found;
  }
  k->handler_count = base + count;
  return df_status_ok();
}
