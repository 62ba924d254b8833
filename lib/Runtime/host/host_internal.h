/* Internal state of the host backend: the run, its virtual CTAs, memory
   regions with their owner shadows (which slot's value each byte holds),
   barrier models, and the
   helpers each concern file exports. */
#ifndef DF_HOST_INTERNAL_H
#define DF_HOST_INTERNAL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "df/host_backend.h"
#include "df/kernel_plan.h"

#define HB_S DF_SENTINEL
#define HB_GUARD_BYTES 64u  /* guard zone before and after every buffer */
#define HB_WORKSPACE_POISON 0xA5u /* handler workspace contents at entry */
#define HB_GUARD_BYTE 0xDBu /* guard fill pattern */
#define HB_PREV 0xFFFFFFFEu /* owner: bytes left by a previous launch */

/* ---- memory regions ---------------------------------------------------- */

typedef enum hb_space {
  HB_SPACE_ARENA = 0,   /* a CTA's shared slot arena */
  HB_SPACE_SCRATCH = 1, /* a CTA's scratch arena */
  HB_SPACE_STAGING = 2, /* global staging (one for the grid) */
} hb_space;

typedef struct hb_region {
  hb_space space;
  uint32_t cta; /* unused for staging */
  uint32_t off, len;
} hb_region;

/* ---- barrier models ------------------------------------------------------ */

/* An mbarrier with arrival count 1: every transfer (arrive.expect_tx + its
   bytes) completes one phase. `consumed` counts the parity waits that
   passed; the phase a receive consumes is `consumed`. */
typedef struct hb_barrier {
  bool init;
  uint32_t completed, consumed;
  uint32_t set_cta, set_instr; /* who completed the latest phase */
} hb_barrier;

/* A cluster ACK barrier (arrivals from CLUSTER_RELEASE). */
typedef struct hb_ack {
  bool init;
  bool pending; /* an ACKed, ungated send waits for its release */
  uint32_t completed, consumed;
  uint32_t set_cta, set_instr;
} hb_ack;

/* HBM bulk-path "issued" state of one barrier index. */
typedef struct hb_issue {
  bool issued;
  uint32_t comm;               /* the issuing comm (first segment) */
  uint32_t set_cta, set_instr; /* who stored the flag it passed on */
  uint32_t bytes;              /* bulk-load bytes in flight until the wait */
} hb_issue;

/* ---- CTAs ------------------------------------------------------------------ */

typedef enum hb_phase {
  HB_PH_FETCH = 0,    /* decode the instruction at pc */
  HB_PH_CLUSTER_RECV, /* kind 2 */
  HB_PH_HBM_RECV,     /* kinds 4, 7 */
  HB_PH_DISPATCH,     /* handler / cluster sync */
  HB_PH_ISSUE,        /* kind 6 (non-blocking) */
  HB_PH_SEND,         /* kinds 1, 5, 3 in block order */
  HB_PH_NEXT,         /* pc + 1 */
  HB_PH_EXIT,         /* wait for pending ACKs, then done */
  HB_PH_DONE,
} hb_phase;

typedef struct hb_cta {
  uint32_t id, q0, qlen, pc;
  /* the instruction being run: q0 + pc, or a pool item's (docs/pool.md) */
  uint32_t cur;
  bool pooled;        /* at its OP_POOL, running claimed items */
  uint32_t item_left; /* instructions after cur in the claimed item */
  hb_phase phase;
  uint32_t cursor; /* next comm of the current phase */
  bool sync_arrived;
  uint32_t sync_count;
  bool blocked;
  df_host_wait wait;
  uint8_t *smem;    /* guard | control | slot arena | guard */
  uint8_t *arena;   /* slot arena */
  uint8_t *scratch; /* scratch arena (inside its own guarded block) */
  uint8_t *scratch_mem;
  /* handler workspace (docs/workspace.md): DF_WORKSPACE_ALIGN-aligned,
     HB_GUARD_BYTES of guard on both sides; NULL without one */
  uint8_t *workspace, *workspace_mem;
  uint32_t *arena_owner, *scratch_owner; /* slot whose value a byte holds, S = none */
  hb_barrier *bars;  /* barrier_count */
  hb_ack *acks;      /* cluster_ack_count */
  hb_issue *issues;  /* barrier_count */
  uint32_t recv_inflight; /* bytes of issued bulk loads not yet waited for */
  double t_free;     /* finish of its last dispatched instruction */
  double t_ready;    /* current instruction: earliest start by edges */
  df_host_cta_cost cost;
} hb_cta;

