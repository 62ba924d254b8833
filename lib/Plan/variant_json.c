/* Canonical JSON of handler identities and variant keys (REFERENCE 1.5,
   1.6). The writer emits compact JSON in a fixed key order; the reader is a
   small strict recursive-descent parser into a fixed node pool (no
   allocation) that accepts whitespace and any key order and rejects
   unknown or duplicate keys. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "df/plan.h"

/* ---- writer ------------------------------------------------------------------ */

typedef struct out {
  char *buf;
  size_t cap, len;
} out;

static void put(out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(out *o, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *dst = o->len < o->cap ? o->buf + o->len : NULL;
  int n = vsnprintf(dst, dst ? o->cap - o->len : 0, fmt, ap);
  va_end(ap);
  if (n > 0)
    o->len += (size_t)n;
}

static void put_identity(out *o, const df_identity *id) {
  put(o, "{\"operator_id\":%u,\"operator_kind\":\"%s\"}", id->operator_id,
      df_op_kind_name(id->kind));
}

int df_identity_to_json(const df_identity *id, char *buf, size_t cap) {
  out o = {buf, cap, 0};
  if (cap)
    buf[0] = '\0';
  put_identity(&o, id);
  return (int)o.len;
}

int df_variant_to_json(const df_variant *v, char *buf, size_t cap) {
  out o = {buf, cap, 0};
  if (cap)
    buf[0] = '\0';
  put(&o, "{\"schema_version\":%u,\"base_identity\":", v->schema_version);
  put_identity(&o, &v->base);
  put(&o, ",\"typed_specializations\":[");
  if (v->has_iter) {
    put(&o, "{\"kind\":\"iter_range\",\"value\":{\"mode\":\"%s\",\"value\":",
        df_iter_mode_name(v->iter_mode));
    if (v->iter_mode == DF_ITER_GENERIC)
      put(&o, "null}}");
    else
      put(&o, "%u}}", v->iter_value);
  }
  if (v->has_arity)
    put(&o, "%s{\"kind\":\"reduce_arity\",\"value\":\"%s\"}", v->has_iter ? "," : "",
        df_arity_class_name(v->arity));
  put(&o, "]}");
  return (int)o.len;
}

/* ---- parser ---------------------------------------------------------------------- */

enum { J_NULL, J_BOOL, J_INT, J_STR, J_ARR, J_OBJ };
enum { POOL = 64, DEPTH = 16, STR_MAX = 64 };

typedef struct jnode {
  int type;
  int64_t num;          /* J_INT, J_BOOL */
  char str[STR_MAX];    /* J_STR value */
  char key[STR_MAX];    /* member key when the parent is an object */
  int first, next;      /* children (arrays, objects), siblings; -1 none */
} jnode;

typedef struct parser {
  const char *s;
  size_t pos;
  jnode nodes[POOL];
  int count;
  df_status err;
} parser;

static int fail(parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(parser *p, const char *fmt, ...) {
  if (p->err.code == DF_OK) {
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    p->err = df_status_errorf(DF_EFORMAT, "invalid Dataflow handler JSON at byte %zu: %s",
                              p->pos, msg);
  }
  return -1;
}

static void skip_ws(parser *p) {
  while (p->s[p->pos] == ' ' || p->s[p->pos] == '\t' || p->s[p->pos] == '\n' ||
         p->s[p->pos] == '\r')
    p->pos++;
}

static int new_node(parser *p, int type) {
  if (p->count == POOL)
    return fail(p, "more than %d values", POOL);
  jnode *n = &p->nodes[p->count];
  memset(n, 0, sizeof *n);
  n->type = type;
  n->first = n->next = -1;
  return p->count++;
}

static int hexval(char c) {
  return c >= '0' && c <= '9' ? c - '0'
         : c >= 'a' && c <= 'f' ? c - 'a' + 10
         : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                : -1;
}

/* A string into dst (ASCII escapes only; our names are identifiers). */
static int parse_string(parser *p, char dst[STR_MAX]) {
  if (p->s[p->pos] != '"')
    return fail(p, "expected a string");
  p->pos++;
  size_t n = 0;
  for (;;) {
    unsigned char c = (unsigned char)p->s[p->pos];
    if (c == '"')
      break;
    if (c < 0x20)
      return fail(p, c ? "control character in string" : "unterminated string");
    p->pos++;
    if (c == '\\') {
      char e = p->s[p->pos++];
      const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t";
      const char *at = e ? strchr(from, e) : NULL;
      if (at) {
        c = (unsigned char)to[at - from];
      } else if (e == 'u') {
        int v = 0;
        for (int i = 0; i < 4; i++) {
          int h = hexval(p->s[p->pos]);
          if (h < 0)
            return fail(p, "bad \\u escape");
          v = v * 16 + h, p->pos++;
        }
        if (v == 0 || v > 0x7F)
          return fail(p, "\\u escape outside ASCII");
        c = (unsigned char)v;
      } else {
        return fail(p, "bad escape");
      }
    }
    if (n + 1 >= STR_MAX)
      return fail(p, "string longer than %d bytes", STR_MAX - 1);
    dst[n++] = (char)c;
  }
  dst[n] = '\0';
  p->pos++;
  return 0;
}

static int parse_value(parser *p, int depth);

static int parse_container(parser *p, int depth, bool object) {
  int node = new_node(p, object ? J_OBJ : J_ARR);
  if (node < 0)
    return -1;
  p->pos++;
  skip_ws(p);
  char close = object ? '}' : ']';
  if (p->s[p->pos] == close) {
    p->pos++;
    return node;
  }
  int last = -1;
  for (;;) {
    char key[STR_MAX] = "";
    if (object) {
      skip_ws(p);
      if (parse_string(p, key) < 0)
        return -1;
      for (int c = p->nodes[node].first; c >= 0; c = p->nodes[c].next)
        if (strcmp(p->nodes[c].key, key) == 0)
          return fail(p, "duplicate key '%s'", key);
      skip_ws(p);
      if (p->s[p->pos] != ':')
        return fail(p, "expected ':'");
      p->pos++;
    }
    int child = parse_value(p, depth + 1);
    if (child < 0)
      return -1;
    memcpy(p->nodes[child].key, key, sizeof key);
    if (last < 0)
      p->nodes[node].first = child;
    else
      p->nodes[last].next = child;
    last = child;
    skip_ws(p);
    if (p->s[p->pos] == ',') {
      p->pos++;
      continue;
    }
    if (p->s[p->pos] == close) {
      p->pos++;
      return node;
    }
    return fail(p, "expected ',' or '%c'", close);
  }
}

static int parse_number(parser *p) {
  size_t start = p->pos;
  bool neg = p->s[p->pos] == '-';
  if (neg)
    p->pos++;
  if (p->s[p->pos] < '0' || p->s[p->pos] > '9')
    return fail(p, "unexpected character '%c'", p->s[start] ? p->s[start] : '?');
  if (p->s[p->pos] == '0' && p->s[p->pos + 1] >= '0' && p->s[p->pos + 1] <= '9')
    return fail(p, "leading zero in a number");
  uint64_t v = 0;
  while (p->s[p->pos] >= '0' && p->s[p->pos] <= '9') {
    v = v * 10 + (uint64_t)(p->s[p->pos++] - '0');
    if (v > (uint64_t)INT64_MAX)
      return fail(p, "integer out of range");
  }
  char c = p->s[p->pos];
  if (c == '.' || c == 'e' || c == 'E')
    return fail(p, "expected an integer, got a fraction or exponent");
  int node = new_node(p, J_INT);
  if (node >= 0)
    p->nodes[node].num = neg ? -(int64_t)v : (int64_t)v;
  return node;
}

static int parse_value(parser *p, int depth) {
  if (depth > DEPTH)
    return fail(p, "nesting deeper than %d", DEPTH);
  skip_ws(p);
  const char *at = p->s + p->pos;
  if (*at == '{' || *at == '[')
    return parse_container(p, depth, *at == '{');
  if (*at == '"') {
    int node = new_node(p, J_STR);
    if (node < 0 || parse_string(p, p->nodes[node].str) < 0)
      return -1;
    return node;
  }
  static const struct { const char *word; int type, value; } words[] = {
      {"null", J_NULL, 0}, {"true", J_BOOL, 1}, {"false", J_BOOL, 0}};
  for (int i = 0; i < 3; i++)
    if (strncmp(at, words[i].word, strlen(words[i].word)) == 0) {
      p->pos += strlen(words[i].word);
      int node = new_node(p, words[i].type);
      if (node >= 0)
        p->nodes[node].num = words[i].value;
      return node;
    }
  if (!*at)
    return fail(p, "unexpected end of input");
  return parse_number(p);
}

static df_status parse_document(parser *p, const char *json, int *root) {
  memset(p, 0, sizeof *p);
  p->s = json ? json : "";
  p->err = df_status_ok();
  *root = parse_value(p, 0);
  if (*root >= 0) {
    skip_ws(p);
    if (p->s[p->pos])
      fail(p, "trailing characters after the JSON value");
  }
  return p->err;
}

static const char *type_name(int t) {
  static const char *const names[] = {"null", "bool", "int", "str", "list", "dict"};
  return names[t];
}

/* Members of object `obj` matching `keys` into `found` (-1 if absent);
   any other key is an error naming `what`. */
static df_status members(const parser *p, int obj, const char *what, const char *const *keys,
                         int n, int *found) {
  if (p->nodes[obj].type != J_OBJ)
    return df_status_errorf(DF_EINVAL, "%s must be a JSON object, got %s", what,
                            type_name(p->nodes[obj].type));
  for (int i = 0; i < n; i++)
    found[i] = -1;
  for (int c = p->nodes[obj].first; c >= 0; c = p->nodes[c].next) {
    int i = 0;
    while (i < n && strcmp(p->nodes[c].key, keys[i]))
      i++;
    if (i == n)
      return df_status_errorf(DF_EINVAL, "%s has unknown key '%s'", what, p->nodes[c].key);
    found[i] = c;
  }
  for (int i = 0; i < n; i++)
    if (found[i] < 0)
      return df_status_errorf(DF_EINVAL, "%s is missing key '%s'", what, keys[i]);
  return df_status_ok();
}

static df_status expect_int(const parser *p, int node, const char *what, int64_t *v) {
  int t = p->nodes[node].type;
  if (t != J_INT)
    return df_status_errorf(DF_EINVAL, "%s must be an int, got %s", what, type_name(t));
  *v = p->nodes[node].num;
  return df_status_ok();
}

static df_status expect_str(const parser *p, int node, const char *what, const char **v) {
  int t = p->nodes[node].type;
  if (t != J_STR)
    return df_status_errorf(DF_EINVAL, "%s must be a string, got %s", what, type_name(t));
  *v = p->nodes[node].str;
  return df_status_ok();
}

static df_status identity_from(const parser *p, int obj, df_identity *out) {
  if (p->nodes[obj].type == J_OBJ)
    for (int c = p->nodes[obj].first; c >= 0; c = p->nodes[c].next)
      if (strcmp(p->nodes[c].key, "specialization") == 0)
        return df_status_errorf(DF_EINVAL,
                                "DataflowHandlerIdentity cannot contain specialization "
                                "metadata; use DataflowHandlerVariantKey");
  static const char *const keys[] = {"operator_id", "operator_kind"};
  int f[2];
  DF_TRY(members(p, obj, "Dataflow handler identity", keys, 2, f));
  int64_t id = 0;
  const char *kind = "";
  DF_TRY(expect_int(p, f[0], "Dataflow handler operator_id", &id));
  if (id < 0 || id > (int64_t)UINT32_MAX)
    return df_status_errorf(DF_EINVAL,
                            "Dataflow handler operator_id must be a non-negative int, got %lld",
                            (long long)id);
  DF_TRY(expect_str(p, f[1], "Dataflow handler operator_kind", &kind));
  DF_TRY(df_op_kind_parse(kind, &out->kind));
  out->operator_id = (uint32_t)id;
  return df_status_ok();
}

df_status df_identity_from_json(const char *json, df_identity *out) {
  parser p;
  int root;
  DF_TRY(parse_document(&p, json, &root));
  df_identity id;
  DF_TRY(identity_from(&p, root, &id));
  *out = id;
  return df_status_ok();
}

static df_status iter_spec_from(const parser *p, int node, df_variant *v) {
  static const char *const keys[] = {"mode", "value"};
  int f[2];
  DF_TRY(members(p, node, "Dataflow ITER specialization", keys, 2, f));
  const char *mode = "";
  DF_TRY(expect_str(p, f[0], "Dataflow ITER specialization mode", &mode));
  DF_TRY(df_iter_mode_parse(mode, &v->iter_mode));
  int t = p->nodes[f[1]].type;
  if (t != J_NULL && t != J_INT)
    return df_status_errorf(DF_EINVAL,
                            "Dataflow ITER specialization value must be an int or None, got %s",
                            type_name(t));
  int64_t value = t == J_INT ? p->nodes[f[1]].num : 0;
  DF_TRY(df_iter_spec_check(v->iter_mode, t == J_INT, value));
  v->iter_value = (uint32_t)value;
  v->has_iter = true;
  return df_status_ok();
}

static df_status arity_spec_from(const parser *p, int node, df_variant *v) {
  const char *name = "";
  DF_TRY(expect_str(p, node, "Dataflow reduce arity class", &name));
  for (int c = DF_ARITY_PASSTHROUGH; c <= DF_ARITY_GENERIC; c++)
    if (strcmp(name, df_arity_class_name((df_arity_class)c)) == 0) {
      v->arity = (df_arity_class)c;
      v->has_arity = true;
      return df_status_ok();
    }
  return df_status_errorf(DF_EINVAL,
                          "Unsupported Dataflow reduce arity class '%s'; expected one of: "
                          "binary, generic, passthrough",
                          name);
}

static df_status spec_from(const parser *p, int node, df_variant *v) {
  static const char *const keys[] = {"kind", "value"};
  int f[2];
  DF_TRY(members(p, node, "Dataflow handler specialization", keys, 2, f));
  const char *kind = "";
  DF_TRY(expect_str(p, f[0], "Dataflow handler specialization kind", &kind));
  bool iter = strcmp(kind, "iter_range") == 0;
  if (!iter && strcmp(kind, "reduce_arity") != 0)
    return df_status_errorf(DF_EINVAL,
                            "Unsupported Dataflow handler specialization kind '%s'; expected "
                            "one of: iter_range, reduce_arity",
                            kind);
  if (iter ? v->has_iter : v->has_arity)
    return df_status_errorf(DF_EINVAL, "duplicate Dataflow handler specialization kind '%s'",
                            kind);
  return iter ? iter_spec_from(p, f[1], v) : arity_spec_from(p, f[1], v);
}

df_status df_variant_from_json(const char *json, df_variant *out) {
  parser p;
  int root;
  DF_TRY(parse_document(&p, json, &root));
  static const char *const keys[] = {"schema_version", "base_identity",
                                     "typed_specializations"};
  int f[3];
  DF_TRY(members(&p, root, "Dataflow handler variant key", keys, 3, f));
  df_variant v;
  memset(&v, 0, sizeof v);
  int64_t version = 0;
  DF_TRY(expect_int(&p, f[0], "Dataflow handler variant schema_version", &version));
  if (version != DF_VARIANT_SCHEMA_VERSION)
    return df_status_errorf(DF_EINVAL,
                            "Dataflow handler variant schema_version must be %u, got %lld",
                            DF_VARIANT_SCHEMA_VERSION, (long long)version);
  v.schema_version = DF_VARIANT_SCHEMA_VERSION;
  DF_TRY(identity_from(&p, f[1], &v.base));
  if (p.nodes[f[2]].type != J_ARR)
    return df_status_errorf(DF_EINVAL,
                            "Dataflow handler typed_specializations must be a list, got %s",
                            type_name(p.nodes[f[2]].type));
  for (int c = p.nodes[f[2]].first; c >= 0; c = p.nodes[c].next)
    DF_TRY(spec_from(&p, c, &v));
  DF_TRY(df_variant_check(&v));
  *out = v;
  return df_status_ok();
}
