/* df-verify: every semantic rule of a df module, each a located error. */
#include <string.h>

#include "df/compiler.h"
#include "mlir_util.h"
#include "pass_util.h"

typedef struct stray_check {
  df_status status;
} stray_check;

static bool is_stage_op(MlirOperation op) {
  return df_op_is(op, "df.partial") || df_op_is(op, "df.map") || df_op_is(op, "df.reshared") ||
         df_op_is(op, "df.reduce") || df_op_is(op, "df.finalize");
}

/* Stage ops belong in a program function; anywhere else they are dead. */
static MlirWalkResult find_stray(MlirOperation op, void *user) {
  stray_check *c = user;
  if (!is_stage_op(op))
    return MlirWalkResultAdvance;
  MlirOperation parent = mlirOperationGetParentOperation(op);
  if (df_op_is(parent, "func.func") && !mlirAttributeIsNull(df_op_attr(parent, "df.task_domain")))
    return MlirWalkResultAdvance;
  c->status = df_emit(mlirOperationGetLocation(op),
                      "'%s' must be inside a program function (a func.func with "
                      "df.task_domain)",
                      mlirIdentifierStr(mlirOperationGetName(op)).data);
  return MlirWalkResultInterrupt;
}

static df_status verify_module(MlirOperation module, const void *options) {
  (void)options;
  stray_check c = {df_status_ok()};
  mlirOperationWalk(module, find_stray, &c, MlirWalkPreOrder);
  DF_TRY(c.status);
  df_program *p;
  DF_TRY(df_program_from_module(module, NULL, NULL, &p));
  df_program_destroy(p);
  return df_status_ok();
}

static const char verify_anchor = 0;

MlirPass df_create_verify_pass(void) {
  return df_make_pass(&verify_anchor, "df-verify",
                      "check every rule of the df dialect and the program model",
                      verify_module, NULL, 0);
}
