/* Shared pieces of the host backend tests: float16 helpers, C handlers
   for the seed attention and MoE programs written against device.h, the
   direct CPU references they are checked against, and packed-plan edits. */
#ifndef DF_HOST_TEST_SUPPORT_H
#define DF_HOST_TEST_SUPPORT_H

#include <stdbool.h>
#include <stdint.h>

#include "df/host_backend.h"
#include "df/plan.h"

uint16_t ht_f2h(float f); /* round to nearest even */
float ht_h2f(uint16_t h);

/* AttnInter {lse: f32; o: f16[2,8]}: lse at 0, o at 4 (16 halves). */
enum { HT_ATTN_O = 16, HT_ATTN_ROW = 1 + HT_ATTN_O, HT_ATTN_OUT_TENSOR = 3 };
/* The seed attention handlers: split_kv computes the softmax partial of
   its kv range, combine the max-rescaled LSE combine of its inputs (any
   count, output may alias an input), finalize writes (lse, o[16]) as
   floats into row task_id of tensor 3. */
void ht_split_kv(const df_ctx *c);
void ht_combine(const df_ctx *c);
void ht_finalize(const df_ctx *c);
/* Direct reference of one task over kv positions [0, len): row[17]. */
void ht_attention_reference(uint32_t task, uint32_t len, float row[HT_ATTN_ROW]);

/* MoE: UpShard/HiddenShard {value: f16[2,4]}; finalize writes 8 floats to
   row range_begin / block of tensor 3. */
enum { HT_MOE_VALUES = 8 };
void ht_moe_map1(const df_ctx *c);
void ht_moe_map2(const df_ctx *c);
void ht_moe_finalize(const df_ctx *c);
/* Reference output row of the map2 instance at range_begin `b`. */
void ht_moe_reference(uint32_t task, uint32_t b, uint32_t map1_block, uint32_t shards,
                      float row[HT_MOE_VALUES]);

/* Handler table by operator name (split_kv, combine, finalize, moe_map1,
   moe_map2, finalize_hidden) for a packed plan; handler_count entries. */
df_handler_fn *ht_handlers(const df_packed *k);

/* Pack with options (NULL = defaults); aborts the test on failure. */
df_packed *ht_pack(const df_plan *p, const df_pack_options *o);

/* Run attention: output rows (task_count x 17 floats) returned (caller
   frees); status and result through the pointers (result freed by the
   caller when non-NULL, else freed here). */
df_status ht_run_attention(const df_packed *k, uint32_t task_count, uint32_t block,
                           const df_host_options *o, float **rows, df_host_result *res);
/* The same with the handler table H (k->handler_count entries). */
df_status ht_run_attention_with(const df_packed *k, const df_handler_fn *h, uint32_t task_count,
                                uint32_t block, const df_host_options *o, float **rows,
                                df_host_result *res);
/* Check rows against the reference for lengths kv[task]. */
void ht_check_attention(const float *rows, const uint32_t *kv, uint32_t task_count);

/* Attention program whose combine is associative (two AttnInter
   parameters), for streaming_tree. */
df_program *ht_associative_attention_program(void);

/* The policy / reduce strategy pairs the randomized tests cover; the last
   (streaming_tree) needs ht_associative_attention_program. */
typedef struct ht_combo {
  df_policy p;
  df_reduce_strategy s;
} ht_combo;
enum { HT_COMBOS = 4 };
extern const ht_combo ht_combos[HT_COMBOS];
/* Default options with the topology, block size and one "kv" range of
   task_count lengths kv (kept, not copied). */
df_schedule_options ht_kv_options(uint32_t sm_count, uint32_t cluster_size, const uint32_t *kv,
                                  uint32_t task_count, uint32_t block);
df_plan *ht_schedule(const df_program *prog, uint32_t sm_count, uint32_t cluster_size,
                     const uint32_t *kv, uint32_t task_count, uint32_t block, df_policy policy,
                     df_reduce_strategy strategy, bool include_exit);

/* Packed edits (each keeps comm blocks contiguous and fixes offsets and
   instruction flags). */
void ht_delete_comm(df_packed *k, uint32_t comm);
/* Insert a comm at the end of the comm block of packed instruction i. */
void ht_insert_comm(df_packed *k, uint32_t instr, const df_abi_comm *c);
void ht_swap_instrs(df_packed *k, uint32_t a, uint32_t b);
/* Recompute instruction flags from the comm kinds. */
void ht_fix_flags(df_packed *k);
/* First packed comm of kind dispatched by packed instruction `instr`
   (DF_SENTINEL for any instruction). */
uint32_t ht_find_comm(const df_packed *k, uint32_t kind, uint32_t instr);
/* Packed index of plan instruction id. */
uint32_t ht_packed_index(const df_packed *k, uint32_t plan_id);

/* A small LCG for reproducible random lengths. */
uint32_t ht_rand(uint64_t *state, uint32_t lo, uint32_t hi);

#endif
