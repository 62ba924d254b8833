/* Names of plan enumerations and their parsers. */
#include <string.h>

#include "df/plan.h"

#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))

static const char *const instr_op_names[DF_INSTR_OP_COUNT] = {
    "exit", "iter", "map", "reshared", "reduce", "reduce_update", "finalize",
    "cluster_sync"};

static const char *const comm_kind_names[] = {
    "none", "cluster_send", "cluster_recv", "hbm_send", "hbm_recv",
    "cluster_release", "hbm_recv_issue", "hbm_recv_wait"};

static const char *const role_names[DF_ROLE_COUNT] = {
    "partial", "reduced", "accumulator", "stage_output", "reshared_full",
    "cluster_inbox", "cluster_gated_inbox", "hbm_spill_inbox",
    "joint_comm_inbox", "joint_comm_outbox", "joint_prefetch_inbox"};

static int find_name(const char *const *names, size_t n, const char *name) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(names[i], name) == 0)
      return (int)i;
  return -1;
}

df_abi_opcode df_instr_op_abi(df_instr_op op) {
  switch (op) {
  case DF_INSTR_EXIT: return DF_ABI_OP_EXIT;
  case DF_INSTR_ITER:
  case DF_INSTR_MAP:
  case DF_INSTR_RESHARED: return DF_ABI_OP_ITER;
  case DF_INSTR_REDUCE:
  case DF_INSTR_REDUCE_UPDATE: return DF_ABI_OP_REDUCE;
  case DF_INSTR_FINALIZE: return DF_ABI_OP_FINALIZE;
  case DF_INSTR_CLUSTER_SYNC:
  case DF_INSTR_OP_COUNT: break;
  }
  return DF_ABI_OP_CLUSTER_SYNC;
}

const char *df_instr_op_name(df_instr_op op) {
  return (unsigned)op < DF_INSTR_OP_COUNT ? instr_op_names[op] : "invalid";
}

df_status df_instr_op_parse(const char *name, df_instr_op *out) {
  int i = find_name(instr_op_names, DF_INSTR_OP_COUNT, name);
  if (i < 0)
    return df_status_errorf(DF_EINVAL,
                            "unknown instruction opcode '%s'; expected one of: exit, iter, "
                            "map, reshared, reduce, reduce_update, finalize, cluster_sync",
                            name);
  *out = (df_instr_op)i;
  return df_status_ok();
}

const char *df_comm_kind_name(df_comm_kind k) {
  return (unsigned)k < COUNT_OF(comm_kind_names) ? comm_kind_names[k] : "invalid";
}

df_status df_comm_kind_parse(const char *name, df_comm_kind *out) {
  int i = find_name(comm_kind_names, COUNT_OF(comm_kind_names), name);
  if (i <= 0)
    return df_status_errorf(DF_EINVAL,
                            "unknown comm kind '%s'; expected one of: cluster_send, "
                            "cluster_recv, hbm_send, hbm_recv, cluster_release, "
                            "hbm_recv_issue, hbm_recv_wait",
                            name);
  *out = (df_comm_kind)i;
  return df_status_ok();
}

const char *df_slot_role_name(df_slot_role r) {
  return (unsigned)r < DF_ROLE_COUNT ? role_names[r] : "invalid";
}

df_status df_slot_role_parse(const char *name, df_slot_role *out) {
  int i = find_name(role_names, DF_ROLE_COUNT, name);
  if (i < 0)
    return df_status_errorf(DF_EINVAL, "unknown slot role '%s'", name);
  *out = (df_slot_role)i;
  return df_status_ok();
}

bool df_slot_role_communicates(df_slot_role r) {
  return r == DF_ROLE_CLUSTER_INBOX || r == DF_ROLE_CLUSTER_GATED_INBOX ||
         r == DF_ROLE_HBM_SPILL_INBOX || r == DF_ROLE_JOINT_COMM_INBOX ||
         r == DF_ROLE_JOINT_COMM_OUTBOX || r == DF_ROLE_JOINT_PREFETCH_INBOX;
}

const char *df_policy_name(df_policy p) {
  switch (p) {
  case DF_POLICY_ROUND_ROBIN: return "round_robin";
  case DF_POLICY_CLUSTER_LOCAL: return "cluster_local";
  case DF_POLICY_STAGE_GRAPH: return "stage_graph";
  }
  return "invalid";
}

const char *df_reduce_strategy_name(df_reduce_strategy s) {
  switch (s) {
  case DF_REDUCE_ALL_AT_ONCE: return "all_at_once";
  case DF_REDUCE_STREAMING: return "streaming";
  case DF_REDUCE_STREAMING_TREE: return "streaming_tree";
  case DF_REDUCE_NONE: return "none";
  }
  return "invalid";
}

df_status df_policy_parse(const char *name, df_policy *out) {
  if (strcmp(name, "round_robin") == 0)
    *out = DF_POLICY_ROUND_ROBIN;
  else if (strcmp(name, "cluster_local") == 0)
    *out = DF_POLICY_CLUSTER_LOCAL;
  else
    return df_status_errorf(DF_EINVAL,
                            "Dataflow scheduler_policy must be one of ('round_robin', "
                            "'cluster_local'), got '%s'",
                            name);
  return df_status_ok();
}

df_status df_reduce_strategy_parse(const char *name, df_reduce_strategy *out) {
  if (strcmp(name, "all_at_once") == 0)
    *out = DF_REDUCE_ALL_AT_ONCE;
  else if (strcmp(name, "streaming") == 0)
    *out = DF_REDUCE_STREAMING;
  else if (strcmp(name, "streaming_tree") == 0)
    *out = DF_REDUCE_STREAMING_TREE;
  else
    return df_status_errorf(DF_EINVAL,
                            "Dataflow reduce_strategy must be one of ('all_at_once', "
                            "'streaming', 'streaming_tree'), got '%s'",
                            name);
  return df_status_ok();
}
