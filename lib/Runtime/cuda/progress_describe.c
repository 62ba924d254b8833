/* Readable lines for the watchdog's per-CTA progress, against the plan
   image the executable uploaded (its host copy). */
#include <stdio.h>
#include <string.h>

#include "internal.h"

const char *df_rt_phase_name(uint32_t phase) {
  static const char *const names[DF_PHASE_COUNT] = {
      "not started", "startup",     "source_guard", "cluster_recv", "hbm_recv",  "hbm_bulk",
      "handler",     "cluster_send", "hbm_send",    "finish",       "done",
  };
  return phase < DF_PHASE_COUNT ? names[phase] : "unknown";
}

static const char *opcode_name(uint32_t op) {
  static const char *const names[] = {"exit",     "iter",         "reduce",
                                      "finalize", "cluster_sync", "pool"};
  return op < sizeof names / sizeof names[0] ? names[op] : "unknown";
}

static const void *section(const df_rt_executable *e, int s) {
  return e->plan_host + e->sections[s];
}

/* "(hbm_recv slot 1 -> 3, flag 3 >= epoch 7)" or the cluster form; the
   epoch is the one the CTA reported waiting for (`epoch`), else the
   record's. */
static void describe_comm(const df_rt_executable *e, uint32_t index, const uint32_t *epoch,
                          char *buf, size_t cap) {
  if (index >= e->launch.comm_count) {
    snprintf(buf, cap, "(no such comm: the plan has %u)", e->launch.comm_count);
    return;
  }
  df_abi_comm c;
  memcpy(&c, (const df_abi_comm *)section(e, DFRT_SEC_COMMS) + index, sizeof c);
  df_abi_slot dst;
  memset(&dst, 0xFF, sizeof dst);
  if (c.dst_slot_id < e->launch.slot_count)
    memcpy(&dst, (const df_abi_slot *)section(e, DFRT_SEC_SLOTS) + c.dst_slot_id, sizeof dst);
  const char *kind = df_comm_kind_name((df_comm_kind)c.kind);
  if (c.kind == DF_COMM_HBM_SEND || c.kind == DF_COMM_HBM_RECV ||
      c.kind == DF_COMM_HBM_RECV_ISSUE || c.kind == DF_COMM_HBM_RECV_WAIT) {
    uint32_t flag = c.flag_index != DF_SENTINEL ? c.flag_index : dst.flag_index;
    snprintf(buf, cap, "(%s slot %u -> %u, flag %u >= epoch %u)", kind, c.src_slot_id,
             c.dst_slot_id, flag, epoch ? *epoch : c.flag_epoch);
  } else {
    uint32_t bar = c.barrier_index != DF_SENTINEL ? c.barrier_index : dst.barrier_index;
    snprintf(buf, cap, "(%s slot %u -> %u, peer rank %u, barrier %u phase %u)", kind,
             c.src_slot_id, c.dst_slot_id, c.peer_cta_rank, bar, c.flag_epoch);
  }
}

void df_rt_executable_describe_progress(const df_rt_executable *e, const df_rt_cta_progress *p,
                                        char *buf, size_t cap) {
  if (!cap)
    return;
  buf[0] = '\0';
  if (!e || !p)
    return;
  size_t used = (size_t)snprintf(buf, cap, "CTA %u: ", p->cta);
  if (used >= cap)
    return;
  if (p->phase == DF_PHASE_NOT_STARTED) {
    snprintf(buf + used, cap - used, "reported nothing (never started: not resident?)");
    return;
  }
  bool have_plan = e->plan_host && p->cta < e->launch.sm_count;
  uint32_t qlen = 0, qoff = 0;
  if (have_plan) {
    qoff = ((const uint32_t *)section(e, DFRT_SEC_QUEUE_OFFSETS))[p->cta];
    qlen = ((const uint32_t *)section(e, DFRT_SEC_QUEUE_LENGTHS))[p->cta];
  }
  if (p->pc == DF_PROGRESS_PC_NONE) {
    used += (size_t)snprintf(buf + used, cap - used, "outside the loop");
  } else if (p->pc & DF_PROGRESS_PC_POOL) { /* docs/pool.md */
    uint32_t i = p->pc & ~DF_PROGRESS_PC_POOL;
    used += (size_t)snprintf(buf + used, cap - used, "pool instruction %u", i);
    if (used < cap && have_plan && i < e->launch.instruction_count) {
      df_abi_instr in;
      memcpy(&in, (const df_abi_instr *)section(e, DFRT_SEC_INSTRUCTIONS) + i, sizeof in);
      used += (size_t)snprintf(buf + used, cap - used, " (%s, task %u)", opcode_name(in.opcode),
                               in.task_id);
    }
  } else if (have_plan && p->pc < qlen && qoff + p->pc < e->launch.instruction_count) {
    df_abi_instr in;
    memcpy(&in, (const df_abi_instr *)section(e, DFRT_SEC_INSTRUCTIONS) + qoff + p->pc,
           sizeof in);
    used += (size_t)snprintf(buf + used, cap - used, "pc %u of %u (%s", p->pc, qlen,
                             opcode_name(in.opcode));
    if (used < cap && in.task_id != DF_SENTINEL)
      used += (size_t)snprintf(buf + used, cap - used, ", task %u", in.task_id);
    if (used < cap)
      used += (size_t)snprintf(buf + used, cap - used, ")");
  } else {
    used += (size_t)snprintf(buf + used, cap - used, "pc %u (past its queue of %u)", p->pc, qlen);
  }
  if (used >= cap)
    return;
  used += (size_t)snprintf(buf + used, cap - used, ": %s", df_rt_phase_name(p->phase));
  if (used >= cap)
    return;
  if (p->phase == DF_PHASE_HANDLER) {
    snprintf(buf + used, cap - used, " (handler %u, task %u)", p->comm, p->wait);
  } else if (p->comm != DF_PROGRESS_NONE &&
             (p->phase == DF_PHASE_CLUSTER_RECV || p->phase == DF_PHASE_HBM_RECV ||
              p->phase == DF_PHASE_HBM_BULK || p->phase == DF_PHASE_CLUSTER_SEND ||
              p->phase == DF_PHASE_HBM_SEND)) {
    char comm[160] = "";
    if (e->plan_host)
      describe_comm(e, p->comm, p->phase == DF_PHASE_HBM_RECV ? &p->wait : NULL, comm,
                    sizeof comm);
    const char *what = p->phase == DF_PHASE_HBM_SEND ? "sends" : "waits on";
    if (p->phase == DF_PHASE_HBM_RECV)
      snprintf(buf + used, cap - used, ": %s comm %u %s", what, p->comm, comm);
    else if (p->phase == DF_PHASE_HBM_SEND)
      snprintf(buf + used, cap - used, ": %s comm %u %s", what, p->comm, comm);
    else
      snprintf(buf + used, cap - used, ": %s comm %u, parity %u %s", what, p->comm, p->wait,
               comm);
  } else if (p->phase == DF_PHASE_SOURCE_GUARD) {
    snprintf(buf + used, cap - used, " (wait action %u)", p->wait);
  }
}
