/* Insert-only open-addressing hash maps for one pass (internal to
   lib/Plan), allocated from an arena: five-word keys (transfer keys,
   handler keys) and u32 keys (storage ids, gate ids). Values are u32 and
   must not be DF_SENTINEL, which marks an empty entry and a miss. */
#ifndef DF_PLAN_KEYMAP_H
#define DF_PLAN_KEYMAP_H

#include <stdint.h>
#include <string.h>

#include "arena.h"
#include "df/abi.h"

typedef struct df_key5 {
  uint32_t w[5];
} df_key5;

typedef struct df_key5_entry {
  df_key5 key;
  uint32_t val;
} df_key5_entry;

typedef struct df_key5map {
  df_key5_entry *e;
  uint32_t mask, count;
} df_key5map;

typedef struct df_u32_entry {
  uint32_t key, val;
} df_u32_entry;

typedef struct df_u32map {
  df_u32_entry *e;
  uint32_t mask;
} df_u32map;

static inline uint64_t df_hash_mix(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  return h;
}

/* Capacity: a power of two at least twice `expected`. */
static inline uint32_t df_keymap_capacity(uint32_t expected) {
  uint64_t cap = 16;
  while (cap < 2 * (uint64_t)expected)
    cap *= 2;
  return (uint32_t)cap;
}

static inline int df_key5map_init(df_key5map *m, df_arena *a, uint32_t expected) {
  uint32_t cap = df_keymap_capacity(expected);
  m->e = df_arena_array(a, cap, sizeof *m->e);
  if (!m->e)
    return 0;
  for (uint32_t i = 0; i < cap; i++)
    m->e[i].val = DF_SENTINEL;
  m->mask = cap - 1;
  m->count = 0;
  return 1;
}

static inline uint32_t df_key5_hash(const df_key5 *k) {
  uint64_t h = 0x9E3779B97F4A7C15ULL;
  for (int i = 0; i < 5; i++)
    h = (h ^ k->w[i]) * 0x100000001B3ULL + (h >> 29);
  return (uint32_t)df_hash_mix(h);
}

static inline int df_key5_equal(const df_key5 *a, const df_key5 *b) {
  return a->w[0] == b->w[0] && a->w[1] == b->w[1] && a->w[2] == b->w[2] &&
         a->w[3] == b->w[3] && a->w[4] == b->w[4];
}

/* The value stored under `k`, or DF_SENTINEL. */
static inline uint32_t df_key5map_get(const df_key5map *m, const df_key5 *k) {
  for (uint32_t i = df_key5_hash(k) & m->mask;; i = (i + 1) & m->mask) {
    const df_key5_entry *e = &m->e[i];
    if (e->val == DF_SENTINEL)
      return DF_SENTINEL;
    if (df_key5_equal(&e->key, k))
      return e->val;
  }
}

/* Stores `val` under `k` unless present; returns the previous value or
   DF_SENTINEL when inserted. The map never fills: capacity is twice the
   number of keys the caller announced. */
static inline uint32_t df_key5map_put(df_key5map *m, const df_key5 *k, uint32_t val) {
  for (uint32_t i = df_key5_hash(k) & m->mask;; i = (i + 1) & m->mask) {
    df_key5_entry *e = &m->e[i];
    if (e->val == DF_SENTINEL) {
      e->key = *k;
      e->val = val;
      m->count++;
      return DF_SENTINEL;
    }
    if (df_key5_equal(&e->key, k))
      return e->val;
  }
}

/* Keeps room for one more key, doubling (rehash into the arena) when the
   map would pass half full; for maps whose key count is not known. */
static inline int df_key5map_room(df_key5map *m, df_arena *a) {
  if (2 * ((uint64_t)m->count + 1) <= (uint64_t)m->mask + 1)
    return 1;
  df_key5map bigger;
  if (!df_key5map_init(&bigger, a, 2 * (m->count + 1)))
    return 0;
  for (uint32_t i = 0; i <= m->mask; i++)
    if (m->e[i].val != DF_SENTINEL)
      df_key5map_put(&bigger, &m->e[i].key, m->e[i].val);
  *m = bigger;
  return 1;
}

static inline int df_u32map_init(df_u32map *m, df_arena *a, uint32_t expected) {
  uint32_t cap = df_keymap_capacity(expected);
  m->e = df_arena_array(a, cap, sizeof *m->e);
  if (!m->e)
    return 0;
  for (uint32_t i = 0; i < cap; i++)
    m->e[i].val = DF_SENTINEL;
  m->mask = cap - 1;
  return 1;
}

static inline uint32_t df_u32map_get(const df_u32map *m, uint32_t k) {
  for (uint32_t i = (uint32_t)df_hash_mix(k) & m->mask;; i = (i + 1) & m->mask) {
    if (m->e[i].val == DF_SENTINEL)
      return DF_SENTINEL;
    if (m->e[i].key == k)
      return m->e[i].val;
  }
}

static inline uint32_t df_u32map_put(df_u32map *m, uint32_t k, uint32_t val) {
  for (uint32_t i = (uint32_t)df_hash_mix(k) & m->mask;; i = (i + 1) & m->mask) {
    df_u32_entry *e = &m->e[i];
    if (e->val == DF_SENTINEL) {
      e->key = k;
      e->val = val;
      return DF_SENTINEL;
    }
    if (e->key == k)
      return e->val;
  }
}

#endif
