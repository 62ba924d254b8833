/* df-translate: translations out of a df module (program dump, plans). */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "df/blob.h"
#include "df/compiler.h"
#include "df/cost.h"
#include "df/kernel_plan.h"
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
  bool embed_plan;          /* --df-embed-plan */
  bool all_features;        /* --df-kernel-features=all */
  df_cost_params cost;      /* --df-cost-*= */
  const char *runtime;      /* --df-runtime=FILE.bc, NULL: the embedded runtime */
  bool no_resolve;          /* --df-resolve=off */
} tr_input;

typedef struct translation {
  const char *flag;
  const char *description;
  bool accepts_blob;
  df_status (*run)(const tr_input *in, FILE *out);
  bool own_output; /* writes -o itself (through a tool) */
  bool kernel;     /* builds the kernel: kernel options apply */
} translation;

static df_status program_dump(const tr_input *in, FILE *out) {
  df_program *p;
  DF_TRY(df_program_from_module(in->module, NULL, NULL, &p));
  df_status s = df_program_dump(p, out);
  df_program_destroy(p);
  return s;
}

/* Pack the plan held in IR with the layout options recorded on df.plan;
   optionally the program and the plan's range block size too. */
/* What the packed plan does not hold: the range block size and an
   automatic split's choice (df-schedule block-size=auto). */
typedef struct tr_plan_info {
  uint32_t block_size;
  bool split_auto, balance_iters, defer_reduces;
  double model_us;
} tr_plan_info;

static df_status pack_module_bs(MlirOperation module, df_packed **k, df_program **prog,
                                tr_plan_info *info) {
  MlirOperation plan_op;
  DF_TRY(df_plan_op(module, &plan_op));
  uint32_t direct[256];
  df_pack_options po;
  memset(&po, 0, sizeof po);
  DF_TRY(df_plan_layout_options(plan_op, &po.layout, direct, 256));
  df_plan *plan;
  DF_TRY(df_plan_from_ir(module, &plan));
  df_status s = df_pack(plan, &po, NULL, k);
  if (info)
    *info = (tr_plan_info){plan->block_size, plan->split_auto, plan->split_balance_iters,
                           plan->split_defer_reduces, plan->split_model_us};
  df_plan_destroy(plan);
  DF_TRY(s);
  if (prog) {
    s = df_program_from_module(module, NULL, NULL, prog);
    if (df_failed(&s))
      df_packed_destroy(*k);
  }
  return s;
}

static df_status pack_module(MlirOperation module, df_packed **k, df_program **prog) {
  return pack_module_bs(module, k, prog, NULL);
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
  tr_plan_info info = {0};
  if (in->module.ptr)
    DF_TRY(pack_module_bs(in->module, &k, NULL, &info));
  else
    DF_TRY(df_blob_read(in->blob, in->blob_len, NULL, &k, NULL));
  /* the scheduler's block-size=auto choice (plans in IR; text only) */
  if (info.split_auto && !in->json)
    fprintf(out, "split: auto block_size=%u balance_iters=%d defer_reduces=%d model_us=%.3f\n",
            info.block_size, info.balance_iters, info.defer_reduces, info.model_us);
  df_status s = in->json ? df_packed_dump_json(k, out) : df_packed_dump_text(k, out);
  df_packed_destroy(k);
  return s;
}

/* The structural dispatch cost of the plan (docs/fusion.md). */
static df_status plan_cost(const tr_input *in, FILE *out) {
  df_packed *k;
  if (in->module.ptr)
    DF_TRY(pack_module(in->module, &k, NULL));
  else
    DF_TRY(df_blob_read(in->blob, in->blob_len, NULL, &k, NULL));
  df_cost c;
  df_status s = df_plan_cost(k, &in->cost, NULL, &c);
  if (!df_failed(&s)) {
    df_cost_write(&c, k, out);
    df_cost_free(&c, NULL);
  }
  df_packed_destroy(k);
  return s;
}

/* --df-cost-<name>=<number>: a finite number >= 0. */
/* A two-valued kernel option `flag=first|second`: *second_given says
   which; false (with a message) for any other value. */
static bool parse_choice(const char *flag, const char *value, const char *first,
                         const char *second, bool *second_given) {
  if (strcmp(value, first) != 0 && strcmp(value, second) != 0) {
    fprintf(stderr, "df-translate: %s expects %s or %s, got '%s'\n", flag, first, second, value);
    return false;
  }
  *second_given = !strcmp(value, second);
  return true;
}

