/* Running one handler call on a virtual CTA of n threads. n = 1: a direct
   call, df_ctx_barrier a no-op. n > 1: n POSIX threads (the caller is
   thread 0) meeting at a pthread barrier; they start only once all exist,
   so a failed thread creation runs nothing. */
#include <pthread.h>
#include <string.h>

#include "host_internal.h"

static void no_barrier(void *user) { (void)user; }

static void cta_barrier(void *user) { pthread_barrier_wait((pthread_barrier_t *)user); }

typedef struct hb_team {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  int go; /* 0 wait, 1 run, 2 abort */
} hb_team;

typedef struct hb_job {
  df_ctx ctx;
  df_handler_fn fn;
  hb_team *team;
} hb_job;

static void *thread_main(void *p) {
  hb_job *j = p;
  pthread_mutex_lock(&j->team->lock);
  while (j->team->go == 0)
    pthread_cond_wait(&j->team->cond, &j->team->lock);
  int go = j->team->go;
  pthread_mutex_unlock(&j->team->lock);
  if (go == 1)
    j->fn(&j->ctx);
  return NULL;
}

static void release(hb_team *t, int go) {
  pthread_mutex_lock(&t->lock);
  t->go = go;
  pthread_cond_broadcast(&t->cond);
  pthread_mutex_unlock(&t->lock);
}

df_status hb_run_handler(hb_run *r, const df_ctx *base, df_handler_fn fn) {
  uint32_t n = r->o.threads;
  if (n <= 1) {
    df_ctx ctx = *base;
    ctx.thread = 0;
    ctx.threads = 1;
    ctx.host_barrier = no_barrier;
    ctx.host_user = NULL;
    fn(&ctx);
    return df_status_ok();
  }
  hb_job *jobs = df_alloc(&r->al, sizeof(hb_job) * n);
  pthread_t *tids = df_alloc(&r->al, sizeof(pthread_t) * n);
  if (!jobs || !tids) {
    df_free(&r->al, jobs);
    df_free(&r->al, tids);
    return hb_oom("handler threads");
  }
  hb_team team;
  pthread_barrier_t bar;
  pthread_mutex_init(&team.lock, NULL);
  pthread_cond_init(&team.cond, NULL);
  team.go = 0;
  pthread_barrier_init(&bar, NULL, n);
  for (uint32_t t = 0; t < n; t++) {
    jobs[t].ctx = *base;
    jobs[t].ctx.thread = t;
    jobs[t].ctx.threads = n;
    jobs[t].ctx.host_barrier = cta_barrier;
    jobs[t].ctx.host_user = &bar;
    jobs[t].fn = fn;
    jobs[t].team = &team;
  }
  uint32_t made = 1;
  df_status st = df_status_ok();
  for (; made < n; made++)
    if (pthread_create(&tids[made], NULL, thread_main, &jobs[made]) != 0) {
      st = df_status_errorf(DF_ENOMEM,
                            "host backend: could not create thread %u of a %u-thread virtual CTA",
                            made, n);
      break;
    }
  release(&team, st.code == DF_OK ? 1 : 2);
  if (st.code == DF_OK)
    fn(&jobs[0].ctx);
  for (uint32_t t = 1; t < made; t++)
    pthread_join(tids[t], NULL);
  pthread_barrier_destroy(&bar);
  pthread_cond_destroy(&team.cond);
  pthread_mutex_destroy(&team.lock);
  df_free(&r->al, jobs);
  df_free(&r->al, tids);
  return st;
}
