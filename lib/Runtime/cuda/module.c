/* Modules: classify and load a PTX/cubin/fatbin image, return the JIT log
   on failure, find the kernel and read its attributes. */
#include <stdio.h>
#include <string.h>

#include "internal.h"

enum { DFRT_JIT_LOG_BYTES = 16384, DFRT_STATUS_LOG_CHARS = 320 };

df_status df_rt_image_classify(const void *image, size_t bytes, df_rt_image_kind *out) {
  if (!image || !out)
    return df_status_errorf(DF_EINVAL, "module: NULL argument to df_rt_image_classify");
  const uint8_t *b = image;
  if (bytes >= 4 && b[0] == 0x7f && b[1] == 'E' && b[2] == 'L' && b[3] == 'F') {
    *out = DF_RT_IMAGE_CUBIN;
    return df_status_ok();
  }
  if (bytes >= 4 && b[0] == 0x50 && b[1] == 0xed && b[2] == 0x55 && b[3] == 0xba) {
    *out = DF_RT_IMAGE_FATBIN;
    return df_status_ok();
  }
  /* PTX: text holding a .version directive (before any NUL). */
  size_t n = strnlen((const char *)b, bytes);
  static const char directive[] = ".version";
  for (size_t i = 0; n >= sizeof directive - 1 && i + sizeof directive - 1 <= n; i++)
    if (memcmp(b + i, directive, sizeof directive - 1) == 0) {
      *out = DF_RT_IMAGE_PTX;
      return df_status_ok();
    }
  return df_status_errorf(DF_EFORMAT,
                          "module: image of %zu bytes is neither a cubin (ELF), a fatbin nor "
                          "PTX text (no '.version' directive)",
                          bytes);
}

static const char *kind_name(df_rt_image_kind k) {
  switch (k) {
  case DF_RT_IMAGE_PTX: return "PTX";
  case DF_RT_IMAGE_CUBIN: return "cubin";
  case DF_RT_IMAGE_FATBIN: return "fatbin";
  }
  return "image";
}

static void copy_log(char *dst, size_t cap, const char *src) {
  if (dst && cap) {
    snprintf(dst, cap, "%s", src);
  }
}

static df_status read_attributes(df_rt_module *m) {
  const df_cuda_driver *d = &m->dev->rt->drv;
  struct {
    CUfunction_attribute a;
    int *out;
  } attrs[] = {
      {CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, &m->info.max_threads_per_block},
      {CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, &m->info.static_shared_bytes},
      {CU_FUNC_ATTRIBUTE_NUM_REGS, &m->info.num_regs},
      {CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, &m->info.local_bytes},
  };
  char object[DF_NAME_MAX + 32];
  snprintf(object, sizeof object, "module: kernel '%s'", m->kernel_name);
  for (size_t i = 0; i < sizeof attrs / sizeof attrs[0]; i++)
    DF_TRY(dfrt_check(m->dev->rt, d->cuFuncGetAttribute(attrs[i].out, attrs[i].a, m->fn),
                      object, "cuFuncGetAttribute"));
  return df_status_ok();
}

/* The image's u32 constant NAME into *out, *present = whether the image
   has it (an image built before NAME, or a driver table without
   cuModuleGetGlobal, has not). */
static df_status read_u32_global(df_rt_module *m, const char *name, bool *present,
                                 uint32_t *out) {
  const df_cuda_driver *d = &m->dev->rt->drv;
  *present = false;
  if (!d->cuModuleGetGlobal)
    return df_status_ok();
  CUdeviceptr ptr = 0;
  size_t bytes = 0;
  CUresult r = d->cuModuleGetGlobal(&ptr, &bytes, m->module, name);
  if (r == CUDA_ERROR_NOT_FOUND)
    return df_status_ok();
  char object[96];
  snprintf(object, sizeof object, "module: %s", name);
  DF_TRY(dfrt_check(m->dev->rt, r, object, "cuModuleGetGlobal"));
  if (bytes != sizeof(uint32_t))
    return df_status_errorf(DF_EFORMAT, "%s is %zu bytes; the generated module defines a "
                                        "uint32_t",
                            object, bytes);
  DF_TRY(dfrt_check(m->dev->rt, d->cuMemcpyDtoHAsync(out, ptr, sizeof *out, NULL), object,
                    "cuMemcpyDtoHAsync"));
  DF_TRY(dfrt_check(m->dev->rt, d->cuStreamSynchronize(NULL), object, "cuStreamSynchronize"));
  *present = true;
  return df_status_ok();
}

