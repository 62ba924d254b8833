/* Internal to lib/Target. */
#ifndef DF_TARGET_INTERNAL_H
#define DF_TARGET_INTERNAL_H

#include "df/target.h"
#include "llvm-c/Types.h"

/* Define df_dispatch in `m` for the plan's handler table. */
df_status df_build_dispatch(LLVMModuleRef m, const df_packed *k);

#endif
