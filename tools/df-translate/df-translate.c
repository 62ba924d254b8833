/* df-translate: translations out of a df module (program dump, plans). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "df/blob.h"
#include "df/compiler.h"
#include "df/target.h"
#include "plan_ir.h"
#ifdef DF_HAVE_DEVICE_RUNTIME
#include "df/device_runtime.h"
#endif

/* What a translation reads: a parsed module, or the bytes of a plan blob
   (only for translations that accept blobs). */
typedef struct input {
  MlirOperation module; /* null for blob input */
  const uint8_t *blob;
  size_t blob_len;
  bool json;
  const char *sm;           /* --df-sm= */
  const char *links[16];    /* --df-link= */
  unsigned link_count;
  const char *output;       /* -o, NULL for stdout */
} tr_input;

typedef struct translation {
  const char *flag;
  const char *description;
  bool accepts_blob;
  df_status (*run)(const tr_input *in, FILE *out);
} translation;

static df_status program_dump(const tr_input *in, FILE *out) {
  df_program *p;
  DF_TRY(df_program_from_module(in->module, NULL, NULL, &p));
  df_status s = df_program_dump(p, out);
  df_program_destroy(p);
  return s;
}

/* Pack the plan held in IR with the layout options recorded on df.plan. */
static df_status pack_module(MlirOperation module, df_packed **k, df_program **prog) {
  MlirOperation plan_op;
  DF_TRY(df_plan_op(module, &plan_op));
  uint32_t direct[256];
  df_pack_options po;
  memset(&po, 0, sizeof po);
  DF_TRY(df_plan_layout_options(plan_op, &po.layout, direct, 256));
  df_plan *plan;
  DF_TRY(df_plan_from_ir(module, &plan));
  df_status s = df_pack(plan, &po, NULL, k);
  df_plan_destroy(plan);
  DF_TRY(s);
  if (prog) {
    s = df_program_from_module(module, NULL, NULL, prog);
    if (df_failed(&s))
      df_packed_destroy(*k);
  }
  return s;
}

static df_status to_plan(const tr_input *in, FILE *out) {
  df_packed *k;
  df_program *prog;
  DF_TRY(pack_module(in->module, &k, &prog));
  uint8_t *bytes = NULL;
  size_t len = 0;
  df_status s = df_blob_write(k, prog, NULL, &bytes, &len);
  if (!df_failed(&s) && fwrite(bytes, 1, len, out) != len)
    s = df_status_errorf(DF_EIO, "could not write the plan blob");
  free(bytes);
  df_program_destroy(prog);
  df_packed_destroy(k);
  return s;
}

static df_status plan_dump(const tr_input *in, FILE *out) {
  df_packed *k;
  if (in->module.ptr)
    DF_TRY(pack_module(in->module, &k, NULL));
  else
    DF_TRY(df_blob_read(in->blob, in->blob_len, NULL, &k, NULL));
  df_status s = in->json ? df_packed_dump_json(k, out) : df_packed_dump_text(k, out);
  df_packed_destroy(k);
  return s;
}

static df_status to_ptx(const tr_input *in, FILE *out) {
#ifdef DF_HAVE_DEVICE_RUNTIME
  df_packed *k;
  DF_TRY(pack_module(in->module, &k, NULL));
  df_ptx_options o = {in->sm, in->links, in->link_count, df_device_runtime_bc,
                      df_device_runtime_bc_size};
  char *ptx = NULL;
  size_t len = 0;
  df_status s = df_emit_ptx(k, &o, &ptx, &len);
  df_packed_destroy(k);
  if (!df_failed(&s) && fwrite(ptx, 1, len, out) != len)
    s = df_status_errorf(DF_EIO, "could not write the PTX");
  free(ptx);
  return s;
#else
  (void)in;
  (void)out;
  return df_status_errorf(DF_EUNSUPPORTED,
                          "this df-translate was built without the device runtime");
#endif
}

static df_status to_host(const tr_input *in, FILE *out) {
  (void)out;
  if (!in->output)
    return df_status_errorf(DF_EINVAL, "--df-to-host writes a shared object; give -o FILE.so");
  df_packed *k;
  DF_TRY(pack_module(in->module, &k, NULL));
  df_host_handler_options o = {in->output, in->links, in->link_count, getenv("DF_HOST_CC")};
  df_status s = df_emit_host_handlers(k, &o);
  df_packed_destroy(k);
  return s;
}

static const translation translations[] = {
    {"--df-program-dump",
     "print the program model: stages, intermediates with slot bytes, operator ids and "
     "kinds, tensor argument order",
     false, program_dump},
    {"--df-to-plan", "write the packed plan (and the program, for re-planning) as a plan blob",
     false, to_plan},
    {"--df-plan-dump",
     "print a plan blob, or the plan held in IR, as text (--json: as one JSON object)", true,
     plan_dump},
    {"--df-to-ptx",
     "emit the persistent kernel for the plan as PTX (--df-link=FILE.bc adds handler "
     "bitcode, --df-sm=sm_90a|sm_90 picks the target)",
     false, to_ptx},
    {"--df-to-host",
     "link host handler bitcode (--df-link=FILE.bc) into a shared object exporting the "
     "plan's handler symbols, for df-run --backend=host (-o FILE.so required)",
     false, to_host},
    {NULL, NULL, false, NULL},
};

