/*
 * The backend registry and the global device enumeration.
 *
 * Backends are listed in AUTO preference order (GPU backends first, the CPU
 * last, as ggml's registry does).  The enumeration is built once, lazily, and
 * sorted so that index 0 is what AUTO picks: GPUs of any backend, then the
 * host CPU, then CPU-like devices of other backends (an OpenCL CPU device is
 * slower than the native CPU backend for the same cores).
 */
#include "common/registry.h"

#include "common/error.h"

#include <pthread.h>
#include <string.h>

/* One line per backend; compiled-out backends simply are not listed. */
static const fmsa_backend_vtable *(*const fmsa_registry_getters[])(void) = {
#if defined(FLASHMSA_HAVE_CUDA)
    fmsa_backend_cuda_vtable,
#endif /* FLASHMSA_HAVE_CUDA */
#if defined(FLASHMSA_HAVE_OPENCL)
    fmsa_backend_opencl_vtable,
#endif /* FLASHMSA_HAVE_OPENCL */
    fmsa_backend_cpu_vtable,
};

#define FMSA_REGISTRY_COUNT (sizeof fmsa_registry_getters / sizeof fmsa_registry_getters[0])
/* Enough for every device of a large node across all backends. */
#define FMSA_MAX_DEVICES 64

static fmsa_device_info fmsa_devices[FMSA_MAX_DEVICES];
static int fmsa_device_total;
static pthread_once_t fmsa_devices_once = PTHREAD_ONCE_INIT;

const fmsa_backend_vtable *fmsa_registry_find(fmsa_backend backend) {
    for (size_t i = 0; i < FMSA_REGISTRY_COUNT; ++i) {
        const fmsa_backend_vtable *vt = fmsa_registry_getters[i]();
        if (vt && vt->kind == backend) return vt;
    }
    return NULL;
}

static int fmsa_kind_rank(fmsa_device_kind kind) {
    return kind == FMSA_DEVICE_KIND_GPU ? 0 : kind == FMSA_DEVICE_KIND_CPU ? 1 : 2;
}

/* Builds the sorted list.  A backend whose runtime is missing contributes no
 * devices; its failure is logged, never fatal, so the CPU always remains. */
static void fmsa_devices_enumerate(void) {
    int n = 0;
    for (size_t i = 0; i < FMSA_REGISTRY_COUNT; ++i) {
        const fmsa_backend_vtable *vt = fmsa_registry_getters[i]();
        int count = 0;
        if (!vt || vt->api_version != FMSA_BACKEND_API_VERSION) continue;
        if (vt->device_count(&count) != FMSA_SUCCESS) {
            fmsa_log(FMSA_LOG_INFO, "backend %s: no devices (%s)", vt->name, fmsa_last_error());
            continue;
        }
        for (int d = 0; d < count && n < FMSA_MAX_DEVICES; ++d) {
            fmsa_device_info info;
            memset(&info, 0, sizeof info);
            if (vt->device_info(d, &info) != FMSA_SUCCESS) {
                fmsa_log(FMSA_LOG_WARN, "backend %s: device %d skipped (%s)", vt->name, d,
                         fmsa_last_error());
                continue;
            }
            info.backend = vt->kind;
            info.index = d;
            if (vt->kind == FMSA_BACKEND_CPU) info.kind = FMSA_DEVICE_KIND_CPU;
            fmsa_devices[n++] = info;
        }
    }
    /* stable insertion sort by kind rank keeps registry order within a rank */
    for (int i = 1; i < n; ++i) {
        fmsa_device_info x = fmsa_devices[i];
        int j = i - 1;
        while (j >= 0 && fmsa_kind_rank(fmsa_devices[j].kind) > fmsa_kind_rank(x.kind)) {
            fmsa_devices[j + 1] = fmsa_devices[j];
            --j;
        }
        fmsa_devices[j + 1] = x;
    }
    fmsa_device_total = n;
    fmsa_clear_error();
}

int fmsa_registry_device_list(const fmsa_device_info **list) {
    pthread_once(&fmsa_devices_once, fmsa_devices_enumerate);
    *list = fmsa_devices;
    return fmsa_device_total;
}

fmsa_status fmsa_device_count(int *count) {
    const fmsa_device_info *list;
    fmsa_clear_error();
    if (!count) return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "count is NULL");
    *count = fmsa_registry_device_list(&list);
    return FMSA_SUCCESS;
}

fmsa_status fmsa_device_get(int i, fmsa_device_info *info) {
    const fmsa_device_info *list;
    int n;
    fmsa_clear_error();
    if (!info) return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "info is NULL");
    n = fmsa_registry_device_list(&list);
    if (i < 0 || i >= n)
        return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "device index %d: %d device(s) found", i, n);
    *info = list[i];
    return FMSA_SUCCESS;
}
