/* The launch watchdog: a watched launch passes the kernel a progress
   array in mapped host memory (df/progress.h), polls its stream with a
   deadline, and when the kernel does not finish in time reads where every
   CTA is, asks the kernel to abort and reports the blocked CTAs instead
   of hanging the process. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "internal.h"

/* Grace period after the abort request for the kernel to trap. */
#define DFRT_ABORT_GRACE_MS 1000.0

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void sleep_us(long us) {
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  nanosleep(&ts, NULL);
}

static df_status need_driver(const df_rt *rt) {
  const df_cuda_driver *d = &rt->drv;
  const char *missing = !d->cuStreamQuery                ? "cuStreamQuery"
                        : !d->cuMemHostAlloc            ? "cuMemHostAlloc"
                        : !d->cuMemFreeHost             ? "cuMemFreeHost"
                        : !d->cuMemHostGetDevicePointer ? "cuMemHostGetDevicePointer"
                                                        : NULL;
  if (missing)
    return df_status_errorf(DF_EUNSUPPORTED,
                            "watchdog: the CUDA driver table lacks %s (the watchdog polls the "
                            "stream and maps a progress array into host memory)",
                            missing);
  return df_status_ok();
}

df_status df_rt_executable_set_timeout(df_rt_executable *e, uint32_t timeout_ms) {
  if (!e)
    return df_status_errorf(DF_EINVAL, "watchdog: NULL executable in "
                                       "df_rt_executable_set_timeout");
  if (timeout_ms)
    DF_TRY(need_driver(e->rt));
  e->timeout_ms = timeout_ms;
  if (!timeout_ms)
    e->param_progress = 0;
  return df_status_ok();
}

/* Poll until the stream is idle (*done), fails (status), or `deadline`
   passes (ok, !*done). `last` receives the last query result. */
static df_status poll_stream(df_rt_executable *e, CUstream h, double deadline, const char *what,
                             bool *done, CUresult *last) {
  const df_cuda_driver *d = &e->rt->drv;
  long pause = 20;
  *done = false;
  for (;;) {
    CUresult r = d->cuStreamQuery(h);
    *last = r;
    if (r == CUDA_SUCCESS) {
      *done = true;
      return df_status_ok();
    }
    if (r != CUDA_ERROR_NOT_READY)
      return dfrt_check(e->rt, r, what, "cuStreamQuery");
    if (now_ms() >= deadline)
      return df_status_ok();
    sleep_us(pause);
    pause = pause < 2000 ? pause * 2 : 2000;
  }
}

static df_status reserve_progress(df_rt_executable *e, uint32_t ctas) {
  const df_cuda_driver *d = &e->rt->drv;
  size_t words = DF_PROGRESS_WORDS((size_t)ctas);
  if (e->progress_host && e->progress_words >= words)
    return df_status_ok();
  if (e->progress_host)
    d->cuMemFreeHost(e->progress_host);
  e->progress_host = NULL;
  e->progress_words = 0;
  e->param_progress = 0;
  void *host = NULL;
  DF_TRY(dfrt_check(e->rt,
                    d->cuMemHostAlloc(&host, words * sizeof(uint32_t),
                                      CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP),
                    "watchdog: progress array", "cuMemHostAlloc"));
  CUdeviceptr dptr = 0;
  df_status s = dfrt_check(e->rt, d->cuMemHostGetDevicePointer(&dptr, host, 0),
                           "watchdog: progress array", "cuMemHostGetDevicePointer");
  if (s.code != DF_OK) {
    d->cuMemFreeHost(host);
    return s;
  }
  e->progress_host = host;
  e->progress_words = words;
  e->param_progress = dptr;
  return df_status_ok();
}

df_status dfrt_watch_before(df_rt_executable *e, CUstream h) {
  if (!e->timeout_ms) {
    e->param_progress = 0;
    return df_status_ok();
  }
  DF_TRY(need_driver(e->rt));
  /* The progress array may be zeroed only while no kernel writes it. */
  bool done;
  CUresult last;
  DF_TRY(poll_stream(e, h, now_ms() + e->timeout_ms, "launch: earlier work on the stream", &done,
                     &last));
  if (!done) {
    e->dev->hung = true;
    return df_status_errorf(DF_ETIMEOUT,
                            "launch: earlier work on the stream did not finish within %u ms "
                            "(watchdog); nothing was launched; the CUDA context is unusable "
                            "now: exit the process",
                            e->timeout_ms);
  }
  DF_TRY(reserve_progress(e, e->cfg.grid_x));
  memset(e->progress_host, 0, e->progress_words * sizeof(uint32_t));
  e->progress_ctas = e->cfg.grid_x;
  return df_status_ok();
}

