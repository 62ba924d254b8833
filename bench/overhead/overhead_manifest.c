/* bench/overhead's manifest reader (overhead_manifest.h). */
#include "overhead_manifest.h"

#include <stdbool.h>
#include <string.h>

/* Whether `line` is exactly `n` fields of sscanf format `fmt` (no more). */
#define SCAN(n, fmt, ...) (sscanf(line, fmt " %1s", __VA_ARGS__, extra) == (n))

static int too_many(FILE *err, const char *path, uint32_t no, const char *what) {
  fprintf(err, "overhead_bench: %s:%u: more than %u %s cases\n", path, no, OV_MAX_CASES, what);
  return -1;
}

/* One chain case (plan "" for a counting chain); false when full. */
static bool add_chain(ov_manifest *m, const char *name, const char *plan, const char *kind,
                      uint32_t length) {
  if (m->nc == OV_MAX_CASES)
    return false;
  ov_chain_case *c = &m->chains[m->nc++];
  snprintf(c->name, sizeof c->name, "%s", name);
  snprintf(c->plan, sizeof c->plan, "%s", plan);
  snprintf(c->kind, sizeof c->kind, "%s", kind);
  c->length = length;
  return true;
}

int ov_manifest_read(FILE *f, const char *path, ov_manifest *m, FILE *err) {
  memset(m, 0, sizeof *m);
  char line[512];
  for (uint32_t no = 1; fgets(line, sizeof line, f); no++) {
    char kind[32], name[64], sub[32], plan[64], extra[2];
    uint32_t v = 0, w = 0;
    if (sscanf(line, "%31s", kind) != 1)
      continue; /* blank line */
    if (!strcmp(kind, "dispatch") && SCAN(2, "dispatch %63s %u", name, &v)) {
      if (m->nd == OV_MAX_CASES)
        return too_many(err, path, no, "dispatch");
      snprintf(m->disp[m->nd].name, sizeof m->disp[m->nd].name, "%s", name);
      m->disp[m->nd++].per_sm = v;
    } else if (!strcmp(kind, "chain") && SCAN(3, "chain %63s %31s %u", name, sub, &v)) {
      if (!add_chain(m, name, "", sub, v))
        return too_many(err, path, no, "chain");
    } else if (!strcmp(kind, "echain") &&
               SCAN(4, "echain %63s %63s %31s %u", name, plan, sub, &v)) {
      if (!add_chain(m, name, plan, sub, v))
        return too_many(err, path, no, "chain");
    } else if (!strcmp(kind, "trace") && SCAN(3, "trace %63s %31s %u", name, sub, &v)) {
      if (m->nt == OV_MAX_CASES)
        return too_many(err, path, no, "trace");
      ov_trace_case *t = &m->traces[m->nt++];
      snprintf(t->name, sizeof t->name, "%s", name);
      snprintf(t->kind, sizeof t->kind, "%s", sub);
      t->length = v;
    } else if (!strcmp(kind, "launch") && SCAN(1, "launch %63s", name)) {
      snprintf(m->launch, sizeof m->launch, "%s", name);
    } else if (!strcmp(kind, "replan") && SCAN(3, "replan %63s %u %u", name, &v, &w)) {
      snprintf(m->replan, sizeof m->replan, "%s", name);
      m->replan_block = v;
      m->replan_lmax = w;
    } else {
      line[strcspn(line, "\n")] = 0;
      fprintf(err, "overhead_bench: %s:%u: unknown or malformed line: %s\n", path, no, line);
      return -1;
    }
  }
  return 0;
}
