/* The allocator hook every df object allocates through. */
#ifndef DF_ALLOC_H
#define DF_ALLOC_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* realloc-style hook: (ptr NULL, size n) allocates, (ptr, 0) frees and
   returns NULL, otherwise resizes. Returns NULL when out of memory. */
typedef struct df_allocator {
  void *(*realloc)(void *user, void *ptr, size_t size);
  void *user;
} df_allocator;

/* The C library's allocator. */
df_allocator df_allocator_default(void);

/* `a` if it has a hook, else the default allocator. */
df_allocator df_allocator_or_default(const df_allocator *a);

static inline void *df_alloc(const df_allocator *a, size_t n) {
  return a->realloc(a->user, NULL, n ? n : 1);
}
static inline void *df_realloc(const df_allocator *a, void *p, size_t n) {
  return a->realloc(a->user, p, n ? n : 1);
}
static inline void df_free(const df_allocator *a, void *p) {
  if (p)
    a->realloc(a->user, p, 0);
}

#ifdef __cplusplus
}
#endif

#endif