/* An HBM send's staging bytes not yet read by their receive. */
typedef struct hb_delivery {
  uint32_t off, len;
  uint32_t send_comm, send_cta;
  uint32_t recv_comm; /* the matching receive */
} hb_delivery;

typedef struct hb_text {
  const df_allocator *al;
  char *s;
  size_t len, cap;
  bool oom;
} hb_text;

typedef struct hb_run {
  const df_packed *k;
  df_launch_package pkg;
  df_pool_desc pool;
  uint32_t pool_next; /* the claim counter */
  df_host_options o;
  df_allocator al;
  const df_handler_fn *handlers;
  uint32_t handler_count;
  const df_abi_tensor_arg *tensors;
  uint32_t tensor_count;
  uint32_t block_size;
  uint32_t cta_count, cluster_size;
  bool bulk_hbm; /* segmented HBM plan: the bulk-copy path (REFERENCE 5.7) */
  uint32_t scratch_bytes;
  hb_cta *ctas;
  uint8_t *staging_mem, *staging;
  uint32_t *staging_owner;
  uint32_t *slot_writer;  /* (cta_count + 1) x slot_count: last writing instruction;
                             row cta_count = global staging */
  uint8_t *slot_produced; /* slot is an output or a comm destination somewhere */
  uint32_t *flags;
  uint8_t *flag_set; /* stored during this launch */
  uint32_t *flag_set_cta, *flag_set_instr;
  /* static maps */
  uint32_t *instr_cta, *instr_pos; /* per packed instruction */
  uint32_t *comm_instr;            /* dispatching packed instruction */
  uint32_t *comm_bytes;            /* bytes moved per comm record */
  uint32_t *comm_match;            /* the other half of the transfer, or S */
  uint32_t *instr_bytes;           /* sum of comm_bytes per instruction */
  /* dynamic state */
  uint8_t *comm_done, *handler_done;
  double *instr_finish;
  hb_delivery *deliveries;          /* every HBM send with a receive, in order */
  uint32_t delivery_count, delivery_cap;
  uint32_t *granule;                /* per 16 staging bytes: 1 + delivery, 0 none */
  uint32_t granule_count;
  uint32_t *delivery_of_recv;       /* per comm: 1 + its delivery, 0 none */
  uint64_t steps;
  df_host_result *out;
  uint32_t op_cap;
} hb_run;

typedef enum hb_step_result {
  HB_STEP_PROGRESS = 0,
  HB_STEP_BLOCKED = 1,
} hb_step_result;

