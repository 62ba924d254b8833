/* The few CUDA driver API types, enumerations and entry points libdfrt
   uses, declared here so that df builds without the CUDA toolkit. Names,
   layouts and numeric values are those of the driver's cuda.h (CUDA 13);
   only the members df needs are listed. When cuda.h was included first,
   its declarations are used instead and this header only adds the symbol
   table. Do not include cuda.h after this header.

   df_cuda_driver is the symbol table libdfrt calls the driver through.
   df_rt_create fills it from libcuda.so.1 (dlopen, preferring the _v2
   entry points); tests inject a table of fakes instead. */
#ifndef DF_CUDA_DRIVER_H
#define DF_CUDA_DRIVER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifndef __cuda_cuda_h__

typedef uint32_t cuuint32_t;
typedef uint64_t cuuint64_t;

/* Driver status codes (cudaError_enum); the ones df names. */
typedef enum cudaError_enum {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_OUT_OF_MEMORY = 2,
  CUDA_ERROR_NOT_INITIALIZED = 3,
  CUDA_ERROR_DEINITIALIZED = 4,
  CUDA_ERROR_NO_DEVICE = 100,
  CUDA_ERROR_INVALID_DEVICE = 101,
  CUDA_ERROR_INVALID_IMAGE = 200,
  CUDA_ERROR_INVALID_CONTEXT = 201,
  CUDA_ERROR_NO_BINARY_FOR_GPU = 209,
  CUDA_ERROR_INVALID_PTX = 218,
  CUDA_ERROR_JIT_COMPILER_NOT_FOUND = 221,
  CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222,
  CUDA_ERROR_SHARED_OBJECT_INIT_FAILED = 303,
  CUDA_ERROR_INVALID_HANDLE = 400,
  CUDA_ERROR_NOT_FOUND = 500,
  CUDA_ERROR_NOT_READY = 600,
  CUDA_ERROR_ILLEGAL_ADDRESS = 700,
  CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701,
  CUDA_ERROR_ILLEGAL_INSTRUCTION = 715,
  CUDA_ERROR_LAUNCH_FAILED = 719,
  CUDA_ERROR_NOT_SUPPORTED = 801,
  CUDA_ERROR_INVALID_CLUSTER_SIZE = 912,
  CUDA_ERROR_UNKNOWN = 999
} CUresult;

typedef int CUdevice;                   /* device ordinal handle */
typedef unsigned long long CUdeviceptr; /* 64-bit device address */
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;

/* cuStreamCreate flags. */
typedef enum CUstream_flags_enum {
  CU_STREAM_DEFAULT = 0x0,
  CU_STREAM_NON_BLOCKING = 0x1
} CUstream_flags;

/* cuEventCreate flags. */
typedef enum CUevent_flags_enum {
  CU_EVENT_DEFAULT = 0x0,
  CU_EVENT_BLOCKING_SYNC = 0x1,
  CU_EVENT_DISABLE_TIMING = 0x2
} CUevent_flags;

/* cuMemHostAlloc flags. */
#define CU_MEMHOSTALLOC_PORTABLE 0x01
#define CU_MEMHOSTALLOC_DEVICEMAP 0x02

/* Device attributes df queries. */
typedef enum CUdevice_attribute_enum {
  CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1,
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK = 8,
  CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
  CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH = 120
} CUdevice_attribute;

/* Function attributes df reads or sets. */
typedef enum CUfunction_attribute_enum {
  CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0,
  CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1,
  CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES = 2,
  CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES = 3,
  CU_FUNC_ATTRIBUTE_NUM_REGS = 4,
  CU_FUNC_ATTRIBUTE_PTX_VERSION = 5,
  CU_FUNC_ATTRIBUTE_BINARY_VERSION = 6,
  CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
  CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT = 9, /* % of L1 + shared, -1: driver's */
  CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH = 11,
  CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED = 14,
  CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE = 15
} CUfunction_attribute;

/* JIT options df passes to cuModuleLoadDataEx for its logs. */
typedef enum CUjit_option_enum {
  CU_JIT_INFO_LOG_BUFFER = 3,
  CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4,
  CU_JIT_ERROR_LOG_BUFFER = 5,
  CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
  CU_JIT_LOG_VERBOSE = 12
} CUjit_option;

/* Cluster scheduling policies. */
typedef enum CUclusterSchedulingPolicy_enum {
  CU_CLUSTER_SCHEDULING_POLICY_DEFAULT = 0,
  CU_CLUSTER_SCHEDULING_POLICY_SPREAD = 1,
  CU_CLUSTER_SCHEDULING_POLICY_LOAD_BALANCING = 2
} CUclusterSchedulingPolicy;

/* Launch attribute ids df uses. */
typedef enum CUlaunchAttributeID_enum {
  CU_LAUNCH_ATTRIBUTE_IGNORE = 0,
  CU_LAUNCH_ATTRIBUTE_COOPERATIVE = 2,
  CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4,
  CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE = 5
} CUlaunchAttributeID;

