/* Uses per storage key for lifetime-based shared reuse (slot_reuse.h).
   A key's uses are instructions on any CTA: producers, readers and
   writers of its slots, and the source, target and dispatch instruction
   of every comm from or into one of them. The remote end counts because
   a cluster push writes the target CTA's bytes from the sender's
   dispatch on, and a bulk send reads the source until the receiver's
   wait: both must be ordered against the other key's uses too. An
   explicit owner without any instruction is a use nothing orders. */
#include <string.h>

#include "slot_reuse.h"

typedef struct pairs {
  uint32_t *key, *ins, n, cap;
} pairs;

static void add(pairs *u, uint8_t *unordered, uint32_t key, uint32_t ins, uint32_t instrs) {
  if (ins >= instrs) {
    unordered[key] = 1;
    return;
  }
  if (u->n < u->cap) {
    u->key[u->n] = key;
    u->ins[u->n++] = ins;
  }
}

df_status df_slot_reuse_init(const df_plan *p, uint32_t (*key)(const df_slot *), df_arena *a,
                             df_slot_reuse *r) {
  uint32_t n = p->slot_count, ni = p->instr_count;
  uint64_t cap = (uint64_t)n + 6ull * p->comm_count + ni;
  for (uint32_t i = 0; i < ni; i++)
    cap += p->instrs[i].input_count;
  if (cap > UINT32_MAX)
    return df_status_errorf(DF_EINVAL, "shared reuse: %llu slot uses exceed uint32",
                            (unsigned long long)cap);
  pairs u = {df_arena_array(a, cap ? cap : 1, sizeof(uint32_t)),
             df_arena_array(a, cap ? cap : 1, sizeof(uint32_t)), 0, (uint32_t)cap};
  r->unordered = df_arena_zero(a, n ? n : 1, 1);
  r->first = df_arena_zero(a, (uint64_t)n + 1, sizeof(uint32_t));
  uint32_t *all = df_arena_array(a, ni ? ni : 1, sizeof(uint32_t));
  if (!u.key || !u.ins || !r->unordered || !r->first || !all)
    return DF_ARENA_OOM("shared reuse");
  for (uint32_t id = 0; id < n; id++) {
    const df_slot *s = &p->slots[id];
    if (s->producer != DF_SENTINEL || s->owner != DF_SENTINEL)
      add(&u, r->unordered, key(s), s->producer, ni);
  }
  for (uint32_t i = 0; i < p->comm_count; i++) {
    const df_comm *c = &p->comms[i];
    const uint32_t slots[2] = {c->src_slot, c->dst_slot};
    for (int e = 0; e < 2; e++) {
      if (slots[e] >= n)
        continue;
      uint32_t k = key(&p->slots[slots[e]]);
      add(&u, r->unordered, k, c->src_instr, ni);
      add(&u, r->unordered, k, c->dst_instr, ni);
      add(&u, r->unordered, k, df_comm_dispatch(c), ni);
    }
  }
  for (uint32_t i = 0; i < ni; i++) {
    const df_instr *in = &p->instrs[i];
    for (uint32_t j = 0; j < in->input_count; j++) {
      uint32_t sl = p->inputs[in->input_offset + j];
      if (sl < n)
        add(&u, r->unordered, key(&p->slots[sl]), i, ni);
    }
    if (in->output_slot < n)
      add(&u, r->unordered, key(&p->slots[in->output_slot]), i, ni);
  }
  r->ev = df_arena_array(a, u.n ? u.n : 1, sizeof(uint32_t));
  uint32_t *fill = df_arena_array(a, (uint64_t)n + 1, sizeof(uint32_t));
  if (!r->ev || !fill)
    return DF_ARENA_OOM("shared reuse");
  for (uint32_t i = 0; i < u.n; i++)
    r->first[u.key[i] + 1]++;
  for (uint32_t k = 0; k < n; k++)
    r->first[k + 1] += r->first[k];
  memcpy(fill, r->first, sizeof(uint32_t) * ((size_t)n + 1));
  for (uint32_t i = 0; i < u.n; i++)
    r->ev[fill[u.key[i]]++] = u.ins[i];
  for (uint32_t i = 0; i < ni; i++)
    all[i] = i;
  /* No send -> receive edges: fewer edges only make fewer keys ordered. */
  return df_hb_build(p, NULL, 0, all, ni, false, a, &r->hb);
}

/* Every use of j strictly before every use of k. */
static bool before(const df_slot_reuse *r, uint32_t j, uint32_t k) {
  for (uint32_t x = r->first[j]; x < r->first[j + 1]; x++)
    for (uint32_t y = r->first[k]; y < r->first[k + 1]; y++)
      if (r->ev[x] == r->ev[y] || !df_hb_le(&r->hb, r->ev[x], r->ev[y]))
        return false;
  return true;
}

bool df_slot_reuse_conflict(const df_slot_reuse *r, uint32_t j, uint32_t k) {
  if (j == k || r->unordered[j] || r->unordered[k])
    return true;
  return !before(r, j, k) && !before(r, k, j);
}