/* The image's df_handler_workspace_bytes (docs/workspace.md); an image
   without the symbol (built before the workspace) has none. */
static df_status read_workspace(df_rt_module *m) {
  bool present;
  uint32_t w = 0;
  m->info.workspace_bytes = 0;
  DF_TRY(read_u32_global(m, "df_handler_workspace_bytes", &present, &w));
  if (present && w > DF_WORKSPACE_MAX_BYTES)
    return df_status_errorf(DF_EFORMAT, "module: df_handler_workspace_bytes is %u, over the "
                                        "largest workspace a handler may declare (%u bytes)",
                            w, DF_WORKSPACE_MAX_BYTES);
  m->info.workspace_bytes = present ? w : 0;
  return df_status_ok();
}

/* The image's df_rt_kernel_abi: 1 (REFERENCE §6's 21 parameters) when
   absent; df's device runtime defines DF_RT_KERNEL_ABI. */
static df_status read_kernel_abi(df_rt_module *m) {
  bool present;
  uint32_t v = 0;
  DF_TRY(read_u32_global(m, "df_rt_kernel_abi", &present, &v));
  if (present && (v < 1 || v > DF_RT_KERNEL_ABI))
    return df_status_errorf(DF_EFORMAT, "module: df_rt_kernel_abi is %u; this libdfrt launches "
                                        "kernel ABIs 1 to %u",
                            v, DF_RT_KERNEL_ABI);
  m->info.kernel_abi = present ? v : 1;
  return df_status_ok();
}

/* cuModuleLoadDataEx with info and error log buffers. */
static df_status load_image(df_rt_module *m, const void *image, char *info, char *error) {
  const df_cuda_driver *d = &m->dev->rt->drv;
  CUjit_option opts[5] = {CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
                          CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                          CU_JIT_LOG_VERBOSE};
  void *vals[5] = {info, (void *)(uintptr_t)DFRT_JIT_LOG_BYTES, error,
                   (void *)(uintptr_t)DFRT_JIT_LOG_BYTES, (void *)(uintptr_t)1};
  info[0] = error[0] = '\0';
  CUresult r = d->cuModuleLoadDataEx(&m->module, image, 5, opts, vals);
  info[DFRT_JIT_LOG_BYTES - 1] = error[DFRT_JIT_LOG_BYTES - 1] = '\0';
  if (r == CUDA_SUCCESS)
    return df_status_ok();
  m->module = NULL;
  char object[64];
  snprintf(object, sizeof object, "module: %s image", kind_name(m->info.image_kind));
  df_status s = dfrt_check(m->dev->rt, r, object, "cuModuleLoadDataEx");
  if (error[0]) {
    size_t used = strlen(s.message);
    snprintf(s.message + used, sizeof s.message - used, "; JIT log: %.*s%s",
             (int)DFRT_STATUS_LOG_CHARS, error,
             strlen(error) > DFRT_STATUS_LOG_CHARS ? "..." : "");
  }
  return s;
}

