/* Executables: a module, the plan it runs and everything on the device
   that plan needs (REFERENCE 7.4, 7.5). */
#include <stdio.h>
#include <string.h>

#include "internal.h"

static df_status copy_options(df_rt_executable *e, const df_rt_executable_options *o) {
  static const uint32_t none[3] = {0, 0, 0};
  const uint32_t *bd = o ? o->block_dim : none;
  if (bd[0] == 0 && bd[1] == 0 && bd[2] == 0) {
    e->block_dim[0] = DF_RT_DEFAULT_BLOCK_DIM_X;
    e->block_dim[1] = e->block_dim[2] = 1;
  } else if (bd[0] == 0 || bd[1] == 0 || bd[2] == 0) {
    return df_status_errorf(DF_EINVAL,
                            "executable: block_dim (%u,%u,%u) must be 3 positive integers",
                            bd[0], bd[1], bd[2]);
  } else {
    memcpy(e->block_dim, bd, sizeof e->block_dim);
  }
  e->block_size_option = o ? o->block_size : 0;
  e->copy_back_staging = o && o->copy_back_staging;
  return df_status_ok();
}

/* Tensor names: the options', else the program's argument order. */
static df_status copy_names(df_rt_executable *e, const df_rt_plan *plan,
                            const df_rt_executable_options *o) {
  df_allocator *a = &e->rt->alloc;
  const char *stack[64];
  const char *const *names = NULL;
  uint32_t count = 0;
  e->program_tensor_count = DF_SENTINEL;
  if (plan->program) {
    uint32_t n = df_program_tensor_args(plan->program, stack, 64);
    if (n > 64)
      return df_status_errorf(DF_EUNSUPPORTED, "executable: program has %u tensor arguments, "
                                               "over the runtime's 64",
                              n);
    e->program_tensor_count = n;
    names = stack;
    count = n;
  }
  if (o && o->tensor_names) {
    names = o->tensor_names;
    count = o->tensor_name_count;
  } else if (o && o->tensor_name_count) {
    return df_status_errorf(DF_EINVAL, "executable: tensor_name_count %u without tensor_names",
                            o->tensor_name_count);
  }
  e->names = df_alloc(a, sizeof *e->names * (count ? count : 1));
  if (!e->names)
    return df_status_errorf(DF_ENOMEM, "executable: out of memory");
  for (uint32_t i = 0; i < count; i++) {
    if (!names[i] || !names[i][0] || strlen(names[i]) >= DF_NAME_MAX)
      return df_status_errorf(DF_EINVAL, "executable: tensor name %u must have 1 to %d bytes",
                              i, DF_NAME_MAX - 1);
    snprintf(e->names[i], DF_NAME_MAX, "%s", names[i]);
  }
  e->name_count = count;
  return df_status_ok();
}

static uint32_t find_name(const df_rt_executable *e, const char *name) {
  for (uint32_t i = 0; i < e->name_count; i++)
    if (strcmp(e->names[i], name) == 0)
      return i;
  return DF_SENTINEL;
}

static df_status copy_tma(df_rt_executable *e, const df_rt_executable_options *o) {
  uint32_t n = o ? o->tma_count : 0;
  if (n && !o->tma_specs)
    return df_status_errorf(DF_EINVAL, "executable: tma_count %u without tma_specs", n);
  df_allocator *a = &e->rt->alloc;
  e->tma = df_alloc(a, sizeof *e->tma * (n ? n : 1));
  e->tma_index = df_alloc(a, sizeof *e->tma_index * (n ? n : 1));
  e->targs.ptr_map = df_alloc(a, sizeof *e->targs.ptr_map * (n ? n : 1));
  /* Tensor maps must be 64-byte aligned for the driver (cuda.h declares
     128): over-allocate and align by hand. */
  e->targs.map_block = df_alloc(a, sizeof(CUtensorMap) * (n ? n : 1) + 128);
  if (!e->tma || !e->tma_index || !e->targs.ptr_map || !e->targs.map_block)
    return df_status_errorf(DF_ENOMEM, "executable: out of memory for %u TMA specs", n);
  uintptr_t base = ((uintptr_t)e->targs.map_block + 127) & ~(uintptr_t)127;
  e->targs.maps = (CUtensorMap *)base;
  memset(e->targs.maps, 0, sizeof(CUtensorMap) * (n ? n : 1));
  for (uint32_t i = 0; i < n; i++) {
    const df_rt_tma_spec *sp = &o->tma_specs[i];
    DF_TRY(df_rt_tma_spec_check(sp));
    for (uint32_t j = 0; j < i; j++)
      if (strcmp(o->tma_specs[j].name, sp->name) == 0)
        return df_status_errorf(DF_EINVAL, "executable: TMA descriptor '%s' is given twice",
                                sp->name);
    e->tma[i] = *sp;
    e->tma_index[i] = find_name(e, sp->tensor_name);
    if (e->tma_index[i] == DF_SENTINEL)
      return df_status_errorf(DF_EINVAL,
                              "executable: TMA descriptor '%s' references missing tensor "
                              "argument '%s' (%u tensor argument names known)",
                              sp->name, sp->tensor_name, e->name_count);
  }
  e->tma_count = n;
  return df_status_ok();
}