static bool parse_cost_option(const char *arg, df_cost_params *c, bool *matched) {
  static const struct {
    const char *prefix;
    size_t field;
  } opts[] = {{"--df-cost-F=", offsetof(df_cost_params, instr_cycles)},
              {"--df-cost-R=", offsetof(df_cost_params, byte_cycles)},
              {"--df-cost-cluster-latency=", offsetof(df_cost_params, cluster_latency)},
              {"--df-cost-hbm-latency=", offsetof(df_cost_params, hbm_latency)}};
  *matched = false;
  for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++) {
    size_t n = strlen(opts[i].prefix);
    if (strncmp(arg, opts[i].prefix, n))
      continue;
    *matched = true;
    char *end = NULL;
    double v = strtod(arg + n, &end);
    if (end == arg + n || *end || !(v >= 0) || v > 1e300) {
      fprintf(stderr, "df-translate: %s expects a finite number >= 0, got '%s'\n",
              opts[i].prefix, arg + n);
      return false;
    }
    *(double *)((char *)c + opts[i].field) = v;
  }
  return true;
}

#ifdef DF_HAVE_DEVICE_RUNTIME
/* --df-runtime=FILE.bc: a device runtime bitcode file (raw or wrapped
   LLVM bitcode) read into *bc (malloc'ed). */
static df_status read_runtime(const char *path, char **bc, size_t *len) {
  df_status s = df_read_file(path, bc, len);
  if (df_failed(&s))
    return df_status_errorf(s.code, "--df-runtime: %s", s.message);
  const unsigned char *b = (const unsigned char *)*bc;
  bool raw = *len >= 4 && b[0] == 'B' && b[1] == 'C' && b[2] == 0xC0 && b[3] == 0xDE;
  bool wrapped = *len >= 4 && b[0] == 0xDE && b[1] == 0xC0 && b[2] == 0x17 && b[3] == 0x0B;
  if (raw || wrapped)
    return df_status_ok();
  free(*bc);
  *bc = NULL;
  return df_status_errorf(DF_EFORMAT,
                          "--df-runtime: '%s' is not LLVM bitcode (expected a device runtime "
                          "such as df_device_runtime_trace.bc)",
                          path);
}
#endif

/* The kernel of the module's plan as PTX (malloc'ed), with the module's
   MLIR handler bodies and the --df-link bitcode, on the embedded device
   runtime or the --df-runtime one. */
static df_status build_kernel(const tr_input *in, char **ptx, size_t *len, uint32_t *features,
                              df_packed **packed, uint32_t *workspace) {
#ifdef DF_HAVE_DEVICE_RUNTIME
  char *runtime = NULL;
  size_t runtime_len = 0;
  if (in->runtime)
    DF_TRY(read_runtime(in->runtime, &runtime, &runtime_len));
  df_packed *k;
  df_program *prog;
  tr_plan_info info = {0};
  df_status ps = pack_module_bs(in->module, &k, &prog, &info);
  if (df_failed(&ps)) {
    free(runtime);
    return ps;
  }
  uint32_t block_size = info.block_size;
  df_ptx_options o = {in->sm, in->links, in->link_count, df_device_runtime_bc,
                      df_device_runtime_bc_size};
  if (runtime) {
    o.runtime_bc = runtime;
    o.runtime_bc_size = runtime_len;
  }
  df_kernel_options ko = {in->module,     prog,       in->all_features,
                          in->embed_plan, block_size, in->no_resolve};
  *features = df_kernel_features(k, &ko);
  df_status s = df_emit_kernel(k, &o, &ko, ptx, len);
  free(runtime);
  if (workspace)
    *workspace = df_program_workspace_bytes(prog);
  df_program_destroy(prog);
  if (packed && s.code == DF_OK)
    *packed = k;
  else
    df_packed_destroy(k);
  return s;
#else
  (void)in;
  (void)ptx;
  (void)len;
  (void)features;
  (void)packed;
  (void)workspace;
  return df_status_errorf(DF_EUNSUPPORTED,
                          "this df-translate was built without the device runtime");
#endif
}

static df_status to_ptx(const tr_input *in, FILE *out) {
  char *ptx = NULL;
  size_t len = 0;
  uint32_t features;
  df_status s = build_kernel(in, &ptx, &len, &features, NULL, NULL);
  if (!df_failed(&s) && fwrite(ptx, 1, len, out) != len)
    s = df_status_errorf(DF_EIO, "could not write the PTX");
  free(ptx);
  return s;
}

