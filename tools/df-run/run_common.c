#include "run_common.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "npy.h"

df_status run_tensors_find(const run_tensors *t, const char *opt, const char *name,
                           uint32_t *out) {
  for (uint32_t i = 0; i < t->count; i++)
    if (strcmp(t->names[i], name) == 0) {
      *out = i;
      return df_status_ok();
    }
  char *end;
  errno = 0;
  unsigned long v = strtoul(name, &end, 10);
  if (end != name && !*end && !errno && v < t->count) {
    *out = (uint32_t)v;
    return df_status_ok();
  }
  char list[512] = "";
  size_t used = 0;
  for (uint32_t i = 0; i < t->count && used < sizeof list; i++)
    used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "",
                             t->names[i]);
  return df_status_errorf(DF_EINVAL, "%s: no tensor argument '%s' (the plan's tensors: %s)", opt,
                          name, t->count ? list : "none");
}

df_status run_tensors_name(run_tensors *t, const df_program *prog, const run_options *o) {
  if (prog) {
    uint32_t n = df_program_tensor_args(prog, t->names, RUN_MAX_TENSORS);
    if (n > RUN_MAX_TENSORS)
      return df_status_errorf(DF_EUNSUPPORTED, "the program has %u tensor arguments, df-run "
                                               "binds at most %d",
                              n, RUN_MAX_TENSORS);
    t->count = n;
    return df_status_ok();
  }
  uint32_t n = 0;
  for (uint32_t i = 0; i < o->tensor_count; i++) {
    char *end;
    unsigned long v = strtoul(o->tensors[i].name, &end, 10);
    if (end == o->tensors[i].name || *end || v >= RUN_MAX_TENSORS)
      return df_status_errorf(DF_EINVAL,
                              "--tensor %s: the plan has no program, name tensors by index "
                              "(0..%d)",
                              o->tensors[i].name, RUN_MAX_TENSORS - 1);
    if (v + 1 > n)
      n = (uint32_t)v + 1;
  }
  t->count = n;
  for (uint32_t i = 0; i < n; i++) {
    snprintf(t->index_names[i], sizeof t->index_names[i], "%u", i);
    t->names[i] = t->index_names[i];
  }
  return df_status_ok();
}

df_status run_tensors_load(run_tensors *t, const run_options *o, bool has_program) {
  for (uint32_t b = 0; b < o->tensor_count; b++) {
    uint32_t i;
    DF_TRY(run_tensors_find(t, "--tensor", o->tensors[b].name, &i));
    if (t->bound[i])
      return df_status_errorf(DF_EINVAL, "--tensor: tensor '%s' is bound twice", t->names[i]);
    host_tensor *h = &t->host[i];
    DF_TRY(host_tensor_parse(t->names[i], o->tensors[b].spec, o->seed, h));
    t->bound[i] = true;
    DF_TRY(host_tensor_fill(h));
    char what[1200];
    host_tensor_describe(h, what, sizeof what);
    printf("df-run: tensor %s: %s\n", t->names[i], what);
  }
  for (uint32_t i = 0; i < t->count && has_program; i++)
    if (!t->bound[i])
      return df_status_errorf(DF_EINVAL, "tensor '%s' is not bound (use --tensor %s=SPEC)",
                              t->names[i], t->names[i]);
  return df_status_ok();
}

void run_tensors_free(run_tensors *t) {
  for (uint32_t i = 0; i < RUN_MAX_TENSORS; i++)
    host_tensor_free(&t->host[i]);
}

static void shape_text(uint32_t ndim, const int64_t *shape, char *buf, size_t cap) {
  size_t used = (size_t)snprintf(buf, cap, ndim ? "" : "scalar");
  for (uint32_t i = 0; i < ndim && used < cap; i++)
    used += (size_t)snprintf(buf + used, cap - used, "%s%lld", i ? "x" : "",
                             (long long)shape[i]);
}

static bool float_dtype(df_dtype d) { return d >= DF_DTYPE_FLOAT16 && d <= DF_DTYPE_FLOAT64; }

/* The reference of --check: a .npy file (same shape; the same dtype, or
   another float width for a float tensor) or raw bytes of the tensor's
   dtype and size. */
