/*
 * dlopen of the OpenCL ICD loader.  Done once per process; a missing library
 * or symbol simply means "no OpenCL", which the backend reports as 0 devices.
 */
#include "backends/opencl/ocl_loader.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>

#include "common/error.h"

static fmsa_ocl_api fmsa_ocl_table;
static const fmsa_ocl_api *fmsa_ocl_loaded;
static pthread_once_t fmsa_ocl_once = PTHREAD_ONCE_INIT;

static void fmsa_ocl_load_once(void) {
    /* libOpenCL.so.1 is the ICD loader's soname everywhere (ocl-icd, Khronos,
     * NVIDIA); the unversioned name is a dev-package symlink, tried last. */
    static const char *const names[] = {"libOpenCL.so.1", "libOpenCL.so"};
    void *lib = NULL;
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !lib; ++i)
        lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!lib) return;
#define FMSA_OCL_RESOLVE(name, ret, params)                                    \
    *(void **)(&fmsa_ocl_table.name) = dlsym(lib, #name);                      \
    if (!fmsa_ocl_table.name) {                                                \
        dlclose(lib);                                                          \
        return;                                                                \
    }
    FMSA_OCL_FUNCTIONS(FMSA_OCL_RESOLVE)
#undef FMSA_OCL_RESOLVE
    /* The library stays loaded for the life of the process: cl objects made
     * through it may outlive any one context. */
    fmsa_ocl_loaded = &fmsa_ocl_table;
}

const fmsa_ocl_api *fmsa_ocl_load(void) {
    pthread_once(&fmsa_ocl_once, fmsa_ocl_load_once);
    return fmsa_ocl_loaded;
}

const char *fmsa_ocl_error_name(cl_int code) {
    switch (code) {
#define FMSA_OCL_CASE(c) case c: return #c;
        FMSA_OCL_CASE(CL_SUCCESS)
        FMSA_OCL_CASE(CL_DEVICE_NOT_FOUND)
        FMSA_OCL_CASE(CL_DEVICE_NOT_AVAILABLE)
        FMSA_OCL_CASE(CL_COMPILER_NOT_AVAILABLE)
        FMSA_OCL_CASE(CL_MEM_OBJECT_ALLOCATION_FAILURE)
        FMSA_OCL_CASE(CL_OUT_OF_RESOURCES)
        FMSA_OCL_CASE(CL_OUT_OF_HOST_MEMORY)
        FMSA_OCL_CASE(CL_PROFILING_INFO_NOT_AVAILABLE)
        FMSA_OCL_CASE(CL_MEM_COPY_OVERLAP)
        FMSA_OCL_CASE(CL_IMAGE_FORMAT_MISMATCH)
        FMSA_OCL_CASE(CL_IMAGE_FORMAT_NOT_SUPPORTED)
        FMSA_OCL_CASE(CL_BUILD_PROGRAM_FAILURE)
        FMSA_OCL_CASE(CL_MAP_FAILURE)
        FMSA_OCL_CASE(CL_MISALIGNED_SUB_BUFFER_OFFSET)
        FMSA_OCL_CASE(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
        FMSA_OCL_CASE(CL_COMPILE_PROGRAM_FAILURE)
        FMSA_OCL_CASE(CL_LINKER_NOT_AVAILABLE)
        FMSA_OCL_CASE(CL_LINK_PROGRAM_FAILURE)
        FMSA_OCL_CASE(CL_DEVICE_PARTITION_FAILED)
        FMSA_OCL_CASE(CL_KERNEL_ARG_INFO_NOT_AVAILABLE)
        FMSA_OCL_CASE(CL_INVALID_VALUE)
        FMSA_OCL_CASE(CL_INVALID_DEVICE_TYPE)
        FMSA_OCL_CASE(CL_INVALID_PLATFORM)
        FMSA_OCL_CASE(CL_INVALID_DEVICE)
        FMSA_OCL_CASE(CL_INVALID_CONTEXT)
        FMSA_OCL_CASE(CL_INVALID_QUEUE_PROPERTIES)
        FMSA_OCL_CASE(CL_INVALID_COMMAND_QUEUE)
        FMSA_OCL_CASE(CL_INVALID_HOST_PTR)
        FMSA_OCL_CASE(CL_INVALID_MEM_OBJECT)
        FMSA_OCL_CASE(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR)
        FMSA_OCL_CASE(CL_INVALID_IMAGE_SIZE)
        FMSA_OCL_CASE(CL_INVALID_SAMPLER)
        FMSA_OCL_CASE(CL_INVALID_BINARY)
        FMSA_OCL_CASE(CL_INVALID_BUILD_OPTIONS)
        FMSA_OCL_CASE(CL_INVALID_PROGRAM)
        FMSA_OCL_CASE(CL_INVALID_PROGRAM_EXECUTABLE)
        FMSA_OCL_CASE(CL_INVALID_KERNEL_NAME)
        FMSA_OCL_CASE(CL_INVALID_KERNEL_DEFINITION)
        FMSA_OCL_CASE(CL_INVALID_KERNEL)
        FMSA_OCL_CASE(CL_INVALID_ARG_INDEX)
        FMSA_OCL_CASE(CL_INVALID_ARG_VALUE)
        FMSA_OCL_CASE(CL_INVALID_ARG_SIZE)
        FMSA_OCL_CASE(CL_INVALID_KERNEL_ARGS)
        FMSA_OCL_CASE(CL_INVALID_WORK_DIMENSION)
        FMSA_OCL_CASE(CL_INVALID_WORK_GROUP_SIZE)
        FMSA_OCL_CASE(CL_INVALID_WORK_ITEM_SIZE)
        FMSA_OCL_CASE(CL_INVALID_GLOBAL_OFFSET)
        FMSA_OCL_CASE(CL_INVALID_EVENT_WAIT_LIST)
        FMSA_OCL_CASE(CL_INVALID_EVENT)
        FMSA_OCL_CASE(CL_INVALID_OPERATION)
        FMSA_OCL_CASE(CL_INVALID_GL_OBJECT)
        FMSA_OCL_CASE(CL_INVALID_BUFFER_SIZE)
        FMSA_OCL_CASE(CL_INVALID_MIP_LEVEL)
        FMSA_OCL_CASE(CL_INVALID_GLOBAL_WORK_SIZE)
        FMSA_OCL_CASE(CL_INVALID_PROPERTY)
        FMSA_OCL_CASE(CL_INVALID_IMAGE_DESCRIPTOR)
        FMSA_OCL_CASE(CL_INVALID_COMPILER_OPTIONS)
        FMSA_OCL_CASE(CL_INVALID_LINKER_OPTIONS)
        FMSA_OCL_CASE(CL_INVALID_DEVICE_PARTITION_COUNT)
#undef FMSA_OCL_CASE
    case -1001: return "CL_PLATFORM_NOT_FOUND_KHR";
    default: return "CL_UNKNOWN_ERROR";
    }
}

fmsa_status fmsa_ocl_fail(const char *call, cl_int code) {
    return fmsa_fail(FMSA_ERR_DEVICE, "opencl: %s failed: %s (%d)", call,
                     fmsa_ocl_error_name(code), (int)code);
}
