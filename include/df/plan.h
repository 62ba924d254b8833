/* The scheduled plan and the passes over it: scheduling, handler variants,
   barrier allocation, slot layout, packing, launch package, fingerprint.
   Pure C, no MLIR: the runtime links it to re-plan at run time. */
#ifndef DF_PLAN_H
#define DF_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "df/abi.h"
#include "df/program.h"
#include "df/split.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- topology ---------------------------------------------------------- */

typedef struct df_topology {
  uint32_t sm_count;
  uint32_t cluster_size;
} df_topology;

/* sm_count > 0, cluster_size > 0, cluster_size <= sm_count. */
df_status df_topology_check(const df_topology *t);
static inline uint32_t df_topology_cluster_count(const df_topology *t) {
  return (t->sm_count + t->cluster_size - 1) / t->cluster_size;
}
static inline uint32_t df_topology_cluster_id(const df_topology *t, uint32_t sm) {
  return sm / t->cluster_size;
}
static inline uint32_t df_topology_cluster_rank(const df_topology *t, uint32_t sm) {
  return sm % t->cluster_size;
}
static inline bool df_topology_same_cluster(const df_topology *t, uint32_t a, uint32_t b) {
  return a / t->cluster_size == b / t->cluster_size;
}

/* ---- handler identities and variant keys (REFERENCE 1.5, 1.6) ---------- */

typedef enum df_iter_mode {
  DF_ITER_GENERIC = 0,
  DF_ITER_TILE_COUNT = 1,
  DF_ITER_EXACT_LENGTH = 2,
} df_iter_mode;

typedef enum df_arity_class {
  DF_ARITY_PASSTHROUGH = 0,
  DF_ARITY_BINARY = 1,
  DF_ARITY_GENERIC = 2,
} df_arity_class;

#define DF_VARIANT_SCHEMA_VERSION 1u

/* Binding key of a handler: (operator_id, operator_kind). */
typedef struct df_identity {
  uint32_t operator_id;
  df_op_kind kind; /* never DF_OPK_NONE in a valid identity */
} df_identity;

/* A variant key: base identity + typed specialisations. */
typedef struct df_variant {
  df_identity base;
  uint32_t schema_version; /* DF_VARIANT_SCHEMA_VERSION */
  bool has_iter;
  df_iter_mode iter_mode;
  uint32_t iter_value; /* 0 for generic */
  bool has_arity;
  df_arity_class arity;
} df_variant;

const char *df_iter_mode_name(df_iter_mode m);
const char *df_arity_class_name(df_arity_class c);
/* "Unsupported Dataflow ITER specialization mode 'x'; expected one of:
   exact_length, generic, tile_count". */
df_status df_iter_mode_parse(const char *name, df_iter_mode *out);
/* Validates an iter spec: generic has no value; the others need a
   positive value. has_value distinguishes None from 0. */
df_status df_iter_spec_check(df_iter_mode mode, bool has_value, int64_t value);
/* Arity class of a reduce arity; arity <= 0 is an error, has_arity=false
   (None) is generic. */
df_status df_arity_class_for(bool has_arity, int64_t arity, df_arity_class *out);
/* Checks the specialisation kinds against the base kind (iter: one iter
   spec; reduce: one arity spec; map/finalize: none) and schema version. */
df_status df_variant_check(const df_variant *v);
/* Default variant: iter -> generic; reduce -> class of arity (<=0 means
   None -> generic); others none. */
df_status df_variant_default(df_identity base, int64_t reduce_arity,
                             df_variant *out);
bool df_variant_equal(const df_variant *a, const df_variant *b);
/* Total order on canonical keys (schema, binding key, spec keys). */
int df_variant_compare(const df_variant *a, const df_variant *b);
/* Fixed extent of an iter spec: exact -> value; tile_count -> value *
   bucket_size; generic -> 0. */
uint32_t df_variant_fixed_extent(const df_variant *v, uint32_t bucket_size);
/* Diagnostic name: base, `<base>__dataflow_iter_tiles_<v>` or
   `<base>__dataflow_iter_len_<v>`. Returns bytes needed (snprintf). */
int df_variant_diag_name(const df_variant *v, const char *base, char *buf,
                         size_t cap);

/* Canonical JSON of identities and variants; the parsers accept exactly
   what the writers produce plus whitespace and key reordering, and
   reject identities carrying "specialization". Writers return bytes
   needed (snprintf semantics). */
int df_identity_to_json(const df_identity *id, char *buf, size_t cap);
df_status df_identity_from_json(const char *json, df_identity *out);
int df_variant_to_json(const df_variant *v, char *buf, size_t cap);
df_status df_variant_from_json(const char *json, df_variant *out);

/* Iter-range bucket options (REFERENCE 1.6). */
typedef struct df_iter_buckets {
  bool enabled;      /* false: no bucket list */
  uint32_t count;    /* sorted unique positive tile counts */
  uint32_t values[64];
  bool generic;      /* parsed lists always include generic */
} df_iter_buckets;

