#include "options.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "df/host_backend.h"

static df_status parse_u32(const char *opt, const char *text, uint32_t min, uint32_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(text, &end, 10);
  if (end == text || *end || errno || v > 0xffffffffull || v < min || text[0] == '-')
    return df_status_errorf(DF_EINVAL, "%s: '%s' is not an integer >= %u", opt, text, min);
  *out = (uint32_t)v;
  return df_status_ok();
}

static df_status parse_double(const char *opt, const char *text, double *out) {
  char *end;
  errno = 0;
  double v = strtod(text, &end);
  if (end == text || *end || errno || !(v >= 0))
    return df_status_errorf(DF_EINVAL, "%s: '%s' is not a non-negative number", opt, text);
  *out = v;
  return df_status_ok();
}

/* NAME=VALUE; the value stays in argv. */
static df_status split_binding(const char *opt, char *arg, run_binding *b) {
  char *eq = strchr(arg, '=');
  if (!eq || eq == arg || !eq[1])
    return df_status_errorf(DF_EINVAL, "%s: expected NAME=VALUE, got '%s'", opt, arg);
  *eq = '\0';
  b->name = arg;
  b->spec = eq + 1;
  return df_status_ok();
}

static df_status add_binding(const char *opt, char *arg, run_binding *list, uint32_t *count) {
  if (*count == RUN_MAX_TENSORS)
    return df_status_errorf(DF_EINVAL, "%s: more than %d given", opt, RUN_MAX_TENSORS);
  run_binding *b = &list[*count];
  memset(b, 0, sizeof *b);
  DF_TRY(split_binding(opt, arg, b));
  for (uint32_t i = 0; i < *count; i++)
    if (strcmp(list[i].name, b->name) == 0)
      return df_status_errorf(DF_EINVAL, "%s: tensor '%s' is given twice", opt, b->name);
  (*count)++;
  return df_status_ok();
}

/* --check NAME=REF[:RTOL[:ATOL]] */
static df_status parse_check(run_binding *b) {
  b->rtol = 1e-3;
  b->atol = 1e-5;
  char *spec = (char *)b->spec;
  char *c1 = strrchr(spec, ':');
  if (!c1)
    return df_status_ok();
  /* Tolerances are numbers; a path may itself contain ':' only when both
     tolerances are given. */
  char *c0 = NULL;
  for (char *p = spec; p < c1; p++)
    if (*p == ':')
      c0 = p;
  if (c0) {
    *c1 = '\0';
    *c0 = '\0';
    DF_TRY(parse_double("--check rtol", c0 + 1, &b->rtol));
    DF_TRY(parse_double("--check atol", c1 + 1, &b->atol));
  } else {
    *c1 = '\0';
    DF_TRY(parse_double("--check rtol", c1 + 1, &b->rtol));
  }
  if (!spec[0])
    return df_status_errorf(DF_EINVAL, "--check %s: empty reference path", b->name);
  return df_status_ok();
}

static df_status parse_lengths(char *arg, run_options *o) {
  run_binding b = {NULL, NULL, 0, 0};
  DF_TRY(split_binding("--replan", arg, &b));
  o->replan_axis = b.name;
  o->replan_count = 0;
  char *p = (char *)b.spec;
  while (*p) {
    if (o->replan_count == RUN_MAX_LENGTHS)
      return df_status_errorf(DF_EINVAL, "--replan: more than %d lengths", RUN_MAX_LENGTHS);
    char *comma = strchr(p, ',');
    if (comma)
      *comma = '\0';
    DF_TRY(parse_u32("--replan length", p, 1, &o->replan_lengths[o->replan_count++]));
    if (!comma)
      break;
    p = comma + 1;
    if (!*p)
      return df_status_errorf(DF_EINVAL, "--replan: trailing ','");
  }
  return df_status_ok();
}

static df_status parse_extents(const char *text, run_options *o) {
  char buf[256];
  snprintf(buf, sizeof buf, "%s", text);
  o->extent_count = 0;
  for (char *p = buf, *next; p; p = next) {
    next = strchr(p, ',');
    if (next)
      *next++ = '\0';
    if (o->extent_count == DF_MAX_AXES)
      return df_status_errorf(DF_EINVAL, "--task-extents: more than %d extents", DF_MAX_AXES);
    DF_TRY(parse_u32("--task-extents", p, 1, &o->extents[o->extent_count++]));
  }
  return df_status_ok();
}

