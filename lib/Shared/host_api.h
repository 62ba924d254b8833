/* libdf.so: the host backend (include/df/host_backend.h) behind one call
   the Python bindings make through ctypes: run a packed plan with the
   handlers of a host-compiled shared object and hand back the run's
   statistics, diagnosis, op log and cost estimate as texts. */
#ifndef DF_SHARED_HOST_API_H
#define DF_SHARED_HOST_API_H

#include <stdbool.h>
#include <stdint.h>

#include "df/abi.h"
#include "df/plan.h"
#include "df/status.h"

typedef struct df_shared_host_run_options {
  uint32_t threads;    /* threads per virtual CTA; 0 = 1 */
  uint32_t block_size; /* the plan's range block size; 0 = 1 */
  bool op_log;         /* return the op log as text */
  bool cost;           /* return the cost estimate as text */
  /* Handler workspace per virtual CTA (docs/workspace.md) for libraries
     that do not carry df_handler_workspace_bytes (built without
     df-translate); the larger of the two is used. */
  uint32_t workspace_bytes;
} df_shared_host_run_options;

/* What a run leaves behind. The texts are malloc'ed (NULL when not asked
   for or not produced); free them with df_shared_free. Filled on failure
   too: `report` then holds the host backend's diagnosis. */
typedef struct df_shared_host_run_info {
  uint64_t steps;
  uint32_t op_count;
  uint32_t diag_kind; /* df_host_diag_kind */
  double makespan_cycles;
  char *report;
  char *op_log;
  char *cost;
} df_shared_host_run_info;

/* dlopen `handlers_path`, resolve every handler of `k` (its packed symbol
   dataflow_handler_<id>_<name>, else the variant's specialised name, else
   the operator name), run the plan once with df_host_run over the tensor
   records (host pointers), and dlclose. */
df_status df_shared_host_run(const df_packed *k, const char *handlers_path,
                             const df_abi_tensor_arg *tensors, uint32_t tensor_count,
                             const df_shared_host_run_options *o,
                             df_shared_host_run_info *out);

/* Release the texts of `info` and zero it. NULL-safe. */
void df_shared_host_run_info_free(df_shared_host_run_info *info);

#endif
