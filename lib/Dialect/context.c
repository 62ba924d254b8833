/* Context creation with the embedded df dialect, parsing and file input. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "df/compiler.h"
#include "mlir-c/Diagnostics.h"
#include "mlir-c/Dialect/Func.h"
#include "mlir-c/Dialect/IRDL.h"
#include "mlir-c/RegisterEverything.h"

extern const char df_irdl_text[];

static void write_ref(MlirStringRef s, void *user) { fwrite(s.data, 1, s.length, user); }

/* Diagnostics as compilers print them: file:line:col: severity: message. */
static MlirLogicalResult print_diagnostic(MlirDiagnostic d, void *user) {
  (void)user;
  MlirLocation loc = mlirDiagnosticGetLocation(d);
  if (mlirLocationIsAFileLineColRange(loc)) {
    MlirStringRef file = mlirIdentifierStr(mlirLocationFileLineColRangeGetFilename(loc));
    fprintf(stderr, "%.*s:%d:%d: ", (int)file.length, file.data,
            mlirLocationFileLineColRangeGetStartLine(loc),
            mlirLocationFileLineColRangeGetStartColumn(loc));
  } else {
    mlirLocationPrint(loc, write_ref, stderr);
    fprintf(stderr, ": ");
  }
  static const char *const names[] = {"error", "warning", "note", "remark"};
  MlirDiagnosticSeverity sev = mlirDiagnosticGetSeverity(d);
  fprintf(stderr, "%s: ", (unsigned)sev < 4 ? names[sev] : "error");
  mlirDiagnosticPrint(d, write_ref, stderr);
  fputc('\n', stderr);
  for (intptr_t i = 0; i < mlirDiagnosticGetNumNotes(d); i++)
    print_diagnostic(mlirDiagnosticGetNote(d, i), NULL);
  return mlirLogicalResultSuccess();
}

static void capture_ref(MlirStringRef s, void *user) {
  df_diag_capture *c = user;
  size_t room = sizeof c->text - 1 - c->len;
  size_t n = s.length < room ? s.length : room;
  memcpy(c->text + c->len, s.data, n);
  c->len += n;
  c->text[c->len] = '\0';
}

static void capture_str(df_diag_capture *c, const char *s) {
  capture_ref(mlirStringRefCreateFromCString(s), c);
}

/* Located as print_diagnostic writes them; notes are left out. */
static MlirLogicalResult capture_diagnostic(MlirDiagnostic d, void *user) {
  df_diag_capture *c = user;
  if (mlirDiagnosticGetSeverity(d) != MlirDiagnosticError)
    return mlirLogicalResultSuccess();
  if (c->len)
    capture_str(c, "; ");
  MlirLocation loc = mlirDiagnosticGetLocation(d);
  if (mlirLocationIsAFileLineColRange(loc)) {
    char pos[48];
    capture_ref(mlirIdentifierStr(mlirLocationFileLineColRangeGetFilename(loc)), c);
    snprintf(pos, sizeof pos, ":%d:%d: ", mlirLocationFileLineColRangeGetStartLine(loc),
             mlirLocationFileLineColRangeGetStartColumn(loc));
    capture_str(c, pos);
  }
  mlirDiagnosticPrint(d, capture_ref, c);
  return mlirLogicalResultSuccess();
}

void df_diag_capture_begin(MlirContext ctx, df_diag_capture *c) {
  c->text[0] = '\0';
  c->len = 0;
  c->ctx = ctx;
  c->id = mlirContextAttachDiagnosticHandler(ctx, capture_diagnostic, c, NULL);
}

void df_diag_capture_end(df_diag_capture *c) { mlirContextDetachDiagnosticHandler(c->ctx, c->id); }

df_status df_context_create(MlirContext *out) {
  MlirDialectRegistry registry = mlirDialectRegistryCreate();
  mlirRegisterAllDialects(registry);
  MlirContext ctx = mlirContextCreateWithRegistry(registry, false);
  mlirDialectRegistryDestroy(registry);
  mlirContextLoadAllAvailableDialects(ctx);
  mlirContextAttachDiagnosticHandler(ctx, print_diagnostic, NULL, NULL);
  MlirModule irdl = mlirModuleCreateParse(ctx, mlirStringRefCreateFromCString(df_irdl_text));
  if (mlirModuleIsNull(irdl)) {
    mlirContextDestroy(ctx);
    return df_status_errorf(DF_EINTERNAL, "the embedded df dialect (IRDL) does not parse");
  }
  MlirLogicalResult r = mlirLoadIRDLDialects(irdl);
  mlirModuleDestroy(irdl);
  if (mlirLogicalResultIsFailure(r)) {
    mlirContextDestroy(ctx);
    return df_status_errorf(DF_EINTERNAL, "the embedded df dialect (IRDL) does not load");
  }
  *out = ctx;
  return df_status_ok();
}

df_status df_parse_module(MlirContext ctx, const char *text, size_t len,
                          const char *source_name, MlirOperation *out) {
  if (len == 0)
    return df_status_errorf(DF_EFORMAT, "%s: the input is empty; expected an MLIR module",
                            source_name);
  MlirOperation op = mlirOperationCreateParse(ctx, mlirStringRefCreate(text, len),
                                              mlirStringRefCreateFromCString(source_name));
  if (mlirOperationIsNull(op))
    return df_status_errorf(DF_EFORMAT, "%s: could not parse the input as MLIR", source_name);
  MlirStringRef name = mlirIdentifierStr(mlirOperationGetName(op));
  if (name.length != strlen("builtin.module") ||
      memcmp(name.data, "builtin.module", name.length) != 0) {
    mlirOperationDestroy(op);
    return df_status_errorf(DF_EFORMAT, "%s: the top-level operation must be builtin.module",
                            source_name);
  }
  *out = op;
  return df_status_ok();
}

df_status df_read_file(const char *path, char **data, size_t *len) {
  bool is_stdin = strcmp(path, "-") == 0;
  FILE *f = is_stdin ? stdin : fopen(path, "rb");
  if (!f)
    return df_status_errorf(DF_EIO, "cannot open '%s': %s", path, strerror(errno));
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap);
  while (buf) {
    n += fread(buf + n, 1, cap - n - 1, f);
    if (n + 1 < cap)
      break;
    cap *= 2;
    char *grown = realloc(buf, cap);
    if (!grown)
      free(buf);
    buf = grown;
  }
  bool err = ferror(f);
  if (!is_stdin)
    fclose(f);
  if (!buf)
    return df_status_errorf(DF_ENOMEM, "out of memory reading '%s'", path);
  if (err) {
    free(buf);
    return df_status_errorf(DF_EIO, "error reading '%s'", path);
  }
  buf[n] = '\0';
  *data = buf;
  *len = n;
  return df_status_ok();
}
