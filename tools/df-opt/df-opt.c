/* df-opt: parse a df module, verify it, run df and upstream passes in the
   order given, print generic MLIR. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "df/compiler.h"
#include "mlir-c/RegisterEverything.h"

static void usage(FILE *out) {
  fprintf(out,
          "usage: df-opt [options] [input.mlir|-]\n"
          "  -o FILE                 write the output to FILE (default stdout)\n"
          "  --pass-pipeline=PIPE    run an upstream MLIR pass pipeline at this point\n"
          "  --help                  print this help\n"
          "df passes (run in command-line order, after df-verify):\n");
  for (const df_pass_info *p = df_pass_table(); p->name; p++) {
    fprintf(out, "  --%-22s %s\n", p->name, p->description);
    if (p->options && *p->options)
      fprintf(out, "%s", p->options);
  }
}

static const df_pass_info *find_pass(const char *arg, const char **options) {
  for (const df_pass_info *p = df_pass_table(); p->name; p++) {
    size_t n = strlen(p->name);
    if (strncmp(arg, p->name, n) != 0)
      continue;
    if (arg[n] == '\0') {
      *options = "";
      return p;
    }
    if (arg[n] == '=') {
      *options = arg + n + 1;
      return p;
    }
  }
  return NULL;
}

static void print_cb(MlirStringRef s, void *user) { fwrite(s.data, 1, s.length, user); }

static void append_error(MlirStringRef s, void *user) {
  fwrite(s.data, 1, s.length, (FILE *)user);
}

int main(int argc, char **argv) {
  const char *input = NULL, *output = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage(stdout);
      return 0;
    }
    if (!strcmp(argv[i], "-o")) {
      if (++i == argc) {
        fprintf(stderr, "df-opt: -o needs a file name\n");
        return 2;
      }
      output = argv[i];
    } else if (argv[i][0] == '-' && argv[i][1] == '-') {
      const char *opts;
      if (strncmp(argv[i], "--pass-pipeline=", 16) && !find_pass(argv[i] + 2, &opts)) {
        fprintf(stderr, "df-opt: unknown option '%s' (see --help)\n", argv[i]);
        return 2;
      }
    } else if (!input) {
      input = argv[i];
    } else {
      fprintf(stderr, "df-opt: more than one input file ('%s' and '%s')\n", input, argv[i]);
      return 2;
    }
  }
  if (!input)
    input = "-";

  MlirContext ctx;
  df_status s = df_context_create(&ctx);
  if (df_failed(&s)) {
    fprintf(stderr, "df-opt: %s\n", s.message);
    return 1;
  }
  mlirRegisterAllPasses();
  /* Build the pipeline first so bad pass options fail before any input. */
  MlirPassManager pm = mlirPassManagerCreate(ctx);
  MlirOpPassManager opm = mlirPassManagerGetAsOpPassManager(pm);
  mlirPassManagerAddOwnedPass(pm, df_create_verify_pass());
  int rc = 0;
  for (int i = 1; i < argc && rc == 0; i++) {
    if (!strcmp(argv[i], "-o")) {
      i++;
      continue;
    }
    if (!strncmp(argv[i], "--pass-pipeline=", 16)) {
      const char *pipe = argv[i] + 16;
      if (mlirLogicalResultIsFailure(mlirParsePassPipeline(
              opm, mlirStringRefCreateFromCString(pipe), append_error, stderr))) {
        fprintf(stderr, "\ndf-opt: invalid --pass-pipeline '%s'\n", pipe);
        rc = 2;
      }
      continue;
    }
    const char *opts;
    const df_pass_info *p = argv[i][0] == '-' ? find_pass(argv[i] + 2, &opts) : NULL;
    if (!p)
      continue;
    if (!strcmp(p->name, "df-verify")) {
      if (*opts) {
        fprintf(stderr, "df-opt: df-verify takes no options, got '%s'\n", opts);
        rc = 2;
      }
      continue; /* it always runs first */
    }
    MlirPass pass;
    s = p->create(opts, &pass);
    if (df_failed(&s)) {
      fprintf(stderr, "df-opt: %s\n", s.message);
      rc = 2;
      break;
    }
    mlirPassManagerAddOwnedPass(pm, pass);
  }
  MlirOperation module = {NULL};
  if (rc == 0) {
    char *text;
    size_t len;
    s = df_read_file(input, &text, &len);
    if (!df_failed(&s)) {
      s = df_parse_module(ctx, text, len, strcmp(input, "-") ? input : "<stdin>", &module);
      free(text);
    }
    if (df_failed(&s)) {
      fprintf(stderr, "df-opt: %s\n", s.message);
      rc = 1;
    }
  }
  if (rc == 0 && mlirLogicalResultIsFailure(mlirPassManagerRunOnOp(pm, module)))
    rc = 1;
  if (rc == 0) {
    FILE *out = output ? fopen(output, "w") : stdout;
    if (!out) {
      fprintf(stderr, "df-opt: cannot write '%s'\n", output);
      rc = 1;
    } else {
      MlirOpPrintingFlags flags = mlirOpPrintingFlagsCreate();
      mlirOpPrintingFlagsPrintGenericOpForm(flags);
      mlirOperationPrintWithFlags(module, flags, print_cb, out);
      fputc('\n', out);
      mlirOpPrintingFlagsDestroy(flags);
      if (output)
        fclose(out);
    }
  }
  mlirPassManagerDestroy(pm);
  if (!mlirOperationIsNull(module))
    mlirOperationDestroy(module);
  mlirContextDestroy(ctx);
  return rc;
}