static df_status parse_block_dim(const char *text, run_options *o) {
  char buf[64];
  snprintf(buf, sizeof buf, "%s", text);
  char *parts[3] = {buf, NULL, NULL};
  int n = 1;
  for (char *p = buf; *p; p++)
    if (*p == ',') {
      if (n == 3)
        return df_status_errorf(DF_EINVAL, "--block-dim: '%s' has more than 3 values", text);
      *p = '\0';
      parts[n++] = p + 1;
    }
  o->block_dim[1] = o->block_dim[2] = 1;
  for (int i = 0; i < n; i++)
    DF_TRY(parse_u32("--block-dim", parts[i], 1, &o->block_dim[i]));
  if (n == 2)
    return df_status_errorf(DF_EINVAL, "--block-dim: give X or X,Y,Z, got '%s'", text);
  return df_status_ok();
}

static df_status parse_backend(const char *text, run_backend *out) {
  if (strcmp(text, "cuda") == 0)
    *out = RUN_BACKEND_CUDA;
  else if (strcmp(text, "host") == 0)
    *out = RUN_BACKEND_HOST;
  else
    return df_status_errorf(DF_EINVAL, "--backend: '%s' is not a backend (cuda or host)", text);
  return df_status_ok();
}

/* Options of one backend only: the name of the first one given. */
typedef struct backend_only {
  const char *cuda, *host;
} backend_only;

static df_status parse_backend_option(const char *a, char *v, run_options *o, backend_only *only,
                                      bool *matched) {
  *matched = true;
  if (strcmp(a, "--backend") == 0)
    return parse_backend(v, &o->backend);
  if (strcmp(a, "--handlers") == 0) {
    o->handlers = v;
    only->host = only->host ? only->host : "--handlers";
  } else if (strcmp(a, "--op-log") == 0) {
    o->op_log = v;
    only->host = only->host ? only->host : "--op-log";
  } else if (strcmp(a, "--threads") == 0) {
    DF_TRY(parse_u32(a, v, 1, &o->threads));
    if (o->threads > DF_HOST_MAX_THREADS)
      return df_status_errorf(DF_EINVAL, "--threads: %u is more than the host backend's %u",
                              o->threads, DF_HOST_MAX_THREADS);
    only->host = only->host ? only->host : "--threads";
  } else {
    *matched = false;
  }
  return df_status_ok();
}

static df_status check_backend(const run_options *o, const backend_only *only) {
  if (o->backend == RUN_BACKEND_HOST) {
    if (only->cuda)
      return df_status_errorf(DF_EINVAL,
                              "%s is for --backend=cuda; the host backend loads no kernel image "
                              "or driver (see --help)",
                              only->cuda);
    if (!o->plan)
      return df_status_errorf(DF_EINVAL, "--backend=host needs --plan (see --help)");
    if (!o->handlers)
      return df_status_errorf(DF_EINVAL,
                              "--backend=host needs --handlers FILE.so (the plan's handlers "
                              "compiled for the host)");
    return df_status_ok();
  }
  if (only->host)
    return df_status_errorf(DF_EINVAL, "%s needs --backend=host", only->host);
  if (!o->kernel || !o->plan)
    return df_status_errorf(DF_EINVAL, "--kernel and --plan are required (see --help)");
  return df_status_ok();
}

