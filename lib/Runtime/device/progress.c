/* The watchdog's progress stores (df/progress.h), out of line and cold:
   only a watched launch calls them (runtime.h df_rt_mark), and only its
   leader (thread 0) stores. The thread index is read here rather than
   passed, so that the caller keeps nothing live for the cold call. */
#include "runtime.h"

__attribute__((noinline, cold)) void df_rt_mark_store(volatile uint32_t *progress,
                                                      uint32_t phase, uint32_t comm,
                                                      uint32_t wait) {
  if (df_ptx_thread_linear() != 0)
    return;
  progress[DF_PROGRESS_W_PHASE] = phase;
  progress[DF_PROGRESS_W_COMM] = comm;
  progress[DF_PROGRESS_W_WAIT] = wait;
}

__attribute__((noinline, cold)) void df_rt_mark_pc_store(volatile uint32_t *progress,
                                                         uint32_t pc) {
  if (df_ptx_thread_linear() == 0)
    progress[DF_PROGRESS_W_PC] = pc;
}
