/* The host backend of libdfrt (device "host"): runs a packed plan on the
   CPU with the persistent kernel's semantics (REFERENCE 6) so that CI
   checks numerics without a GPU, and diagnoses invalid or unsafe plans
   instead of producing wrong numbers.

   Model. One virtual CTA per queue, each with a shared-memory block of
   the launch package's shared_memory_bytes (slot arena at
   shared_slot_base_offset), a scratch arena, mbarrier state per barrier
   index (completed / consumed phases, parity waits), cluster ACK
   barriers and HBM "issued" state; one global staging buffer and one
   flag array for the grid. The CTAs run as cooperative tasks: a
   deterministic scheduler steps each CTA through its queue (per
   instruction: source-lifetime guard, cluster receives, HBM receives,
   handler, HBM issues, sends) until it blocks on a barrier parity, a flag
   epoch, a cluster ACK or a cluster barrier; a wait blocks only that CTA.
   Handlers are native functions called with the df_ctx of device.h
   (`threads` threads per CTA, default 1). docs/host-backend.md describes
   every rule, diagnosis and default. */
#ifndef DF_HOST_BACKEND_H
#define DF_HOST_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "df/abi.h"
#include "df/alloc.h"
#include "df/device.h"
#include "df/plan.h"
#include "df/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- cost model ---------------------------------------------------------- */

/* Defaults of the structural cost model, in cycles. */
#define DF_HOST_DEFAULT_INSTR_CYCLES 40.0      /* F per dispatched instruction */
#define DF_HOST_DEFAULT_BYTE_CYCLES 0.0625     /* R per byte moved by its comms */
#define DF_HOST_DEFAULT_CLUSTER_LATENCY 200.0  /* cluster (DSMEM) edge */
#define DF_HOST_DEFAULT_HBM_LATENCY 1000.0     /* HBM edge (staging + flag) */

/* Parameters of the cost model: an instruction costs
   instr_cycles + byte_cycles * (bytes moved by the comms dispatched at
   it); a receive can start only `latency` after the instruction that
   completed its transfer finished. All must be finite and >= 0. */
typedef struct df_host_cost_params {
  double instr_cycles;    /* F */
  double byte_cycles;     /* R */
  double cluster_latency; /* edge latency of cluster receives and ACKs */
  double hbm_latency;     /* edge latency of HBM receives */
} df_host_cost_params;

/* ---- options ------------------------------------------------------------- */

#define DF_HOST_MAX_THREADS 1024u

/* Run options; start from df_host_options_default(). */
typedef struct df_host_options {
  /* Threads per virtual CTA (df_ctx.threads), 1..DF_HOST_MAX_THREADS.
     1 (default): the handler runs once with thread 0 and df_ctx_barrier
     is a no-op. n > 1: the handler runs on n POSIX threads that meet at
     df_ctx_barrier. */
  uint32_t threads;
  /* Record the op log (default true). */
  bool op_log;
  /* Fail with DF_HOST_DIAG_STEP_LIMIT after this many scheduler steps;
     0 (default) = no limit. A step is one unit of progress of one CTA
     (a comm, a handler, a phase change). */
  uint64_t max_steps;
  /* Steps a CTA runs per scheduler turn; 0 (default) = as far as it can.
     Together with `reverse` it selects among interleavings: numerics
     must not depend on it, hazards may show in only some orders. */
  uint32_t quantum;
  /* Visit CTAs in descending instead of ascending order. */
  bool reverse;
  /* Per-CTA scratch arena bytes; 0 (default) = the plan's scratch_bytes. */
  uint32_t scratch_bytes;
  /* Handler workspace bytes per virtual CTA (df_ctx.workspace,
     docs/workspace.md), at most DF_WORKSPACE_MAX_BYTES; 0 (default) =
     none. A handler library made by df-translate --df-to-host carries its
     handlers' value: df_host_workspace_dl reads it. The buffer is
     DF_WORKSPACE_ALIGN-aligned, guarded like the other arenas and filled
     with a poison byte before every handler call (its contents do not
     survive an instruction, as on the GPU). */
  uint32_t workspace_bytes;
  /* Starting contents of global staging (global_staging_bytes bytes), as
     a previous launch left them; NULL (default) = zero bytes. */
  const uint8_t *initial_staging;
  /* Starting flag values (flag_count words), as a previous launch left
     them; used only when the launch package does not need a flag reset
     (REFERENCE 5.5). NULL (default) = zero. */
  const uint32_t *initial_flags;
  /* Cost model parameters (defaults above). */
  df_host_cost_params cost;
  /* Allocator for the run and its result; no hook = the default one. */
  df_allocator alloc;
} df_host_options;

/* Options with every default filled in. */
df_host_options df_host_options_default(void);

/* ---- op log ---------------------------------------------------------------- */

