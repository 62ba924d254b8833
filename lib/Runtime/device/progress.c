/* The watchdog's progress stores (df/progress.h), out of line and cold:
   only the leader of a watched launch calls them (runtime.h df_rt_mark). */
#include "runtime.h"

__attribute__((noinline, cold)) void df_rt_mark_store(volatile uint32_t *progress,
                                                      uint32_t phase, uint32_t comm,
                                                      uint32_t wait) {
  progress[DF_PROGRESS_W_PHASE] = phase;
  progress[DF_PROGRESS_W_COMM] = comm;
  progress[DF_PROGRESS_W_WAIT] = wait;
}

__attribute__((noinline, cold)) void df_rt_mark_pc_store(volatile uint32_t *progress,
                                                         uint32_t pc) {
  progress[DF_PROGRESS_W_PC] = pc;
}
