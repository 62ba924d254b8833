/* A growable text buffer for diagnosis reports. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "host_internal.h"

void hb_text_init(hb_text *t, const df_allocator *al) {
  memset(t, 0, sizeof *t);
  t->al = al;
}

void hb_text_printf(hb_text *t, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  hb_text_vprintf(t, fmt, ap);
  va_end(ap);
}

void hb_text_vprintf(hb_text *t, const char *fmt, va_list ap) {
  if (t->oom)
    return;
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap);
  if (n < 0) {
    va_end(ap2);
    return;
  }
  size_t need = t->len + (size_t)n + 1;
  if (need > t->cap) {
    size_t cap = t->cap ? t->cap : 256;
    while (cap < need)
      cap *= 2;
    char *s = df_realloc(t->al, t->s, cap);
    if (!s) {
      t->oom = true;
      va_end(ap2);
      return;
    }
    t->s = s;
    t->cap = cap;
  }
  vsnprintf(t->s + t->len, t->cap - t->len, fmt, ap2);
  va_end(ap2);
  t->len += (size_t)n;
}

char *hb_text_take(hb_text *t) {
  char *s = t->oom ? NULL : t->s;
  if (t->oom)
    df_free(t->al, t->s);
  if (s == NULL && !t->oom) {
    s = df_alloc(t->al, 1);
    if (s)
      s[0] = '\0';
  }
  t->s = NULL;
  t->len = t->cap = 0;
  t->oom = false;
  return s;
}

void hb_text_free(hb_text *t) {
  df_free(t->al, t->s);
  t->s = NULL;
  t->len = t->cap = 0;
}