static df_status load_reference(const run_binding *b, const host_tensor *h, uint8_t **ref,
                                df_dtype *dtype) {
  *ref = NULL;
  *dtype = h->dtype;
  if (!npy_is_path(b->spec)) {
    size_t len;
    df_status s = read_whole_file(b->spec, ref, &len);
    if (s.code != DF_OK)
      return df_status_wrap(s, "--check");
    if (len != h->bytes) {
      free(*ref);
      *ref = NULL;
      return df_status_errorf(DF_EINVAL,
                              "--check %s: reference '%s' has %zu bytes, the tensor %zu",
                              b->name, b->spec, len, h->bytes);
    }
    return df_status_ok();
  }
  npy_header nh;
  char prefix[DF_NAME_MAX + 16];
  snprintf(prefix, sizeof prefix, "--check %s", b->name);
  df_status s = npy_read(b->spec, &nh, ref);
  if (s.code != DF_OK)
    return df_status_wrap(s, prefix);
  bool same_shape = nh.ndim == h->ndim;
  for (uint32_t d = 0; same_shape && d < nh.ndim; d++)
    same_shape = nh.shape[d] == h->shape[d];
  char want[128], got[128];
  shape_text(h->ndim, h->shape, want, sizeof want);
  shape_text(nh.ndim, nh.shape, got, sizeof got);
  if (!same_shape)
    s = df_status_errorf(DF_EINVAL, "--check %s: reference '%s' has shape %s, the tensor %s",
                         b->name, b->spec, got, want);
  else if (nh.dtype != h->dtype && !(float_dtype(nh.dtype) && float_dtype(h->dtype)))
    s = df_status_errorf(DF_EINVAL,
                         "--check %s: reference '%s' is %s, the tensor %s (a float tensor may "
                         "have a float reference of another width; other dtypes must match)",
                         b->name, b->spec, df_dtype_name(nh.dtype), df_dtype_name(h->dtype));
  if (s.code != DF_OK) {
    free(*ref);
    *ref = NULL;
    return s;
  }
  *dtype = nh.dtype;
  return df_status_ok();
}

static df_status check_one(run_tensors *t, const run_binding *b, uint32_t i, int *failed) {
  host_tensor *h = &t->host[i];
  uint8_t *ref;
  df_dtype ref_dtype;
  DF_TRY(load_reference(b, h, &ref, &ref_dtype));
  compare_result cr;
  df_status s = host_tensor_compare(h, h->data, ref, ref_dtype, b->rtol, b->atol, &cr);
  free(ref);
  DF_TRY(s);
  if (cr.mismatches) {
    *failed = 1;
    printf("df-run: check %s: FAILED: %zu of %zu elements outside rtol %g atol %g (first at %zu; "
           "max abs err %g, max rel err %g, rel L2 err %g)\n",
           b->name, cr.mismatches, cr.elements, b->rtol, b->atol, cr.first_mismatch, cr.max_abs,
           cr.max_rel, cr.rel_l2);
  } else {
    printf("df-run: check %s: ok (%zu elements, max abs err %g, max rel err %g, rel L2 err "
           "%g)\n",
           b->name, cr.elements, cr.max_abs, cr.max_rel, cr.rel_l2);
  }
  return df_status_ok();
}

/* Fetch tensor i once. */
static df_status fetch_once(run_fetch_fn fetch, void *user, uint32_t i, bool *fetched) {
  if (fetched[i])
    return df_status_ok();
  DF_TRY(fetch(user, i));
  fetched[i] = true;
  return df_status_ok();
}

