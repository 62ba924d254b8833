/* The watchdog's progress array: what the persistent kernel reports about
   each CTA while it runs, so that a launch that does not finish can say
   where every CTA is (libdfrt reads it from mapped host memory while the
   kernel still runs). Shared by the device runtime and libdfrt;
   freestanding (only <stdint.h>).

   Kernel parameter 20 (after scratch_offset) points at the array, or is
   NULL (no watchdog: the kernel writes nothing). Layout, u32 words:
     [0] abort request: the host writes non-zero after a timeout; a CTA
         spinning on a flag or barrier then traps, ending the kernel
     [1..3] reserved (0)
     then DF_PROGRESS_CTA_WORDS words per CTA (block index order):
     [pc] queue position of the instruction in progress (DF_PROGRESS_PC_NONE
          during start-up and after the loop); for a pool instruction
          (docs/pool.md) DF_PROGRESS_PC_POOL | its packed instruction index
     [phase] df_progress_phase
     [comm] global comm record index the CTA waits on (handler id in the
            handler phase), DF_PROGRESS_NONE otherwise
     [wait] the awaited HBM epoch, or mbarrier parity, or task id
   Only the leader thread writes, with plain volatile stores; the host
   zeroes the array before each watched launch. */
#ifndef DF_PROGRESS_H
#define DF_PROGRESS_H

#include <stdint.h>

#define DF_PROGRESS_HEADER_WORDS 4u
#define DF_PROGRESS_CTA_WORDS 4u
#define DF_PROGRESS_NONE 0xFFFFFFFFu
#define DF_PROGRESS_PC_NONE 0xFFFFFFFFu
#define DF_PROGRESS_PC_POOL 0x80000000u
/* Words of the array for `ctas` CTAs. */
#define DF_PROGRESS_WORDS(ctas) (DF_PROGRESS_HEADER_WORDS + DF_PROGRESS_CTA_WORDS * (ctas))

enum {
  DF_PROGRESS_W_PC = 0,
  DF_PROGRESS_W_PHASE = 1,
  DF_PROGRESS_W_COMM = 2,
  DF_PROGRESS_W_WAIT = 3,
};

typedef enum df_progress_phase {
  DF_PHASE_NOT_STARTED = 0, /* no store yet (the CTA never ran) */
  DF_PHASE_STARTUP = 1,     /* barrier init, cluster barrier */
  DF_PHASE_SOURCE_GUARD = 2,/* waiting for bulk-send source reads */
  DF_PHASE_CLUSTER_RECV = 3,/* waiting on a receive barrier (parity) */
  DF_PHASE_HBM_RECV = 4,    /* polling an HBM flag (epoch) */
  DF_PHASE_HBM_BULK = 5,    /* waiting for a bulk HBM load (parity) */
  DF_PHASE_HANDLER = 6,     /* running a handler (comm = handler id) */
  DF_PHASE_CLUSTER_SEND = 7,/* waiting for a gated push's ACK (parity 0) */
  DF_PHASE_HBM_SEND = 8,    /* copying to staging, publishing a flag */
  DF_PHASE_FINISH = 9,      /* final bulk wait and cluster barrier */
  DF_PHASE_DONE = 10,       /* left the kernel */
  DF_PHASE_COUNT = 11
} df_progress_phase;

#endif
