/*
 * dlopen of the CUDA driver.  Done once per process; a missing library, a
 * missing symbol or a failing cuInit simply means "no CUDA", which the
 * backend reports as 0 devices (the reason is kept for its error messages).
 */
#include "backends/cuda/cuda_loader.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "common/error.h"

static fmsa_cuda_api fmsa_cuda_table;
static const fmsa_cuda_api *fmsa_cuda_loaded;
static char fmsa_cuda_why[160];
static pthread_once_t fmsa_cuda_once = PTHREAD_ONCE_INIT;

static void fmsa_cuda_load_once(void) {
    /* libcuda.so.1 is the driver's soname; the unversioned name exists only
     * where the toolkit's stub or a dev symlink is installed, tried last. */
    static const char *const names[] = {"libcuda.so.1", "libcuda.so"};
    void *lib = NULL;
    fmsa_cu_result rc;
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !lib; ++i)
        lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(fmsa_cuda_why, sizeof fmsa_cuda_why, "libcuda.so.1 not found (no NVIDIA driver)");
        return;
    }
#define FMSA_CU_RESOLVE(field, symbol, params)                                              \
    *(void **)(&fmsa_cuda_table.field) = dlsym(lib, symbol);                                \
    if (!fmsa_cuda_table.field) {                                                           \
        snprintf(fmsa_cuda_why, sizeof fmsa_cuda_why, "libcuda.so.1 lacks %s (driver too old)", \
                 symbol);                                                                   \
        dlclose(lib);                                                                       \
        return;                                                                             \
    }
    FMSA_CU_FUNCTIONS(FMSA_CU_RESOLVE)
#undef FMSA_CU_RESOLVE
    rc = fmsa_cuda_table.cuInit(0);
    fmsa_cuda_table.init_error = rc;
    if (rc != FMSA_CU_SUCCESS) {
        /* CUDA_ERROR_NO_DEVICE (say, CUDA_VISIBLE_DEVICES="") is not an error
         * here: it is what "no device" looks like with a driver installed. */
        const char *name = NULL;
        if (fmsa_cuda_table.cuGetErrorName(rc, &name) != FMSA_CU_SUCCESS || !name)
            name = "CUDA_ERROR_UNKNOWN";
        snprintf(fmsa_cuda_why, sizeof fmsa_cuda_why, "cuInit failed: %s (%d)", name, (int)rc);
        return; /* the library stays loaded: unloading a driver is never safe */
    }
    fmsa_cuda_table.cuDriverGetVersion(&fmsa_cuda_table.driver_version);
    /* Loaded for the life of the process: device memory and modules made
     * through it may outlive any one context. */
    fmsa_cuda_loaded = &fmsa_cuda_table;
}

const fmsa_cuda_api *fmsa_cuda_load(void) {
    pthread_once(&fmsa_cuda_once, fmsa_cuda_load_once);
    return fmsa_cuda_loaded;
}

const char *fmsa_cuda_load_error(void) {
    pthread_once(&fmsa_cuda_once, fmsa_cuda_load_once);
    return fmsa_cuda_why;
}

fmsa_status fmsa_cuda_fail(const fmsa_cuda_api *cu, const char *call, fmsa_cu_result rc) {
    const char *name = NULL, *text = NULL;
    if (!cu || cu->cuGetErrorName(rc, &name) != FMSA_CU_SUCCESS || !name) name = "CUDA_ERROR_UNKNOWN";
    if (!cu || cu->cuGetErrorString(rc, &text) != FMSA_CU_SUCCESS || !text) text = "";
    return fmsa_fail(rc == FMSA_CU_ERROR_OUT_OF_MEMORY ? FMSA_ERR_OUT_OF_MEMORY : FMSA_ERR_DEVICE,
                     "cuda: %s failed: %s (%d)%s%s", call, name, (int)rc, *text ? ": " : "", text);
}
