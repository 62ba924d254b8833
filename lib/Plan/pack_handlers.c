/* The handler table of a packed plan (REFERENCE 5.4, 5.7): walk plan
   instructions in list order; the first key of each binding key is a
   primary handler, later keys are additional and numbered after all
   primaries, so an early additional variant never renumbers primaries. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "keymap.h"
#include "pack_internal.h"

static bool has_handler_op(df_instr_op op) {
  return op != DF_INSTR_EXIT && op != DF_INSTR_RESHARED && op != DF_INSTR_CLUSTER_SYNC;
}

/* Operator kind an opcode runs (REDUCE_UPDATE is a reduce). */
static df_op_kind opcode_kind(df_instr_op op) {
  switch (op) {
  case DF_INSTR_ITER: return DF_OPK_ITER;
  case DF_INSTR_MAP: return DF_OPK_MAP;
  case DF_INSTR_REDUCE:
  case DF_INSTR_REDUCE_UPDATE: return DF_OPK_REDUCE;
  case DF_INSTR_FINALIZE: return DF_OPK_FINALIZE;
  default: return DF_OPK_NONE;
  }
}

/* Stage lookups: by operator id, by opcode fallback, canonical per name. */
typedef struct stage_index {
  int32_t *by_operator;        /* operator id -> stage */
  uint32_t operator_count;
  int32_t fallback[DF_INSTR_OP_COUNT];
  int32_t *canonical;          /* stage -> first stage with its op_name */
} stage_index;

static df_status index_stages(const df_plan *p, df_arena *a, stage_index *x) {
  x->by_operator = df_arena_array(a, p->stage_count, sizeof(int32_t));
  x->canonical = df_arena_array(a, p->stage_count, sizeof(int32_t));
  if (!x->by_operator || !x->canonical)
    return DF_ARENA_OOM("the handler table");
  x->operator_count = 0;
  for (uint32_t i = 0; i < p->stage_count; i++) {
    const df_plan_stage *s = &p->stages[i];
    if (s->kind != DF_STAGE_RESHARED && s->op_name[0])
      x->by_operator[x->operator_count++] = (int32_t)i;
    x->canonical[i] = (int32_t)i;
    for (uint32_t j = 0; j < i; j++)
      if (strcmp(p->stages[j].op_name, s->op_name) == 0) {
        x->canonical[i] = (int32_t)j;
        break;
      }
  }
  for (int op = 0; op < DF_INSTR_OP_COUNT; op++) {
    x->fallback[op] = -1;
    for (uint32_t i = 0; i < p->stage_count && x->fallback[op] < 0; i++) {
      const df_plan_stage *s = &p->stages[i];
      if ((op == DF_INSTR_ITER && s->kind == DF_STAGE_MAP && s->op_kind == DF_OPK_ITER) ||
          ((op == DF_INSTR_REDUCE || op == DF_INSTR_REDUCE_UPDATE) &&
           s->kind == DF_STAGE_REDUCE) ||
          (op == DF_INSTR_FINALIZE && s->kind == DF_STAGE_FINALIZE))
        x->fallback[op] = (int32_t)i;
    }
  }
  return df_status_ok();
}

/* The stage naming an instruction's operator: its own stage, else the one
   of its identity's operator id, else the opcode's fallback; -1 none. */
static int32_t operator_stage(const df_plan *p, const stage_index *x, const df_instr *in) {
  if (in->stage >= 0 && (uint32_t)in->stage < p->stage_count &&
      p->stages[in->stage].op_name[0])
    return in->stage;
  if (in->has_identity)
    return in->identity.operator_id < x->operator_count
               ? x->by_operator[in->identity.operator_id]
               : -1;
  return (unsigned)in->op < DF_INSTR_OP_COUNT ? x->fallback[in->op] : -1;
}

/* REFERENCE 1.6 packing re-check of one handler instruction; `full`
   also runs the checks that depend on the identity and variant alone. */
