#include "pass_util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlir_util.h"

typedef struct pass_state {
  df_pass_run_fn run;
  size_t size;
  char name[64];
  _Alignas(16) unsigned char options[];
} pass_state;

static void construct(void *user) { (void)user; }
static void destruct(void *user) { free(user); }

static void *clone_state(void *user) {
  pass_state *s = user;
  pass_state *c = malloc(sizeof *s + s->size);
  if (c)
    memcpy(c, s, sizeof *s + s->size);
  return c;
}

static void run(MlirOperation op, MlirExternalPass pass, void *user) {
  pass_state *s = user;
  df_status st = s->run(op, s->options);
  if (df_failed(&st))
    mlirExternalPassSignalFailure(pass);
}

MlirPass df_make_pass(const void *type_id_anchor, const char *name, const char *description,
                      df_pass_run_fn fn, const void *options, size_t size) {
  pass_state *s = malloc(sizeof *s + size);
  if (!s)
    return (MlirPass){NULL};
  s->run = fn;
  s->size = size;
  snprintf(s->name, sizeof s->name, "%s", name);
  if (size)
    memcpy(s->options, options, size);
  MlirExternalPassCallbacks cb = {construct, destruct, NULL, clone_state, run};
  return mlirCreateExternalPass(mlirTypeIDCreate(type_id_anchor),
                                mlirStringRefCreateFromCString(name),
                                mlirStringRefCreateFromCString(name),
                                mlirStringRefCreateFromCString(description),
                                mlirStringRefCreateFromCString("builtin.module"), 0, NULL, cb, s);
}

df_status df_parse_pass_options(const char *pass, const char *text, void *options,
                                df_option_setter set) {
  const char *p = text ? text : "";
  while (*p) {
    while (*p == ' ' || *p == '\t')
      p++;
    if (!*p)
      break;
    const char *end = p;
    while (*end && *end != ' ' && *end != '\t')
      end++;
    char tok[1024];
    size_t n = (size_t)(end - p);
    if (n >= sizeof tok)
      return df_status_errorf(DF_EINVAL, "%s: option '%.32s...' is too long", pass, p);
    memcpy(tok, p, n);
    tok[n] = '\0';
    char *eq = strchr(tok, '=');
    if (!eq)
      return df_status_errorf(DF_EINVAL, "%s: option '%s' must be written key=value", pass, tok);
    *eq = '\0';
    df_status s = set(options, tok, eq + 1);
    if (df_failed(&s))
      return df_status_wrap(s, pass);
    p = end;
  }
  return df_status_ok();
}

df_status df_option_u32(const char *key, const char *value, uint32_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(value, &end, 10);
  if (!*value || *end || errno || v > UINT32_MAX || value[0] == '-')
    return df_status_errorf(DF_EINVAL, "option '%s' expects an unsigned integer, got '%s'", key,
                            value);
  *out = (uint32_t)v;
  return df_status_ok();
}

df_status df_option_bool(const char *key, const char *value, bool *out) {
  if (!strcmp(value, "true") || !strcmp(value, "1"))
    *out = true;
  else if (!strcmp(value, "false") || !strcmp(value, "0"))
    *out = false;
  else
    return df_status_errorf(DF_EINVAL, "option '%s' expects true or false, got '%s'", key,
                            value);
  return df_status_ok();
}

df_status df_option_u32_list(const char *key, const char *value, uint32_t *out, uint32_t cap,
                             uint32_t *count) {
  *count = 0;
  char buf[1024];
  snprintf(buf, sizeof buf, "%s", value);
  char *save = NULL;
  for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    if (*count == cap)
      return df_status_errorf(DF_EINVAL, "option '%s' has more than %u values", key, cap);
    DF_TRY(df_option_u32(key, t, &out[(*count)++]));
  }
  if (*count == 0)
    return df_status_errorf(DF_EINVAL, "option '%s' needs at least one value", key);
  return df_status_ok();
}