static df_status to_cubin(const tr_input *in, FILE *out) {
  (void)out;
  if (!in->output)
    return df_status_errorf(DF_EINVAL, "--df-to-cubin writes a binary; give -o FILE.cubin");
  char ptxas[4096];
  DF_TRY(df_ptxas_find(ptxas, sizeof ptxas));
  char *ptx = NULL;
  size_t len = 0;
  uint32_t features;
  DF_TRY(build_kernel(in, &ptx, &len, &features, NULL, NULL));
  df_ptxas_result r;
  df_status s = df_ptxas_run(ptxas, ptx, len, in->sm, in->output, &r);
  free(ptx);
  return s;
}

/* Registers, spills and shared memory of the kernel (ptxas -v), with what
   the plan says (features, dynamic shared memory). */
static df_status kernel_report(const tr_input *in, FILE *out) {
  char *ptx = NULL;
  size_t len = 0;
  uint32_t features;
  df_packed *k;
  uint32_t workspace = 0;
  DF_TRY(build_kernel(in, &ptx, &len, &features, &k, &workspace));
  char names[256], ptxas[4096];
  df_features_name(features, names, sizeof names);
  const char *sm = in->sm ? in->sm : "sm_90a";
  fprintf(out, "kernel: df_persistent_kernel\ntarget: %s\n", sm);
  fprintf(out, "features: %s (0x%x)\n", names, features);
  fprintf(out, "plan: %s\n", in->embed_plan ? "embedded" : "kernel parameters");
  fprintf(out, "ptx_bytes: %zu\n", len);
  fprintf(out, "dynamic_shared_bytes: %u\n", k->launch.shared_memory_bytes);
  if (workspace) /* docs/workspace.md: a launch adds it and 128 alignment bytes */
    fprintf(out, "handler_workspace_bytes: %u (launch dynamic shared bytes %u)\n", workspace,
            k->launch.shared_memory_bytes + df_workspace_launch_bytes(workspace));
  df_packed_destroy(k);
  df_status s = df_ptxas_find(ptxas, sizeof ptxas);
  if (df_failed(&s)) {
    fprintf(out, "ptxas: %s; registers, spills and static shared memory are not available\n",
            s.message);
    free(ptx);
    return df_status_ok();
  }
  df_ptxas_result r;
  s = df_ptxas_run(ptxas, ptx, len, sm, NULL, &r);
  free(ptx);
  DF_TRY(s);
  fprintf(out, "ptxas: %s\n", ptxas);
  if (!r.found_entry) {
    fprintf(out, "ptxas -v did not report the entry; its output:\n%s", r.log);
    return df_status_ok();
  }
  fprintf(out, "registers: %u\nbarriers: %u\n", r.registers, r.barriers);
  fprintf(out, "stack_frame_bytes: %u\nspill_store_bytes: %u\nspill_load_bytes: %u\n",
          r.stack_frame, r.spill_stores, r.spill_loads);
  fprintf(out, "static_shared_bytes: %u\nconstant_bytes: %u\n", r.static_shared, r.constant);
  return df_status_ok();
}

static df_status to_host(const tr_input *in, FILE *out) {
  (void)out;
  if (!in->output)
    return df_status_errorf(DF_EINVAL, "--df-to-host writes a shared object; give -o FILE.so");
  df_packed *k;
  df_program *prog;
  DF_TRY(pack_module(in->module, &k, &prog));
  df_host_handler_options o = {in->output, in->links, in->link_count, getenv("DF_HOST_CC"),
                               in->module, prog, NULL, 0};
#ifdef DF_HAVE_DEVICE_RUNTIME
  o.accessors_bc = df_host_ctx_fn_bc;
  o.accessors_bc_size = df_host_ctx_fn_bc_size;
#endif
  df_status s = df_emit_host_handlers(k, &o);
  df_program_destroy(prog);
  df_packed_destroy(k);
  return s;
}

static const translation translations[] = {
    {"--df-program-dump",
     "print the program model: stages, intermediates with slot bytes, operator ids and "
     "kinds, tensor argument order",
     false, program_dump, false, false},
    {"--df-to-plan", "write the packed plan (and the program, for re-planning) as a plan blob",
     false, to_plan, false, false},
    {"--df-plan-dump",
     "print a plan blob, or the plan held in IR, as text (--json: as one JSON object)", true,
     plan_dump, false, false},
    {"--df-plan-cost",
     "print the structural dispatch cost of a plan blob or the plan in IR: per-CTA dispatch "
     "cycles, instruction counts, the critical path (--df-cost-F= -R= -cluster-latency= "
     "-hbm-latency=)",
     true, plan_cost, false, false},
    {"--df-to-ptx",
     "emit the persistent kernel for the plan as PTX: the module's MLIR handler bodies, "
     "--df-link=FILE.bc handler bitcode, --df-sm=sm_90a|sm_90 target",
     false, to_ptx, false, true},
    {"--df-to-cubin", "the kernel as a cubin through ptxas (-o FILE.cubin required)", false,
     to_cubin, true, true},
    {"--df-kernel-report",
     "the kernel's features, registers, spills, stack and shared memory (ptxas -v)", false,
     kernel_report, false, true},
    {"--df-to-host",
     "link host handler bitcode (--df-link=FILE.bc) into a shared object exporting the "
     "plan's handler symbols, for df-run --backend=host (-o FILE.so required)",
     false, to_host, true, false},
    {NULL, NULL, false, NULL, false, false},
};