static df_status copy_handlers(df_rt_executable *e, const df_packed *k) {
  df_allocator *a = &e->rt->alloc;
  e->handlers = df_alloc(a, sizeof *e->handlers * (k->handler_count ? k->handler_count : 1));
  if (!e->handlers)
    return df_status_errorf(DF_ENOMEM, "executable: out of memory");
  if (k->handler_count)
    memcpy(e->handlers, k->handlers, sizeof *e->handlers * k->handler_count);
  e->handler_count = k->handler_count;
  return df_status_ok();
}

/* Everything that depends on the plan: pre-checks, plan arrays, staging,
   flags, scalar parameters. The executable keeps its previous plan when
   this fails before the uploads. */
static df_status apply_plan(df_rt_executable *e, const df_rt_plan *plan, CUstream stream) {
  const df_packed *k = plan->packed;
  df_allocator *a = &e->rt->alloc;
  DF_TRY(dfrt_plan_check(k));
  uint32_t *map = df_alloc(a, sizeof *map * (k->handler_count ? k->handler_count : 1));
  if (!map)
    return df_status_errorf(DF_ENOMEM, "executable: out of memory");
  dfrt_launch_cfg cfg;
  memset(&cfg, 0, sizeof cfg);
  df_status s = dfrt_map_handlers(e, k, map);
  if (s.code == DF_OK)
    s = dfrt_launch_prepare(e, &k->launch, plan->block_size, &cfg);
  if (s.code != DF_OK) {
    df_free(a, map); /* nothing changed on the device */
    return s;
  }
  /* From here on the device buffers change: until this succeeds the
     executable refuses to launch. */
  e->plan_valid = false;
  s = dfrt_plan_upload(e, k, map, stream);
  df_free(a, map);
  if (s.code == DF_OK)
    s = dfrt_buffer_reserve(e->dev, &e->staging, k->launch.global_staging_bytes,
                            "executable: global staging", NULL);
  /* A kernel that zeroes the next launch's flags (ABI 2) gets two copies
     of them to alternate between. */
  const bool alternate = e->module->info.kernel_abi >= 2 && cfg.needs_flag_reset &&
                         k->launch.flags_bytes;
  if (s.code == DF_OK)
    s = dfrt_buffer_reserve(e->dev, &e->flags, k->launch.flags_bytes * (alternate ? 2 : 1),
                            "executable: flags", NULL);
  if (s.code != DF_OK)
    return s;
  e->launch = k->launch;
  e->launch.barrier_init_offsets = e->launch.barrier_init_lengths = NULL;
  e->launch.barrier_init_indices = NULL;
  e->cfg = cfg;
  e->staging_bytes = k->launch.global_staging_bytes;
  e->flags_bytes = k->launch.flags_bytes;
  e->flags_alternate = alternate;
  e->flags_stale = true;
  e->flag_copy = 0;
  e->param_flags_clear = 0;
  e->param_flags_clear_words = 0;
  e->params_ptr[DFRT_P_GLOBAL_STAGING] = e->staging.ptr;
  e->params_ptr[DFRT_P_FLAGS] = e->flags.ptr;
  e->params_u32[0] = k->launch.shared_slot_base_offset;
  e->params_u32[1] = k->launch.barrier_count;
  e->params_u32[2] = k->launch.cluster_ack_count;
  e->params_u32[3] = k->launch.cluster_size;
  e->params_u32[4] = cfg.block_size;
  e->params_u32[5] = 0; /* scratch_offset */
  e->plan_valid = true;
  e->plan_id = plan->id;
  return s;
}

