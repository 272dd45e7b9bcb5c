/*
 * The CUDA driver, loaded lazily.  libflashmsa never links libcuda or
 * libcudart and needs no CUDA header to build: libcuda.so.1 is dlopen'ed at
 * first use and every entry point the backend calls is reached through this
 * table, so one binary runs on machines with and without an NVIDIA driver
 * (without one the backend reports 0 devices).  The few driver types and
 * constants used are declared here with the values of the driver ABI, which
 * NVIDIA keeps stable (symbols that changed meaning carry a _v2 suffix, and
 * those are the ones resolved).
 */
#ifndef FMSA_CUDA_LOADER_H
#define FMSA_CUDA_LOADER_H

#include <stddef.h>

#include "flashmsa/flashmsa.h"

typedef int fmsa_cu_result;                        ///< CUresult
typedef int fmsa_cu_device;                        ///< CUdevice
typedef unsigned long long fmsa_cu_deviceptr;      ///< CUdeviceptr (64-bit on every platform)
typedef struct fmsa_cu_ctx_st *fmsa_cu_context;    ///< CUcontext
typedef struct fmsa_cu_mod_st *fmsa_cu_module;     ///< CUmodule
typedef struct fmsa_cu_func_st *fmsa_cu_function;  ///< CUfunction
typedef struct fmsa_cu_stream_st *fmsa_cu_stream;  ///< CUstream == cudaStream_t

/// CUresult values the backend tells apart.
enum {
    FMSA_CU_SUCCESS = 0,                ///< CUDA_SUCCESS
    FMSA_CU_ERROR_INVALID_VALUE = 1,    ///< CUDA_ERROR_INVALID_VALUE
    FMSA_CU_ERROR_OUT_OF_MEMORY = 2,    ///< CUDA_ERROR_OUT_OF_MEMORY
    FMSA_CU_ERROR_NO_DEVICE = 100,      ///< CUDA_ERROR_NO_DEVICE
    FMSA_CU_ERROR_NOT_FOUND = 500,      ///< CUDA_ERROR_NOT_FOUND
};

/// CUdevice_attribute values queried by cuda_device.c.
enum {
    FMSA_CU_ATTR_MAX_THREADS_PER_BLOCK = 1,
    FMSA_CU_ATTR_SMEM_PER_BLOCK = 8,
    FMSA_CU_ATTR_WARP_SIZE = 10,
    FMSA_CU_ATTR_REGS_PER_BLOCK = 12,
    FMSA_CU_ATTR_MULTIPROCESSORS = 16,
    FMSA_CU_ATTR_L2_CACHE_SIZE = 38,
    FMSA_CU_ATTR_UNIFIED_ADDRESSING = 41,
    FMSA_CU_ATTR_CC_MAJOR = 75,
    FMSA_CU_ATTR_CC_MINOR = 76,
    FMSA_CU_ATTR_SMEM_PER_SM = 81,
    FMSA_CU_ATTR_SMEM_PER_BLOCK_OPTIN = 97,
};

/// CUfunction_attribute: the dynamic shared memory a launch may request.
#define FMSA_CU_FUNC_ATTR_MAX_DYNAMIC_SMEM 8

