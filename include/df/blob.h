/* Plan blobs: a packed plan (and optionally the program it was planned
   from) as one versioned, checksummed little-endian byte string, plus
   readable text and JSON dumps of packed plans.

   Layout (format version 1; all integers little-endian):
     header, 32 bytes
       0  magic "DFPLAN\0\1"          8 bytes
       8  format version (1)          u32
      12  ABI version (DF_ABI_VERSION) u32
      16  header size (32)            u32
      20  section count               u32
      24  total length incl. checksum u64
     section table at offset 32, one 16-byte entry per section:
       id u32, record count u32, offset u32, length u32
     section data: ids strictly ascending, each section at the next
       16-byte boundary after the previous one (the first right after the
       table), padding bytes zero
     checksum, 8 bytes at total_length - 8, right after the last section
       padded to 16: FNV-1a 64 (offset basis 0xcbf29ce484222325, prime
       0x100000001b3) over every byte before it.
   Fixed-size sections hold `record count` records of a fixed size; the
   others hold one record (count 1) whose length is checked while
   decoding. Names and symbols are u32 byte offsets into the strings
   section (NUL-terminated, shorter than the C field they fill), so every
   record stays fixed-size and blobs stay small. Section layouts (u32
   words unless noted):
     instructions/slots/comms/args  the abi.h records, field by field
     queue_offsets/queue_lengths    sm_count words each
     input_slots/task_coords/pack_order  one word per entry
     handlers   id kind has_identity identity.operator_id identity.kind
                has_variant base.operator_id base.kind schema_version
                has_iter iter_mode iter_value has_arity arity primary 0
                name symbol (absent parts written as 0)
     operators/types  name index kind
     barriers   barrier_count slot_count comm_count ack_count
                slot_barrier[slot_count] comm_barrier[comm_count]
                comm_phase[comm_count] comm_ack[comm_count]
     launch     the 24 u32 scalars of df_launch_package in declaration
                order, needs_flag_reset, barrier_init_count,
                barrier_init_offsets[sm_count], barrier_init_lengths[sm_count],
                barrier_init_indices[barrier_init_count]
     topology   sm_count cluster_size shared_slot_bytes
                global_staging_bytes scratch_bytes primary_handler_count 0 0
     fingerprint  65 bytes: 64 lower-case hex digits and a NUL, or all 0
     strings    NUL-terminated strings
     program    see lib/Plan/blob_program.c */
#ifndef DF_BLOB_H
#define DF_BLOB_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "df/alloc.h"
#include "df/plan.h"
#include "df/program.h"
#include "df/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DF_BLOB_MAGIC "DFPLAN\0\1" /* 8 bytes, the last two 0 and 1 */
#define DF_BLOB_MAGIC_BYTES 8u
#define DF_BLOB_FORMAT_VERSION 1u
#define DF_BLOB_HEADER_BYTES 32u
#define DF_BLOB_ENTRY_BYTES 16u
#define DF_BLOB_ALIGN 16u
#define DF_BLOB_CHECKSUM_BYTES 8u

/* Section ids, in the order they appear in a blob. All but PROGRAM are
   required. */
