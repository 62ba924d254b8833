/* Plan blob tables shared by the writer, reader and dumps; the checksum. */
#include <stddef.h>
#include <stdio.h>

#include "blob_format.h"

const char *const df_instr_field_names[DF_INSTR_WORDS] = {
    "opcode",      "handler_id", "task_id", "arg_offset",
    "comm_offset", "comm_count", "slot_id", "flags"};

const char *const df_slot_field_names[DF_SLOT_WORDS] = {
    "shared_offset", "global_offset", "bytes", "flag_index",
    "barrier_index", "owner_cta",     "flags", "reserved"};

const char *const df_comm_field_names[DF_COMM_WORDS] = {
    "kind",          "src_slot_id", "dst_slot_id", "peer_cta_rank",
    "barrier_phase", "flag_index",  "flag_epoch",  "barrier_index",
    "byte_offset",   "byte_count",  "segment_id",  "segment_count"};

const char *const df_args_field_names[DF_ARGS_WORDS] = {
    "task_id",
    "task_coord_offset",
    "task_coord_count",
    "range_begin",
    "range_end",
    "input_slot_offset",
    "input_slot_count",
    "output_slot",
    "handoff_peer_arg_offset",
    "handoff_plan_index",
    "handoff_binding_index",
    "handoff_stage_count",
    "handoff_arena_slot",
    "handoff_flags",
    "reserved0",
    "reserved1"};

#define LF(f) {#f, offsetof(df_launch_package, f)}
const df_blob_u32_field df_launch_u32_fields[] = {
    LF(abi_version),
    LF(sm_count),
    LF(cluster_size),
    LF(barrier_count),
    LF(barrier_bytes),
    LF(cluster_ack_count),
    LF(cluster_ack_barrier_bytes),
    LF(cluster_ack_pending_bytes),
    LF(hbm_recv_state_bytes),
    LF(shared_control_bytes),
    LF(shared_slot_base_offset),
    LF(shared_slot_bytes),
    LF(shared_memory_bytes),
    LF(flag_count),
    LF(flags_bytes),
    LF(global_staging_bytes),
    LF(slot_count),
    LF(comm_count),
    LF(arg_count),
    LF(instruction_count),
    LF(scratch_slot_count),
    LF(scratch_bytes),
    LF(cluster_inbox_offset),
    LF(cluster_inbox_bytes),
};
#undef LF
const uint32_t df_launch_u32_field_count =
    sizeof df_launch_u32_fields / sizeof df_launch_u32_fields[0];

static const char *const section_names[] = {
    "unknown",     "instructions", "slots",        "comms",
    "args",        "queue_offsets", "queue_lengths", "input_slots",
    "task_coords", "pack_order",   "handlers",     "operators",
    "types",       "barriers",     "launch",       "topology",
    "fingerprint", "strings",      "program"};

const char *df_blob_section_name(uint32_t id) {
  return id <= DF_BLOB_SEC_LAST ? section_names[id] : "unknown";
}

const char *df_blob_abi_opcode_name(uint32_t op) {
  static const char *const n[] = {"exit", "iter", "reduce", "finalize", "cluster_sync", "pool"};
  return op < 6 ? n[op] : "invalid";
}

const char *df_blob_iter_mode_name(uint32_t m) {
  static const char *const n[] = {"generic", "tile_count", "exact_length"};
  return m < 3 ? n[m] : "invalid";
}

const char *df_blob_arity_name(uint32_t c) {
  static const char *const n[] = {"passthrough", "binary", "generic"};
  return c < 3 ? n[c] : "invalid";
}

uint64_t df_blob_checksum(const uint8_t *bytes, size_t len) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < len; i++) {
    h ^= bytes[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

df_status df_blob_reseal(uint8_t *bytes, size_t len) {
  if (!bytes || len < DF_BLOB_HEADER_BYTES + DF_BLOB_CHECKSUM_BYTES)
    return df_status_errorf(DF_EINVAL,
                            "plan blob: %zu bytes is too short to reseal (need %u)", len,
                            DF_BLOB_HEADER_BYTES + DF_BLOB_CHECKSUM_BYTES);
  size_t body = len - DF_BLOB_CHECKSUM_BYTES;
  df_put_le64(bytes + body, df_blob_checksum(bytes, body));
  return df_status_ok();
}

uint32_t df_blob_pool_add(df_blob_buf *pool, const char *s, size_t width) {
  size_t n = strnlen(s, width - 1);
  /* Reuse an equal string; pools are small (names of one plan). */
  for (size_t at = 0; at < pool->len;) {
    const char *t = (const char *)pool->data + at;
    size_t tn = strlen(t);
    if (tn == n && memcmp(t, s, n) == 0)
      return (uint32_t)at;
    at += tn + 1;
  }
  uint32_t off = (uint32_t)pool->len;
  df_blob_buf_bytes(pool, s, n);
  df_blob_buf_zeros(pool, 1);
  return off;
}

bool df_blob_string(const df_blob_strings *t, uint32_t off, char *dst, size_t width, char *why,
                    size_t why_cap) {
  if (off >= t->len) {
    snprintf(why, why_cap, "string offset %u out of range (%u bytes of strings)", off, t->len);
    return false;
  }
  size_t avail = t->len - off;
  const uint8_t *s = t->data + off;
  const uint8_t *nul = memchr(s, 0, avail < width ? avail : width);
  if (!nul) {
    if (avail < width)
      snprintf(why, why_cap, "string at offset %u is not NUL-terminated within the string table",
               off);
    else
      snprintf(why, why_cap, "string at offset %u is longer than %zu bytes", off, width - 1);
    return false;
  }
  memset(dst, 0, width);
  memcpy(dst, s, (size_t)(nul - s));
  return true;
}
