/* The df program model: typed intermediates, operators (handlers) and a
   small stage graph over a task domain. Pure C; the dialect converts IR to
   this model and the scheduler consumes it. */
#ifndef DF_PROGRAM_H
#define DF_PROGRAM_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "df/alloc.h"
#include "df/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DF_NAME_MAX 64 /* names are at most 63 bytes */
#define DF_MAX_AXES 8  /* task-domain axes, dynamic ranges, task args */
#define DF_MAX_RANK 8  /* field shape rank */

/* Element types of intermediate fields (REFERENCE 1.4). */
typedef enum df_dtype {
  DF_DTYPE_INVALID = 0,
  DF_DTYPE_BOOL,
  DF_DTYPE_INT8,
  DF_DTYPE_INT16,
  DF_DTYPE_INT32,
  DF_DTYPE_INT64,
  DF_DTYPE_UINT8,
  DF_DTYPE_UINT16,
  DF_DTYPE_UINT32,
  DF_DTYPE_UINT64,
  DF_DTYPE_FLOAT16,
  DF_DTYPE_BFLOAT16,
  DF_DTYPE_FLOAT32,
  DF_DTYPE_FLOAT64,
  DF_DTYPE_FLOAT8_E4M3,
  DF_DTYPE_FLOAT8_E4M3FN,
  DF_DTYPE_FLOAT8_E4M3FNUZ,
  DF_DTYPE_FLOAT8_E5M2,
  DF_DTYPE_FLOAT8_E5M2FNUZ,
  DF_DTYPE_COUNT
} df_dtype;

/* Canonical lower-case name ("float16"); "invalid" when out of range. */
const char *df_dtype_name(df_dtype t);
/* Element bytes; 0 for DF_DTYPE_INVALID. */
uint32_t df_dtype_bytes(df_dtype t);
/* Tensor dtype code of abi.h (DF_TENSOR_DTYPE_*). */
uint32_t df_dtype_code(df_dtype t);
/* Bits per element (1 for bool). */
uint32_t df_dtype_bits(df_dtype t);
/* Parse a dtype name: canonical names, aliases half/fp16, bf16, float,
   double, case-insensitive, any `module.` prefix dropped. */
df_status df_dtype_parse(const char *name, df_dtype *out);

/* One field of an intermediate: scalar when rank is 0. */
typedef struct df_field {
  char name[DF_NAME_MAX];
  df_dtype dtype;
  uint32_t rank;
  uint32_t shape[DF_MAX_RANK];
} df_field;

/* A typed intermediate: ordered fields. */
typedef struct df_itype {
  char name[DF_NAME_MAX];
  uint32_t field_count;
  df_field *fields;
} df_itype;

/* Byte size of a slot holding `t` (REFERENCE 1.4): fields aligned to
   min(element bytes, 16), total aligned to 16; 0 if a dtype is invalid. */
uint32_t df_itype_slot_bytes(const df_itype *t);
/* Byte offset of field `field` in such a slot (same rule); DF_SENTINEL when
   out of range or a dtype is invalid. */
uint32_t df_itype_field_offset(const df_itype *t, uint32_t field);
/* Element count of a field (1 for a scalar; 0 on overflow). */
uint32_t df_field_elements(const df_field *f);

typedef enum df_stage_kind {
  DF_STAGE_MAP = 0,
  DF_STAGE_REDUCE = 1,
  DF_STAGE_RESHARED = 2,
  DF_STAGE_FINALIZE = 3,
} df_stage_kind;

typedef enum df_op_kind {
  DF_OPK_ITER = 0,
  DF_OPK_MAP = 1,
  DF_OPK_REDUCE = 2,
  DF_OPK_FINALIZE = 3,
  DF_OPK_NONE = 4,
} df_op_kind;

const char *df_stage_kind_name(df_stage_kind k);
/* "iter", "map", "reduce", "finalize" ("none" for DF_OPK_NONE). */
const char *df_op_kind_name(df_op_kind k);
/* Parse an operator kind name; error names the accepted kinds. */
df_status df_op_kind_parse(const char *name, df_op_kind *out);

