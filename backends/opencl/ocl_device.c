/*
 * Device enumeration across every OpenCL platform, done once per process.
 * Devices are listed GPUs first, then accelerators, then CPUs, so index 0 is
 * the one AUTO would want.  Devices below OpenCL C 1.2 are skipped: the
 * kernels need 1.2 (vload_half on every device, static-size __local arrays).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/opencl/ocl_internal.h"

#define FMSA_OCL_MAX_DEVICES 64

static fmsa_ocl_device fmsa_ocl_dev_list[FMSA_OCL_MAX_DEVICES];
static int fmsa_ocl_dev_count;
static pthread_once_t fmsa_ocl_dev_once = PTHREAD_ONCE_INIT;

/* The work-group multiple the compiler prefers is a property of a kernel, not
 * of the device (32 on NVIDIA, 64 on AMD wave64, 8 on PoCL's AVX2 vectoriser);
 * a trivial kernel answers it for every kernel of the same device. */
static int fmsa_ocl_probe_multiple(const fmsa_ocl_api *cl, cl_device_id dev) {
    static const char *src = "__kernel void fmsa_probe(__global float *x) {"
                             " x[get_global_id(0)] = 0.0f; }";
    size_t multiple = 1;
    cl_int rc;
    cl_context ctx = cl->clCreateContext(NULL, 1, &dev, NULL, NULL, &rc);
    if (rc != CL_SUCCESS) return 1;
    cl_program prog = cl->clCreateProgramWithSource(ctx, 1, &src, NULL, &rc);
    if (rc == CL_SUCCESS) {
        if (cl->clBuildProgram(prog, 1, &dev, "", NULL, NULL) == CL_SUCCESS) {
            cl_kernel k = cl->clCreateKernel(prog, "fmsa_probe", &rc);
            if (rc == CL_SUCCESS) {
                cl->clGetKernelWorkGroupInfo(k, dev,
                                             CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE,
                                             sizeof multiple, &multiple, NULL);
                cl->clReleaseKernel(k);
            }
        }
        cl->clReleaseProgram(prog);
    }
    cl->clReleaseContext(ctx);
    return multiple > 0 && multiple <= 1024 ? (int)multiple : 1;
}

/* "OpenCL C 1.2 ..." -> 102; 0 when unparsable. */
static int fmsa_ocl_c_version(const fmsa_ocl_api *cl, cl_device_id dev) {
    char buf[128] = {0};
    int major = 0, minor = 0;
    if (cl->clGetDeviceInfo(dev, CL_DEVICE_OPENCL_C_VERSION, sizeof buf - 1, buf, NULL) !=
        CL_SUCCESS)
        return 0;
    if (sscanf(buf, "OpenCL C %d.%d", &major, &minor) != 2) return 0;
    return major * 100 + minor;
}

static void fmsa_ocl_add_device(const fmsa_ocl_api *cl, cl_platform_id plat, cl_device_id dev) {
    fmsa_ocl_device *d;
    cl_bool avail = CL_FALSE;
    cl_ulong local = 0, global = 0;
    cl_uint cus = 0;
    size_t max_wg = 0;
    if (fmsa_ocl_dev_count >= FMSA_OCL_MAX_DEVICES) return;
    if (cl->clGetDeviceInfo(dev, CL_DEVICE_AVAILABLE, sizeof avail, &avail, NULL) != CL_SUCCESS ||
        !avail)
        return;
    if (fmsa_ocl_c_version(cl, dev) < 102) return;
    d = &fmsa_ocl_dev_list[fmsa_ocl_dev_count];
    memset(d, 0, sizeof *d);
    d->platform = plat;
    d->id = dev;
    cl->clGetDeviceInfo(dev, CL_DEVICE_LOCAL_MEM_SIZE, sizeof local, &local, NULL);
    cl->clGetDeviceInfo(dev, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof global, &global, NULL);
    cl->clGetDeviceInfo(dev, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cus, &cus, NULL);
    cl->clGetDeviceInfo(dev, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof max_wg, &max_wg, NULL);
    cl->clGetDeviceInfo(dev, CL_DEVICE_NAME, sizeof d->info.name - 1, d->info.name, NULL);
    d->max_work_group = max_wg ? max_wg : 1;
    d->info.backend = FMSA_BACKEND_OPENCL;
    {
        cl_device_type type = 0;
        cl->clGetDeviceInfo(dev, CL_DEVICE_TYPE, sizeof type, &type, NULL);
        /* AUTO prefers the CPU backend over OpenCL CPU devices (PoCL). */
        d->info.kind = (type & CL_DEVICE_TYPE_GPU) ? FMSA_DEVICE_KIND_GPU : FMSA_DEVICE_KIND_OTHER;
    }
    d->info.index = fmsa_ocl_dev_count;
    snprintf(d->info.arch, sizeof d->info.arch, "opencl");
    d->info.sram_per_block = (size_t)local;
    d->info.sram_per_block_optin = (size_t)local;
    d->info.sram_per_multiprocessor = (size_t)local;
    d->info.multiprocessors = (int)cus;
    d->info.warp_size = fmsa_ocl_probe_multiple(cl, dev);
    d->info.registers_per_block = 0;
    d->info.global_memory = (size_t)global;
    ++fmsa_ocl_dev_count;
}

static void fmsa_ocl_enumerate_once(void) {
    static const cl_device_type order[] = {CL_DEVICE_TYPE_GPU, CL_DEVICE_TYPE_ACCELERATOR,
                                           CL_DEVICE_TYPE_CPU};
    const fmsa_ocl_api *cl = fmsa_ocl_load();
    cl_platform_id plats[16];
    cl_uint nplat = 0;
    if (!cl) return;
    if (cl->clGetPlatformIDs(16, plats, &nplat) != CL_SUCCESS) return; /* no ICD: 0 devices */
    if (nplat > 16) nplat = 16;
    for (size_t t = 0; t < sizeof order / sizeof order[0]; ++t) {
        for (cl_uint p = 0; p < nplat; ++p) {
            cl_device_id devs[FMSA_OCL_MAX_DEVICES];
            cl_uint ndev = 0;
            if (cl->clGetDeviceIDs(plats[p], order[t], FMSA_OCL_MAX_DEVICES, devs, &ndev) !=
                CL_SUCCESS)
                continue;
            if (ndev > FMSA_OCL_MAX_DEVICES) ndev = FMSA_OCL_MAX_DEVICES;
            for (cl_uint i = 0; i < ndev; ++i) fmsa_ocl_add_device(cl, plats[p], devs[i]);
        }
    }
}

const fmsa_ocl_device *fmsa_ocl_devices(int *count) {
    pthread_once(&fmsa_ocl_dev_once, fmsa_ocl_enumerate_once);
    *count = fmsa_ocl_dev_count;
    return fmsa_ocl_dev_list;
}