/* None-like spellings ("", "0", "false", "none", "off") -> disabled;
   "auto" -> {1,2,4}+generic; else a comma list of positive ints and/or
   "generic". */
df_status df_iter_buckets_parse(const char *text, df_iter_buckets *out);

/* Exact lengths: same none-like spellings, else positive ints; sorted
   unique. */
typedef struct df_exact_lengths {
  uint32_t count;
  uint32_t values[64];
} df_exact_lengths;
df_status df_exact_lengths_parse(const char *text, df_exact_lengths *out);

/* Iter spec chosen for a range of `length` (REFERENCE 1.6 selection). */
void df_iter_select(uint32_t length, const df_iter_buckets *buckets,
                    uint32_t bucket_size, const df_exact_lengths *exact,
                    df_iter_mode *mode, uint32_t *value);

/* ---- the plan ----------------------------------------------------------- */

/* Plan-level opcodes; df_instr_op_abi maps them to ABI opcodes. */
typedef enum df_instr_op {
  DF_INSTR_EXIT = 0,
  DF_INSTR_ITER,
  DF_INSTR_MAP,
  DF_INSTR_RESHARED,
  DF_INSTR_REDUCE,
  DF_INSTR_REDUCE_UPDATE,
  DF_INSTR_FINALIZE,
  DF_INSTR_CLUSTER_SYNC,
  DF_INSTR_OP_COUNT
} df_instr_op;

df_abi_opcode df_instr_op_abi(df_instr_op op);
/* "exit", "iter", "map", "reshared", "reduce", "reduce_update",
   "finalize", "cluster_sync". */
const char *df_instr_op_name(df_instr_op op);
df_status df_instr_op_parse(const char *name, df_instr_op *out);

typedef enum df_policy {
  DF_POLICY_ROUND_ROBIN = 0,
  DF_POLICY_CLUSTER_LOCAL = 1,
  DF_POLICY_STAGE_GRAPH = 2, /* recorded for reshared plans */
} df_policy;

typedef enum df_reduce_strategy {
  DF_REDUCE_ALL_AT_ONCE = 0,
  DF_REDUCE_STREAMING = 1,
  DF_REDUCE_STREAMING_TREE = 2,
  DF_REDUCE_NONE = 3, /* recorded for reshared plans */
} df_reduce_strategy;

const char *df_policy_name(df_policy p);
const char *df_reduce_strategy_name(df_reduce_strategy s);
/* Errors use the reference's wording ("Dataflow scheduler_policy must be
   one of ('round_robin', 'cluster_local'), got 'x'"). */
df_status df_policy_parse(const char *name, df_policy *out);
df_status df_reduce_strategy_parse(const char *name, df_reduce_strategy *out);

/* One scheduled instruction. */
typedef struct df_instr {
  uint32_t id;
  df_instr_op op;
  uint32_t task; /* DF_SENTINEL if none */
  uint32_t sm;   /* queue it is placed on by the scheduler */
  bool has_range;
  uint32_t range_begin, range_end;
  uint32_t input_offset, input_count; /* into df_plan.inputs (slot ids) */
  uint32_t output_slot;               /* DF_SENTINEL if none */
  int32_t stage;                      /* program stage, -1 for none */
  bool has_identity;
  df_identity identity;
  bool has_variant;
  df_variant variant;
  /* Chosen implementation (df/impl.h): 1 + index into df_plan.impl_names;
     0 = the default binding (the variant's symbol or the operator). */
  uint32_t impl;
  /* Fused (df-fuse, docs/fusion.md): runs inside the dispatch of the
     previous entry of its queue, as a later part of one composite
     instruction. false for every scheduled plan. */
  bool fused;
} df_instr;

typedef enum df_slot_role {
  DF_ROLE_PARTIAL = 0,
  DF_ROLE_REDUCED,
  DF_ROLE_ACCUMULATOR,
  DF_ROLE_STAGE_OUTPUT, /* "<stage name>_output" */
  DF_ROLE_RESHARED_FULL,
  DF_ROLE_CLUSTER_INBOX,
  DF_ROLE_CLUSTER_GATED_INBOX,
  DF_ROLE_HBM_SPILL_INBOX,
  DF_ROLE_JOINT_COMM_INBOX,
  DF_ROLE_JOINT_COMM_OUTBOX,
  DF_ROLE_JOINT_PREFETCH_INBOX,
  DF_ROLE_COUNT
} df_slot_role;

const char *df_slot_role_name(df_slot_role r); /* stage output -> "stage_output" */
df_status df_slot_role_parse(const char *name, df_slot_role *out);
/* Roles that must be scratch-backed and carry DF_SLOT_FLAG_COMMUNICATE. */
bool df_slot_role_communicates(df_slot_role r);

