/* bench/overhead's reading of the device runtime trace (df/rt_trace.h):
   per-phase medians of a traced dispatch or chain case, from the stamps
   df_rt_trace_buf holds after one launch. Pure host code (no driver). */
#ifndef OV_TRACE_H
#define OV_TRACE_H

#include <stdint.h>
#include <stdio.h>

/* What the untraced cases measured, for the check lines (NAN: not run). */
typedef struct ov_trace_ref {
  double untraced;     /* dispatch: ns per instruction (fit); chain: us per edge (fit) */
  double traced_us;    /* the traced kernel's device time (median of the timed launches) */
} ov_trace_ref;

/* Steady state: the first OV_TRACE_SKIP instructions (edges) and the
   last OV_TRACE_TAIL are left out of the medians. */
#define OV_TRACE_SKIP 4u
#define OV_TRACE_TAIL 2u

/* The trace of a dispatch case (N empty ITERs per SM): per instruction,
   decode/guard, handler, post-handler barrier, end, loop back, for every
   traced CTA below `ctas`. Returns 0, or -1 (with a message on `out`)
   when the trace does not have the expected shape. */
int ov_trace_dispatch(FILE *out, const uint64_t *buf, uint32_t ctas, uint32_t per_sm,
                      const ov_trace_ref *ref);

/* The trace of a chain case of `length` edges, kind "cluster", "hbm" or
   "hbm_in_cluster": the two CTAs that run handlers are found in the trace
   (the ITER's is the one whose first handler has no receive), the chain
   is walked edge by edge and every phase of an edge is reported, from
   the sender's END to the receiver's END. */
int ov_trace_chain(FILE *out, const uint64_t *buf, uint32_t ctas, const char *kind,
                   uint32_t length, const ov_trace_ref *ref);

#endif
