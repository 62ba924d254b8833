/* bench/overhead's manifest.txt (written by make_carry.sh): one case per
   line. Pure host code, so it is tested without a GPU
   (test/unit/test_overhead_manifest.c).
     dispatch NAME N          partial-only plan, N empty ITERs per SM
     chain NAME KIND L        L-edge chain, counting handlers
     echain NAME PLAN KIND L  NAME.ptx (empty handlers) on PLAN.dfplan
     trace NAME KIND L        traced copy (KIND dispatch or a chain kind)
     launch NAME              the launch-overhead plan
     replan NAME BLOCK LMAX   the decode-step plan the bench re-plans */
#ifndef OV_MANIFEST_H
#define OV_MANIFEST_H

#include <stdint.h>
#include <stdio.h>

#define OV_MAX_CASES 64

typedef struct ov_dispatch_case {
  char name[64];
  uint32_t per_sm;
} ov_dispatch_case;

/* plan[0] == 0: counting handlers on NAME's own plan (Out checked =
   L + 1); else empty handlers on PLAN's plan (Out must stay 0). */
typedef struct ov_chain_case {
  char name[64], kind[32], plan[64];
  uint32_t length;
} ov_chain_case;

typedef struct ov_trace_case {
  char name[64], kind[32];
  uint32_t length; /* chain: edges; dispatch: ITERs per SM */
} ov_trace_case;

typedef struct ov_manifest {
  ov_dispatch_case disp[OV_MAX_CASES];
  ov_chain_case chains[OV_MAX_CASES];
  ov_trace_case traces[OV_MAX_CASES];
  uint32_t nd, nc, nt;
  char launch[64], replan[64]; /* "" when absent */
  uint32_t replan_block, replan_lmax;
} ov_manifest;

/* Reads every line of `f` into `m`. Returns 0, or -1 with a message
   naming `path`, the line and what is wrong written to `err` (an unknown
   or malformed line, more than OV_MAX_CASES cases of one kind). */
int ov_manifest_read(FILE *f, const char *path, ov_manifest *m, FILE *err);

#endif