typedef enum df_param_kind {
  DF_PARAM_SCALAR = 0,     /* an int32 task argument */
  DF_PARAM_TENSOR = 1,     /* an external tensor */
  DF_PARAM_INTER = 2,      /* one intermediate value */
  DF_PARAM_INTER_LIST = 3, /* a collection of intermediates (n-ary reduce) */
} df_param_kind;

/* One handler parameter in signature order. */
typedef struct df_param {
  char name[DF_NAME_MAX];
  df_param_kind kind;
  int32_t type; /* itype index for INTER / INTER_LIST, else -1 */
} df_param;

/* An operator: a handler symbol with its kind and signature. */
typedef struct df_operator {
  char name[DF_NAME_MAX];
  df_op_kind kind;
  uint32_t param_count;
  df_param *params;
  int32_t result_type; /* itype index, -1 for none */
  /* Built-in handler library the operator uses (df/impl.h), "" none. */
  char library[DF_NAME_MAX];
  /* Shared-memory workspace the handler needs per CTA
     (`df.workspace_bytes`, docs/workspace.md); 0 = none. */
  uint32_t workspace_bytes;
} df_operator;

/* A reducer is associative when it takes two intermediates (not a list). */
bool df_operator_is_associative(const df_operator *op);

/* Tensor binding: handler parameter -> external tensor name. */
typedef struct df_binding {
  char param[DF_NAME_MAX];
  char tensor[DF_NAME_MAX];
} df_binding;

/* One stage of the program. */
typedef struct df_stage {
  char name[DF_NAME_MAX];
  df_stage_kind kind;
  int32_t op;    /* operator index, -1 for reshared */
  int32_t input; /* upstream stage index, -1 for none */
  char range_axis[DF_NAME_MAX]; /* "" when none */
  uint32_t task_arg_count;
  char task_args[DF_MAX_AXES][DF_NAME_MAX];
  uint32_t binding_count;
  df_binding *bindings;
  int32_t type; /* itype the stage produces (physical), -1 for none */
  /* reshared only */
  int32_t logical_type;
  uint32_t output_arity;
  char policy[DF_NAME_MAX];
} df_stage;

/* A dynamic range: axis name -> length source name. */
typedef struct df_range_decl {
  char axis[DF_NAME_MAX];
  char source[DF_NAME_MAX];
} df_range_decl;

struct df_impl; /* df/impl.h */

/* A whole program. Owns its arrays; destroy with df_program_destroy. */
typedef struct df_program {
  df_allocator alloc;
  char name[DF_NAME_MAX];
  uint32_t axis_count;
  char axes[DF_MAX_AXES][DF_NAME_MAX];
  uint32_t range_count;
  df_range_decl ranges[DF_MAX_AXES];
  uint32_t type_count;
  df_itype *types;
  uint32_t op_count;
  df_operator *ops;
  uint32_t stage_count;
  df_stage *stages;
  /* Implementations of operators (df/impl.h): declared ones, and the
     caller's replacements once a compiled plan records them. */
  uint32_t impl_count;
  struct df_impl *impls;
  /* Target architecture implementations were selected for (a df_arch;
     0 = sm_90a), kept so run-time re-plans select the same way. */
  uint32_t select_arch;
  /* How the compiled plan was scheduled, kept so run-time re-plans
     (df_schedule_replan) schedule the same way; plan blobs carry them.
     transfer_tile_bytes: the transfer tile (0 = whole-slot transfers, else
     a multiple of 16). memory_auto: df-schedule reduce-strategy=auto, so
     a re-plan takes the first reduce strategy whose fullest CTA fits
     shared_memory_limit bytes (0 = no limit), all_at_once under
     auto_policy (a df_policy: round_robin or cluster_local) first. Without
     memory_auto the limit and policy are 0. split_auto (0 or 1; not with
     memory_auto): df-schedule block-size=auto, so a re-plan chooses the
     block size and placement again for its lengths (auto_split) with the
     default split search and cost model (df_split_search_default; the
     compile's split-* options are not recorded). */
  uint32_t transfer_tile_bytes;
  uint32_t memory_auto;
  uint32_t shared_memory_limit;
  uint32_t auto_policy;
  uint32_t split_auto;
} df_program;