static bool waiting_phase(uint32_t phase) {
  return phase == DF_PHASE_CLUSTER_RECV || phase == DF_PHASE_HBM_RECV ||
         phase == DF_PHASE_HBM_BULK || phase == DF_PHASE_CLUSTER_SEND ||
         phase == DF_PHASE_SOURCE_GUARD;
}

static df_status snapshot(df_rt_executable *e) {
  uint32_t n = e->progress_ctas;
  df_allocator *a = &e->rt->alloc;
  df_free(a, e->last_progress);
  e->last_progress_count = 0;
  e->last_progress = df_alloc(a, sizeof *e->last_progress * (n ? n : 1));
  if (!e->last_progress)
    return df_status_errorf(DF_ENOMEM, "watchdog: out of memory for %u CTAs' progress", n);
  const volatile uint32_t *w = e->progress_host;
  for (uint32_t i = 0; i < n; i++) {
    const volatile uint32_t *c = w + DF_PROGRESS_HEADER_WORDS + DF_PROGRESS_CTA_WORDS * i;
    df_rt_cta_progress *p = &e->last_progress[i];
    p->cta = i;
    p->pc = c[DF_PROGRESS_W_PC];
    p->phase = c[DF_PROGRESS_W_PHASE];
    p->comm = c[DF_PROGRESS_W_COMM];
    p->wait = c[DF_PROGRESS_W_WAIT];
  }
  e->last_progress_count = n;
  return df_status_ok();
}

/* Ask spinning CTAs to trap, then give the kernel a moment to end. */
static void request_abort(df_rt_executable *e, CUstream h, char *outcome, size_t cap) {
  volatile uint32_t *w = e->progress_host;
  w[0] = 1;
  __sync_synchronize();
  bool done = false;
  CUresult last = CUDA_ERROR_NOT_READY;
  double grace = e->timeout_ms < DFRT_ABORT_GRACE_MS ? e->timeout_ms : DFRT_ABORT_GRACE_MS;
  df_status s = poll_stream(e, h, now_ms() + grace, "watchdog: abort", &done, &last);
  if (done)
    snprintf(outcome, cap, "the kernel finished after the deadline");
  else if (s.code != DF_OK)
    snprintf(outcome, cap, "the kernel aborted (%s)", s.message);
  else
    snprintf(outcome, cap, "the kernel is still running %.0f ms after the abort request", grace);
}

df_status dfrt_watch_after(df_rt_executable *e, CUstream h) {
  if (!e->timeout_ms)
    return df_status_ok();
  bool done;
  CUresult last;
  DF_TRY(poll_stream(e, h, now_ms() + e->timeout_ms, "launch: kernel", &done, &last));
  if (done)
    return df_status_ok();
  DF_TRY(snapshot(e));
  uint32_t open = 0, shown = 0;
  char blocked[2][200];
  /* Name the CTAs that wait on something first, then any other not done. */
  for (int pass = 0; pass < 2; pass++)
    for (uint32_t i = 0; i < e->last_progress_count; i++) {
      const df_rt_cta_progress *p = &e->last_progress[i];
      if (p->phase == DF_PHASE_DONE)
        continue;
      open += pass == 0;
      if (shown < 2 && waiting_phase(p->phase) == (pass == 0))
        df_rt_executable_describe_progress(e, p, blocked[shown++], sizeof blocked[0]);
    }
  char outcome[160];
  request_abort(e, h, outcome, sizeof outcome);
  e->dev->hung = !strstr(outcome, "finished");
  return df_status_errorf(DF_ETIMEOUT,
                          "launch: kernel '%s' did not finish within %u ms (watchdog): %u of %u "
                          "CTAs not done; %s%s%s; abort requested: %s; the CUDA context is "
                          "unusable now: exit the process (df_rt_executable_progress lists "
                          "every CTA)",
                          e->module->kernel_name, e->timeout_ms, open, e->last_progress_count,
                          shown ? blocked[0] : "no CTA reported progress",
                          shown > 1 ? "; " : "", shown > 1 ? blocked[1] : "", outcome);
}

void dfrt_watch_release(df_rt_executable *e) {
  df_allocator *a = &e->rt->alloc;
  if (e->progress_host && !e->dev->hung)
    e->rt->drv.cuMemFreeHost(e->progress_host);
  e->progress_host = NULL;
  df_free(a, e->last_progress);
  e->last_progress = NULL;
  e->last_progress_count = 0;
}

df_status df_rt_executable_progress(const df_rt_executable *e, const df_rt_cta_progress **out,
                                    uint32_t *count) {
  if (!e || !out || !count)
    return df_status_errorf(DF_EINVAL, "watchdog: NULL argument to df_rt_executable_progress");
  *out = e->last_progress;
  *count = e->last_progress_count;
  return df_status_ok();
}