df_status run_options_parse(int argc, char **argv, run_options *o) {
  memset(o, 0, sizeof *o);
  o->iters = 1;
  o->seed = 1;
  o->policy = DF_POLICY_ROUND_ROBIN;
  o->strategy = DF_REDUCE_ALL_AT_ONCE;
  backend_only only = {NULL, NULL};
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
      o->help = true;
      return df_status_ok();
    }
    if (strncmp(arg, "--", 2) != 0)
      return df_status_errorf(DF_EINVAL, "unexpected argument '%s'", arg);
    /* --NAME VALUE or --NAME=VALUE */
    char a[64];
    char *v = strchr(argv[i], '=');
    size_t len = v ? (size_t)(v - arg) : strlen(arg);
    if (len >= sizeof a)
      return df_status_errorf(DF_EINVAL, "unknown option '%s' (see --help)", arg);
    memcpy(a, arg, len);
    a[len] = '\0';
    if (v)
      v++;
    if (strcmp(a, "--cost") == 0 || strcmp(a, "--repeat-check") == 0 ||
        strcmp(a, "--per-cta-shared") == 0 || strcmp(a, "--fuse") == 0) {
      if (v)
        return df_status_errorf(DF_EINVAL, "%s takes no value, got '%s'", a, arg);
      if (strcmp(a, "--cost") == 0) {
        o->cost = true;
        only.host = only.host ? only.host : "--cost";
      } else if (strcmp(a, "--repeat-check") == 0) {
        o->repeat_check = true;
        only.cuda = only.cuda ? only.cuda : "--repeat-check";
      } else if (strcmp(a, "--fuse") == 0) {
        o->fuse = true;
        only.host = only.host ? only.host : "--fuse";
      } else {
        o->per_cta_shared = true;
      }
      continue;
    }
    if (!v) {
      if (i + 1 >= argc)
        return df_status_errorf(DF_EINVAL, "%s needs a value", a);
      v = argv[++i];
    }
    bool matched;
    DF_TRY(parse_backend_option(a, v, o, &only, &matched));
    if (matched)
      continue;
    if (strcmp(a, "--kernel") == 0) {
      o->kernel = v;
      only.cuda = only.cuda ? only.cuda : "--kernel";
    } else if (strcmp(a, "--plan") == 0) {
      o->plan = v;
    } else if (strcmp(a, "--kernel-name") == 0) {
      o->kernel_name = v;
      only.cuda = only.cuda ? only.cuda : "--kernel-name";
    } else if (strcmp(a, "--driver") == 0) {
      o->driver = v;
      only.cuda = only.cuda ? only.cuda : "--driver";
    } else if (strcmp(a, "--device") == 0) {
      uint32_t d;
      DF_TRY(parse_u32(a, v, 0, &d));
      if (d > 1024)
        return df_status_errorf(DF_EINVAL, "--device: %u is not a device ordinal", d);
      o->device = (int)d;
      only.cuda = only.cuda ? only.cuda : "--device";
    } else if (strcmp(a, "--timeout-ms") == 0) {
      DF_TRY(parse_u32(a, v, 1, &o->timeout_ms));
      only.cuda = only.cuda ? only.cuda : "--timeout-ms";
    } else if (strcmp(a, "--iters") == 0 || strcmp(a, "--repeat") == 0) {
      DF_TRY(parse_u32(a, v, 1, &o->iters));
    } else if (strcmp(a, "--warmup") == 0) {
      DF_TRY(parse_u32(a, v, 0, &o->warmup));
    } else if (strcmp(a, "--block-size") == 0) {
      o->block_auto = v && strcmp(v, "auto") == 0;
      o->block_size = 0;
      if (!o->block_auto)
        DF_TRY(parse_u32(a, v, 1, &o->block_size));
    } else if (strcmp(a, "--block-dim") == 0) {
      DF_TRY(parse_block_dim(v, o));
      only.cuda = only.cuda ? only.cuda : "--block-dim";
    } else if (strcmp(a, "--seed") == 0) {
      char *end;
      errno = 0;
      o->seed = strtoull(v, &end, 0);
      if (end == v || *end || errno)
        return df_status_errorf(DF_EINVAL, "--seed: '%s' is not an integer", v);
    } else if (strcmp(a, "--tensor") == 0) {
      DF_TRY(add_binding(a, v, o->tensors, &o->tensor_count));
    } else if (strcmp(a, "--check") == 0) {
      DF_TRY(add_binding(a, v, o->checks, &o->check_count));
      DF_TRY(parse_check(&o->checks[o->check_count - 1]));
    } else if (strcmp(a, "--save") == 0 || strcmp(a, "--out") == 0) {
      DF_TRY(add_binding(a, v, o->saves, &o->save_count));
    } else if (strcmp(a, "--staging-out") == 0) {
      o->staging_out = v;
    } else if (strcmp(a, "--replan") == 0) {
      DF_TRY(parse_lengths(v, o));
    } else if (strcmp(a, "--task-extents") == 0) {
      DF_TRY(parse_extents(v, o));
    } else if (strcmp(a, "--policy") == 0) {
      DF_TRY(df_policy_parse(v, &o->policy));
      o->policy_set = true;
    } else if (strcmp(a, "--strategy") == 0) {
      DF_TRY(df_reduce_strategy_parse(v, &o->strategy));
      o->strategy_set = true;
    } else {
      return df_status_errorf(DF_EINVAL, "unknown option '%s' (see --help)", a);
    }
  }
  DF_TRY(check_backend(o, &only));
  if (o->replan_axis && !o->block_size && !o->block_auto)
    return df_status_errorf(DF_EINVAL, "--replan needs --block-size");
  if (o->block_auto && !o->replan_axis)
    return df_status_errorf(DF_EINVAL, "--block-size auto takes the block a re-plan chooses "
                                       "(a blob compiled with block-size=auto); it needs "
                                       "--replan");
  if (o->fuse && !o->replan_axis)
    return df_status_errorf(DF_EINVAL, "--fuse fuses the re-plan of --replan (a blob's "
                                       "instructions are fixed when it is written; fuse with "
                                       "df-opt --df-fuse before df-translate)");
  if (o->per_cta_shared && !o->replan_axis)
    return df_status_errorf(DF_EINVAL, "--per-cta-shared is a layout option of --replan (a "
                                       "blob's layout is fixed when it is written)");
  return df_status_ok();
}
