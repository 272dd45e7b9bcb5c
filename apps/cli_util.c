/*
 * Helpers shared by the flashmsa program's files (see cli_util.h).
 */
#define _POSIX_C_SOURCE 199309L /* clock_gettime(CLOCK_MONOTONIC) */

#include "apps/cli_util.h"

#include <stdio.h>
#include <time.h>

#ifdef _OPENMP
#include <omp.h>
#endif /* _OPENMP */

#include "common/registry.h"

fmsa_status cli_report(fmsa_status st, const char *what) {
    if (st != FMSA_SUCCESS)
        fprintf(stderr, "flashmsa: %s: %s: %s\n", what, fmsa_status_string(st),
                fmsa_last_error());
    return st;
}

double cli_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void cli_set_threads(int threads) {
#ifdef _OPENMP
    /* The library's parallel regions run on this thread's team size.  Setting
     * OMP_NUM_THREADS here would be too late: libgomp reads it at load. */
    if (threads > 0) omp_set_num_threads(threads);
#else
    if (threads > 1)
        fprintf(stderr, "flashmsa: built without OpenMP; --threads %d ignored\n", threads);
#endif /* _OPENMP */
}

/* The CPU backend's probe and the path its passes run, or NULL / -1. */
static const fmsa_backend_peak *cli_cpu_peak(const fmsa_device_info *info, int *path) {
    const fmsa_backend_vtable *vt = fmsa_registry_find(FMSA_BACKEND_CPU);
    *path = -1;
    if (info->backend != FMSA_BACKEND_CPU || !vt || !vt->peak) return NULL;
    *path = vt->peak->path_selected();
    return *path >= 0 ? vt->peak : NULL;
}

const char *cli_cpu_kernel_name(const fmsa_device_info *info) {
    int path;
    const fmsa_backend_peak *pk = cli_cpu_peak(info, &path);
    return pk ? pk->path_name(path) : "-";
}

void cli_cpu_selected_peak(const fmsa_device_info *info, int threads, double seconds,
                           double *fp32, double *bf16) {
    int path;
    const fmsa_backend_peak *pk = cli_cpu_peak(info, &path);
    *fp32 = *bf16 = 0.0;
    if (!pk) return;
    if (pk->measure(path, FMSA_PEAK_FP32, threads, seconds, fp32) != FMSA_SUCCESS) *fp32 = 0.0;
    if (pk->measure(path, FMSA_PEAK_BF16, threads, seconds, bf16) != FMSA_SUCCESS)
        *bf16 = 0.0; /* no bf16 dot products on this path */
}