/* One intermediate slot. */
typedef struct df_slot {
  uint32_t id;
  uint32_t task;     /* DF_SENTINEL if none */
  int32_t type;      /* index into df_plan.types */
  df_slot_role role;
  int32_t stage;     /* stage of DF_ROLE_STAGE_OUTPUT, else -1 */
  uint32_t producer; /* instruction id or DF_SENTINEL */
  uint32_t shared_storage; /* DF_SENTINEL = own id */
  uint32_t global_storage; /* DF_SENTINEL = own id */
  bool private_shared;     /* remote reshared target: own shared region */
  bool scratch_backed;
  bool has_scratch_offset;
  uint32_t scratch_offset;
  uint32_t owner;          /* explicit owner CTA, DF_SENTINEL = producer's SM */
  bool gated;              /* cluster gated push */
} df_slot;

/* One half of a transfer. */
typedef struct df_comm {
  df_comm_kind kind;
  uint32_t src_instr, dst_instr;
  uint32_t src_slot, dst_slot;
  uint32_t producer_sm, consumer_sm;
  uint32_t dispatch_instr; /* DF_SENTINEL = default (recv kinds: target;
                              else source) */
  uint32_t peer_cta_rank;  /* DF_SENTINEL = derived */
  uint32_t flag_epoch;
  uint32_t barrier_phase;
  uint32_t byte_offset, byte_count; /* byte_count 0 = whole slot */
  uint32_t segment_id, segment_count;
  uint32_t gate_id;        /* cluster_gate_id, DF_SENTINEL none */
} df_comm;

/* Program facts a plan keeps so it is self-contained. */
typedef struct df_plan_type {
  char name[DF_NAME_MAX];
  uint32_t bytes; /* slot bytes */
} df_plan_type;

typedef struct df_plan_stage {
  char name[DF_NAME_MAX];    /* stage name */
  char op_name[DF_NAME_MAX]; /* operator (call) name, "" for reshared */
  df_stage_kind kind;
  df_op_kind op_kind;        /* the call's kind, DF_OPK_NONE if none */
} df_plan_stage;

/* Symbol of an implementation chosen for some instruction. */
typedef struct df_plan_impl_name {
  char name[DF_NAME_MAX];
} df_plan_impl_name;

typedef struct df_plan {
  df_allocator alloc;
  df_topology topology;
  uint32_t block_size;
  char range_axis[DF_NAME_MAX];
  df_policy policy;
  df_reduce_strategy strategy;
  uint32_t extent_count; /* 0: coordinates are (task) */
  uint32_t extents[DF_MAX_AXES];
  uint32_t task_count;
  uint32_t *task_lengths; /* task_count entries */
  uint32_t stage_count;
  df_plan_stage *stages;
  uint32_t type_count;
  df_plan_type *types;
  uint32_t instr_count, instr_cap;
  df_instr *instrs; /* instrs[i].id == i */
  uint32_t slot_count, slot_cap;
  df_slot *slots; /* slots[i].id == i */
  uint32_t comm_count, comm_cap;
  df_comm *comms;
  uint32_t input_count, input_cap;
  uint32_t *inputs; /* input slot ids of all instructions */
  uint32_t *queue_offsets; /* topology.sm_count entries into queue_ids */
  uint32_t *queue_lengths;
  uint32_t queue_id_count, queue_id_cap;
  uint32_t *queue_ids; /* instruction ids */
  uint32_t impl_count;
  df_plan_impl_name *impl_names; /* chosen implementations, distinct */
  /* df_schedule's automatic split (df_schedule_options.auto_split): the
     placement it chose (block_size above) and its modelled makespan */
  bool split_auto;
  bool split_balance_iters;
  bool split_defer_reduces;
  double split_model_us;
  /* df_schedule_options.pool: df_pack puts the instructions in the pool
     that every CTA claims from (docs/pool.md). */
  bool pool;
} df_plan;

/* An empty plan for a topology (checked). */
df_status df_plan_create(const df_allocator *alloc, df_topology topology,
                         df_plan **out);
void df_plan_destroy(df_plan *p);
/* Deep copy. */
df_status df_plan_clone(const df_plan *p, df_plan **out);

/* Growers; each returns the new element's index through `index`. */
df_status df_plan_add_type(df_plan *p, const char *name, uint32_t bytes,
                           int32_t *index);
df_status df_plan_add_stage(df_plan *p, const df_plan_stage *s, int32_t *index);
df_status df_plan_add_instr(df_plan *p, const df_instr *in,
                            const uint32_t *inputs, uint32_t input_count,
                            uint32_t *id);
df_status df_plan_add_slot(df_plan *p, const df_slot *s, uint32_t *id);
df_status df_plan_add_comm(df_plan *p, const df_comm *c);
/* The df_instr.impl reference of implementation `name`, added to
   impl_names when new. */
df_status df_plan_intern_impl(df_plan *p, const char *name, uint32_t *ref);
df_status df_plan_set_tasks(df_plan *p, uint32_t task_count,
                            const uint32_t *lengths);
/* Rebuild queues from scratch: queue of SM s = ids in `order` whose
   instruction has sm == s, in `order`'s order. order NULL = id order. */
df_status df_plan_build_queues(df_plan *p, const uint32_t *order,
                               uint32_t count);
/* Set queues explicitly (lengths per SM, ids concatenated). */
df_status df_plan_set_queues(df_plan *p, const uint32_t *lengths,
                             const uint32_t *ids, uint32_t id_count);

