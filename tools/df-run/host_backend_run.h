/* df-run --backend=host: the plan blob runs on the CPU through
   df_host_run (include/df/host_backend.h) with handlers from a
   host-compiled shared object; no CUDA driver is loaded. */
#ifndef DF_RUN_HOST_BACKEND_RUN_H
#define DF_RUN_HOST_BACKEND_RUN_H

#include "options.h"

/* Load the blob (and --replan it), resolve --handlers, bind the tensors
   as host buffers, run --warmup + --iters times, write --op-log and print
   --cost of the last run, then --check, --save and --staging-out.
   Returns df-run's exit status (RUN_EXIT_*); a diagnosed run prints the
   diagnosis report and returns RUN_EXIT_DIAGNOSIS. */
int host_backend_run(const run_options *o);

#endif