typedef enum df_host_op_kind {
  DF_HOST_OP_INSTR = 0, /* an instruction dispatched (or EXIT reached) */
  DF_HOST_OP_COMM = 1,  /* a comm record executed */
} df_host_op_kind;

/* One op-log record, in execution order. An instruction record is
   written when its handler is dispatched (after its receives, before its
   sends); EXIT gets a record too. */
typedef struct df_host_op {
  uint64_t seq;        /* position in the log */
  df_host_op_kind kind;
  uint32_t cta;        /* virtual CTA = queue index */
  uint32_t queue_pos;  /* position in that queue */
  uint32_t instr;      /* packed instruction index */
  uint32_t opcode;     /* df_abi_opcode of the instruction */
  uint32_t handler_id; /* DF_SENTINEL when no handler ran */
  uint32_t comm;       /* packed comm index; DF_SENTINEL for instr records */
  uint32_t comm_kind;  /* df_comm_kind; DF_COMM_NONE for instr records */
  uint32_t src_slot, dst_slot; /* comm records; DF_SENTINEL otherwise */
  uint32_t bytes;      /* comm: bytes it moves (0 for signals and releases);
                          instr: the sum over the comms dispatched at it */
  uint32_t peer_cta;   /* comm: the other CTA (destination of a send,
                          source of a receive) or DF_SENTINEL */
} df_host_op;

/* ---- cost estimate ---------------------------------------------------------- */

typedef struct df_host_cta_cost {
  uint32_t instructions; /* dispatched (non-EXIT) instructions */
  uint32_t comms;        /* comm records executed */
  uint64_t comm_bytes;   /* bytes of those comms */
  uint32_t max_copy_bytes; /* the largest single comm record (one copy, a
                              segment of a tiled transfer) it executed */
  uint32_t max_recv_inflight_bytes; /* the most bytes of HBM -> shared bulk
                              loads it had posted and not yet waited for at
                              one time (issued loads included): a tiled
                              transfer loads one tile at a time */
  double busy_cycles;    /* sum over its instructions of F + R * bytes */
  double finish_cycles;  /* finish of its last instruction in the
                            dependency schedule (>= busy_cycles) */
} df_host_cta_cost;

typedef struct df_host_cost {
  df_host_cost_params params;
  uint32_t cta_count;
  df_host_cta_cost *ctas;  /* cta_count entries */
  uint32_t instructions;   /* totals over CTAs */
  uint64_t comm_bytes;
  double busy_cycles;
  /* Makespan along the dependency graph: every instruction starts after
     the previous one of its queue and `latency` after each instruction
     whose transfer (or release) it waited for. >= every CTA's busy sum. */
  double makespan_cycles;
  uint32_t critical_cta;   /* a CTA that finishes at the makespan */
} df_host_cost;

/* ---- diagnoses -------------------------------------------------------------- */

typedef enum df_host_diag_kind {
  DF_HOST_DIAG_NONE = 0,
  DF_HOST_DIAG_INVALID_PLAN,   /* records the device could not run */
  DF_HOST_DIAG_ARENA,          /* a slot or access outside its arena */
  DF_HOST_DIAG_MISSING_HANDLER,
  DF_HOST_DIAG_PHASE_MISMATCH, /* a barrier parity that cannot match */
  DF_HOST_DIAG_DEADLOCK,       /* every unfinished CTA blocked */
  DF_HOST_DIAG_UNWRITTEN_READ, /* a handler input nobody wrote */
  DF_HOST_DIAG_OVERWRITE,      /* a transfer clobbering unconsumed data */
  DF_HOST_DIAG_STALE_FLAG,     /* a receive passed on a wrong flag value */
  DF_HOST_DIAG_STEP_LIMIT,     /* max_steps reached */
} df_host_diag_kind;

/* "invalid_plan", "arena", "missing_handler", "phase_mismatch",
   "deadlock", "unwritten_read", "overwrite", "stale_flag", "step_limit",
   "none". */
const char *df_host_diag_kind_name(df_host_diag_kind k);

typedef enum df_host_wait_kind {
  DF_HOST_WAIT_BARRIER = 0, /* cluster receive: barrier parity */
  DF_HOST_WAIT_FLAG = 1,    /* HBM receive: flag >= epoch */
  DF_HOST_WAIT_ACK = 2,     /* gated cluster send or EXIT: cluster ACK */
  DF_HOST_WAIT_CLUSTER = 3, /* CLUSTER_SYNC: the cluster barrier */
} df_host_wait_kind;

/* What one blocked CTA waits for (deadlock reports). */
typedef struct df_host_wait {
  df_host_wait_kind kind;
  uint32_t cta, queue_pos, instr;
  uint32_t comm;      /* packed comm index, DF_SENTINEL for cluster syncs
                         and EXIT ACK waits */
  uint32_t slot;      /* destination slot of the comm, else DF_SENTINEL */
  uint32_t index;     /* barrier, flag or ACK index; cluster id for syncs */
  uint32_t awaited;   /* parity, epoch, ACK phase or sync count */
  uint32_t current;   /* completed phases, flag value, ACK phases, or
                         syncs of the slowest cluster member */
  uint32_t waits_for; /* the CTA that would unblock it, DF_SENTINEL when
                         no unfinished CTA will */
} df_host_wait;