df_status df_rt_executable_create(df_rt_module *module, const df_rt_plan *plan,
                                  const df_rt_executable_options *o,
                                  df_rt_executable **out) {
  if (!module || !plan || !out)
    return df_status_errorf(DF_EINVAL, "executable: NULL argument to df_rt_executable_create");
  *out = NULL;
  df_rt_device *dev = module->dev;
  df_rt *rt = dev->rt;
  DF_TRY(dfrt_bind(dev));
  df_rt_executable *e = df_alloc(&rt->alloc, sizeof *e);
  if (!e)
    return df_status_errorf(DF_ENOMEM, "executable: out of memory");
  memset(e, 0, sizeof *e);
  e->module = module;
  e->dev = dev;
  e->rt = rt;
  df_status s = copy_options(e, o);
  if (s.code == DF_OK)
    s = copy_names(e, plan, o);
  if (s.code == DF_OK)
    s = copy_tma(e, o);
  if (s.code == DF_OK)
    s = copy_handlers(e, plan->packed);
  if (s.code == DF_OK)
    s = apply_plan(e, plan, df_rt_stream_handle(o ? o->stream : NULL));
  if (s.code != DF_OK) {
    df_rt_executable_destroy(e);
    return s;
  }
  *out = e;
  return s;
}

void df_rt_executable_destroy(df_rt_executable *e) {
  if (!e)
    return;
  df_allocator *a = &e->rt->alloc;
  dfrt_bind(e->dev);
  dfrt_buffer_release(e->dev, &e->plan_buf);
  dfrt_buffer_release(e->dev, &e->staging);
  dfrt_buffer_release(e->dev, &e->flags);
  dfrt_targs_release(e);
  dfrt_watch_release(e);
  df_free(a, e->plan_host);
  df_free(a, e->staging_host);
  df_free(a, e->handlers);
  df_free(a, e->names);
  df_free(a, e->tma);
  df_free(a, e->tma_index);
  df_free(a, e);
}

df_status df_rt_executable_set_plan(df_rt_executable *e, const df_rt_plan *plan,
                                    df_rt_stream *stream) {
  if (!e || !plan)
    return df_status_errorf(DF_EINVAL, "executable: NULL argument to df_rt_executable_set_plan");
  DF_TRY(dfrt_bind(e->dev));
  return apply_plan(e, plan, df_rt_stream_handle(stream));
}

df_status df_rt_executable_patch_lengths(df_rt_executable *e, df_rt_plan *plan,
                                         const uint32_t *lengths, uint32_t count,
                                         uint32_t max_last_block, df_rt_stream *stream,
                                         df_patch_result *out) {
  if (!e || !plan || !out)
    return df_status_errorf(DF_EINVAL,
                            "executable: NULL argument to df_rt_executable_patch_lengths");
  if (!e->plan_valid || e->plan_id != plan->id)
    return df_status_errorf(DF_EINVAL,
                            "executable: df_rt_executable_patch_lengths needs the plan the "
                            "executable runs (its last df_rt_executable_set_plan); patch another "
                            "plan with df_rt_plan_patch_lengths and set it");
  DF_TRY(dfrt_bind(e->dev));
  DF_TRY(df_rt_plan_patch_lengths(plan, lengths, count, max_last_block, out));
  if (!out->patched || out->changed == 0)
    return df_status_ok();
  /* Only range_end words of args records moved: the args section alone
     goes up (the plan's structure, checked at set_plan, is unchanged). */
  const df_packed *k = plan->packed;
  const size_t bytes = sizeof(df_abi_args) * k->arg_count, at = e->sections[DFRT_SEC_ARGS];
  if (at + bytes > e->plan_bytes)
    return df_status_errorf(DF_EINTERNAL,
                            "executable: the args section (%zu bytes at %zu) is outside the "
                            "uploaded %zu-byte plan image",
                            bytes, at, e->plan_bytes);
  memcpy(e->plan_host + at, k->args, bytes);
  df_status s = dfrt_check(e->rt,
                           e->rt->drv.cuMemcpyHtoDAsync(e->plan_buf.ptr + at, e->plan_host + at,
                                                        bytes, df_rt_stream_handle(stream)),
                           "executable: plan args", "cuMemcpyHtoDAsync");
  if (s.code != DF_OK)
    e->plan_valid = false; /* the device args may be half new */
  return s;
}

df_status df_rt_executable_set_tensor_metadata(df_rt_executable *e,
                                               const df_rt_tensor *tensors, uint32_t count) {
  if (!e || (count && !tensors))
    return df_status_errorf(DF_EINVAL,
                            "executable: NULL argument to df_rt_executable_set_tensor_metadata");
  dfrt_meta *meta;
  DF_TRY(dfrt_meta_build(e, tensors, count, &meta));
  dfrt_targs_adopt_meta(e, meta, count);
  return df_status_ok();
}

