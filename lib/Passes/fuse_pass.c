/* df-fuse: the fusion rule of lib/Plan (df_plan_fuse, docs/fusion.md) over
   the plan in IR. Only the `fused` flags of df.instr ops change, so every
   other plan op and the options recorded on df.plan stay as they are. */
#include <string.h>

#include "df/fuse.h"
#include "mlir-c/BuiltinAttributes.h"
#include "mlir_util.h"
#include "pass_util.h"
#include "plan_ir.h"

static df_status set_fuse_option(void *opts, const char *key, const char *value) {
  df_fuse_options *o = opts;
  if (!strcmp(key, "max-parts"))
    return df_option_u32(key, value, &o->max_parts);
  if (!strcmp(key, "no-iter"))
    return df_option_bool(key, value, &o->no_iter);
  return df_status_errorf(DF_EINVAL, "unknown option '%s'", key);
}

static df_status run_fuse(MlirOperation module, const void *options) {
  MlirOperation plan_op;
  DF_TRY(df_plan_op(module, &plan_op));
  df_plan *plan;
  DF_TRY(df_plan_from_ir(module, &plan));
  df_status st = df_plan_fuse(plan, options, NULL);
  if (df_failed(&st)) {
    df_plan_destroy(plan);
    return df_emit(mlirOperationGetLocation(plan_op), "df-fuse: %s", st.message);
  }
  MlirContext ctx = mlirOperationGetContext(module);
  uint32_t i = 0;
  for (MlirOperation op = mlirBlockGetFirstOperation(
           mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0)));
       !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
    if (!df_op_is(op, "df.instr"))
      continue;
    if (plan->instrs[i++].fused)
      df_set_attr(op, "fused", mlirBoolAttrGet(ctx, 1));
    else
      mlirOperationRemoveAttributeByName(op, mlirStringRefCreateFromCString("fused"));
  }
  df_plan_destroy(plan);
  return df_status_ok();
}

static const char fuse_anchor = 0;

df_status df_create_fuse_pass(const char *text, MlirPass *out) {
  df_fuse_options o;
  memset(&o, 0, sizeof o);
  DF_TRY(df_parse_pass_options("df-fuse", text, &o, set_fuse_option));
  if (o.max_parts == 1 || o.max_parts > DF_FUSE_MAX_PARTS)
    return df_status_errorf(DF_EINVAL, "df-fuse: option 'max-parts' must be 2..%u, got %u",
                            DF_FUSE_MAX_PARTS, o.max_parts);
  *out = df_make_pass(&fuse_anchor, "df-fuse",
                      "fuse producer/consumer instructions back to back on one CTA", run_fuse,
                      &o, sizeof o);
  return df_status_ok();
}
