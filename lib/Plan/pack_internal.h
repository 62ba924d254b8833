/* State of one df_pack call shared by its parts (internal to lib/Plan):
   pack order, handler table, comm order, records, source lifetimes. */
#ifndef DF_PLAN_PACK_INTERNAL_H
#define DF_PLAN_PACK_INTERNAL_H

#include "arena.h"
#include "df/plan.h"

typedef struct df_pack_ctx {
  const df_plan *p;
  const df_pack_options *o;
  df_packed *k;
  df_arena *a;
  uint32_t *pack_index;  /* per plan instruction: packed position */
  uint32_t *handler_of;  /* per plan instruction: handler id or S */
  uint32_t *comm_order;  /* packed comm position -> plan comm index */
  uint32_t *comm_first;  /* per packed instruction + 1: first packed comm */
  uint32_t *next_part;   /* per plan instruction: next part of its fused
                            instruction, or S (docs/fusion.md) */
  uint32_t *composite_of; /* per packed instruction: composite handler or S */
} df_pack_ctx;

/* Pack order: SM 0's queue, SM 1's, ..., then unqueued ids (5.4). */
df_status df_pack_order(df_pack_ctx *c);
/* Handler table, operator and intermediate-type tables; the per
   instruction identity/variant checks of REFERENCE 1.6. */
df_status df_pack_handlers(df_pack_ctx *c);
/* dataflow_handler_<id>_<name> (REFERENCE 5.7 sanitising). */
void df_pack_handler_symbol(char *buf, size_t cap, uint32_t id, const char *name);
/* Composite handlers of fused instructions, appended to the table. */
df_status df_pack_composites(df_pack_ctx *c);
/* Parts of packed instruction `pi` (1 unless fused). */
uint32_t df_pack_parts(const df_pack_ctx *c, uint32_t pi);
/* Comm records grouped by dispatch instruction in pack order. */
df_status df_pack_comms(df_pack_ctx *c);
/* Instruction and args records, input_slots, task_coords. */
df_status df_pack_records(df_pack_ctx *c);
/* Source-lifetime actions into args word 14 (REFERENCE 5.4). */
df_status df_pack_source_lifetimes(df_pack_ctx *c);

/* The instruction pool of a pool plan (docs/pool.md): moves the items
   out of the queues and starts each queue with OP_POOL; after the
   records, before the launch package. */
df_status df_pack_pool(df_pack_ctx *c);

/* A pool's items for df_pool_order: their modelled costs (us) and the
   items each one reads from (CSR: producers of item g are
   prods[prod_off[g] .. prod_off[g + 1])). */
typedef struct df_pool_items {
  uint32_t count, ctas;
  const double *cost;
  const uint32_t *prod_off, *prods;
  double edge_us; /* a transfer between items */
} df_pool_items;

/* The claim order (pool_order.c): order[k] = the k-th item to claim. */
df_status df_pool_order(const df_pool_items *it, df_arena *a, uint32_t *order);

/* "Dataflow ABI value must fit uint32, got X". */
static inline df_status df_abi_u32(uint64_t v, uint32_t *out) {
  if (v > UINT32_MAX)
    return df_status_errorf(DF_EINVAL, "Dataflow ABI value must fit uint32, got %llu",
                            (unsigned long long)v);
  *out = (uint32_t)v;
  return df_status_ok();
}

#endif
