/* df-program-ir: IR -> program model -> IR. Reads a module, converts its
   program with df_program_from_module and prints the module that
   df_program_to_mlir builds from the model (generic form). The lit test
   program-to-ir.test checks that the printed module round-trips through
   df-opt and has the same program dump as its input. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "df/compiler.h"

static int usage(FILE *out) {
  fprintf(out, "usage: df-program-ir [--program NAME] [-o OUTPUT] INPUT.mlir\n");
  return out == stdout ? 0 : 2;
}

static df_status run(const char *input, const char *name, char **text) {
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
      s = df_program_to_mlir_text(prog, text);
      df_program_destroy(prog);
    }
  }
  mlirContextDestroy(ctx);
  return s;
}

int main(int argc, char **argv) {
  const char *input = NULL, *output = NULL, *name = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0)
      return usage(stdout);
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
  df_status s = run(input, name, &text);
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
