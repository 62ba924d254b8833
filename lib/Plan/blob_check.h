/* Packed-plan validation shared by the blob reader and writer (internal). */
#ifndef DF_PLAN_BLOB_CHECK_H
#define DF_PLAN_BLOB_CHECK_H

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "blob_format.h"

#define DF_BLOB_SLOT_FLAGS                                                     \
  (DF_SLOT_FLAG_SCRATCH_BACKED | DF_SLOT_FLAG_HBM_DIRECT_GLOBAL |              \
   DF_SLOT_FLAG_CLUSTER_GATED_PUSH | DF_SLOT_FLAG_COMMUNICATE)
#define DF_BLOB_HANDOFF_FLAGS                                                  \
  (DF_HANDOFF_PRODUCER | DF_HANDOFF_CONSUMER | DF_HANDOFF_TAIL | DF_HANDOFF_DISABLED)

/* A DF_EFORMAT status with a printf message. */
df_status df_blob_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Handler, operator and type tables, barrier allocation, the launch
   package's structure (counts, barrier-init lists) and the fingerprint. */
df_status df_blob_check_tables(const df_packed *k);

/* The launch package's values derived from the records (REFERENCE 5.5);
   run after the records are known to be in bounds. */
df_status df_blob_check_launch_derived(const df_packed *k);

#endif