/* Copy a program's intermediate types (same indices, with slot bytes)
   and stage names into an empty plan's tables. */
df_status df_plan_adopt_program(df_plan *p, const df_program *g);

static inline const uint32_t *df_plan_instr_inputs(const df_plan *p,
                                                   const df_instr *in) {
  return p->inputs + in->input_offset;
}
/* The queue of SM `sm` lies inside queue_ids (hand-edited plans may not). */
df_status df_plan_check_queue(const df_plan *p, uint32_t sm);
/* Coordinates of a task: row-major decomposition over extents (last
   varies fastest), or (task) without extents. Returns the count. */
uint32_t df_plan_task_coords(const df_plan *p, uint32_t task,
                             uint32_t coords[DF_MAX_AXES]);
/* Dispatch instruction of a comm (explicit, else target for receive
   kinds, else source). */
uint32_t df_comm_dispatch(const df_comm *c);
bool df_comm_kind_is_recv(df_comm_kind k); /* 2, 4, 6, 7 */
bool df_comm_kind_is_hbm(df_comm_kind k);  /* 3, 4, 6, 7 */
bool df_comm_kind_is_cluster(df_comm_kind k); /* 1, 2, 5 */
const char *df_comm_kind_name(df_comm_kind k); /* "cluster_send", ... */
df_status df_comm_kind_parse(const char *name, df_comm_kind *out);

/* ---- scheduling ---------------------------------------------------------- */

/* Length source of one dynamic range axis. */
typedef struct df_range_lengths {
  const char *axis;
  uint32_t count;
  const uint32_t *lengths;
  const uint32_t *offsets; /* NULL: none */
} df_range_lengths;

/* Most chunks of an even split (df_schedule_options.even_split_chunks, and
   all batches of a tapered one): a plan holds up to task count + chunks
   ITERs. */
#define DF_EVEN_SPLIT_MAX_CHUNKS (1u << 20)
/* even_split_taper's shortest tapered chunk by default, in the split's
   units (range units plus even_split_task_cost per task) */
#define DF_EVEN_SPLIT_TAPER_MIN 512u

