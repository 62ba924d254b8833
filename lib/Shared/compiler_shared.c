/* libdf_compiler.so: the compiler front end (include/df/compiler.h) as a
   shared library for the Python bindings. The archives linked whole carry
   the code; this file only marks the library. */
#include "shared.h"

int df_compiler_shared_available(void) { return 1; }