/* ---- text (text.c) -------------------------------------------------------- */
void hb_text_init(hb_text *t, const df_allocator *al);
void hb_text_printf(hb_text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void hb_text_vprintf(hb_text *t, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
/* Hand the string over (NULL on OOM); the text is reset. */
char *hb_text_take(hb_text *t);
void hb_text_free(hb_text *t);

/* ---- diagnoses (diag.c) ------------------------------------------------------ */

/* Where a diagnosis points; fields DF_SENTINEL when not applicable. */
typedef struct hb_site {
  uint32_t cta, queue_pos, instr, comm, slot, input;
} hb_site;
hb_site hb_site_none(void);
/* Site of comm `comm` (or instruction `instr` when comm is S). */
hb_site hb_site_at(const hb_run *r, uint32_t instr, uint32_t comm);
/* Record a diagnosis with a printf message in out->diag and return it
   as a DF_EINVAL status (message truncated to the status buffer). */
df_status hb_fail(hb_run *r, df_host_diag_kind kind, hb_site site, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* As hb_fail with a prepared report (ownership taken). */
df_status hb_fail_report(hb_run *r, df_host_diag_kind kind, hb_site site, char *report);
df_status hb_oom(const char *what);
/* "CTA c queue position p (packed instruction i, <opcode>[, handler h 'name'])". */
void hb_describe_instr(const hb_run *r, uint32_t instr, char *buf, size_t cap);
const char *hb_opcode_name(uint32_t opcode);
const char *hb_comm_kind_name(uint32_t kind);

/* ---- setup (setup.c) -------------------------------------------------------- */
df_status hb_setup_maps(hb_run *r);   /* static maps over the records */
df_status hb_setup_memory(hb_run *r); /* CTAs, arenas, staging, flags */
void hb_teardown(hb_run *r);

/* ---- validation (validate.c, validate_comms.c, phase_check.c) ----------------- */
df_status hb_check_topology(hb_run *r);
df_status hb_validate(hb_run *r);
df_status hb_validate_comms(hb_run *r);
df_status hb_check_phases(hb_run *r);
/* Number of comm records in the transfer group starting at comm j
   (segment_count for a first segment, else 1). */
uint32_t hb_group_len(const df_packed *k, uint32_t j);

/* ---- memory (memory.c) ---------------------------------------------------------- */
/* Region of `slot` as CTA `cta` sees it, bytes [off, off + len). */
hb_region hb_slot_region(const hb_run *r, uint32_t cta, uint32_t slot, uint32_t off,
                         uint32_t len);
hb_region hb_staging_region(uint32_t off, uint32_t len);
uint8_t *hb_region_ptr(const hb_run *r, hb_region g);
uint32_t *hb_region_owner(const hb_run *r, hb_region g);
bool hb_regions_overlap(hb_region a, hb_region b);
/* Copy bytes (skipped when both are the same bytes); the destination
   bytes now hold dst_slot's value (unwritten source bytes stay
   unwritten), written by packed instruction `instr`. */
void hb_copy(hb_run *r, hb_region dst, hb_region src, uint32_t dst_slot, uint32_t instr);
/* A handler wrote `slot` over g. */
void hb_mark_written(hb_run *r, hb_region g, uint32_t slot, uint32_t instr);
/* Last instruction that wrote `slot` in g's memory (S if none). */
uint32_t hb_slot_writer(const hb_run *r, hb_region g, uint32_t slot);
/* First unwritten byte range of g: returns false when all are written. */
bool hb_find_unwritten(const hb_run *r, hb_region g, uint32_t *begin, uint32_t *end);
/* First byte range of g holding another slot's value (*owner). */
bool hb_find_foreign(const hb_run *r, hb_region g, uint32_t slot, uint32_t *begin,
                     uint32_t *end, uint32_t *owner);
/* Bytes of a comm record's transfer: [*off, *off + return). */
uint32_t hb_comm_span(const df_packed *k, const df_abi_comm *c, uint32_t *off);
/* HBM comm whose ends are the same direct-global bytes (signal-only). */
bool hb_comm_signal_only(const df_packed *k, const df_abi_comm *c);
/* Guard zones and the control region untouched; names the first violation. */
df_status hb_check_guards(hb_run *r, uint32_t cta, uint32_t instr);
void hb_fill_guards(uint8_t *mem, size_t inner);
/* select(comm field, slot field) as the device does. */
static inline uint32_t hb_select(uint32_t a, uint32_t b) { return a != HB_S ? a : b; }
uint32_t hb_comm_barrier(const df_packed *k, const df_abi_comm *c);
uint32_t hb_comm_flag(const df_packed *k, const df_abi_comm *c);
/* Destination CTA of a cluster comm dispatched on `cta`. */
uint32_t hb_peer_cta(const hb_run *r, uint32_t cta, const df_abi_comm *c);

/* ---- hazards (hazard.c) -------------------------------------------------------- */
/* A transfer (comm `send`, on CTA `from`) is about to land in region g of
   CTA x, to be received by comm `recv`: fail if some instruction of x
   still needs the bytes it overwrites. */
df_status hb_check_landing(hb_run *r, uint32_t from, uint32_t send, uint32_t x, uint32_t recv,
                           hb_region g);
/* Every input of the instruction about to dispatch was written. */
df_status hb_check_inputs(hb_run *r, hb_cta *c, uint32_t instr);
/* Inputs of one args record of `instr` (a part of a fused instruction),
   skipping the slots in skip[0..nskip) (written by earlier parts inside
   the same call). */
df_status hb_check_part_inputs(hb_run *r, hb_cta *c, uint32_t instr, const df_abi_args *a,
                               const uint32_t *skip, uint32_t nskip);
/* Parts of a packed instruction (args word 15: 0 = 1 part) and the args
   record of part `i` (docs/fusion.md). */
static inline uint32_t hb_parts(const df_packed *k, uint32_t instr) {
  uint32_t n = k->args[k->instrs[instr].arg_offset / sizeof(df_abi_args)].reserved1;
  return n ? n : 1;
}
static inline const df_abi_args *hb_part_args(const df_packed *k, uint32_t instr, uint32_t i) {
  return &k->args[k->instrs[instr].arg_offset / sizeof(df_abi_args) + i];
}

/* ---- transfers (cluster.c, hbm.c) ------------------------------------------------ */
df_status hb_cluster_recv(hb_run *r, hb_cta *c, uint32_t j, hb_step_result *res);
df_status hb_cluster_send(hb_run *r, hb_cta *c, uint32_t j, hb_step_result *res);
df_status hb_cluster_release(hb_run *r, hb_cta *c, uint32_t j);
df_status hb_exit_acks(hb_run *r, hb_cta *c, hb_step_result *res);
df_status hb_hbm_recv(hb_run *r, hb_cta *c, uint32_t j, hb_step_result *res);
df_status hb_hbm_issue(hb_run *r, hb_cta *c, uint32_t j);
df_status hb_hbm_send(hb_run *r, hb_cta *c, uint32_t j);
/* Complete one phase of barrier b of CTA x (a transfer landed). */
df_status hb_barrier_complete(hb_run *r, uint32_t x, uint32_t b, uint32_t from_cta,
                              uint32_t from_instr, uint32_t comm);
/* Consume the phase a receive waits for; *passed false = block. */
df_status hb_barrier_consume(hb_run *r, hb_cta *c, uint32_t b, uint32_t parity, uint32_t comm,
                             bool *passed);

/* ---- HBM deliveries (deliveries.c) -------------------------------------------------- */
/* Fail when staging [off, off + len) holds data a pending receive needs. */
df_status hb_delivery_check(hb_run *r, uint32_t cta, uint32_t send, uint32_t off, uint32_t len);
/* Remember that `recv` will read staging [off, off + len) written by `send`. */
df_status hb_delivery_add(hb_run *r, uint32_t cta, uint32_t send, uint32_t recv, uint32_t off,
                          uint32_t len);
/* The data for `recv` has been read (receive or early issue). */
void hb_delivery_consume(hb_run *r, uint32_t recv);

/* ---- dispatch (dispatch.c) ----------------------------------------------------------- */
df_status hb_dispatch(hb_run *r, hb_cta *c, uint32_t instr, hb_step_result *res);
/* One handler call on the CTA's `threads` threads (threads.c). */
df_status hb_run_handler(hb_run *r, const df_ctx *base, df_handler_fn fn);

/* ---- stepping and scheduling (step.c, scheduler.c, deadlock.c) ------------------------ */
df_status hb_step(hb_run *r, hb_cta *c, hb_step_result *res);
df_status hb_schedule(hb_run *r);
df_status hb_deadlock(hb_run *r);
/* Fill c->wait and report blocked. */
void hb_block(hb_cta *c, df_host_wait_kind kind, uint32_t instr, uint32_t comm, uint32_t slot,
              uint32_t index, uint32_t awaited, uint32_t current, const hb_run *r);

/* ---- op log and cost (oplog.c, cost.c) --------------------------------------------- */
df_status hb_log_instr(hb_run *r, const hb_cta *c, uint32_t instr, uint32_t handler);
df_status hb_log_comm(hb_run *r, const hb_cta *c, uint32_t comm, uint32_t peer_cta);
/* A receive edge: the current instruction of c starts no earlier than
   the finish of `from_instr` plus the latency of the comm kind. */
void hb_cost_edge(hb_run *r, hb_cta *c, uint32_t from_instr, bool cluster);
/* Dispatch of instr on c: start, finish and per-CTA sums. */
void hb_cost_dispatch(hb_run *r, hb_cta *c, uint32_t instr);
void hb_cost_comm(hb_run *r, hb_cta *c, uint32_t comm);
df_status hb_cost_finish(hb_run *r);
df_status hb_check_cost_params(const df_host_cost_params *p);

#endif