df_status df_rt_executable_bind_tensors(df_rt_executable *e, df_rt_stream *stream,
                                        const df_rt_tensor *tensors, uint32_t count) {
  if (!e || (count && !tensors))
    return df_status_errorf(DF_EINVAL,
                            "executable: NULL argument to df_rt_executable_bind_tensors");
  if (e->program_tensor_count != DF_SENTINEL && count != e->program_tensor_count)
    return df_status_errorf(DF_EINVAL,
                            "executable: %u tensors bound, the plan's program takes %u "
                            "(use df_rt_tensor_missing for absent ones)",
                            count, e->program_tensor_count);
  df_allocator *a = &e->rt->alloc;
  df_abi_tensor_arg *records = df_alloc(a, sizeof *records * (count ? count : 1));
  if (!records)
    return df_status_errorf(DF_ENOMEM, "executable: out of memory packing tensor args");
  df_status s = df_status_ok();
  for (uint32_t i = 0; i < count && s.code == DF_OK; i++) {
    s = df_rt_tensor_pack(&tensors[i], &records[i]);
    if (s.code != DF_OK) {
      char prefix[DF_NAME_MAX + 40];
      snprintf(prefix, sizeof prefix, "executable: tensor %u%s%s%s", i,
               i < e->name_count ? " '" : "", i < e->name_count ? e->names[i] : "",
               i < e->name_count ? "'" : "");
      s = df_status_wrap(s, prefix);
    }
  }
  dfrt_meta *meta = NULL;
  if (s.code == DF_OK)
    s = dfrt_meta_build(e, tensors, count, &meta);
  if (s.code == DF_OK)
    s = dfrt_targs_bind(e, records, count, meta, df_rt_stream_handle(stream));
  df_free(a, records);
  return s;
}

df_status df_rt_executable_update_tensor_args(df_rt_executable *e, df_rt_stream *stream,
                                              const void *bytes, size_t len) {
  if (!e || (len && !bytes))
    return df_status_errorf(DF_EINVAL,
                            "executable: NULL argument to df_rt_executable_update_tensor_args");
  DF_TRY(dfrt_bind(e->dev));
  return dfrt_targs_update(e, bytes, len, df_rt_stream_handle(stream));
}

/* The flags of the next launch: a kernel of ABI 2 runs on one copy and
   zeroes the other for the launch after it, so only a new plan or a
   failed launch needs a memset (of both); older kernels get their one
   copy reset before every launch. bench/attention run AA: the reset
   costs ~1 us of device time per launch. */
static df_status flags_for_launch(df_rt_executable *e, CUstream h) {
  const df_cuda_driver *d = &e->rt->drv;
  if (!e->cfg.needs_flag_reset || !e->flags_bytes)
    return df_status_ok();
  if (!e->flags_alternate)
    return dfrt_check(e->rt, d->cuMemsetD8Async(e->flags.ptr, 0, e->flags_bytes, h),
                      "launch: flag reset", "cuMemsetD8Async");
  if (e->flags_stale) {
    DF_TRY(dfrt_check(e->rt, d->cuMemsetD8Async(e->flags.ptr, 0, 2 * e->flags_bytes, h),
                      "launch: flag reset", "cuMemsetD8Async"));
    e->flags_stale = false;
  }
  e->params_ptr[DFRT_P_FLAGS] = e->flags.ptr + e->flag_copy * e->flags_bytes;
  e->param_flags_clear = e->flags.ptr + (1u - e->flag_copy) * e->flags_bytes;
  e->param_flags_clear_words = (uint32_t)(e->flags_bytes / 4);
  return df_status_ok();
}