/* Create an empty program (alloc may be NULL for the default). */
df_status df_program_create(const df_allocator *alloc, const char *name,
                            df_program **out);
void df_program_destroy(df_program *p);
/* Deep copy (implementations and built-in handler choices included);
   alloc may be NULL for the default. */
df_status df_program_clone(const df_program *p, const df_allocator *alloc, df_program **out);

/* Builders. Each copies its arguments and checks local rules (name
   lengths, duplicates); df_program_validate checks the whole. */
df_status df_program_add_axis(df_program *p, const char *axis);
df_status df_program_add_range(df_program *p, const char *axis,
                               const char *source);
df_status df_program_add_type(df_program *p, const char *name,
                              uint32_t field_count, const df_field *fields,
                              int32_t *index_out);
df_status df_program_add_operator(df_program *p, const char *name,
                                  df_op_kind kind, uint32_t param_count,
                                  const df_param *params, int32_t result_type,
                                  int32_t *index_out);
/* Declare that handler `name` needs a shared-memory workspace of `bytes`
   per CTA (docs/workspace.md): at most DF_WORKSPACE_MAX_BYTES (227 KiB,
   the sm_90 opt-in limit); 0 removes it. The kernel gets the largest
   workspace of the handlers its plan runs. */
df_status df_program_set_handler_workspace(df_program *p, const char *name, int64_t bytes);
/* The largest workspace of the handlers a stage of `p` calls (what the
   kernel and the host handler object are built with); 0 when none. */
uint32_t df_program_workspace_bytes(const df_program *p);
/* Adds a copy of `stage` (its bindings array is copied too). */
df_status df_program_add_stage(df_program *p, const df_stage *stage,
                               int32_t *index_out);

/* The tensor a stage binds to handler parameter `param`; NULL unbound
   (the tensor is then named like the parameter). */
const char *df_stage_binding(const df_stage *s, const char *param);

/* Look-ups by name; -1 when absent. */
int32_t df_program_find_type(const df_program *p, const char *name);
int32_t df_program_find_operator(const df_program *p, const char *name);
int32_t df_program_find_stage(const df_program *p, const char *name);

/* Whole-program rules of REFERENCE 1.1 (task axis present, canonical
   pipeline or supported stage graph, type agreement, task_args rank,
   range axes declared, reshared attributes, one stage per call, ...). */
df_status df_program_validate(const df_program *p);
/* As df_program_validate; on failure *bad_stage is the offending stage
   index, or -1 when the rule concerns the program as a whole. */
df_status df_program_validate_at(const df_program *p, int32_t *bad_stage);

/* True when the program has a reshared stage (a stage graph). */
bool df_program_is_stage_graph(const df_program *p);

/* Handler identity operator id of each stage (REFERENCE 1.5): counts
   stages with a call in order; -1 for reshared stages. */
int32_t df_program_operator_id(const df_program *p, uint32_t stage);

/* Operator kind of a stage's handler identity: the call's operator kind
   for map-kind stages, else the stage kind; DF_OPK_NONE for reshared. */
df_op_kind df_program_identity_kind(const df_program *p, uint32_t stage);

/* External tensor names in argument order (REFERENCE 7.1): first
   appearance walking stages and each call's bound tensor parameters in
   signature order. Writes up to `cap` name pointers (into the program)
   and returns the total count. */
uint32_t df_program_tensor_args(const df_program *p, const char **names,
                                uint32_t cap);

/* Index of the canonical pipeline's partial stage (stage kind map with
   an iter operator), -1 if none. */
int32_t df_program_partial_stage(const df_program *p);

/* Print the program model as text: axes, ranges, intermediates with slot
   bytes, operators, stages with handler identities, tensor argument order. */
df_status df_program_dump(const df_program *p, FILE *out);

#ifdef __cplusplus
}
#endif

#endif
