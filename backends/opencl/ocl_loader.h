/*
 * The OpenCL runtime, loaded lazily.  libflashmsa never links -lOpenCL: the
 * ICD loader is dlopen'ed at first use and every entry point the backend calls
 * is reached through this table, so one binary runs on machines with and
 * without an OpenCL runtime (without one the backend reports 0 devices).
 * The Khronos headers give types and constants only.
 */
#ifndef FMSA_OCL_LOADER_H
#define FMSA_OCL_LOADER_H

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif /* !CL_TARGET_OPENCL_VERSION */
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl.h>

#include "flashmsa/flashmsa.h"

/// X-macro of every OpenCL entry point used: (name, return type, parameters).
#define FMSA_OCL_FUNCTIONS(X)                                                                  \
    X(clGetPlatformIDs, cl_int, (cl_uint, cl_platform_id *, cl_uint *))                        \
    X(clGetPlatformInfo, cl_int, (cl_platform_id, cl_platform_info, size_t, void *, size_t *)) \
    X(clGetDeviceIDs, cl_int,                                                                  \
      (cl_platform_id, cl_device_type, cl_uint, cl_device_id *, cl_uint *))                    \
    X(clGetDeviceInfo, cl_int, (cl_device_id, cl_device_info, size_t, void *, size_t *))       \
    X(clCreateContext, cl_context,                                                             \
      (const cl_context_properties *, cl_uint, const cl_device_id *,                           \
       void(CL_CALLBACK *)(const char *, const void *, size_t, void *), void *, cl_int *))     \
    X(clReleaseContext, cl_int, (cl_context))                                                  \
    X(clCreateCommandQueue, cl_command_queue,                                                  \
      (cl_context, cl_device_id, cl_command_queue_properties, cl_int *))                       \
    X(clReleaseCommandQueue, cl_int, (cl_command_queue))                                       \
    X(clCreateBuffer, cl_mem, (cl_context, cl_mem_flags, size_t, void *, cl_int *))            \
    X(clReleaseMemObject, cl_int, (cl_mem))                                                    \
    X(clGetMemObjectInfo, cl_int, (cl_mem, cl_mem_info, size_t, void *, size_t *))             \
    X(clEnqueueReadBuffer, cl_int,                                                             \
      (cl_command_queue, cl_mem, cl_bool, size_t, size_t, void *, cl_uint, const cl_event *,   \
       cl_event *))                                                                            \
    X(clEnqueueWriteBuffer, cl_int,                                                            \
      (cl_command_queue, cl_mem, cl_bool, size_t, size_t, const void *, cl_uint,               \
       const cl_event *, cl_event *))                                                          \
    X(clFinish, cl_int, (cl_command_queue))                                                    \
    X(clCreateProgramWithSource, cl_program,                                                   \
      (cl_context, cl_uint, const char **, const size_t *, cl_int *))                          \
    X(clBuildProgram, cl_int,                                                                  \
      (cl_program, cl_uint, const cl_device_id *, const char *,                                \
       void(CL_CALLBACK *)(cl_program, void *), void *))                                       \
    X(clGetProgramBuildInfo, cl_int,                                                           \
      (cl_program, cl_device_id, cl_program_build_info, size_t, void *, size_t *))             \
    X(clReleaseProgram, cl_int, (cl_program))                                                  \
    X(clCreateKernel, cl_kernel, (cl_program, const char *, cl_int *))                         \
    X(clReleaseKernel, cl_int, (cl_kernel))                                                    \
    X(clSetKernelArg, cl_int, (cl_kernel, cl_uint, size_t, const void *))                      \
    X(clGetKernelWorkGroupInfo, cl_int,                                                        \
      (cl_kernel, cl_device_id, cl_kernel_work_group_info, size_t, void *, size_t *))          \
    X(clEnqueueNDRangeKernel, cl_int,                                                          \
      (cl_command_queue, cl_kernel, cl_uint, const size_t *, const size_t *, const size_t *,   \
       cl_uint, const cl_event *, cl_event *))

/// Function-pointer table filled by fmsa_ocl_load().
typedef struct fmsa_ocl_api {
#define FMSA_OCL_DECLARE(name, ret, params) ret(CL_API_CALL *name) params;
    FMSA_OCL_FUNCTIONS(FMSA_OCL_DECLARE)
#undef FMSA_OCL_DECLARE
} fmsa_ocl_api;

/// The loaded runtime, or NULL when no usable libOpenCL is installed.  Loads
/// once per process (thread-safe); never fails loudly.
const fmsa_ocl_api *fmsa_ocl_load(void);

/// "CL_INVALID_VALUE" style name of an OpenCL error code.
const char *fmsa_ocl_error_name(cl_int code);

/// fmsa_fail(FMSA_ERR_DEVICE, "opencl: <call> failed: <CL_NAME> (<code>)").
fmsa_status fmsa_ocl_fail(const char *call, cl_int code);

/// Runs an OpenCL call returning cl_int and fails with its name on error.
#define FMSA_OCL_CHECK(call_name, expr)                                        \
    do {                                                                       \
        cl_int fmsa_ocl_rc_ = (expr);                                          \
        if (fmsa_ocl_rc_ != CL_SUCCESS) return fmsa_ocl_fail(call_name, fmsa_ocl_rc_); \
    } while (0)

#endif /* FMSA_OCL_LOADER_H */
