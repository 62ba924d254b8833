#include "df/alloc.h"

#include <stdlib.h>

static void *libc_realloc(void *user, void *ptr, size_t size) {
  (void)user;
  if (size == 0) {
    free(ptr);
    return NULL;
  }
  return realloc(ptr, size);
}

df_allocator df_allocator_default(void) {
  df_allocator a = {libc_realloc, NULL};
  return a;
}

df_allocator df_allocator_or_default(const df_allocator *a) {
  if (a && a->realloc)
    return *a;
  return df_allocator_default();
}
