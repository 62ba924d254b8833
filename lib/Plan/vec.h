/* Growable arrays for lib/Plan (internal). */
#ifndef DF_PLAN_VEC_H
#define DF_PLAN_VEC_H

#include <stdint.h>
#include <string.h>

#include "df/alloc.h"
#include "df/status.h"

/* Ensure room for `need` elements of `elem` bytes in *data (capacity *cap),
   growing geometrically. */
static inline df_status df_vec_reserve(const df_allocator *a, void **data,
                                       uint32_t *cap, uint32_t need,
                                       size_t elem) {
  if (need <= *cap)
    return df_status_ok();
  uint64_t n = *cap ? (uint64_t)*cap * 2 : 16;
  while (n < need)
    n *= 2;
  if (n > UINT32_MAX)
    return df_status_errorf(DF_ENOMEM, "array of %u elements is too large", need);
  void *p = df_realloc(a, *data, (size_t)n * elem);
  if (!p)
    return df_status_errorf(DF_ENOMEM, "out of memory growing an array to %llu elements",
                            (unsigned long long)n);
  *data = p;
  *cap = (uint32_t)n;
  return df_status_ok();
}

/* Copy a NUL-terminated name into a fixed buffer; error if it does not fit. */
static inline df_status df_name_copy(char *dst, size_t cap, const char *src,
                                     const char *what) {
  size_t n = src ? strlen(src) : 0;
  if (n >= cap)
    return df_status_errorf(DF_EINVAL, "%s '%.40s...' is longer than %zu bytes", what,
                            src, cap - 1);
  memcpy(dst, src ? src : "", n);
  dst[n] = '\0';
  return df_status_ok();
}

#endif
