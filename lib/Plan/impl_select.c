/* Choosing an implementation for one call (the rules of df/impl.h). */
#include <stdio.h>
#include <string.h>

#include "df/impl.h"

static df_arch target_arch(const df_call_facts *f) {
  return f->arch == DF_ARCH_ANY ? DF_ARCH_SM90A : f->arch;
}

static df_arity_class arity_class(uint32_t n) {
  return n == 1 ? DF_ARITY_PASSTHROUGH : n == 2 ? DF_ARITY_BINARY : DF_ARITY_GENERIC;
}

static bool region_applies(const df_impl *im, const df_call_facts *f) {
  if (im->dtype != DF_DTYPE_INVALID && im->dtype != f->dtype)
    return false;
  if (im->general)
    return true;
  if (im->iter == DF_IMPL_ITER_TILES && !(f->has_range && f->tiles == im->iter_value))
    return false;
  if (im->iter == DF_IMPL_ITER_LENGTH && !(f->has_range && f->length == im->iter_value))
    return false;
  if (im->has_arity && !(f->has_arity && f->arity > 0 && arity_class(f->arity) == im->arity))
    return false;
  return true;
}

static bool arch_ok(const df_impl *im, const df_call_facts *f) {
  return im->min_arch == DF_ARCH_ANY || im->min_arch <= target_arch(f);
}

bool df_impl_applies(const df_impl *im, const df_call_facts *f) {
  return arch_ok(im, f) && region_applies(im, f);
}

/* "instruction 7: range length 300, 3 tiles, arity 2, dtype float16, arch sm_90" */
static void describe_call(const df_call_facts *f, char *buf, size_t cap) {
  int n = snprintf(buf, cap, "instruction %u: ", f->instr);
  if (f->has_range)
    n += snprintf(buf + n, cap - (size_t)n, "range length %u, %u tiles, ", f->length, f->tiles);
  if (f->has_arity)
    n += snprintf(buf + n, cap - (size_t)n, "arity %u, ", f->arity);
  if (f->dtype != DF_DTYPE_INVALID)
    n += snprintf(buf + n, cap - (size_t)n, "dtype %s, ", df_dtype_name(f->dtype));
  snprintf(buf + n, cap - (size_t)n, "arch %s", df_arch_name(target_arch(f)));
}

/* "a [tiles=4] (program), b [general] (built-in)" for the candidates in
   `idx`; `why_skip` adds the architecture skip where it applies. */
static void describe_list(const df_impl *impls, const uint32_t *idx, uint32_t n,
                          const df_call_facts *f, char *buf, size_t cap) {
  size_t used = 0;
  buf[0] = '\0';
  for (uint32_t i = 0; i < n && used < cap; i++) {
    const df_impl *im = &impls[idx[i]];
    char region[128];
    df_impl_region(im, region, sizeof region);
    int w = snprintf(buf + used, cap - used, "%s'%s' [%s] (%s%s)", i ? ", " : "", im->name,
                     region, df_impl_origin_name(im->origin),
                     arch_ok(im, f) ? "" : ", needs a newer architecture");
    used += w > 0 ? (size_t)w : 0;
  }
}

df_status df_impl_select(const df_impl *impls, uint32_t count, const df_call_facts *f,
                         uint32_t *chosen) {
  *chosen = DF_SENTINEL;
  bool replaced = false;
  for (uint32_t i = 0; i < count; i++)
    replaced |= impls[i].origin == DF_IMPL_REPLACEMENT && strcmp(impls[i].op, f->op) == 0;
  uint32_t cand[64], ncand = 0, spec[2], nspec = 0, gen[2], ngen = 0;
  for (uint32_t i = 0; i < count; i++) {
    const df_impl *im = &impls[i];
    if (strcmp(im->op, f->op) != 0 || (replaced && im->origin != DF_IMPL_REPLACEMENT))
      continue;
    if (ncand == 64)
      return df_status_errorf(DF_EUNSUPPORTED,
                              "operator '%s' has more than 64 implementations", f->op);
    cand[ncand++] = i;
    if (!df_impl_applies(im, f))
      continue;
    if (im->general) {
      if (ngen < 2)
        gen[ngen] = i;
      ngen++;
    } else {
      if (nspec < 2)
        spec[nspec] = i;
      nspec++;
    }
  }
  if (ncand == 0)
    return df_status_ok();
  char call[192], list[320];
  describe_call(f, call, sizeof call);
  const uint32_t *pair = nspec >= 2 ? spec : ngen >= 2 && nspec == 0 ? gen : NULL;
  if (pair) {
    describe_list(impls, pair, 2, f, list, sizeof list);
    return df_status_errorf(DF_EINVAL,
                            "dispatch is ambiguous for operator '%s' (%s): %s both serve "
                            "this call; narrow one region",
                            f->op, call, list);
  }
  if (nspec == 1 || ngen == 1) {
    *chosen = nspec == 1 ? spec[0] : gen[0];
    return df_status_ok();
  }
  describe_list(impls, cand, ncand, f, list, sizeof list);
  if (replaced)
    return df_status_errorf(DF_EINVAL,
                            "the kernel supplied for operator '%s' does not serve this call "
                            "(%s); supplied: %s; a replacement is never stood in for by the "
                            "program's or df's own implementations",
                            f->op, call, list);
  return df_status_errorf(DF_EINVAL,
                          "no implementation serves this call to operator '%s' (%s); "
                          "candidates: %s",
                          f->op, call, list);
}
