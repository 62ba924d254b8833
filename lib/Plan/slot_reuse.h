/* Lifetime-based reuse of shared bytes inside a CTA (df_layout_options.
   reuse_dead_shared, internal to lib/Plan): two storage keys may take
   overlapping bytes when every use of one happens before every use of the
   other (strictly: no instruction uses both). */
#ifndef DF_PLAN_SLOT_REUSE_H
#define DF_PLAN_SLOT_REUSE_H

#include <stdbool.h>
#include <stdint.h>

#include "arena.h"
#include "happens_before.h"

typedef struct df_slot_reuse {
  df_hb hb;
  uint32_t *first;     /* per key (slot_count + 1): start in ev[] */
  uint32_t *ev;        /* instructions using each key */
  uint8_t *unordered;  /* per key: a use no instruction stands for */
} df_slot_reuse;

/* Uses of every shared storage key (key(slot) gives a slot's key, all
   below slot_count) and the plan's happens-before relation. */
df_status df_slot_reuse_init(const df_plan *p, uint32_t (*key)(const df_slot *), df_arena *a,
                             df_slot_reuse *out);

/* True when keys j and k must not share bytes. */
bool df_slot_reuse_conflict(const df_slot_reuse *r, uint32_t j, uint32_t k);

#endif