/* The diagnosis of a failed run. */
typedef struct df_host_diag {
  df_host_diag_kind kind;
  /* Where it happened; DF_SENTINEL where it does not apply. */
  uint32_t cta, queue_pos, instr, comm, slot, input;
  uint32_t wait_count;   /* deadlock: one entry per blocked CTA */
  df_host_wait *waits;
  uint32_t cycle_length; /* deadlock: the wait-for cycle, CTAs in order */
  uint32_t *cycle;
  char *report;          /* full text (the status message is a prefix) */
} df_host_diag;

/* ---- run -------------------------------------------------------------------- */

/* Everything a run leaves behind. Initialised by df_host_run even when it
   fails (a failed run keeps the op log and cost up to the failure and the
   diagnosis); release with df_host_result_free. */
typedef struct df_host_result {
  df_allocator alloc;
  uint32_t cta_count;
  bool completed;          /* every CTA reached EXIT or its queue's end */
  uint64_t steps;
  uint32_t op_count;
  df_host_op *ops;
  df_host_cost cost;
  uint32_t staging_bytes;  /* final global staging */
  uint8_t *staging;
  uint32_t flag_count;     /* final flag values */
  uint32_t *flags;
  df_host_diag diag;
} df_host_result;

/* Run a packed plan once, as one launch of the persistent kernel.
   handlers[h] is the handler of handler id h (handler_count entries;
   every id an instruction dispatches must be present and non-NULL);
   tensors are the kernel's tensor arguments (host pointers in data_ptr);
   block_size is the plan's range block size (df_ctx.block_size); o may be
   NULL for the defaults. Checks the records and the launch package
   (REFERENCE 5.5), the arena bounds of every slot, handlers, peers,
   instruction flag partitions, segment groups and barrier phases before
   running. Fails with DF_EINVAL and out->diag filled when the plan is
   invalid or unsafe (deadlock, unwritten read, overwrite, phase mismatch,
   stale flag, arena violation), DF_ENOMEM when allocation fails. */
df_status df_host_run(const df_packed *k, const df_handler_fn *handlers,
                      uint32_t handler_count, const df_abi_tensor_arg *tensors,
                      uint32_t tensor_count, uint32_t block_size,
                      const df_host_options *o, df_host_result *out);

/* Release everything a result owns and zero it. NULL-safe. */
void df_host_result_free(df_host_result *r);

/* The op log as text, one line per record:
     <seq> instr cta=C pos=P instr=I opcode=NAME handler=H bytes=B
     <seq> comm cta=C pos=P instr=I comm=J kind=NAME src_slot=S dst_slot=D bytes=B peer=X
   (`-` for sentinels). DF_EIO when writing fails. */
df_status df_host_op_log_write(const df_host_result *r, FILE *out);

/* The cost estimate as text: the parameters, one line per CTA
   (instructions, comms, comm bytes, busy and finish cycles) and the
   totals with the makespan. DF_EIO when writing fails. */
df_status df_host_cost_write(const df_host_result *r, FILE *out);

/* ---- handler resolution (df-run) --------------------------------------------- */

/* Looks up a symbol (e.g. dlsym over a host-compiled handler library);
   returns NULL when absent. */
typedef void *(*df_host_symbol_lookup)(void *user, const char *symbol);

/* Fill out[0..k->handler_count) with the handler functions named by the
   packed handler table's symbols (dataflow_handler_<id>_<name>). Fails
   naming the first handler whose symbol is missing, except a composite
   with its parts listed (part_count > 0, docs/fusion.md): its entry stays
   NULL and the backend runs the parts' functions in order. */
df_status df_host_resolve_handlers(const df_packed *k, df_host_symbol_lookup lookup,
                                   void *user, df_handler_fn *out);

/* df_host_resolve_handlers over a dlopen'ed library `lib`, looking up per
   handler the packed symbol, then the variant's specialised name, then the
   operator name (the names the PTX path links by). On failure `tried`
   (tried_cap bytes) lists the names looked for. */
df_status df_host_resolve_dl(const df_packed *k, void *lib, df_handler_fn *out, char *tried,
                             size_t tried_cap);

/* The handler workspace of a dlopen'ed handler library: its
   df_handler_workspace_bytes (the largest df.workspace_bytes of its
   handlers, df-translate --df-to-host); 0 when the library has no such
   symbol (hand-built libraries, objects made before the workspace). Fails
   when the value is over DF_WORKSPACE_MAX_BYTES. */
df_status df_host_workspace_dl(void *lib, uint32_t *out);

#ifdef __cplusplus
}
#endif

#endif