static df_status check_identity(const df_plan *p, const df_instr *in, bool full) {
  (void)p;
  if (in->has_identity != in->has_variant)
    return df_status_errorf(DF_EINVAL,
                            "Dataflow handler identity and variant must both be present or "
                            "both absent: instruction_id=%u, identity=%s, variant=%s",
                            in->id, in->has_identity ? "set" : "None",
                            in->has_variant ? "set" : "None");
  if (!in->has_identity)
    return df_status_ok();
  const df_identity *id = &in->identity;
  const df_variant *v = &in->variant;
  if (full && (v->base.operator_id != id->operator_id || v->base.kind != id->kind))
    return df_status_errorf(DF_EINVAL,
                            "Dataflow handler variant base identity (%u, %s) does not match "
                            "handler identity (%u, %s): instruction_id=%u",
                            v->base.operator_id, df_op_kind_name(v->base.kind),
                            id->operator_id, df_op_kind_name(id->kind), in->id);
  if (id->kind != opcode_kind(in->op))
    return df_status_errorf(DF_EINVAL,
                            "Dataflow handler identity kind '%s' does not match instruction "
                            "opcode '%s': instruction_id=%u",
                            df_op_kind_name(id->kind), df_instr_op_name(in->op), in->id);
  if (full) {
    df_status st = df_variant_check(v);
    if (st.code != DF_OK) {
      char prefix[64];
      snprintf(prefix, sizeof prefix, "instruction %u", in->id);
      return df_status_wrap(st, prefix);
    }
  }
  if (v->has_arity) {
    uint32_t n = in->input_count;
    bool ok = n > 0 && v->arity == (n == 1 ? DF_ARITY_PASSTHROUGH
                                    : n == 2 ? DF_ARITY_BINARY
                                             : DF_ARITY_GENERIC);
    if (!ok) {
      char json[256];
      df_variant_to_json(v, json, sizeof json);
      return df_status_errorf(DF_EINVAL,
                              "Dataflow reduce handler variant does not match instruction "
                              "arity: instruction_id=%u, input_slots=%u, variant=%s",
                              in->id, n, json);
    }
  }
  return df_status_ok();
}

/* Handler key and binding key as five words; legacy instructions are
   keyed by (opcode kind, operator name) with bit 31 set. */
static void handler_keys(const df_instr *in, int32_t name_stage, df_key5 *key, df_key5 *bind) {
  memset(key, 0, sizeof *key);
  memset(bind, 0, sizeof *bind);
  if (in->has_variant) {
    const df_variant *v = &in->variant;
    key->w[0] = v->base.operator_id;
    key->w[1] = (uint32_t)v->base.kind | (uint32_t)v->has_iter << 4 |
                (uint32_t)v->iter_mode << 5 | (uint32_t)v->has_arity << 8 |
                (uint32_t)v->arity << 9;
    key->w[2] = v->has_iter ? v->iter_value : 0;
    key->w[3] = v->schema_version;
    bind->w[0] = v->base.operator_id;
    bind->w[1] = (uint32_t)v->base.kind;
    key->w[4] = in->impl; /* one handler per (variant, implementation) */
  } else {
    key->w[0] = (uint32_t)name_stage;
    key->w[1] = (uint32_t)opcode_kind(in->op) | 1u << 31;
    *bind = *key;
  }
}

/* dataflow_handler_<id>_<name>: non-identifier characters become '_',
   underscores are trimmed, an empty or digit-led name gets "op". */
void df_pack_handler_symbol(char *buf, size_t cap, uint32_t id, const char *name) {
  char s[DF_NAME_MAX];
  size_t n = 0;
  for (const char *c = name; *c && n + 1 < sizeof s; c++)
    s[n++] = isalnum((unsigned char)*c) || *c == '_' ? *c : '_';
  s[n] = '\0';
  size_t b = 0;
  while (s[b] == '_')
    b++;
  while (n > b && s[n - 1] == '_')
    s[--n] = '\0';
  const char *t = s + b;
  if (!*t)
    snprintf(buf, cap, "dataflow_handler_%u_op", id);
  else if (isdigit((unsigned char)*t))
    snprintf(buf, cap, "dataflow_handler_%u_op_%s", id, t);
  else
    snprintf(buf, cap, "dataflow_handler_%u_%s", id, t);
}

/* One distinct handler key in discovery order. */
typedef struct found {
  uint32_t instr;  /* first instruction with the key */
  int32_t stage;   /* its operator stage */
  bool primary;
  uint32_t id;
} found;

/* The handler walk order of the pack options: NULL (id order) or a
   checked permutation of the instruction ids. */