typedef struct df_schedule_options {
  df_topology topology;
  uint32_t block_size;
  uint32_t range_count;
  df_range_lengths ranges[DF_MAX_AXES];
  uint32_t extent_count; /* 0: no task_extents */
  uint32_t extents[DF_MAX_AXES];
  df_policy policy;
  df_reduce_strategy strategy;
  bool include_exit;
  bool force_hbm_comms;
  bool partial_only;
  df_iter_buckets buckets;
  uint32_t bucket_size; /* 0: block_size */
  df_exact_lengths exact_lengths;
  /* df extension: split every transfer of more than this many bytes into
     ceil(S / tile) segments per direction (df_plan_segment_transfers);
     0 = whole-slot transfers (the reference). A multiple of 16. */
  uint32_t transfer_tile_bytes;
  /* Implementation selection (df/impl.h) for programs that declare
     implementations or use built-in handlers: target architecture and
     caller-supplied replacements; NULL = sm_90a, none. */
  const struct df_select_options *select;
  /* Leave every instruction on its default binding: the df-schedule pass
     sets it, df-select-variants chooses afterwards with its options. */
  bool defer_select;
  /* df extension (off by default): all_at_once queues hold every ITER
     before the REDUCEs and FINALIZEs (each group in id order), so an SM
     never waits in a reduce for partials that other SMs compute later in
     their queues; instruction ids and records are unchanged. */
  bool defer_reduces;
  /* df extension (off by default; round_robin all_at_once only): tasks are
     emitted longest first (ties: lower task id) and each ITER goes to the
     SM with the fewest range units placed so far (ties: lower SM) instead
     of the next SM in turn, so skewed lengths spread evenly. */
  bool balance_iters;
  /* df extension (off by default; round_robin all_at_once only, not with
     balance_iters): stream-K style split. The summed range units of all
     tasks, tasks longest first (ties: lower id), are cut into
     even_split_chunks (0: sm_count) nearly equal chunks; each cut moves to
     the nearest multiple of even_split_granularity (0: 1) from its task's
     start, or to the task's end. A task's range is split at the cuts that
     fall inside it (pieces need not be block multiples) and one ITER runs
     per piece on its chunk's SM (chunk c: SM c % sm_count with more chunks
     than SMs, else SM c * sm_count / chunks); the task's REDUCE takes one
     input per piece and runs on the SM of its first piece. Each task
     counts even_split_task_cost extra units ahead of its range (its fixed
     costs in range units), so chunks of many short tasks hold fewer
     units of range. block_size only sets the iter variants' bucket size. */
  bool even_split;
  uint32_t even_split_granularity;
  /* at most DF_EVEN_SPLIT_MAX_CHUNKS */
  uint32_t even_split_chunks;
  uint32_t even_split_task_cost;
  /* df extension (0: off, else at least 2; all_at_once only): a task's
     REDUCE takes at most this many inputs. While it would take more,
     consecutive runs of its inputs (ceil(n / fan_in) runs, sizes within
     one, in range order) are first combined by a REDUCE on the SM of the
     run's first input (a reduce tree, levels as needed); the reducer must
     accept its own output as an input (associative, as an LSE combine).
     The receives a reduce waits for in turn drop from n to about
     fan_in per level. */
  uint32_t reduce_fan_in;
  /* df extension (off by default; round_robin all_at_once only, not with
     even_split, balance_iters or defer_reduces): block_size (may be 0),
     balance_iters and defer_reduces are chosen by df_split_choose over the
     scheduled axis's lengths with `split` (df/split.h); the plan records
     the choice (df_plan.block_size, split_*). */
  bool auto_split;
  df_split_search split;
  /* df extension (off by default; needs reduce_fan_in): each REDUCE of a
     task's tree, the last included, runs on the SM of the first partial
     under it (in range order) whose SM runs no other REDUCE of the task,
     instead of on the SM of its first input; the FINALIZE follows the
     last REDUCE. A tree's upper levels then wait on SMs that ran only a
     partial instead of after a lower level's reduce on the same SM. */
  bool reduce_spread;
  /* df extension (off by default; all_at_once, a reduce and a finalize
     stage whose reducer produces the partial's type): a task whose
     reduce would take one input has no REDUCE; its FINALIZE reads the
     partial directly, on the partial's SM. The caller asserts that the
     reducer is the identity on one input (an LSE combine is). */
  bool skip_unary_reduce;
  /* df extension (0: off; round_robin all_at_once with a reduce stage,
     not with even_split or auto_split): the last reduce_sms SMs (< the
     SM count) run no ITER; each task's last REDUCE and its FINALIZE run
     there instead, task k of the emission order on SM
     sm_count - reduce_sms + k % reduce_sms (reduce_fan_in's lower levels
     stay on the partials' SMs; a task skip_unary_reduce leaves without a
     REDUCE keeps its FINALIZE on the partial's SM). Those SMs wait for
     the partials from the kernel's start, so the reduce's own set-up is
     off the critical path when the last partial lands. */
  uint32_t reduce_sms;
  /* df extension (off by default; round_robin all_at_once, even_split
     allowed, no automatic split; docs/pool.md): the instructions leave
     their queues for one pool that every CTA claims items from at run
     time, in dependency order (longest chain first), so a slower SM runs
     fewer of them. Every transfer goes through HBM (as force_hbm_comms),
     even a REDUCE's input from its own SM, and df_pack makes every
     transferred slot direct-global; the plan records the choice
     (df_plan.pool). */
  bool pool;
  /* df extension (0: off, else 1..99; even_split only): the chunks come
     in batches of even_split_chunks (0: sm_count) equal chunks, each
     batch taking this percent of the units still to cut, so chunks
     shrink from batch to batch; once a batch's chunks would be shorter
     than even_split_taper_min units (0: DF_EVEN_SPLIT_TAPER_MIN; range
     units plus even_split_task_cost per task), the rest is cut into at
     most a batch of chunks of at least that length — or more, shorter
     ones, where those would be longer than the batch before's (a taper
     under 50 %).
     Chunk c goes to SM c % sm_count. With the pool (which claims longer
     chains first) every SM starts on a long piece and the short ones
     even out SMs that stream at different rates at the end. */
  uint32_t even_split_taper;
  uint32_t even_split_taper_min;
} df_schedule_options;

/* The reference defaults: include_exit, round_robin, all_at_once. */
df_schedule_options df_schedule_options_default(void);

/* Schedule a validated program for concrete range lengths (REFERENCE 2). */
df_status df_schedule(const df_program *prog, const df_schedule_options *o,
                      df_plan **out);

/* Segments of a transfer of `bytes` with tile `tile`: ceil(bytes / tile),
   1 when the transfer fits one tile (or tile is 0). */
uint32_t df_transfer_segment_count(uint32_t bytes, uint32_t tile);

/* Split every unsegmented send/receive record (not releases) moving more
   than `tile` bytes into ceil(S / tile) records with byte_offset = i*tile,
   byte_count = min(tile, S - i*tile), segment_id i, segment_count n.
   HBM epochs are rescaled, e -> (e-1)*m + i + 1 (m = the most segments of
   any HBM transfer), so each segment has its own epoch and epochs on a
   shared flag keep their order. tile 0 does nothing; tile must be a
   multiple of 16. */
df_status df_plan_segment_transfers(df_plan *p, uint32_t tile);

/* Attach identities and default variants (REFERENCE 2.7); also run on
   hand-edited plans. */
df_status df_plan_attach_handlers(df_plan *p);

/* ---- barriers (REFERENCE 3) --------------------------------------------- */

typedef struct df_barrier_alloc {
  uint32_t barrier_count;
  uint32_t slot_count, comm_count;
  uint32_t *slot_barrier;  /* per slot: barrier index or DF_SENTINEL */
  uint32_t *comm_barrier;  /* per comm: barrier index of its use or S */
  uint32_t *comm_phase;    /* per comm: barrier phase (0 if none) */
  uint32_t *comm_ack;      /* per comm: cluster ACK index or S */
  uint32_t ack_count;
} df_barrier_alloc;

