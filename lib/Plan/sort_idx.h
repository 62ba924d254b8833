/* Stable sort of u32 indices with a context comparator (internal to
   lib/Plan): insertion sort for short runs, bottom-up merge otherwise, so
   large comm groups or phase buckets never go quadratic. */
#ifndef DF_PLAN_SORT_IDX_H
#define DF_PLAN_SORT_IDX_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

typedef bool (*df_idx_less)(const void *ctx, uint32_t a, uint32_t b);

static inline void df_sort_idx_insertion(uint32_t *v, uint32_t n, df_idx_less less,
                                         const void *ctx) {
  for (uint32_t i = 1; i < n; i++) {
    uint32_t x = v[i], j = i;
    while (j > 0 && less(ctx, x, v[j - 1])) {
      v[j] = v[j - 1];
      j--;
    }
    v[j] = x;
  }
}

/* `tmp` holds n elements. */
static inline void df_sort_idx(uint32_t *v, uint32_t n, uint32_t *tmp, df_idx_less less,
                               const void *ctx) {
  const uint32_t run = 16;
  for (uint32_t i = 0; i < n; i += run)
    df_sort_idx_insertion(v + i, n - i < run ? n - i : run, less, ctx);
  uint32_t *src = v, *dst = tmp;
  for (uint32_t w = run; w < n; w *= 2) {
    for (uint32_t lo = 0; lo < n; lo += 2 * w) {
      uint32_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
      uint32_t a = lo, b = mid, o = lo;
      while (a < mid && b < hi)
        dst[o++] = less(ctx, src[b], src[a]) ? src[b++] : src[a++];
      while (a < mid)
        dst[o++] = src[a++];
      while (b < hi)
        dst[o++] = src[b++];
    }
    uint32_t *t = src;
    src = dst;
    dst = t;
  }
  if (src != v)
    memcpy(v, src, sizeof(uint32_t) * n);
}

#endif
