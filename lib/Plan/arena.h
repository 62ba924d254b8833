/* A bump arena for the scratch arrays of one pass (internal to lib/Plan):
   one allocator call per chunk instead of one per array, and one release
   at the end of the pass. */
#ifndef DF_PLAN_ARENA_H
#define DF_PLAN_ARENA_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "df/alloc.h"
#include "df/status.h"

typedef struct df_arena_chunk {
  struct df_arena_chunk *prev;
  size_t used, cap;
} df_arena_chunk;

typedef struct df_arena {
  const df_allocator *alloc;
  df_arena_chunk *head;
} df_arena;

static inline void df_arena_init(df_arena *a, const df_allocator *alloc) {
  a->alloc = alloc;
  a->head = NULL;
}

static inline void df_arena_release(df_arena *a) {
  while (a->head) {
    df_arena_chunk *prev = a->head->prev;
    df_free(a->alloc, a->head);
    a->head = prev;
  }
}

/* 16-byte aligned, uninitialised; NULL when out of memory. */
static inline void *df_arena_alloc(df_arena *a, size_t bytes) {
  bytes = (bytes + 15) & ~(size_t)15;
  if (bytes == 0)
    bytes = 16;
  const size_t hdr = (sizeof(df_arena_chunk) + 15) & ~(size_t)15;
  df_arena_chunk *c = a->head;
  if (!c || c->cap - c->used < bytes) {
    size_t cap = bytes > 60000 ? bytes : 60000;
    c = df_alloc(a->alloc, hdr + cap);
    if (!c)
      return NULL;
    c->prev = a->head;
    c->used = 0;
    c->cap = cap;
    a->head = c;
  }
  void *p = (char *)c + hdr + c->used;
  c->used += bytes;
  return p;
}

/* `count` elements of `elem` bytes; NULL on overflow or out of memory. */
static inline void *df_arena_array(df_arena *a, uint64_t count, size_t elem) {
  if (count > (SIZE_MAX / 2) / (elem ? elem : 1))
    return NULL;
  return df_arena_alloc(a, (size_t)count * elem);
}

static inline void *df_arena_zero(df_arena *a, uint64_t count, size_t elem) {
  void *p = df_arena_array(a, count, elem);
  if (p)
    memset(p, 0, (size_t)count * elem);
  return p;
}

/* Filled with 0xFF bytes: every u32 is DF_SENTINEL. */
static inline uint32_t *df_arena_sentinels(df_arena *a, uint64_t count) {
  uint32_t *p = df_arena_array(a, count, sizeof(uint32_t));
  if (p)
    memset(p, 0xFF, (size_t)count * sizeof(uint32_t));
  return p;
}

#define DF_ARENA_OOM(what)                                                     \
  df_status_errorf(DF_ENOMEM, "out of memory allocating %s", what)

#endif