df_status df_allocate_barriers(const df_plan *p, const df_allocator *alloc,
                               df_barrier_alloc *out);
void df_barrier_alloc_free(df_barrier_alloc *b, const df_allocator *alloc);
/* Legal colouring, count = max + 1, every use assigned. */
df_status df_barrier_alloc_check(const df_plan *p, const df_barrier_alloc *b);
/* As df_allocate_barriers, with the HBM direct-global slot set
   (direct_global[slot] != 0; NULL for none): an HBM receive between two
   direct-global slots of one global alias is signal-only and gets no
   barrier (REFERENCE 3.2). */
df_status df_allocate_barriers_ex(const df_plan *p, const uint8_t *direct_global,
                                  const df_allocator *alloc, df_barrier_alloc *out);

/* ---- slot layout (REFERENCE 4) -------------------------------------------- */

typedef struct df_layout_options {
  bool hbm_direct_global;
  uint32_t direct_count;
  const uint32_t *direct_slots; /* selective direct-global slot ids */
  bool reuse_hbm_flags;
  /* df extension (not in the reference): shared offsets per CTA instead of
     one arena for the whole plan. A slot occupies its offset in every CTA
     that produces, receives or reads it; offsets need only be distinct
     among the slots of one CTA, so the dynamic shared memory is the
     fullest CTA's. Off by default (REFERENCE 4 layout). */
  bool per_cta_shared;
  /* df extension, needs per_cta_shared: storage keys whose uses are
     ordered by happens-before may share bytes in a CTA (a dead region is
     reused by a later key). A key's uses are the instructions that
     produce, read or write any of its slots, and every send, receive,
     source and target instruction of a transfer into or out of them, on
     any CTA, so a remote push into the region is ordered too. Off by
     default: the layout is then the per-CTA one above. */
  bool reuse_dead_shared;
} df_layout_options;

typedef struct df_slot_layout {
  uint32_t slot_count;
  df_abi_slot *slots; /* barrier_index filled from the barrier allocation */
  uint32_t shared_slot_bytes;
  uint32_t global_staging_bytes;
  uint32_t scratch_bytes;
  bool reuse_hbm_flags;
} df_slot_layout;

/* The HBM direct-global slot set of layout options (REFERENCE 4), with
   their errors; mask receives p->slot_count bytes (1 = direct). */
df_status df_direct_global_slots(const df_plan *p, const df_layout_options *o,
                                 uint8_t *mask);
/* b may be NULL (no barriers). */
df_status df_layout_slots(const df_plan *p, const df_barrier_alloc *b,
                          const df_layout_options *o,
                          const df_allocator *alloc, df_slot_layout *out);
void df_slot_layout_free(df_slot_layout *l, const df_allocator *alloc);

/* ---- packing (REFERENCE 5) -------------------------------------------------- */

/* Most instructions one fused (composite) instruction runs. */
#define DF_FUSE_MAX_PARTS 8u

/* One entry of the handler table. */
typedef struct df_handler {
  uint32_t id;
  char name[DF_NAME_MAX]; /* operator name */
  df_op_kind kind;
  bool has_identity;
  df_identity identity;
  bool has_variant;
  df_variant variant;
  bool primary;
  char symbol[2 * DF_NAME_MAX]; /* dataflow_handler_<id>_<sanitised> */
  /* The implementation chosen by df-select-variants (df/impl.h); ""
     = the default binding (variant symbol or operator name). */
  char impl[DF_NAME_MAX];
  /* Composite handler of fused instructions (docs/fusion.md): the handler
     ids its parts run, in order; 0 for an ordinary handler. Composites
     follow every ordinary handler in the table and are not written to
     plan blobs (a blob's composite has part_count 0). */
  uint32_t part_count;
  uint32_t parts[DF_FUSE_MAX_PARTS];
} df_handler;

typedef struct df_named_index {
  char name[DF_NAME_MAX];
  uint32_t index;
  df_op_kind kind; /* operator table only */
} df_named_index;

typedef struct df_launch_package {
  uint32_t abi_version;
  uint32_t sm_count, cluster_size;
  uint32_t barrier_count, barrier_bytes;
  uint32_t cluster_ack_count, cluster_ack_barrier_bytes,
      cluster_ack_pending_bytes;
  uint32_t hbm_recv_state_bytes;
  uint32_t shared_control_bytes, shared_slot_base_offset, shared_slot_bytes,
      shared_memory_bytes;
  uint32_t flag_count, flags_bytes;
  uint32_t global_staging_bytes;
  uint32_t slot_count, comm_count, arg_count, instruction_count;
  uint32_t scratch_slot_count, scratch_bytes;
  uint32_t cluster_inbox_offset, cluster_inbox_bytes;
  bool needs_flag_reset;
  uint32_t *barrier_init_offsets; /* sm_count */
  uint32_t *barrier_init_lengths; /* sm_count */
  uint32_t barrier_init_count;
  uint32_t *barrier_init_indices;
} df_launch_package;