static void usage(FILE *out) {
  fprintf(out, "usage: df-translate <translation> [--json] [--df-link=F.bc] [--df-sm=SM] "
                "[--df-embed-plan] [--df-kernel-features=plan|all] [--df-resolve=on|off]\n"
                "                    [--df-runtime=F.bc]\n"
                "                    [-o FILE] [input|-]\n"
               "translations:\n");
  for (const translation *t = translations; t->flag; t++)
    fprintf(out, "  %-20s %s\n", t->flag, t->description);
  fprintf(out, "kernel options (--df-to-ptx, --df-to-cubin, --df-kernel-report):\n"
               "  --df-embed-plan      bake the plan's records into the image; the kernel "
               "ignores its plan parameters\n"
               "  --df-runtime=FILE.bc link this device runtime bitcode instead of the "
               "embedded one\n"
               "                       (developer option: df_device_runtime_trace.bc, the "
               "traced runtime)\n"
               "  --df-kernel-features=plan|all\n"
               "                       plan (default): only the plan's protocol paths; all: "
               "every path, for any plan of the program\n"
               "  --df-resolve=on|off  on (default): cluster-receiving instructions resolve the "
               "handler's\n"
               "                       input 0 and output addresses before the wait; off: the "
               "accessors do\n"
               "cost options (--df-plan-cost; docs/fusion.md):\n"
               "  --df-cost-F=N        cycles per dispatched instruction (default 40)\n"
               "  --df-cost-R=N        cycles per record or payload byte (default 0.0625)\n"
               "  --df-cost-cluster-latency=N, --df-cost-hbm-latency=N\n"
               "                       transfer edge latencies (defaults 200, 1000)\n");
}

int main(int argc, char **argv) {
  const char *input = NULL, *output = NULL;
  const translation *chosen = NULL;
  bool json = false, embed = false, all_features = false, kernel_opts = false;
  bool no_resolve = false;
  bool cost_opts = false, cost_match = false;
  df_cost_params cost = df_cost_params_default();
  const char *sm = NULL, *links[16], *runtime = NULL;
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
    } else if (!parse_cost_option(argv[i], &cost, &cost_match)) {
      return 2;
    } else if (cost_match) {
      cost_opts = true;
    } else if (!strcmp(argv[i], "--json")) {
      json = true;
    } else if (!strncmp(argv[i], "--df-sm=", 8)) {
      sm = argv[i] + 8;
      kernel_opts = true;
    } else if (!strncmp(argv[i], "--df-runtime=", 13)) {
      runtime = argv[i] + 13;
      if (!*runtime) {
        fprintf(stderr, "df-translate: --df-runtime needs a bitcode file name\n");
        return 2;
      }
      kernel_opts = true;
    } else if (!strcmp(argv[i], "--df-embed-plan")) {
      embed = kernel_opts = true;
    } else if (!strncmp(argv[i], "--df-kernel-features=", 21)) {
      if (!parse_choice("--df-kernel-features", argv[i] + 21, "plan", "all", &all_features))
        return 2;
      kernel_opts = true;
    } else if (!strncmp(argv[i], "--df-resolve=", 13)) {
      if (!parse_choice("--df-resolve", argv[i] + 13, "on", "off", &no_resolve))
        return 2;
      kernel_opts = true;
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
  if (kernel_opts && !chosen->kernel) {
    fprintf(stderr, "df-translate: --df-sm, --df-embed-plan, --df-kernel-features and "
                    "--df-runtime apply to --df-to-ptx, --df-to-cubin and --df-kernel-report\n");
    free(text);
    return 2;
  }
  if (cost_opts && chosen->run != plan_cost) {
    fprintf(stderr, "df-translate: --df-cost-* options apply to --df-plan-cost only\n");
    free(text);
    return 2;
  }
  tr_input in = {{NULL}, NULL, 0,        json,         sm,  {NULL},
                 link_count, output, embed, all_features, cost, runtime, no_resolve};
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
    /* --df-to-host and --df-to-cubin write their own file through a tool. */
    FILE *out = chosen->own_output ? stdout : output ? fopen(output, "wb") : stdout;
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
