/* The device runtime's per-phase timestamp trace (a developer build, off
   by default): shared by the device runtime and the programs that read
   the trace (bench/overhead). Freestanding (only <stdint.h>).

   A runtime compiled with -DDF_RT_TRACE (df_device_runtime_trace.bc,
   linked with df-translate --df-runtime=FILE.bc) has its leader thread
   (thread 0) of each CTA below DF_RT_TRACE_CTAS record, for each of the
   CTA's first DF_RT_TRACE_INSTRS instructions (queue positions), two
   64-bit stamps at each point it passes: %globaltimer (ns, one clock for
   the whole GPU, so stamps of different CTAs compare) and %clock64 (the
   SM's cycle counter, finer, same-CTA only). Without DF_RT_TRACE nothing
   of it is compiled (the PTX is byte-identical to a build without it).

   The stamps go to the device global df_rt_trace_buf (u64, visible in the
   PTX; read it with df_rt_module_global), at index
   DF_RT_TRACE_INDEX(cta, pc, point, stamp). The host zeroes it before the
   launch: a point an instruction does not pass stays 0. A point passed
   more than once in one instruction (several receives) keeps the last.
   A CTA's pool instructions (docs/pool.md) take the slots after its
   queue, pc = queue length + n for its n-th; their CL_WAIT %clock64
   stamp (pooled plans have no cluster receive) holds the packed
   instruction index + 1 instead, and their TOP is taken after the claim
   and the record load.

   | # | point      | where (lib/Runtime/device)                                        |
   |---|------------|-------------------------------------------------------------------|
   | 0 | TOP        | loop top, before the record is read (kernel.c)                    |
   | 1 | CL_WAIT    | cluster receive: the leader's mbarrier waits satisfied, before    |
   |   |            | the bar.sync (comm_recv.c)                                        |
   | 2 | CL_SYNC    | after the cluster receive's bar.sync                              |
   | 3 | HBM_FLAG   | HBM receive: a flag poll satisfied and acquired (poll_flag)       |
   | 4 | HBM_DONE   | after the HBM receive's copy and final bar.sync                   |
   | 5 | H_BEGIN    | just before df_dispatch (the handler)                             |
   | 6 | H_END      | just after df_dispatch                                            |
   | 7 | POST_SYNC  | after the post-handler fence + bar.sync                           |
   | 8 | SEND_MID   | HBM send: staging copy + bar.sync done, before the release stores; |
   |   |            | cluster send: the first bulk copy issued, before its remote arrive |
   | 9 | END        | end of the instruction: every send issued (bulk copies committed, |
   |   |            | release stores done), before the loop back                        | */
#ifndef DF_RT_TRACE_H
#define DF_RT_TRACE_H

#include <stdint.h>

#define DF_RT_TRACE_CTAS 132u
#define DF_RT_TRACE_INSTRS 64u

enum {
  DF_RT_TRACE_TOP = 0,
  DF_RT_TRACE_CL_WAIT = 1,
  DF_RT_TRACE_CL_SYNC = 2,
  DF_RT_TRACE_HBM_FLAG = 3,
  DF_RT_TRACE_HBM_DONE = 4,
  DF_RT_TRACE_H_BEGIN = 5,
  DF_RT_TRACE_H_END = 6,
  DF_RT_TRACE_POST_SYNC = 7,
  DF_RT_TRACE_SEND_MID = 8,
  DF_RT_TRACE_END = 9,
  DF_RT_TRACE_POINTS = 10,
};

/* Stamp 0: %globaltimer (ns); stamp 1: %clock64 (SM cycles). */
#define DF_RT_TRACE_INDEX(cta, pc, point, stamp)                                                   \
  ((((uint64_t)(cta) * DF_RT_TRACE_INSTRS + (pc)) * DF_RT_TRACE_POINTS + (point)) * 2u + (stamp))
/* u64 words of df_rt_trace_buf. */
#define DF_RT_TRACE_WORDS ((uint64_t)DF_RT_TRACE_CTAS * DF_RT_TRACE_INSTRS * DF_RT_TRACE_POINTS * 2u)
/* The symbol's name in the PTX. */
#define DF_RT_TRACE_SYMBOL "df_rt_trace_buf"

/* Diagnostic build (-DDF_RT_TRACE -DDF_RT_TRACE_DIAG): the leader also
   stamps %globaltimer (ns) at the steps of an instruction's records work
   and HBM receive into df_rt_diag_buf (u64, [132][64][8], 0 = not passed;
   the same CTAs and instructions as the trace):

   | # | point   | where (lib/Runtime/device)                                  |
   |---|---------|-------------------------------------------------------------|
   | 0 | KINDS   | the comm records' kinds read (kernel.c)                     |
   | 1 | GUARD   | after the source-lifetime guard                             |
   | 2 | STAGE   | after staging the handler's records                         |
   | 3 | RESOLVE | after resolving input 0 and the output (cluster receivers)  |
   | 4 | PREPARE | after the HBM sends' preparation, before the HBM receives   |
   | 5 | SCAN    | HBM receive: the batch counted (comm_recv.c)                |
   | 6 | POLL    | receive table: members' records read, before the polls      |
   | 7 | COPY    | receive table: copies done, before the arrivals             | */
enum {
  DF_RT_DIAG_KINDS = 0,
  DF_RT_DIAG_GUARD = 1,
  DF_RT_DIAG_STAGE = 2,
  DF_RT_DIAG_RESOLVE = 3,
  DF_RT_DIAG_PREPARE = 4,
  DF_RT_DIAG_SCAN = 5,
  DF_RT_DIAG_POLL = 6,
  DF_RT_DIAG_COPY = 7,
  DF_RT_DIAG_POINTS = 8,
};
#define DF_RT_DIAG_INDEX(cta, pc, point)                                                           \
  (((uint64_t)(cta) * DF_RT_TRACE_INSTRS + (pc)) * DF_RT_DIAG_POINTS + (point))
#define DF_RT_DIAG_WORDS ((uint64_t)DF_RT_TRACE_CTAS * DF_RT_TRACE_INSTRS * DF_RT_DIAG_POINTS)
#define DF_RT_DIAG_SYMBOL "df_rt_diag_buf"

#endif