static df_status load(df_rt_module *m, const void *image, size_t bytes,
                      const df_rt_module_options *o) {
  df_allocator *a = &m->dev->rt->alloc;
  DF_TRY(df_rt_image_classify(image, bytes, &m->info.image_kind));
  /* A private copy; PTX gets the terminating NUL the driver needs. */
  uint8_t *copy = df_alloc(a, bytes + 1);
  char *logs = df_alloc(a, 2 * DFRT_JIT_LOG_BYTES);
  if (!copy || !logs) {
    df_free(a, copy);
    df_free(a, logs);
    return df_status_errorf(DF_ENOMEM, "module: out of memory copying a %zu-byte image",
                            bytes);
  }
  memcpy(copy, image, bytes);
  copy[bytes] = 0;
  char *info = logs, *error = logs + DFRT_JIT_LOG_BYTES;
  df_status s = load_image(m, copy, info, error);
  df_free(a, copy);
  if (s.code != DF_OK) {
    copy_log(o ? o->jit_log : NULL, o ? o->jit_log_cap : 0, error);
    df_free(a, logs);
    return s;
  }
  copy_log(o ? o->jit_log : NULL, o ? o->jit_log_cap : 0, info);
  size_t n = strlen(info) + 1;
  m->info_log = df_alloc(a, n);
  if (m->info_log)
    memcpy(m->info_log, info, n);
  df_free(a, logs);
  if (!m->info_log)
    return df_status_errorf(DF_ENOMEM, "module: out of memory keeping the JIT log");
  CUresult r = m->dev->rt->drv.cuModuleGetFunction(&m->fn, m->module, m->kernel_name);
  if (r != CUDA_SUCCESS) {
    char object[DF_NAME_MAX + 48];
    snprintf(object, sizeof object, "module: kernel '%s' not found in the %s image",
             m->kernel_name, kind_name(m->info.image_kind));
    return dfrt_check(m->dev->rt, r, object, "cuModuleGetFunction");
  }
  /* The watched twin, optional: a module without it runs its one entry
     under a watchdog too. */
  char watched[DF_NAME_MAX + sizeof DF_RT_WATCHED_SUFFIX];
  snprintf(watched, sizeof watched, "%s" DF_RT_WATCHED_SUFFIX, m->kernel_name);
  r = m->dev->rt->drv.cuModuleGetFunction(&m->fn_watched, m->module, watched);
  if (r == CUDA_ERROR_NOT_FOUND)
    m->fn_watched = NULL;
  else if (r != CUDA_SUCCESS)
    return dfrt_check(m->dev->rt, r, "module: watched kernel entry", "cuModuleGetFunction");
  DF_TRY(read_attributes(m));
  DF_TRY(read_workspace(m));
  return read_kernel_abi(m);
}

df_status df_rt_module_load(df_rt_device *dev, const void *image, size_t bytes,
                            const df_rt_module_options *o, df_rt_module **out) {
  if (!dev || !image || !out)
    return df_status_errorf(DF_EINVAL, "module: NULL argument to df_rt_module_load");
  *out = NULL;
  if (o && o->jit_log && o->jit_log_cap)
    o->jit_log[0] = '\0';
  const char *name = o && o->kernel_name ? o->kernel_name : DF_RT_KERNEL_NAME;
  if (!name[0] || strlen(name) >= DF_NAME_MAX)
    return df_status_errorf(DF_EINVAL, "module: kernel name '%s' must have 1 to %d bytes",
                            name, DF_NAME_MAX - 1);
  DF_TRY(dfrt_bind(dev));
  df_rt_module *m = df_alloc(&dev->rt->alloc, sizeof *m);
  if (!m)
    return df_status_errorf(DF_ENOMEM, "module: out of memory");
  memset(m, 0, sizeof *m);
  m->dev = dev;
  m->dynamic_shared_set = -1;
  snprintf(m->kernel_name, sizeof m->kernel_name, "%s", name);
  df_status s = load(m, image, bytes, o);
  if (s.code != DF_OK) {
    df_rt_module_unload(m);
    return s;
  }
  *out = m;
  return s;
}

df_status df_rt_module_load_file(df_rt_device *dev, const char *path,
                                 const df_rt_module_options *o, df_rt_module **out) {
  if (!dev || !out)
    return df_status_errorf(DF_EINVAL, "module: NULL argument to df_rt_module_load_file");
  *out = NULL;
  uint8_t *bytes;
  size_t len;
  DF_TRY(dfrt_read_file(&dev->rt->alloc, path, "module", &bytes, &len));
  df_status s = df_rt_module_load(dev, bytes, len, o, out);
  df_free(&dev->rt->alloc, bytes);
  if (s.code != DF_OK) {
    char prefix[300];
    snprintf(prefix, sizeof prefix, "'%s'", path);
    return df_status_wrap(s, prefix);
  }
  return s;
}

void df_rt_module_unload(df_rt_module *m) {
  if (!m)
    return;
  df_rt *rt = m->dev->rt;
  if (m->module && dfrt_bind(m->dev).code == DF_OK)
    rt->drv.cuModuleUnload(m->module);
  df_free(&rt->alloc, m->info_log);
  df_free(&rt->alloc, m);
}

const df_rt_kernel_info *df_rt_module_kernel_info(const df_rt_module *m) {
  return m ? &m->info : NULL;
}

const char *df_rt_module_info_log(const df_rt_module *m) {
  return m && m->info_log ? m->info_log : "";
}
