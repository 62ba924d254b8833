/* The plan in IR: df.plan / df.queue / df.instr / df.slot / df.comm ops at
   module level with named attributes (internal to lib/Passes). */
#ifndef DF_PLAN_IR_H
#define DF_PLAN_IR_H

#include "df/compiler.h"

/* Replace any plan ops in the module by ops describing `p`. */
df_status df_plan_to_ir(MlirOperation module, const df_plan *p);

/* Read the plan ops back (the module's program provides types and stage
   names). Errors are located at the offending op. */
df_status df_plan_from_ir(MlirOperation module, df_plan **out);

/* The df.plan op of the module; error if absent or repeated. */
df_status df_plan_op(MlirOperation module, MlirOperation *out);

/* Layout options recorded on df.plan by df-layout-slots (defaults when
   absent); direct_slots points into `storage` (cap entries). */
df_status df_plan_layout_options(MlirOperation plan_op, df_layout_options *o,
                                 uint32_t *storage, uint32_t cap);

/* Set an attribute on an op. */
void df_set_attr(MlirOperation op, const char *name, MlirAttribute value);
MlirAttribute df_i64(MlirContext ctx, int64_t v);
MlirAttribute df_str(MlirContext ctx, const char *s);
MlirAttribute df_i64_array(MlirContext ctx, const uint32_t *v, uint32_t n);

#endif
