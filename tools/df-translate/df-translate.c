/* df-translate: translations out of a df module (program dump, plans). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "df/compiler.h"

typedef struct translation {
  const char *flag;
  const char *description;
  df_status (*run)(MlirOperation module, FILE *out);
} translation;

static df_status program_dump(MlirOperation module, FILE *out) {
  df_program *p;
  DF_TRY(df_program_from_module(module, NULL, NULL, &p));
  df_status s = df_program_dump(p, out);
  df_program_destroy(p);
  return s;
}

static const translation translations[] = {
    {"--df-program-dump",
     "print the program model: stages, intermediates with slot bytes, operator ids and "
     "kinds, tensor argument order",
     program_dump},
    {NULL, NULL, NULL},
};

static void usage(FILE *out) {
  fprintf(out, "usage: df-translate <translation> [-o FILE] [input|-]\ntranslations:\n");
  for (const translation *t = translations; t->flag; t++)
    fprintf(out, "  %-20s %s\n", t->flag, t->description);
}

int main(int argc, char **argv) {
  const char *input = NULL, *output = NULL;
  const translation *chosen = NULL;
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
  MlirContext ctx;
  s = df_context_create(&ctx);
  MlirOperation module = {NULL};
  if (!df_failed(&s))
    s = df_parse_module(ctx, text, len, strcmp(input, "-") ? input : "<stdin>", &module);
  free(text);
  int rc = 0;
  if (df_failed(&s)) {
    fprintf(stderr, "df-translate: %s\n", s.message);
    rc = 1;
  } else {
    FILE *out = output ? fopen(output, "wb") : stdout;
    if (!out) {
      fprintf(stderr, "df-translate: cannot write '%s'\n", output);
      rc = 1;
    } else {
      s = chosen->run(module, out);
      if (df_failed(&s)) {
        fprintf(stderr, "df-translate: %s\n", s.message);
        rc = 1;
      }
      if (output)
        fclose(out);
    }
  }
  if (!mlirOperationIsNull(module))
    mlirOperationDestroy(module);
  mlirContextDestroy(ctx);
  return rc;
}