typedef struct df_pack_options {
  df_layout_options layout;
  /* The order in which the handler table walks plan instructions
     (REFERENCE 5.4 "list order"): a permutation of the instruction ids,
     for plans whose instruction list is not in id order (the Python
     bindings); NULL = id order. */
  const uint32_t *handler_order;
  uint32_t handler_order_count;
  /* Leave df_packed.fingerprint empty (run-time re-plans do not need the
     hash; df_plan_fingerprint computes it on demand). */
  bool skip_fingerprint;
} df_pack_options;

typedef struct df_packed {
  df_allocator alloc;
  uint32_t abi_version;
  df_topology topology;
  uint32_t instr_count, slot_count, comm_count, arg_count;
  df_abi_instr *instrs; /* pack order */
  uint32_t *pack_order; /* plan instruction id of each packed instruction */
  df_abi_slot *slots;
  df_abi_comm *comms;
  df_abi_args *args;
  uint32_t *queue_offsets, *queue_lengths; /* sm_count each */
  uint32_t input_slot_count, task_coord_count;
  uint32_t *input_slots, *task_coords;
  uint32_t handler_count, primary_handler_count;
  df_handler *handlers;
  uint32_t operator_count;
  df_named_index *operators;
  uint32_t type_count;
  df_named_index *types;
  df_barrier_alloc barriers;
  uint32_t shared_slot_bytes, global_staging_bytes, scratch_bytes;
  df_launch_package launch;
  char fingerprint[65];
} df_packed;

/* Allocate barriers, lay out slots, pack records and build the launch
   package of a plan (REFERENCE 3-5). */
df_status df_pack(const df_plan *p, const df_pack_options *o,
                  const df_allocator *alloc, df_packed **out);
void df_packed_destroy(df_packed *k);

/* What df_packed_patch_lengths did. */
typedef struct df_patch_result {
  bool patched;     /* the lengths are the plan's now (records changed or already equal) */
  uint32_t changed; /* ITER records whose range_end moved */
  char reason[256]; /* when not patched: which task or instruction, which rule */
} df_patch_result;

/* Give a packed plan new lengths of its range in place, without
   re-planning: each task's last block (its ITER with the largest
   range_begin) ends at the task's new length and every other record stays
   as it is, so the plan keeps its blocks, placement, slots, barriers and
   comms. A decode step that adds a token per sequence needs nothing else
   while no last block outgrows the block size: with max_last_block = the
   plan's block size (0: no limit) a block-split plan patched this way
   has the blocks a re-plan would cut (its placement may differ where the
   scheduler orders by length). `lengths` has one entry per task (task
   ids 0..count-1, as df_schedule_options' range).
   Not patched (out->patched false, out->reason says why, records
   untouched, DF_OK): a plan with no ranged ITER, with ITERs of two
   ranged operators (e.g. a MoE's two maps), a fused ITER, a last block
   that would be empty or hold more than max_last_block units, or whose
   handler is a tile-count or exact-length variant (a fixed extent) while
   its length changes. Re-plan then (df_schedule_replan,
   df_rt_plan_replan). Errors (DF_EINVAL): NULL arguments, no or zero
   lengths, a task id of the plan >= count, a task without a ranged ITER.
   A changed plan's fingerprint is cleared (the records no longer hash to
   it); an executable running it needs df_rt_executable_set_plan again. */
df_status df_packed_patch_lengths(df_packed *k, const uint32_t *lengths, uint32_t count,
                                  uint32_t max_last_block, df_patch_result *out);
/* df_packed_patch_lengths in two steps, for a caller that patches the
   same plan every step: df_packed_last_blocks scans the records once
   (last[t]: the packed ITER of task t's last block; the refusals that
   depend on the plan alone — no ranged ITER, two ranged operators, a
   fused ITER — leave out->patched false, and the errors on task ids are
   the same), and df_packed_patch_lengths_at applies lengths through that
   index in O(count), with the checks and results of
   df_packed_patch_lengths (a `last` entry that is not an ITER of `k` is
   DF_EINVAL). Patching keeps the index valid: it moves no instruction. */
df_status df_packed_last_blocks(const df_packed *k, uint32_t count, uint32_t *last,
                               df_patch_result *out);
df_status df_packed_patch_lengths_at(df_packed *k, const uint32_t *last, const uint32_t *lengths,
                                     uint32_t count, uint32_t max_last_block,
                                     df_patch_result *out);

/* The instruction pool of a packed plan (docs/pool.md): instructions
   [first, first + items * stride) after the last queue, item i being
   [first + i * stride, first + (i + 1) * stride) up to its first EXIT,
   claimed through flag `counter`. */
typedef struct df_pool_desc {
  bool present;
  uint32_t first, items, stride, counter;
} df_pool_desc;

/* Find and check the pool: every queue starts with the same OP_POOL record
   or none does; the region is the instructions after the queues; an item
   is handler instructions padded with EXITs; a pool instruction only
   receives flags of direct-global slots, and no comm of the plan is a
   cluster transfer; the counter is the flag after every slot's and
   comm's flag. The queues' offsets and lengths must already be checked
   (contiguous from 0, inside the instructions). */
