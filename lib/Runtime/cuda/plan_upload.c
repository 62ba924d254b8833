/* The plan arrays on the device: one allocation, every section at a
   256-byte aligned offset, in kernel-parameter order. Handler ids are
   rewritten through the executable's handler map on the way. */
#include <string.h>

#include "internal.h"

typedef struct section {
  const void *data;
  size_t bytes;
} section;

static size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

static void sections_of(const df_packed *k, section s[DFRT_SEC_COUNT]) {
  const df_launch_package *l = &k->launch;
  size_t sm = k->topology.sm_count;
  s[DFRT_SEC_INSTRUCTIONS] = (section){k->instrs, sizeof(df_abi_instr) * k->instr_count};
  s[DFRT_SEC_QUEUE_OFFSETS] = (section){k->queue_offsets, 4 * sm};
  s[DFRT_SEC_QUEUE_LENGTHS] = (section){k->queue_lengths, 4 * sm};
  s[DFRT_SEC_SLOTS] = (section){k->slots, sizeof(df_abi_slot) * k->slot_count};
  s[DFRT_SEC_COMMS] = (section){k->comms, sizeof(df_abi_comm) * k->comm_count};
  s[DFRT_SEC_BARRIER_INIT_OFFSETS] = (section){l->barrier_init_offsets, 4 * sm};
  s[DFRT_SEC_BARRIER_INIT_LENGTHS] = (section){l->barrier_init_lengths, 4 * sm};
  s[DFRT_SEC_BARRIER_INIT_INDICES] =
      (section){l->barrier_init_indices, 4 * (size_t)l->barrier_init_count};
  s[DFRT_SEC_ARGS] = (section){k->args, sizeof(df_abi_args) * k->arg_count};
  s[DFRT_SEC_INPUT_SLOTS] = (section){k->input_slots, 4 * (size_t)k->input_slot_count};
  s[DFRT_SEC_TASK_COORDS] = (section){k->task_coords, 4 * (size_t)k->task_coord_count};
}

static const int param_of_section[DFRT_SEC_COUNT] = {
    DFRT_P_INSTRUCTIONS,          DFRT_P_QUEUE_OFFSETS,         DFRT_P_QUEUE_LENGTHS,
    DFRT_P_SLOTS,                 DFRT_P_COMMS,                 DFRT_P_BARRIER_INIT_OFFSETS,
    DFRT_P_BARRIER_INIT_LENGTHS,  DFRT_P_BARRIER_INIT_INDICES,  DFRT_P_ARGS,
    DFRT_P_INPUT_SLOTS,           DFRT_P_TASK_COORDS,
};

df_status dfrt_plan_upload(df_rt_executable *e, const df_packed *k, const uint32_t *map,
                           CUstream stream) {
  section s[DFRT_SEC_COUNT];
  sections_of(k, s);
  size_t offsets[DFRT_SEC_COUNT], end = 0;
  for (int i = 0; i < DFRT_SEC_COUNT; i++) {
    offsets[i] = align_up(end, DFRT_SECTION_ALIGN);
    end = offsets[i] + s[i].bytes;
  }
  df_allocator *a = &e->rt->alloc;
  uint8_t *image = df_alloc(a, end ? end : 1);
  if (!image)
    return df_status_errorf(DF_ENOMEM, "executable: out of memory building a %zu-byte plan "
                                       "image",
                            end);
  memset(image, 0, end ? end : 1);
  for (int i = 0; i < DFRT_SEC_COUNT; i++)
    if (s[i].bytes)
      memcpy(image + offsets[i], s[i].data, s[i].bytes);
  df_abi_instr *in = (df_abi_instr *)(void *)(image + offsets[DFRT_SEC_INSTRUCTIONS]);
  for (uint32_t i = 0; i < k->instr_count; i++)
    if (in[i].handler_id != DF_SENTINEL && in[i].handler_id < k->handler_count)
      in[i].handler_id = map[in[i].handler_id];
  df_status st = dfrt_buffer_reserve(e->dev, &e->plan_buf, end, "executable: plan arrays",
                                     NULL);
  if (st.code == DF_OK && end)
    st = dfrt_check(e->rt, e->rt->drv.cuMemcpyHtoDAsync(e->plan_buf.ptr, image, end, stream),
                    "executable: plan arrays", "cuMemcpyHtoDAsync");
  if (st.code != DF_OK) {
    df_free(a, image);
    return st;
  }
  /* Kept for the watchdog's dump (handler ids as uploaded). */
  df_free(a, e->plan_host);
  e->plan_host = image;
  e->plan_bytes = end;
  for (int i = 0; i < DFRT_SEC_COUNT; i++) {
    e->sections[i] = offsets[i];
    e->params_ptr[param_of_section[i]] = e->plan_buf.ptr + offsets[i];
  }
  return st;
}
