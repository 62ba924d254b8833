/* df-program-ir: IR -> program model -> IR. Reads a module, converts its
   program with df_program_from_module and prints the module that
   df_program_to_mlir builds from the model (generic form). The lit test
   program-to-ir.test checks that the printed module round-trips through
   df-opt and has the same program dump as its input.
   `--body NAME=FILE` merges handler NAME's MLIR body from FILE into the
   printed module (df_module_add_handler_body, as the Python bindings'
   mlir= bodies); handler-bodies.test runs the result. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "df/compiler.h"

static int usage(FILE *out) {
  fprintf(out, "usage: df-program-ir [--program NAME] [--body HANDLER=FILE.mlir]... "
               "[-o OUTPUT] INPUT.mlir\n");
  return out == stdout ? 0 : 2;
}

enum { MAX_BODIES = 16 };

static void print_cb(MlirStringRef s, void *user) { fwrite(s.data, 1, s.length, user); }

/* The module of `prog` with the bodies merged, printed in generic form. */
static df_status with_bodies(const df_program *prog, MlirContext ctx, char **bodies,
                             unsigned count, char **text) {
  MlirOperation module;
  DF_TRY(df_program_to_mlir(prog, ctx, &module));
  df_status s = df_status_ok();
  for (unsigned i = 0; i < count && s.code == DF_OK; i++) {
    char *eq = strchr(bodies[i], '=');
    char *data = NULL;
    size_t len = 0;
    *eq = '\0';
    s = df_read_file(eq + 1, &data, &len);
    if (s.code == DF_OK)
      s = df_module_add_handler_body(module, bodies[i], data, len, eq + 1);
    *eq = '=';
    free(data);
  }
  if (s.code == DF_OK) {
    size_t size = 0;
    FILE *mem = open_memstream(text, &size);
    if (!mem) {
      s = df_status_errorf(DF_ENOMEM, "out of memory printing the module");
    } else {
      MlirOpPrintingFlags f = mlirOpPrintingFlagsCreate();
      mlirOpPrintingFlagsPrintGenericOpForm(f);
      mlirOperationPrintWithFlags(module, f, print_cb, mem);
      mlirOpPrintingFlagsDestroy(f);
      fputc('\n', mem);
      fclose(mem);
    }
  }
  mlirOperationDestroy(module);
  return s;
}

static df_status run(const char *input, const char *name, char **bodies, unsigned body_count,
                     char **text) {
  char *data;
  size_t len;
  DF_TRY(df_read_file(input, &data, &len));
  MlirContext ctx;
  df_status s = df_context_create(&ctx);
  if (s.code != DF_OK) {
    free(data);
    return s;
  }
  MlirOperation module;
  s = df_parse_module(ctx, data, len, input, &module);
  free(data);
  if (s.code == DF_OK) {
    df_program *prog;
    s = df_program_from_module(module, name, NULL, &prog);
    mlirOperationDestroy(module);
    if (s.code == DF_OK) {
      s = body_count ? with_bodies(prog, ctx, bodies, body_count, text)
                     : df_program_to_mlir_text(prog, text);
      df_program_destroy(prog);
    }
  }
  mlirContextDestroy(ctx);
  return s;
}

int main(int argc, char **argv) {
  const char *input = NULL, *output = NULL, *name = NULL;
  char *bodies[MAX_BODIES];
  unsigned body_count = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0)
      return usage(stdout);
    if (strcmp(argv[i], "--body") == 0 && i + 1 < argc) {
      if (!strchr(argv[i + 1], '=') || body_count == MAX_BODIES) {
        fprintf(stderr, "df-program-ir: --body takes HANDLER=FILE (at most %d)\n", MAX_BODIES);
        return 2;
      }
      bodies[body_count++] = argv[++i];
      continue;
    }
    if ((strcmp(argv[i], "-o") == 0 || strcmp(argv[i], "--program") == 0) && i + 1 < argc) {
      *(argv[i][1] == 'o' ? &output : &name) = argv[i + 1];
      i++;
    } else if (argv[i][0] == '-' && argv[i][1]) {
      fprintf(stderr, "df-program-ir: unknown option '%s'\n", argv[i]);
      return usage(stderr);
    } else if (input) {
      fprintf(stderr, "df-program-ir: more than one input file\n");
      return usage(stderr);
    } else {
      input = argv[i];
    }
  }
  if (!input)
    return usage(stderr);
  char *text = NULL;
  df_status s = run(input, name, bodies, body_count, &text);
  if (s.code != DF_OK) {
    fprintf(stderr, "df-program-ir: %s\n", s.message);
    return 1;
  }
  FILE *out = output ? fopen(output, "w") : stdout;
  if (!out) {
    fprintf(stderr, "df-program-ir: cannot write '%s'\n", output);
    free(text);
    return 1;
  }
  fputs(text, out);
  free(text);
  if (out != stdout)
    fclose(out);
  return 0;
}