df_status df_packed_pool_find(const df_packed *k, df_pool_desc *out);

/* Whether a pooled instruction may wait on comm c: an HBM receive into a
   direct-global slot without a barrier, so only a flag (no copy into, and
   no barrier of, the CTA that claimed it). */
bool df_pool_receive_ok(const df_packed *k, const df_abi_comm *c);

/* One past the largest flag index of a slot or comm (the data flags); a
   pool's counter is that flag. */
uint32_t df_packed_data_flags(const df_packed *k);

/* Whether a checked packed plan has a pool (its first queue starts with
   OP_POOL). Run-time re-plans of such a plan pool too. */
bool df_packed_has_pool(const df_packed *k);

/* Build and check the launch package from packed records (REFERENCE 5.5). */
df_status df_launch_package_build(const df_packed *k, df_launch_package *out);
void df_launch_package_free(df_launch_package *l, const df_allocator *alloc);

/* ---- shared-memory budget (df extension) -------------------------------- */

/* Dynamic shared memory a CTA may use: 227 KiB on sm_90, 163 KiB on sm_80. */
#define DF_SHARED_LIMIT_SM90 232448u
#define DF_SHARED_LIMIT_SM80 166912u

/* Limit of a target name ("sm_90", "sm_90a", "sm_80"). */
df_status df_target_shared_limit(const char *target, uint32_t *out);

/* What the fullest CTA of a packed plan needs: the control area and the
   slot arena up to the end of the last slot it produces, receives, sends
   or reads (scratch-backed and direct-global slots excluded). */
typedef struct df_shared_need {
  uint32_t cta;
  uint32_t control_bytes; /* barriers, ACK barriers, bit-words */
  uint32_t slot_base;     /* shared_slot_base_offset = align(control, 16) */
  uint32_t slot_bytes;    /* that CTA's arena, rounded up to 16 */
  /* The handler workspace a launch adds to every CTA
     (df_workspace_launch_bytes of the handlers' largest
     df.workspace_bytes, docs/workspace.md); 0 when none. */
  uint32_t workspace_bytes;
  uint32_t total;         /* slot_base + slot_bytes + workspace_bytes */
} df_shared_need;

/* `workspace` is the handlers' largest df.workspace_bytes
   (df_program_workspace_bytes; 0 = none). */
df_status df_shared_need_of(const df_plan *p, const df_packed *k, uint32_t workspace,
                            df_shared_need *out);
/* Error naming the CTA, its bytes (control + slots + workspace) and the
   limit when the fullest CTA needs more than `limit` (0 = no limit). need
   may be NULL. */
df_status df_shared_budget_check(const df_plan *p, const df_packed *k, uint32_t workspace,
                                 uint32_t limit, df_shared_need *need);

/* `auto` memory choice: candidates in order all_at_once (the requested
   policy), then streaming and streaming_tree under cluster_local (stage
   graphs: one candidate); each is scheduled and packed, the first whose
   fullest CTA fits `limit` is returned. The need counts the workspace of
   g's handlers (df_program_workspace_bytes). */
typedef struct df_fit_candidate {
  df_policy policy;
  df_reduce_strategy strategy;
  bool scheduled; /* false: the scheduler or packer refused it (why) */
  bool fits;
  df_shared_need need;
  char why[256];
} df_fit_candidate;

typedef struct df_fit_result {
  uint32_t count;
  df_fit_candidate c[3];
  int32_t chosen; /* index into c, -1 none */
} df_fit_result;

/* On success *out is the chosen plan; when none fits, an error listing
   every candidate's need or refusal (res still filled). */
df_status df_schedule_fitting(const df_program *g, const df_schedule_options *o,
                              const df_pack_options *po, uint32_t limit, df_plan **out,
                              df_fit_result *res);
/* "reduce-strategy=X policy=Y fits (CTA c needs N bytes)" for the first
   fitting candidate other than `current`, or a sentence saying none does.
   snprintf semantics. */
int df_fit_suggestion(const df_fit_result *r, df_reduce_strategy current, char *buf,
                      size_t cap);

/* A run-time re-plan of `g` for new lengths, scheduled the way its
   compiled plan was (the program's re-plan choices, df/program.h):
   o->transfer_tile_bytes 0 takes g->transfer_tile_bytes; with
   g->memory_auto the strategy is chosen by df_schedule_fitting under
   g->shared_memory_limit starting from g->auto_policy (o->policy and
   o->strategy are not used; `po` is the layout the need is measured
   with), else df_schedule with `o`. `fit` (may be NULL) gets the
   candidates of an auto choice. */
df_status df_schedule_replan(const df_program *g, const df_schedule_options *o,
                             const df_pack_options *po, df_plan **out, df_fit_result *fit);

/* SHA-256 hex of the plan's canonical encoding (operator names
   excluded), REFERENCE 5.6. */
df_status df_plan_fingerprint(const df_plan *p, char hex[65]);

#ifdef __cplusplus
}
#endif

#endif
