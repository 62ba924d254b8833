/* Patching a packed plan's range lengths in place (df/plan.h,
   df_packed_patch_lengths): a decode step adds a token per sequence, and
   while no task's last block outgrows the block size the schedule's
   structure (blocks, placement, slots, barriers, comms) is the one a
   re-plan would rebuild at far greater cost; only the last block's end
   moves. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "df/plan.h"

/* Not patched (the records untouched): why, for the caller's log. */
__attribute__((format(printf, 2, 3))) static void refuse(df_patch_result *r, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->reason, sizeof r->reason, fmt, ap);
  va_end(ap);
  r->patched = false;
}

/* The args record of packed instruction i. */
static df_abi_args *args_of(const df_packed *k, uint32_t i) {
  return &k->args[k->instrs[i].arg_offset / sizeof(df_abi_args)];
}

/* Why handler h's calls cannot take another extent, or NULL. */
static const char *fixed_extent(const df_handler *h) {
  if (h->has_variant && h->variant.has_iter && h->variant.iter_mode != DF_ITER_GENERIC)
    return h->variant.iter_mode == DF_ITER_TILE_COUNT ? "a tile-count variant"
                                                      : "an exact-length variant";
  return NULL;
}

df_status df_packed_last_blocks(const df_packed *k, uint32_t count, uint32_t *last,
                               df_patch_result *out) {
  if (!k || !last || !out)
    return df_status_errorf(DF_EINVAL, "patch lengths: NULL argument");
  memset(out, 0, sizeof *out);
  if (count == 0)
    return df_status_errorf(DF_EINVAL, "patch lengths: no lengths");
  for (uint32_t t = 0; t < count; t++)
    last[t] = DF_SENTINEL;
  uint32_t ranged_handler = DF_SENTINEL;
  for (uint32_t i = 0; i < k->instr_count; i++) {
    const df_abi_instr *in = &k->instrs[i];
    if (in->opcode != DF_ABI_OP_ITER || in->handler_id == DF_SENTINEL)
      continue;
    const df_abi_args *a = args_of(k, i);
    if (a->range_end <= a->range_begin)
      continue; /* a map call without a range */
    if (a->reserved1 > 1) {
      refuse(out, "instruction %u fuses %u parts: a fused ITER is not patched", i, a->reserved1);
      return df_status_ok();
    }
    if (a->task_id >= count)
      return df_status_errorf(DF_EINVAL,
                              "patch lengths: instruction %u runs task %u, but %u lengths were "
                              "given (one per task of the plan)",
                              i, a->task_id, count);
    const df_handler *h = &k->handlers[in->handler_id];
    const df_handler *base =
        &k->handlers[ranged_handler == DF_SENTINEL ? in->handler_id : ranged_handler];
    if (strcmp(h->name, base->name) != 0) {
      refuse(
          out,
          "instruction %u runs '%s', others '%s': only plans with one ranged operator are patched",
          i, h->name, base->name);
      return df_status_ok();
    }
    ranged_handler = in->handler_id;
    uint32_t *l = &last[a->task_id];
    if (*l == DF_SENTINEL || args_of(k, *l)->range_begin < a->range_begin)
      *l = i;
  }
  if (ranged_handler == DF_SENTINEL) {
    refuse(out, "the plan has no ranged ITER instruction");
    return df_status_ok();
  }
  for (uint32_t t = 0; t < count; t++)
    if (last[t] == DF_SENTINEL)
      return df_status_errorf(DF_EINVAL,
                              "patch lengths: task %u has no ranged ITER in the plan, so the "
                              "plan is not one of %u tasks",
                              t, count);
  out->patched = true;
  return df_status_ok();
}

df_status df_packed_patch_lengths_at(df_packed *k, const uint32_t *last, const uint32_t *lengths,
                                     uint32_t count, uint32_t max_last_block,
                                     df_patch_result *out) {
  if (!k || !last || !lengths || !out)
    return df_status_errorf(DF_EINVAL, "patch lengths: NULL argument");
  memset(out, 0, sizeof *out);
  if (count == 0)
    return df_status_errorf(DF_EINVAL, "patch lengths: no lengths");
  for (uint32_t t = 0; t < count; t++) {
    if (lengths[t] == 0)
      return df_status_errorf(DF_EINVAL, "patch lengths: length %u of task %u must be positive",
                              lengths[t], t);
    const uint32_t i = last[t];
    if (i >= k->instr_count || k->instrs[i].opcode != DF_ABI_OP_ITER)
      return df_status_errorf(DF_EINVAL,
                              "patch lengths: last-block index %u of task %u is not an ITER of "
                              "the plan (df_packed_last_blocks of this plan gives it)",
                              i, t);
    const df_abi_args *a = args_of(k, i);
    const char *why = fixed_extent(&k->handlers[k->instrs[i].handler_id]);
    if (why && lengths[t] != a->range_end) {
      refuse(out, "task %u's last block (instruction %u) runs %s", t, i, why);
      return df_status_ok();
    }
    if (lengths[t] <= a->range_begin) {
      refuse(out, "task %u's length %u leaves its last block (from %u) empty", t, lengths[t],
             a->range_begin);
      return df_status_ok();
    }
    if (max_last_block && lengths[t] - a->range_begin > max_last_block) {
      refuse(out, "task %u's last block would hold %u range units, more than %u", t,
             lengths[t] - a->range_begin, max_last_block);
      return df_status_ok();
    }
  }
  /* Every check passed: only now are records changed. */
  for (uint32_t t = 0; t < count; t++) {
    df_abi_args *a = args_of(k, last[t]);
    if (a->range_end != lengths[t]) {
      a->range_end = lengths[t];
      out->changed++;
    }
  }
  out->patched = true;
  if (out->changed)
    k->fingerprint[0] = '\0'; /* the records no longer hash to it */
  return df_status_ok();
}

df_status df_packed_patch_lengths(df_packed *k, const uint32_t *lengths, uint32_t count,
                                  uint32_t max_last_block, df_patch_result *out) {
  if (!k || !lengths || !out)
    return df_status_errorf(DF_EINVAL, "patch lengths: NULL argument");
  memset(out, 0, sizeof *out);
  if (count == 0)
    return df_status_errorf(DF_EINVAL, "patch lengths: no lengths");
  uint32_t *last = df_alloc(&k->alloc, sizeof(uint32_t) * count);
  if (!last)
    return df_status_errorf(DF_ENOMEM, "patch lengths: out of memory for %u tasks", count);
  df_status s = df_packed_last_blocks(k, count, last, out);
  if (s.code == DF_OK && out->patched)
    s = df_packed_patch_lengths_at(k, last, lengths, count, max_last_block, out);
  df_free(&k->alloc, last);
  if (s.code != DF_OK)
    out->patched = false;
  return s;
}
