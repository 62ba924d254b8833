/* The device runtime (lib/Runtime/device) as LLVM bitcode for nvptx64,
   embedded at build time. The compiler links it with the handlers and the
   generated df_dispatch; its kernel entry is df_persistent_kernel
   (parameters: docs/device-runtime.md). */
#ifndef DF_DEVICE_RUNTIME_H
#define DF_DEVICE_RUNTIME_H

#ifdef __cplusplus
extern "C" {
#endif

/* The bitcode bytes, followed by a NUL that is not counted in the size. */
extern const char df_device_runtime_bc[];
extern const unsigned long df_device_runtime_bc_size;

/* lib/Runtime/device/ctx_fn.c (the out-of-line handler accessors)
   compiled for the host, for MLIR-body handlers on the host backend. */
extern const char df_host_ctx_fn_bc[];
extern const unsigned long df_host_ctx_fn_bc_size;

#ifdef __cplusplus
}
#endif

#endif