df_status df_rt_executable_launch(df_rt_executable *e, df_rt_stream *stream) {
  if (!e)
    return df_status_errorf(DF_EINVAL, "executable: NULL argument to df_rt_executable_launch");
  if (!e->plan_valid)
    return df_status_errorf(DF_EINVAL,
                            "launch: the executable holds no complete plan (the last "
                            "df_rt_executable_set_plan failed while uploading); set a plan again");
  CUstream h = df_rt_stream_handle(stream);
  const df_cuda_driver *d = &e->rt->drv;
  DF_TRY(dfrt_bind(e->dev));
  DF_TRY(dfrt_watch_before(e, h));
  dfrt_targs *t = &e->targs;
  DF_TRY(dfrt_targs_update(e, t->current, t->current_len, h));
  if (e->tma_count && !t->built) {
    /* No descriptors yet: validation says why (usually a null pointer). */
    uint64_t ptrs[1];
    uint64_t *p = e->tma_count <= 1 ? ptrs : df_alloc(&e->rt->alloc, sizeof *p * e->tma_count);
    if (!p)
      return df_status_errorf(DF_ENOMEM, "launch: out of memory reading TMA pointers");
    dfrt_tma_pointers(e, t->current, t->current_len, p);
    df_status s = dfrt_tma_build(e, p, t->meta, t->meta_count, t->maps);
    if (s.code == DF_OK) {
      t->built = true;
      t->builds++;
      memcpy(t->ptr_map, p, sizeof *p * e->tma_count);
      t->has_ptr_map = true;
    }
    if (p != ptrs)
      df_free(&e->rt->alloc, p);
    if (s.code != DF_OK)
      return df_status_wrap(s, "launch");
  }
  DF_TRY(flags_for_launch(e, h));
  df_status ls = dfrt_launch_attributes(e, &e->cfg);
  if (ls.code == DF_OK)
    ls = dfrt_launch_kernel(e, h);
  if (ls.code != DF_OK) {
    e->flags_stale = true; /* whether the kernel ran is unknown */
    return ls;
  }
  e->flag_copy ^= e->flags_alternate; /* the next launch runs on the copy just zeroed */
  ls = dfrt_watch_after(e, h);
  if (ls.code != DF_OK) {
    e->flags_stale = true; /* a launch the watchdog stopped left its flags set */
    return ls;
  }
  if (!e->copy_back_staging)
    return df_status_ok();
  if (e->staging_host_len != e->staging_bytes) {
    df_free(&e->rt->alloc, e->staging_host);
    e->staging_host_len = 0;
    e->staging_host = df_alloc(&e->rt->alloc, e->staging_bytes ? e->staging_bytes : 1);
    if (!e->staging_host)
      return df_status_errorf(DF_ENOMEM, "launch: out of memory for the staging copy");
    e->staging_host_len = e->staging_bytes;
  }
  if (e->staging_bytes)
    DF_TRY(dfrt_check(e->rt,
                      d->cuMemcpyDtoHAsync(e->staging_host, e->staging.ptr, e->staging_bytes, h),
                      "launch: staging copy-back", "cuMemcpyDtoHAsync"));
  return dfrt_check(e->rt, d->cuStreamSynchronize(h), "launch: staging copy-back",
                    "cuStreamSynchronize");
}

df_status df_rt_executable_launch_info(const df_rt_executable *e, df_rt_launch_info *out) {
  if (!e || !out)
    return df_status_errorf(DF_EINVAL,
                            "executable: NULL argument to df_rt_executable_launch_info");
  memset(out, 0, sizeof *out);
  out->grid[0] = e->cfg.grid_x;
  out->grid[1] = out->grid[2] = 1;
  memcpy(out->block, e->cfg.block, sizeof out->block);
  out->cluster_size = e->cfg.cluster_size;
  out->dynamic_shared_bytes = e->cfg.shared_bytes;
  out->non_portable_cluster = e->cfg.non_portable;
  out->needs_flag_reset = e->cfg.needs_flag_reset;
  out->flags_alternate = e->flags_alternate;
  out->block_size = e->cfg.block_size;
  out->param_count = dfrt_fixed_params(e->module) + e->tma_count;
  out->flags_bytes = e->flags_bytes;
  out->staging_bytes = e->staging_bytes;
  out->plan_bytes = e->plan_bytes;
  return df_status_ok();
}

df_status df_rt_executable_staging(const df_rt_executable *e, const uint8_t **bytes,
                                   size_t *len) {
  if (!e || !bytes || !len)
    return df_status_errorf(DF_EINVAL, "executable: NULL argument to df_rt_executable_staging");
  *bytes = e->staging_host;
  *len = e->staging_host ? e->staging_host_len : 0;
  return df_status_ok();
}

df_status df_rt_executable_read_staging(df_rt_executable *e, df_rt_stream *stream, void *dst,
                                        size_t len) {
  if (!e || (len && !dst))
    return df_status_errorf(DF_EINVAL,
                            "executable: NULL argument to df_rt_executable_read_staging");
  if (len != e->staging_bytes)
    return df_status_errorf(DF_EINVAL,
                            "executable: staging read of %zu bytes, the plan's staging has %zu",
                            len, e->staging_bytes);
  return df_rt_memcpy_dtoh(e->dev, stream, dst, e->staging.ptr, len);
}

void df_rt_executable_tensor_args(const df_rt_executable *e, const uint8_t **bytes,
                                  size_t *len) {
  *bytes = e ? e->targs.current : NULL;
  *len = e ? e->targs.current_len : 0;
}

uint32_t df_rt_executable_tma_builds(const df_rt_executable *e) {
  return e ? e->targs.builds : 0;
}