df_status run_tensors_outputs(run_tensors *t, const run_options *o, run_fetch_fn fetch,
                              void *user, int *failed) {
  bool fetched[RUN_MAX_TENSORS] = {false};
  for (uint32_t c = 0; c < o->check_count; c++) {
    uint32_t i;
    DF_TRY(run_tensors_find(t, "--check", o->checks[c].name, &i));
    if (!t->bound[i])
      return df_status_errorf(DF_EINVAL, "--check %s: the tensor is not bound", t->names[i]);
    DF_TRY(fetch_once(fetch, user, i, fetched));
    DF_TRY(check_one(t, &o->checks[c], i, failed));
  }
  for (uint32_t c = 0; c < o->save_count; c++) {
    uint32_t i;
    DF_TRY(run_tensors_find(t, "--save", o->saves[c].name, &i));
    if (!t->bound[i])
      return df_status_errorf(DF_EINVAL, "--save %s: the tensor is not bound", t->names[i]);
    DF_TRY(fetch_once(fetch, user, i, fetched));
    const host_tensor *h = &t->host[i];
    if (npy_is_path(o->saves[c].spec))
      DF_TRY(npy_write(o->saves[c].spec, h->dtype, h->ndim, h->shape, h->data, h->bytes));
    else
      DF_TRY(write_whole_file(o->saves[c].spec, h->data, h->bytes));
    printf("df-run: saved %s to %s\n", t->names[i], o->saves[c].spec);
  }
  return df_status_ok();
}

void run_replan_options(const run_options *o, df_schedule_options *so) {
  *so = df_schedule_options_default();
  so->topology.sm_count = 0; /* the base plan's */
  so->block_size = o->block_size;
  so->range_count = 1;
  so->ranges[0].axis = o->replan_axis;
  so->ranges[0].count = o->replan_count;
  so->ranges[0].lengths = o->replan_lengths;
  so->extent_count = o->extent_count;
  memcpy(so->extents, o->extents, sizeof so->extents);
  so->policy = o->policy;
  so->strategy = o->strategy;
}

df_status run_replan_choices(const run_options *o, const df_program *prog) {
  bool split = prog && prog->split_auto;
  if (split && !o->block_auto)
    return df_status_errorf(DF_EINVAL,
                            "--replan: the plan was compiled with block-size=auto, which "
                            "re-plans repeat (choosing the block for the new lengths); pass "
                            "--block-size auto, not %u",
                            o->block_size);
  if (!split && o->block_auto)
    return df_status_errorf(DF_EINVAL, "--block-size auto: the plan was not compiled with "
                                       "block-size=auto; give the block size");
  if (split && (o->policy_set || o->strategy_set))
    return df_status_errorf(DF_EINVAL,
                            "--replan: the plan was compiled with block-size=auto (round_robin "
                            "all_at_once, placement chosen), which re-plans repeat; --policy / "
                            "--strategy cannot override it");
  if (!prog || (!prog->transfer_tile_bytes && !prog->memory_auto && !split))
    return df_status_ok();
  if (prog->memory_auto && (o->policy_set || o->strategy_set))
    return df_status_errorf(DF_EINVAL,
                            "--replan: the plan was compiled with reduce-strategy=auto (shared "
                            "memory limit %u bytes, from policy %s), which re-plans repeat; "
                            "--policy / --strategy cannot override it",
                            prog->shared_memory_limit,
                            df_policy_name((df_policy)prog->auto_policy));
  printf("df-run: re-plan repeats transfer_tile_bytes=%u", prog->transfer_tile_bytes);
  if (prog->memory_auto)
    printf(" reduce-strategy=auto shared_memory_limit=%u policy=%s", prog->shared_memory_limit,
           df_policy_name((df_policy)prog->auto_policy));
  if (split)
    printf(" block-size=auto");
  printf("\n");
  return df_status_ok();
}

void run_replan_block(run_options *o, uint32_t chosen) {
  if (!o->block_auto)
    return;
  o->block_size = chosen;
  printf("df-run: re-plan chose block_size %u\n", chosen);
}

void run_replan_pack_options(const run_options *o, df_pack_options *po) {
  memset(po, 0, sizeof *po);
  po->skip_fingerprint = true; /* run-time plans need none */
  po->layout.per_cta_shared = o->per_cta_shared;
}

double run_now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int compare_doubles(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

void run_print_timings(double *t, uint32_t n, uint32_t warmup, const char *one,
                       const char *many, const char *what) {
  qsort(t, n, sizeof *t, compare_doubles);
  double sum = 0;
  for (uint32_t i = 0; i < n; i++)
    sum += t[i];
  double median = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
  printf("df-run: %u %s (%u warm-up, %s): min %.1f us, median %.1f us, mean %.1f us, max %.1f "
         "us\n",
         n, n == 1 ? one : many, warmup, what, t[0], median, sum / n, t[n - 1]);
}