static df_status walk_order(df_pack_ctx *c, const uint32_t **order) {
  const df_pack_options *o = c->o;
  uint32_t n = c->p->instr_count;
  *order = NULL;
  if (!o || !o->handler_order)
    return df_status_ok();
  if (o->handler_order_count != n)
    return df_status_errorf(DF_EINVAL,
                            "handler_order names %u instructions, plan has %u",
                            o->handler_order_count, n);
  uint8_t *seen = df_arena_zero(c->a, n, 1);
  if (!seen)
    return DF_ARENA_OOM("the handler order");
  for (uint32_t i = 0; i < n; i++) {
    uint32_t id = o->handler_order[i];
    if (id >= n || seen[id])
      return df_status_errorf(DF_EINVAL,
                              "handler_order entry %u (instruction %u) is %s", i, id,
                              id >= n ? "out of range" : "repeated");
    seen[id] = 1;
  }
  *order = o->handler_order;
  return df_status_ok();
}

static df_status discover(df_pack_ctx *c, const stage_index *x, found *f, uint32_t *count,
                          uint32_t *primaries) {
  const df_plan *p = c->p;
  const uint32_t *order;
  DF_TRY(walk_order(c, &order));
  df_key5map keys, binds;
  if (!df_key5map_init(&keys, c->a, 16) || !df_key5map_init(&binds, c->a, 16))
    return DF_ARENA_OOM("the handler table");
  *count = *primaries = 0;
  /* instructions of one opcode mostly share a key: the last key per
     opcode skips the maps and the checks that depend on the key alone */
  struct {
    df_key5 key;
    df_identity id;
    uint32_t handler;
  } last[DF_INSTR_OP_COUNT];
  for (int op = 0; op < DF_INSTR_OP_COUNT; op++)
    last[op].handler = DF_SENTINEL;
  for (uint32_t n = 0; n < p->instr_count; n++) {
    uint32_t i = order ? order[n] : n;
    const df_instr *in = &p->instrs[i];
    c->handler_of[i] = DF_SENTINEL;
    if ((unsigned)in->op >= DF_INSTR_OP_COUNT)
      return df_status_errorf(DF_EINVAL, "instruction %u has invalid opcode %d", i, (int)in->op);
    if (!has_handler_op(in->op))
      continue;
    int32_t stage = operator_stage(p, x, in);
    if (!in->has_identity && stage < 0)
      return df_status_errorf(DF_EINVAL,
                              "instruction %u (%s) has no handler identity and no operator "
                              "name",
                              i, df_instr_op_name(in->op));
    if (!in->has_identity)
      stage = x->canonical[stage];
    df_key5 key, bind;
    handler_keys(in, stage, &key, &bind);
    bool same = last[in->op].handler != DF_SENTINEL && df_key5_equal(&key, &last[in->op].key) &&
                in->has_identity && in->has_variant &&
                in->identity.operator_id == last[in->op].id.operator_id &&
                in->identity.kind == last[in->op].id.kind;
    DF_TRY(check_identity(p, in, !same));
    if (same) {
      c->handler_of[i] = last[in->op].handler;
      continue;
    }
    if (!df_key5map_room(&keys, c->a) || !df_key5map_room(&binds, c->a))
      return DF_ARENA_OOM("the handler table");
    uint32_t have = df_key5map_put(&keys, &key, *count);
    if (have == DF_SENTINEL) {
      bool primary = df_key5map_put(&binds, &bind, 1) == DF_SENTINEL;
      f[*count] = (found){i, stage, primary, 0};
      *primaries += primary;
      have = (*count)++;
    }
    c->handler_of[i] = have; /* discovery index until numbered */
    last[in->op].key = key;
    last[in->op].id = in->has_identity ? in->identity : (df_identity){DF_SENTINEL, DF_OPK_NONE};
    last[in->op].handler = have;
  }
  uint32_t next_primary = 0, next_additional = *primaries;
  for (uint32_t h = 0; h < *count; h++)
    f[h].id = f[h].primary ? next_primary++ : next_additional++;
  for (uint32_t i = 0; i < p->instr_count; i++)
    if (c->handler_of[i] != DF_SENTINEL)
      c->handler_of[i] = f[c->handler_of[i]].id;
  return df_status_ok();
}

