/* ptxas, when present: PTX -> cubin, and the kernel's resource usage from
   its -v report (--df-to-cubin, --df-kernel-report). */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "target_internal.h"

extern char **environ;

#define DF_KERNEL_ENTRY "df_persistent_kernel"
#define DF_CUDA_PTXAS "/usr/local/cuda/bin/ptxas"

static bool executable(const char *path) { return access(path, X_OK) == 0; }

df_status df_ptxas_find(char *path, size_t cap) {
  const char *env = getenv("DF_PTXAS");
  if (env && env[0]) {
    if (!executable(env))
      return df_status_errorf(DF_EUNSUPPORTED, "ptxas not found: DF_PTXAS='%s' is not an "
                                               "executable file",
                              env);
    snprintf(path, cap, "%s", env);
    return df_status_ok();
  }
  const char *p = getenv("PATH");
  while (p && *p) {
    const char *end = strchr(p, ':');
    size_t n = end ? (size_t)(end - p) : strlen(p);
    if (n > 0 && n + 7 < cap) {
      snprintf(path, cap, "%.*s/ptxas", (int)n, p);
      if (executable(path))
        return df_status_ok();
    }
    p = end ? end + 1 : NULL;
  }
  if (executable(DF_CUDA_PTXAS)) {
    snprintf(path, cap, "%s", DF_CUDA_PTXAS);
    return df_status_ok();
  }
  return df_status_errorf(DF_EUNSUPPORTED,
                          "ptxas not found (set DF_PTXAS, put ptxas on PATH, or install the "
                          "CUDA toolkit in /usr/local/cuda)");
}

/* The number before `key` in `line` ("72 registers" -> 72), if any. */
static bool number_before(const char *line, const char *key, unsigned *out) {
  const char *k = strstr(line, key);
  if (!k)
    return false;
  const char *p = k;
  while (p > line && p[-1] == ' ')
    p--;
  const char *digits = p;
  while (digits > line && digits[-1] >= '0' && digits[-1] <= '9')
    digits--;
  if (digits == p)
    return false;
  *out = (unsigned)strtoul(digits, NULL, 10);
  return true;
}

/* The kernel's section of a `ptxas -v` report: after "Compiling entry
   function 'df_persistent_kernel'", up to the next entry. */
static void parse_report(df_ptxas_result *r) {
  const char *s = strstr(r->log, "Compiling entry function '" DF_KERNEL_ENTRY "'");
  if (!s)
    return;
  r->found_entry = true;
  const char *end = strstr(s + 1, "Compiling entry function");
  for (const char *line = s; line && (!end || line < end);) {
    const char *nl = strchr(line, '\n');
    char buf[512];
    size_t n = nl ? (size_t)(nl - line) : strlen(line);
    snprintf(buf, sizeof buf, "%.*s", (int)(n < sizeof buf ? n : sizeof buf - 1), line);
    number_before(buf, "registers", &r->registers);
    number_before(buf, "barriers", &r->barriers);
    number_before(buf, "bytes stack frame", &r->stack_frame);
    number_before(buf, "bytes spill stores", &r->spill_stores);
    number_before(buf, "bytes spill loads", &r->spill_loads);
    number_before(buf, "bytes smem", &r->static_shared);
    number_before(buf, "bytes cmem[0]", &r->constant);
    line = nl ? nl + 1 : NULL;
  }
}

static df_status write_file(const char *path, const char *data, size_t len) {
  FILE *f = fopen(path, "wb");
  if (!f)
    return df_status_errorf(DF_EIO, "cannot write '%s': %s", path, strerror(errno));
  bool ok = fwrite(data, 1, len, f) == len;
  ok &= fclose(f) == 0;
  return ok ? df_status_ok() : df_status_errorf(DF_EIO, "cannot write '%s'", path);
}

static void read_log(const char *path, df_ptxas_result *r) {
  FILE *f = fopen(path, "rb");
  size_t n = f ? fread(r->log, 1, sizeof r->log - 1, f) : 0;
  r->log[n] = '\0';
  if (f)
    fclose(f);
}

/* Run ptxas with stdout and stderr into `log`. */
static df_status spawn_ptxas(const char *ptxas, char *const argv[], const char *log) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  pid_t pid;
  int rc = posix_spawn(&pid, ptxas, &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0)
    return df_status_errorf(DF_EIO, "cannot run ptxas '%s': %s", ptxas, strerror(rc));
  int status;
  if (waitpid(pid, &status, 0) < 0)
    return df_status_errorf(DF_EIO, "waiting for ptxas failed: %s", strerror(errno));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return df_status_errorf(DF_EINVAL, "ptxas rejected the kernel");
  return df_status_ok();
}

df_status df_ptxas_run(const char *ptxas, const char *ptx, size_t len, const char *sm,
                       const char *cubin, df_ptxas_result *r) {
  memset(r, 0, sizeof *r);
  const char *tmp = getenv("TMPDIR");
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/df-ptxas-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
  if (!mkdtemp(dir))
    return df_status_errorf(DF_EIO, "cannot make a temporary folder '%s': %s", dir,
                            strerror(errno));
  char in[4200], out[4200], log[4200], arch[64];
  snprintf(in, sizeof in, "%s/kernel.ptx", dir);
  snprintf(out, sizeof out, "%s/kernel.cubin", dir);
  snprintf(log, sizeof log, "%s/ptxas.log", dir);
  snprintf(arch, sizeof arch, "-arch=%s", sm ? sm : "sm_90a");
  df_status s = write_file(in, ptx, len);
  if (s.code == DF_OK) {
    char *argv[] = {(char *)ptxas, arch, "-v", "-o", (char *)(cubin ? cubin : out), in, NULL};
    s = spawn_ptxas(ptxas, argv, log);
    read_log(log, r);
    if (s.code == DF_OK)
      parse_report(r);
    else if (s.code == DF_EINVAL)
      s = df_status_errorf(DF_EINVAL, "ptxas rejected the kernel: %.400s", r->log);
  }
  unlink(in);
  unlink(out);
  unlink(log);
  rmdir(dir);
  return s;
}
