/* An operation printed in generic form into one malloc'ed string. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "df/compiler.h"

typedef struct text_buf {
  char *data;
  size_t len, cap;
  bool oom;
} text_buf;

static void append(MlirStringRef s, void *user) {
  text_buf *b = user;
  if (b->oom)
    return;
  if (b->len + s.length + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 4096;
    while (b->len + s.length + 1 > cap)
      cap *= 2;
    char *grown = realloc(b->data, cap);
    if (!grown) {
      b->oom = true;
      return;
    }
    b->data = grown;
    b->cap = cap;
  }
  memcpy(b->data + b->len, s.data, s.length);
  b->len += s.length;
  b->data[b->len] = '\0';
}

df_status df_operation_generic_text(MlirOperation op, char **text) {
  *text = NULL;
  text_buf b = {NULL, 0, 0, false};
  MlirOpPrintingFlags flags = mlirOpPrintingFlagsCreate();
  mlirOpPrintingFlagsPrintGenericOpForm(flags);
  mlirOperationPrintWithFlags(op, flags, append, &b);
  mlirOpPrintingFlagsDestroy(flags);
  append(mlirStringRefCreateFromCString("\n"), &b);
  if (b.oom) {
    free(b.data);
    return df_status_errorf(DF_ENOMEM, "out of memory printing an operation");
  }
  *text = b.data;
  return df_status_ok();
}