static void fill_handler(const df_plan *p, const found *f, df_handler *h) {
  const df_instr *in = &p->instrs[f->instr];
  memset(h, 0, sizeof *h);
  h->id = f->id;
  if (f->stage >= 0)
    snprintf(h->name, sizeof h->name, "%s", p->stages[f->stage].op_name);
  if (in->has_identity)
    h->kind = in->identity.kind;
  else if (f->stage >= 0 && p->stages[f->stage].op_kind != DF_OPK_NONE)
    h->kind = p->stages[f->stage].op_kind;
  else {
    df_abi_opcode op = df_instr_op_abi(in->op);
    h->kind = op == DF_ABI_OP_ITER      ? DF_OPK_ITER
              : op == DF_ABI_OP_REDUCE  ? DF_OPK_REDUCE
              : op == DF_ABI_OP_FINALIZE ? DF_OPK_FINALIZE
                                         : DF_OPK_NONE;
  }
  h->has_identity = in->has_identity;
  h->identity = in->identity;
  h->has_variant = in->has_variant;
  h->variant = in->variant;
  h->primary = f->primary;
  if (in->impl && in->impl <= p->impl_count)
    memcpy(h->impl, p->impl_names[in->impl - 1].name, sizeof h->impl);
  df_pack_handler_symbol(h->symbol, sizeof h->symbol, h->id, h->name);
}

/* operator_table / operator_kinds: each name's first handler id. */
static df_status operator_table(df_packed *k) {
  k->operators = df_alloc(&k->alloc, sizeof(df_named_index) * (k->handler_count + 1));
  if (!k->operators)
    return df_status_errorf(DF_ENOMEM, "out of memory packing the operator table");
  k->operator_count = 0;
  for (uint32_t h = 0; h < k->handler_count; h++) {
    const df_handler *hd = &k->handlers[h];
    if (!hd->name[0])
      continue;
    uint32_t j = 0;
    while (j < k->operator_count && strcmp(k->operators[j].name, hd->name) != 0)
      j++;
    if (j < k->operator_count)
      continue;
    df_named_index *e = &k->operators[k->operator_count++];
    memcpy(e->name, hd->name, sizeof e->name);
    e->index = hd->id;
    e->kind = hd->kind;
  }
  return df_status_ok();
}

/* intermediate_type_table: type names by first appearance in slots. */
static df_status type_table(const df_plan *p, df_arena *a, df_packed *k) {
  uint8_t *seen = df_arena_zero(a, p->type_count, 1);
  k->types = df_alloc(&k->alloc, sizeof(df_named_index) * (p->type_count + 1));
  if (!seen || !k->types)
    return df_status_errorf(DF_ENOMEM, "out of memory packing the intermediate type table");
  k->type_count = 0;
  for (uint32_t s = 0; s < p->slot_count; s++) {
    int32_t t = p->slots[s].type;
    if (t < 0 || (uint32_t)t >= p->type_count || seen[t])
      continue;
    seen[t] = 1;
    df_named_index *e = &k->types[k->type_count];
    memcpy(e->name, p->types[t].name, sizeof e->name);
    e->index = k->type_count++;
    e->kind = DF_OPK_NONE;
  }
  return df_status_ok();
}

df_status df_pack_handlers(df_pack_ctx *c) {
  const df_plan *p = c->p;
  df_packed *k = c->k;
  stage_index x;
  memset(&x, 0, sizeof x);
  DF_TRY(index_stages(p, c->a, &x));
  found *f = df_arena_array(c->a, p->instr_count, sizeof *f);
  c->handler_of = df_arena_array(c->a, p->instr_count, sizeof(uint32_t));
  if (!f || !c->handler_of)
    return DF_ARENA_OOM("the handler table");
  uint32_t count = 0, primaries = 0;
  DF_TRY(discover(c, &x, f, &count, &primaries));
  k->handlers = df_alloc(&k->alloc, sizeof(df_handler) * (count ? count : 1));
  if (!k->handlers)
    return df_status_errorf(DF_ENOMEM, "out of memory packing %u handlers", count);
  k->handler_count = count;
  k->primary_handler_count = primaries;
  for (uint32_t h = 0; h < count; h++)
    fill_handler(p, &f[h], &k->handlers[f[h].id]);
  DF_TRY(operator_table(k));
  return type_table(p, c->a, k);
}