static void usage(FILE *out) {
  fprintf(out, "usage: df-translate <translation> [--json] [--df-link=F.bc] [--df-sm=SM] "
                "[-o FILE] [input|-]\n"
               "translations:\n");
  for (const translation *t = translations; t->flag; t++)
    fprintf(out, "  %-20s %s\n", t->flag, t->description);
}

int main(int argc, char **argv) {
  const char *input = NULL, *output = NULL;
  const translation *chosen = NULL;
  bool json = false;
  const char *sm = NULL, *links[16];
  unsigned link_count = 0;
  for (int i = 1; i < argc; i++) {
    const translation *t = NULL;
    for (const translation *c = translations; c->flag; c++)
      if (!strcmp(argv[i], c->flag))
        t = c;
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage(stdout);
      return 0;
    } else if (t) {
      if (chosen) {
        fprintf(stderr, "df-translate: choose one translation ('%s' and '%s' given)\n",
                chosen->flag, t->flag);
        return 2;
      }
      chosen = t;
    } else if (!strcmp(argv[i], "--json")) {
      json = true;
    } else if (!strncmp(argv[i], "--df-sm=", 8)) {
      sm = argv[i] + 8;
    } else if (!strncmp(argv[i], "--df-link=", 10)) {
      if (link_count == 16) {
        fprintf(stderr, "df-translate: at most 16 --df-link files\n");
        return 2;
      }
      links[link_count++] = argv[i] + 10;
    } else if (!strcmp(argv[i], "-o")) {
      if (++i == argc) {
        fprintf(stderr, "df-translate: -o needs a file name\n");
        return 2;
      }
      output = argv[i];
    } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
      fprintf(stderr, "df-translate: unknown option '%s' (see --help)\n", argv[i]);
      return 2;
    } else if (!input) {
      input = argv[i];
    } else {
      fprintf(stderr, "df-translate: more than one input file\n");
      return 2;
    }
  }
  if (!chosen) {
    fprintf(stderr, "df-translate: no translation given (see --help)\n");
    return 2;
  }
  if (!input)
    input = "-";
  char *text;
  size_t len;
  df_status s = df_read_file(input, &text, &len);
  if (df_failed(&s)) {
    fprintf(stderr, "df-translate: %s\n", s.message);
    return 1;
  }
  if (len == 0) {
    fprintf(stderr, "df-translate: %s: the input is empty; expected an MLIR module%s\n",
            input, chosen->accepts_blob ? " or a plan blob" : "");
    free(text);
    return 1;
  }
  if (json && chosen->run != plan_dump) {
    fprintf(stderr, "df-translate: --json applies to --df-plan-dump only\n");
    free(text);
    return 2;
  }
  tr_input in = {{NULL}, NULL, 0, json, sm, {NULL}, link_count, output};
  for (unsigned i = 0; i < link_count; i++)
    in.links[i] = links[i];
  bool is_blob = len >= DF_BLOB_MAGIC_BYTES && !memcmp(text, DF_BLOB_MAGIC, DF_BLOB_MAGIC_BYTES);
  MlirContext ctx = {NULL};
  if (is_blob && !chosen->accepts_blob) {
    s = df_status_errorf(DF_EFORMAT, "%s is a plan blob; %s needs an MLIR module", input,
                         chosen->flag);
  } else if (is_blob) {
    in.blob = (const uint8_t *)text;
    in.blob_len = len;
  } else {
    s = df_context_create(&ctx);
    if (!df_failed(&s))
      s = df_parse_module(ctx, text, len, strcmp(input, "-") ? input : "<stdin>", &in.module);
  }
  int rc = 0;
  if (df_failed(&s)) {
    fprintf(stderr, "df-translate: %s\n", s.message);
    rc = 1;
  } else {
    /* --df-to-host writes its own file through the linker. */
    FILE *out = chosen->run == to_host ? stdout : output ? fopen(output, "wb") : stdout;
    if (!out) {
      fprintf(stderr, "df-translate: cannot write '%s'\n", output);
      rc = 1;
    } else {
      s = chosen->run(&in, out);
      if (df_failed(&s)) {
        fprintf(stderr, "df-translate: %s\n", s.message);
        rc = 1;
      }
      if (out != stdout)
        fclose(out);
    }
  }
  free(text);
  if (in.module.ptr)
    mlirOperationDestroy(in.module);
  if (ctx.ptr)
    mlirContextDestroy(ctx);
  return rc;
}
