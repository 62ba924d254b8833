/* The cooperative scheduler: visits the CTAs in order (or reverse) and
   steps each as far as it can (or `quantum` steps). A full pass without
   progress while some CTA is unfinished is a deadlock. Deterministic:
   the same plan and options give the same op log. */
#include "host_internal.h"

static df_status step_limit(hb_run *r) {
  return hb_fail(r, DF_HOST_DIAG_STEP_LIMIT, hb_site_none(),
                 "host run stopped after max_steps = %llu scheduler steps with CTAs unfinished",
                 (unsigned long long)r->o.max_steps);
}

/* Run one CTA for a turn; *progress is set when it moved. */
static df_status turn(hb_run *r, hb_cta *c, bool *progress) {
  uint32_t ran = 0;
  while (c->phase != HB_PH_DONE) {
    if (r->o.max_steps && r->steps >= r->o.max_steps)
      return step_limit(r);
    hb_step_result res;
    DF_TRY(hb_step(r, c, &res));
    if (res != HB_STEP_PROGRESS)
      break;
    *progress = true;
    r->steps++;
    if (r->o.quantum && ++ran >= r->o.quantum)
      break;
  }
  return df_status_ok();
}

df_status hb_schedule(hb_run *r) {
  uint32_t n = r->cta_count;
  for (;;) {
    bool progress = false, all_done = true;
    for (uint32_t t = 0; t < n; t++) {
      hb_cta *c = &r->ctas[r->o.reverse ? n - 1 - t : t];
      DF_TRY(turn(r, c, &progress));
      if (c->phase != HB_PH_DONE)
        all_done = false;
    }
    if (all_done)
      return df_status_ok();
    if (!progress)
      return hb_deadlock(r);
  }
}