/* Launch attribute value: a 64-byte union in the driver ABI. */
typedef union CUlaunchAttributeValue_union {
  char pad[64];
  struct {
    unsigned int x;
    unsigned int y;
    unsigned int z;
  } clusterDim;
  CUclusterSchedulingPolicy clusterSchedulingPolicyPreference;
  int cooperative;
  void *align_; /* the driver's union holds pointers: 8-byte aligned */
} CUlaunchAttributeValue;

typedef struct CUlaunchAttribute_st {
  CUlaunchAttributeID id;
  char pad[8 - sizeof(CUlaunchAttributeID)];
  CUlaunchAttributeValue value;
} CUlaunchAttribute;

typedef struct CUlaunchConfig_st {
  unsigned int gridDimX;
  unsigned int gridDimY;
  unsigned int gridDimZ;
  unsigned int blockDimX;
  unsigned int blockDimY;
  unsigned int blockDimZ;
  unsigned int sharedMemBytes; /* dynamic shared memory per block */
  CUstream hStream;
  CUlaunchAttribute *attrs;
  unsigned int numAttrs;
} CUlaunchConfig;

#define CU_TENSOR_MAP_NUM_QWORDS 16

/* The opaque 128-byte tensor map. CUDA 13's cuda.h declares it 128-byte
   aligned (cuTensorMapEncodeTiled itself needs 64). */
typedef struct CUtensorMap_st {
#ifdef __cplusplus
  alignas(128)
#else
  _Alignas(128)
#endif
  cuuint64_t opaque[CU_TENSOR_MAP_NUM_QWORDS];
} CUtensorMap;

typedef enum CUtensorMapDataType_enum {
  CU_TENSOR_MAP_DATA_TYPE_UINT8 = 0,
  CU_TENSOR_MAP_DATA_TYPE_UINT16,
  CU_TENSOR_MAP_DATA_TYPE_UINT32,
  CU_TENSOR_MAP_DATA_TYPE_INT32,
  CU_TENSOR_MAP_DATA_TYPE_UINT64,
  CU_TENSOR_MAP_DATA_TYPE_INT64,
  CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
  CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
  CU_TENSOR_MAP_DATA_TYPE_FLOAT64,
  CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
  CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ,
  CU_TENSOR_MAP_DATA_TYPE_TFLOAT32,
  CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ,
  CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B,
  CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B,
  CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B
} CUtensorMapDataType;

typedef enum CUtensorMapInterleave_enum {
  CU_TENSOR_MAP_INTERLEAVE_NONE = 0,
  CU_TENSOR_MAP_INTERLEAVE_16B,
  CU_TENSOR_MAP_INTERLEAVE_32B
} CUtensorMapInterleave;

typedef enum CUtensorMapSwizzle_enum {
  CU_TENSOR_MAP_SWIZZLE_NONE = 0,
  CU_TENSOR_MAP_SWIZZLE_32B,
  CU_TENSOR_MAP_SWIZZLE_64B,
  CU_TENSOR_MAP_SWIZZLE_128B,
  CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B,
  CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B_FLIP_8B,
  CU_TENSOR_MAP_SWIZZLE_128B_ATOM_64B
} CUtensorMapSwizzle;

typedef enum CUtensorMapL2promotion_enum {
  CU_TENSOR_MAP_L2_PROMOTION_NONE = 0,
  CU_TENSOR_MAP_L2_PROMOTION_L2_64B,
  CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
  CU_TENSOR_MAP_L2_PROMOTION_L2_256B
} CUtensorMapL2promotion;

typedef enum CUtensorMapFloatOOBfill_enum {
  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE = 0,
  CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA
} CUtensorMapFloatOOBfill;

#endif /* __cuda_cuda_h__ */

_Static_assert(sizeof(CUlaunchAttributeValue) == 64, "CUlaunchAttributeValue is 64 bytes");
_Static_assert(sizeof(CUlaunchAttribute) == 72, "CUlaunchAttribute is 72 bytes");
_Static_assert(sizeof(CUlaunchConfig) == 56, "CUlaunchConfig is 56 bytes");
_Static_assert(sizeof(CUtensorMap) == 128, "CUtensorMap is 128 bytes");
_Static_assert(sizeof(CUdeviceptr) == 8, "CUdeviceptr is 64-bit");

/* Highest CUtensorMapDataType / interleave / swizzle / L2 promotion /
   OOB fill value df accepts in a TMA descriptor spec. */
#define DF_CU_TENSOR_MAP_DATA_TYPE_MAX 15u
#define DF_CU_TENSOR_MAP_INTERLEAVE_MAX 2u
#define DF_CU_TENSOR_MAP_SWIZZLE_MAX 6u
#define DF_CU_TENSOR_MAP_L2_PROMOTION_MAX 3u
#define DF_CU_TENSOR_MAP_OOB_FILL_MAX 1u
#define DF_CU_TENSOR_MAP_MAX_RANK 5u

