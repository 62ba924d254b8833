/* Handler implementations by capability region (docs/implementations.md).

   An operator may have several implementations: specialised ones that
   serve a region of calls (a tile count, an exact range length, a reduce
   arity class, an intermediate dtype, a minimum architecture) and general
   ones. df_impl_select chooses one per call by fixed rules, never by the
   order the implementations were written in:
     1. candidates needing a newer architecture than the target are skipped;
     2. one applicable specialised implementation wins; a general one serves
        only where no specialised one applies;
     3. two applicable specialised (or, failing those, general)
        implementations: "dispatch is ambiguous";
     4. none applies: "no implementation serves this call";
     5. when the caller supplied replacements for the operator, only they
        are candidates: a replacement that declines is never stood in for by
        a program-declared or built-in implementation ("the kernel supplied
        for ..."). */
#ifndef DF_IMPL_H
#define DF_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include "df/plan.h"
#include "df/program.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Minimum architectures, ordered: sm_80 < sm_90 < sm_90a. */
typedef enum df_arch {
  DF_ARCH_ANY = 0,
  DF_ARCH_SM80 = 80,
  DF_ARCH_SM90 = 90,
  DF_ARCH_SM90A = 91,
} df_arch;

/* "sm_80", "sm_90", "sm_90a" ("any" for DF_ARCH_ANY). */
const char *df_arch_name(df_arch a);
/* Accepts "80", "90", "90a" with or without an "sm_" prefix; the error
   names the accepted spellings. */
df_status df_arch_parse(const char *text, df_arch *out);

typedef enum df_impl_origin {
  DF_IMPL_PROGRAM = 0,     /* declared in the program module */
  DF_IMPL_BUILTIN = 1,     /* df's handler library */
  DF_IMPL_REPLACEMENT = 2, /* supplied by the caller at compile time */
} df_impl_origin;

/* "program", "built-in", "replacement". */
const char *df_impl_origin_name(df_impl_origin o);

typedef enum df_impl_iter {
  DF_IMPL_ITER_ANY = 0,
  DF_IMPL_ITER_TILES = 1,  /* exactly iter_value range blocks */
  DF_IMPL_ITER_LENGTH = 2, /* exactly iter_value range units */
} df_impl_iter;

/* One implementation of an operator and the region of calls it serves. */
typedef struct df_impl {
  char name[DF_NAME_MAX]; /* the function symbol */
  char op[DF_NAME_MAX];   /* operator it implements */
  df_impl_origin origin;
  df_impl_iter iter;
  uint32_t iter_value;
  bool has_arity;
  df_arity_class arity;
  df_dtype dtype; /* DF_DTYPE_INVALID = any */
  df_arch min_arch;
  bool general;
  /* Built-in library handler this symbol belongs to ("" otherwise). */
  char library[DF_NAME_MAX];
} df_impl;

/* True when the implementation declares no region beyond its
   architecture: general ones must not narrow the iter range or arity. */
df_status df_impl_check(const df_impl *im);

/* Parse a caller-supplied replacement `OP=SYMBOL[:key[=value],...]`
   with keys tiles=N, length=L, arity=passthrough|binary|generic,
   dtype=NAME, arch=80|90|90a, general. origin is DF_IMPL_REPLACEMENT. */
df_status df_impl_parse(const char *spec, df_impl *out);

/* The region as text ("tiles=4,arch=sm_90", "general", "any"). */
int df_impl_region(const df_impl *im, char *buf, size_t cap);

/* The facts of one call that implementations are matched against. */
typedef struct df_call_facts {
  const char *op;       /* operator name */
  uint32_t instr;       /* plan instruction id, for messages */
  bool has_range;
  uint32_t length;      /* range units */
  uint32_t tiles;       /* range blocks (the variant's tile count when
                           the scheduler bucketed the range) */
  bool has_arity;
  uint32_t arity;       /* reduce inputs */
  df_dtype dtype;       /* the intermediate's payload dtype, INVALID none */
  df_arch arch;         /* the target */
} df_call_facts;

/* Does `im` serve the call (architecture included)? */
bool df_impl_applies(const df_impl *im, const df_call_facts *f);

/* Choose among `impls` (all implementations; those of other operators
   are ignored) by the rules above; *chosen is an index into impls. The
   status says which rule refused. *chosen is DF_SENTINEL when the
   operator has no implementations at all (the caller then keeps its
   default binding). */
df_status df_impl_select(const df_impl *impls, uint32_t count, const df_call_facts *f,
                         uint32_t *chosen);

/* ---- built-in handler library ------------------------------------------- */

/* The library's implementations of `library` ("lse_combine", "copy") for
   operator `op`; *count 0 when the library name is unknown. Writes at
   most `cap`. */
uint32_t df_library_impls(const char *library, const char *op, df_impl *out, uint32_t cap);
/* The library a built-in symbol belongs to; NULL for other symbols. */
const char *df_library_of_symbol(const char *symbol);
/* Names of the libraries, comma-separated, for error messages. */
const char *df_library_names(void);
/* Whether `library` exists and suits an operator of kind `kind` over
   intermediate type `t` (fields it needs, dtypes, shapes); the error
   names the operator and the rule. */
df_status df_library_check(const char *library, const char *op, df_op_kind kind,
                           const df_itype *t);

/* Descriptor words a built-in handler reads (docs/implementations.md):
   lse_combine: {lse offset, heads, o offset, o dtype code, o elements per
   head}; copy: {o offset, o dtype code, o elements, output tensor index}.
   Returns the word count (at most 8). */
df_status df_library_descriptor(const char *library, const df_program *p, const char *op,
                                uint32_t words[8], uint32_t *count);

/* ---- programs ------------------------------------------------------------- */

/* Declare an implementation of an operator of `p` (origin becomes
   DF_IMPL_PROGRAM). Checks the region, that the operator exists and that
   the symbol is declared once. */
df_status df_program_add_impl(df_program *p, const df_impl *im);
/* Make operator `op` use built-in library handler `library`
   (df_library_check). */
df_status df_program_set_library(df_program *p, const char *op, const char *library);

/* True when some operator has a declared implementation or a built-in
   library handler (df_schedule then selects implementations). */
bool df_program_has_impls(const df_program *p);
/* The same for one operator. */
bool df_operator_has_impls(const df_program *p, const char *op);

/* ---- plans ---------------------------------------------------------------- */

typedef struct df_select_options {
  df_arch arch;                 /* DF_ARCH_ANY = sm_90a */
  const df_impl *replacements;  /* caller-supplied, may be NULL */
  uint32_t replacement_count;
} df_select_options;

/* Every implementation of the program (declared + built-in library ones)
   and the replacements, in one malloc'ed (alloc) array. */
df_status df_program_impls(const df_program *p, const df_select_options *o,
                           const df_allocator *alloc, df_impl **out, uint32_t *count);

/* Choose an implementation for every handler instruction of the plan
   whose operator has implementations (df-select-variants): the choice is
   recorded as the instruction's impl (df_plan.impls). Instructions of
   operators without implementations keep the default binding. */
df_status df_plan_select_impls(df_plan *plan, const df_program *p, const df_select_options *o);

#ifdef __cplusplus
}
#endif

#endif