/// X-macro of every driver entry point used: (field, exported symbol, parameters).
#define FMSA_CU_FUNCTIONS(X)                                                                     \
    X(cuInit, "cuInit", (unsigned))                                                             \
    X(cuDriverGetVersion, "cuDriverGetVersion", (int *))                                         \
    X(cuDeviceGetCount, "cuDeviceGetCount", (int *))                                             \
    X(cuDeviceGet, "cuDeviceGet", (fmsa_cu_device *, int))                                       \
    X(cuDeviceGetAttribute, "cuDeviceGetAttribute", (int *, int, fmsa_cu_device))                \
    X(cuDeviceGetName, "cuDeviceGetName", (char *, int, fmsa_cu_device))                         \
    X(cuDeviceTotalMem, "cuDeviceTotalMem_v2", (size_t *, fmsa_cu_device))                       \
    X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", (fmsa_cu_context *, fmsa_cu_device)) \
    X(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", (fmsa_cu_device))               \
    X(cuCtxPushCurrent, "cuCtxPushCurrent_v2", (fmsa_cu_context))                               \
    X(cuCtxPopCurrent, "cuCtxPopCurrent_v2", (fmsa_cu_context *))                               \
    X(cuCtxSynchronize, "cuCtxSynchronize", (void))                                              \
    X(cuModuleLoadData, "cuModuleLoadData", (fmsa_cu_module *, const void *))                    \
    X(cuModuleUnload, "cuModuleUnload", (fmsa_cu_module))                                        \
    X(cuModuleGetFunction, "cuModuleGetFunction",                                                \
      (fmsa_cu_function *, fmsa_cu_module, const char *))                                        \
    X(cuFuncSetAttribute, "cuFuncSetAttribute", (fmsa_cu_function, int, int))                    \
    X(cuLaunchKernel, "cuLaunchKernel",                                                          \
      (fmsa_cu_function, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,   \
       fmsa_cu_stream, void **, void **))                                                        \
    X(cuMemAlloc, "cuMemAlloc_v2", (fmsa_cu_deviceptr *, size_t))                                \
    X(cuMemFree, "cuMemFree_v2", (fmsa_cu_deviceptr))                                            \
    X(cuMemGetAddressRange, "cuMemGetAddressRange_v2",                                           \
      (fmsa_cu_deviceptr *, size_t *, fmsa_cu_deviceptr))                                        \
    X(cuMemcpyHtoD, "cuMemcpyHtoD_v2", (fmsa_cu_deviceptr, const void *, size_t))                \
    X(cuMemcpyDtoH, "cuMemcpyDtoH_v2", (void *, fmsa_cu_deviceptr, size_t))                      \
    X(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2",                                                 \
      (void *, fmsa_cu_deviceptr, size_t, fmsa_cu_stream))                                       \
    X(cuMemsetD32Async, "cuMemsetD32Async",                                                      \
      (fmsa_cu_deviceptr, unsigned, size_t, fmsa_cu_stream))                                     \
    X(cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2",                                                 \
      (fmsa_cu_deviceptr, fmsa_cu_deviceptr, size_t, fmsa_cu_stream))                            \
    X(cuStreamSynchronize, "cuStreamSynchronize", (fmsa_cu_stream))                              \
    X(cuStreamIsCapturing, "cuStreamIsCapturing", (fmsa_cu_stream, int *))                       \
    X(cuGetErrorName, "cuGetErrorName", (fmsa_cu_result, const char **))                         \
    X(cuGetErrorString, "cuGetErrorString", (fmsa_cu_result, const char **))

/// Function-pointer table filled by fmsa_cuda_load().
typedef struct fmsa_cuda_api {
#define FMSA_CU_DECLARE(field, symbol, params) fmsa_cu_result(*field) params;
    FMSA_CU_FUNCTIONS(FMSA_CU_DECLARE)
#undef FMSA_CU_DECLARE
    int driver_version;        ///< cuDriverGetVersion (e.g. 13000)
    fmsa_cu_result init_error; ///< what cuInit returned (FMSA_CU_SUCCESS when usable)
} fmsa_cuda_api;

/// The loaded driver, or NULL when libcuda.so.1 is missing, lacks a symbol or
/// cuInit fails (no device visible, driver too old).  Loads once per process
/// (thread-safe); never fails loudly.
const fmsa_cuda_api *fmsa_cuda_load(void);

/// Why fmsa_cuda_load() returned NULL ("" when it did not).
const char *fmsa_cuda_load_error(void);

/// fmsa_fail(FMSA_ERR_DEVICE or FMSA_ERR_OUT_OF_MEMORY,
///           "cuda: <call> failed: <CUDA_ERROR_NAME> (<code>): <description>").
fmsa_status fmsa_cuda_fail(const fmsa_cuda_api *cu, const char *call, fmsa_cu_result rc);

/// Runs a driver call and returns its failure as an fmsa_status naming the call.
#define FMSA_CU_CHECK(cu, call_name, expr)                                     \
    do {                                                                       \
        fmsa_cu_result fmsa_cu_rc_ = (expr);                                   \
        if (fmsa_cu_rc_ != FMSA_CU_SUCCESS) return fmsa_cuda_fail((cu), (call_name), fmsa_cu_rc_); \
    } while (0)

#endif /* FMSA_CUDA_LOADER_H */