/* The driver entry points libdfrt calls. Each member has the signature of
   the cuda.h function of the same name; the loader resolves the versioned
   symbol named in the comment first (e.g. cuMemAlloc_v2) and falls back to
   the plain name. Members marked optional may be NULL: the feature that
   needs them then fails with a clear status. */
typedef struct df_cuda_driver {
  CUresult (*cuInit)(unsigned int flags);
  CUresult (*cuDriverGetVersion)(int *version);
  CUresult (*cuGetErrorName)(CUresult error, const char **name);   /* optional */
  CUresult (*cuGetErrorString)(CUresult error, const char **text); /* optional */
  CUresult (*cuDeviceGetCount)(int *count);
  CUresult (*cuDeviceGet)(CUdevice *device, int ordinal);
  CUresult (*cuDeviceGetName)(char *name, int len, CUdevice device);
  CUresult (*cuDeviceGetAttribute)(int *value, CUdevice_attribute attrib,
                                   CUdevice device);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *ctx, CUdevice device);
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice device); /* _v2 */
  CUresult (*cuCtxSetCurrent)(CUcontext ctx);
  CUresult (*cuModuleLoadDataEx)(CUmodule *module, const void *image,
                                 unsigned int num_options, CUjit_option *options,
                                 void **option_values);
  CUresult (*cuModuleUnload)(CUmodule module);
  CUresult (*cuModuleGetFunction)(CUfunction *fn, CUmodule module,
                                  const char *name);
  /* optional (_v2): reads df_handler_workspace_bytes from the image */
  CUresult (*cuModuleGetGlobal)(CUdeviceptr *ptr, size_t *bytes, CUmodule module,
                                const char *name);
  CUresult (*cuFuncGetAttribute)(int *value, CUfunction_attribute attrib,
                                 CUfunction fn);
  CUresult (*cuFuncSetAttribute)(CUfunction fn, CUfunction_attribute attrib,
                                 int value);
  CUresult (*cuOccupancyMaxPotentialClusterSize)(int *cluster_size, CUfunction fn,
                                                 const CUlaunchConfig *config);
  CUresult (*cuOccupancyMaxActiveClusters)(int *clusters, CUfunction fn,
                                           const CUlaunchConfig *config);
  CUresult (*cuOccupancyMaxActiveBlocksPerMultiprocessor)(int *blocks, CUfunction fn,
                                                         int block_threads,
                                                         size_t dynamic_shared);
  CUresult (*cuMemAlloc)(CUdeviceptr *ptr, size_t bytes); /* _v2 */
  CUresult (*cuMemFree)(CUdeviceptr ptr);                 /* _v2 */
  CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr dst, const void *src, size_t bytes,
                                CUstream stream); /* _v2 */
  CUresult (*cuMemcpyDtoHAsync)(void *dst, CUdeviceptr src, size_t bytes,
                                CUstream stream); /* _v2 */
  CUresult (*cuMemsetD8Async)(CUdeviceptr dst, unsigned char value, size_t count,
                              CUstream stream);
  CUresult (*cuStreamCreate)(CUstream *stream, unsigned int flags);
  CUresult (*cuStreamDestroy)(CUstream stream); /* _v2 */
  CUresult (*cuStreamSynchronize)(CUstream stream);
  CUresult (*cuLaunchKernelEx)(const CUlaunchConfig *config, CUfunction fn,
                               void **params, void **extra);
  CUresult (*cuTensorMapEncodeTiled)(
      CUtensorMap *map, CUtensorMapDataType dtype, cuuint32_t rank, void *address,
      const cuuint64_t *global_dim, const cuuint64_t *global_strides,
      const cuuint32_t *box_dim, const cuuint32_t *element_strides,
      CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
      CUtensorMapL2promotion l2_promotion,
      CUtensorMapFloatOOBfill oob_fill); /* optional: needed for TMA specs */
  /* The watchdog (df_rt_executable_set_timeout): stream polling and the
     mapped host memory of the progress array. Optional. */
  CUresult (*cuStreamQuery)(CUstream stream);
  CUresult (*cuMemHostAlloc)(void **host, size_t bytes, unsigned int flags);
  CUresult (*cuMemFreeHost)(void *host);
  CUresult (*cuMemHostGetDevicePointer)(CUdeviceptr *dptr, void *host,
                                        unsigned int flags); /* _v2 */
  /* Events (df_rt_event_*: timing). Optional. */
  CUresult (*cuEventCreate)(CUevent *event, unsigned int flags);
  CUresult (*cuEventRecord)(CUevent event, CUstream stream);
  CUresult (*cuEventSynchronize)(CUevent event);
  CUresult (*cuEventElapsedTime)(float *ms, CUevent start, CUevent end); /* _v2 */
  CUresult (*cuEventDestroy)(CUevent event); /* _v2 */
} df_cuda_driver;

#ifdef __cplusplus
}
#endif

#endif