typedef enum df_blob_section {
  DF_BLOB_SEC_INSTRUCTIONS = 1,  /* df_abi_instr records, 32 B */
  DF_BLOB_SEC_SLOTS = 2,         /* df_abi_slot records, 32 B */
  DF_BLOB_SEC_COMMS = 3,         /* df_abi_comm records, 48 B */
  DF_BLOB_SEC_ARGS = 4,          /* df_abi_args records, 64 B */
  DF_BLOB_SEC_QUEUE_OFFSETS = 5, /* u32 per SM */
  DF_BLOB_SEC_QUEUE_LENGTHS = 6, /* u32 per SM */
  DF_BLOB_SEC_INPUT_SLOTS = 7,   /* u32 slot ids */
  DF_BLOB_SEC_TASK_COORDS = 8,   /* u32 coordinates */
  DF_BLOB_SEC_PACK_ORDER = 9,    /* u32 plan instruction id per instruction */
  DF_BLOB_SEC_HANDLERS = 10,     /* 72 B: 16 words, name, symbol */
  DF_BLOB_SEC_OPERATORS = 11,    /* 12 B: name, handler id, kind */
  DF_BLOB_SEC_TYPES = 12,        /* 12 B: name, index, kind */
  DF_BLOB_SEC_BARRIERS = 13,     /* barrier allocation */
  DF_BLOB_SEC_LAUNCH = 14,       /* launch package incl. barrier-init lists */
  DF_BLOB_SEC_TOPOLOGY = 15,     /* topology and plan-wide byte totals */
  DF_BLOB_SEC_FINGERPRINT = 16,  /* 65 bytes: hex SHA-256 + NUL, or empty */
  DF_BLOB_SEC_STRINGS = 17,      /* the string table */
  DF_BLOB_SEC_PROGRAM = 18,      /* optional: the df_program description */
  DF_BLOB_SEC_LAST = DF_BLOB_SEC_PROGRAM
} df_blob_section;

/* Name of a section id ("instructions", "slots", ...); "unknown" for any
   other value. */
const char *df_blob_section_name(uint32_t id);

/* Serialise a packed plan, and `prog` when non-NULL, into a new blob
   allocated with `a` (NULL: default allocator; free it with the same).
   Fails with DF_EINVAL when the packed plan's counts and arrays are not
   self-consistent enough to encode (NULL array with a non-zero count,
   barrier/launch counts that disagree with the record counts). */
df_status df_blob_write(const df_packed *k, const df_program *prog,
                        const df_allocator *a, uint8_t **bytes, size_t *len);

/* Parse and validate a blob. Never reads outside [bytes, bytes+len) and
   never trusts a field before checking it: container (magic, versions,
   header and table sizes, section order, alignment, overlap, padding,
   checksum), record counts vs lengths, and every index, range and enum
   of the records (see blob_read.c). On success *out is a new df_packed
   (allocated with `a`, destroy with df_packed_destroy) and, when
   prog_out is non-NULL, *prog_out the embedded program or NULL if the
   blob has none. Errors are DF_EFORMAT with a message naming the
   section, record, field and rule, e.g. "plan blob: comm 3: dst_slot_id
   9 out of range (7 slots)"; DF_ENOMEM when allocation fails. */
df_status df_blob_read(const uint8_t *bytes, size_t len, const df_allocator *a,
                       df_packed **out, df_program **prog_out);

/* FNV-1a 64 of `len` bytes: the blob checksum function. */
uint64_t df_blob_checksum(const uint8_t *bytes, size_t len);

/* Recompute and store the checksum of a patched blob in its last 8
   bytes (tools and tests that edit blobs; the fuzzer). Fails when len is
   shorter than a header plus checksum. */
df_status df_blob_reseal(uint8_t *bytes, size_t len);

/* Readable, line-oriented dump of a packed plan for FileCheck: header
   (abi_version, topology, totals), every record with its field names,
   queues, input slots, task coordinates, pack order, handler, operator
   and type tables, barrier allocation, launch package (one field=value
   per line) and fingerprint. The sentinel prints as `S`. The format is
   stable: new fields are appended to the end of lines. */
df_status df_packed_dump_text(const df_packed *k, FILE *out);

/* One JSON object with the reference's key names (abi_version,
   operator_table, operator_kinds, handler_identities,
   handler_variant_keys, intermediate_type_table, queue_offsets, ...,
   instructions/slots/comms/args keyed by the abi.h field names,
   barrier_allocation, launch_package, fingerprint). The sentinel is
   written as 4294967295. */
df_status df_packed_dump_json(const df_packed *k, FILE *out);

#ifdef __cplusplus
}
#endif

#endif
