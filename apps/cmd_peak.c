/*
 * `flashmsa peak`: the CPU's measured multiply-add peak per kernel path, so
 * CPU speed figures can be read as a fraction of what this machine does on
 * this many threads.  It reaches the probe through the CPU backend's vtable
 * (fmsa_backend_peak in common/backend.h), not through the backend's headers.
 */
#include <stdio.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif /* _OPENMP */

#include "apps/cli.h"
#include "apps/cli_options.h"
#include "common/registry.h"

#define CLI_PEAK_MAX_THREADS 16 ///< entries of --threads LIST

static void cli_peak_help(void) {
    printf("usage: flashmsa peak [options]\n"
           "\n"
           "Measures the CPU's multiply-add peak (GFLOP/s, a multiply-add = 2 flops) with a\n"
           "register-resident loop of 12 independent chains per thread, for every kernel\n"
           "path this CPU can run (amx, avx512, avx2, generic, scalar): fp32, and bf16\n"
           "dot products where the path has them (vdpbf16ps, AMX tdpbf16ps).  The path\n"
           "the CPU backend runs (FLASHMSA_CPU_KERNEL or the best) is marked with '*'.\n"
           "\n"
           "  --threads LIST    comma-separated thread counts (default: all threads)\n"
           "  --seconds S       seconds per measurement (default 0.3)\n"
           "  --selected        only the path the CPU backend runs (quick, for benchmark\n"
           "                    scripts that re-measure the peak beside every timing)\n"
           "  --fp32-only       only the fp32 multiply-add loop (no bf16 / AMX burst\n"
           "                    right before a timing that is not about it)\n"
           "  --json            one JSON object per line instead of the table\n");
}

int cmd_peak(int argc, char **argv) {
    cli_args a = cli_args_begin(argc, argv, 2);
    int64_t threads[CLI_PEAK_MAX_THREADS] = {0};
    int n_threads = 1, json = 0, selected_only = 0, fp32_only = 0, rc = CLI_EXIT_OK;
    float seconds = 0.3f;
    const fmsa_backend_vtable *vt = fmsa_registry_find(FMSA_BACKEND_CPU);
    const fmsa_backend_peak *pk = vt ? vt->peak : NULL;
    int current;
    fmsa_device_info info;

    while (cli_args_next(&a)) {
        if (cli_flag(&a, "--help") || cli_flag(&a, "-h")) {
            cli_peak_help();
            return CLI_EXIT_OK;
        } else if (cli_flag(&a, "--json")) {
            json = 1;
        } else if (cli_flag(&a, "--selected")) {
            selected_only = 1;
        } else if (cli_flag(&a, "--fp32-only")) {
            fp32_only = 1;
        } else if (cli_value(&a, "--threads")) {
            if (cli_parse_i64_list("--threads", a.value, 1, 4096, threads, CLI_PEAK_MAX_THREADS,
                                   &n_threads))
                return CLI_EXIT_ERROR;
        } else if (cli_value(&a, "--seconds")) {
            if (cli_parse_float("--seconds", a.value, 0.01f, 60.0f, &seconds)) return CLI_EXIT_ERROR;
        } else if (!a.error) {
            cli_unknown(&a, "peak");
            return CLI_EXIT_ERROR;
        }
    }
    if (a.error) return CLI_EXIT_ERROR;
    if (!pk) {
        fprintf(stderr, "flashmsa peak: the CPU backend of this build has no peak probe\n");
        return CLI_EXIT_ERROR;
    }
#ifdef _OPENMP
    /* 0 = all threads: print the number it stands for */
    for (int t = 0; t < n_threads; ++t)
        if (threads[t] == 0) threads[t] = omp_get_max_threads();
#endif /* _OPENMP */
    current = pk->path_selected(); /* -1 on a bad FLASHMSA_CPU_KERNEL: still measure */
    if (fmsa_device_get(0, &info) != FMSA_SUCCESS || info.backend != FMSA_BACKEND_CPU)
        strcpy(info.name, "CPU");
    if (!json) {
        printf("# flashmsa peak: %s, multiply-add peak per kernel path (GFLOP/s)\n", info.name);
        printf("%-8s %-5s %7s %10s\n", "path", "kind", "threads", "GFLOP/s");
    }
    for (int path = 0; path < pk->path_count; ++path) {
        if (!pk->path_usable(path)) continue;
        if (selected_only && current != path) continue;
        for (int kind = 0; kind < (fp32_only ? 1 : 2); ++kind)
            for (int t = 0; t < n_threads; ++t) {
                double gf = 0.0;
                const char *name = pk->path_name(path);
                const int mark = current == path;
                if (pk->measure(path, kind ? FMSA_PEAK_BF16 : FMSA_PEAK_FP32, (int)threads[t],
                                seconds, &gf) != FMSA_SUCCESS)
                    continue; /* no bf16 on this path */
                if (json)
                    printf("{\"path\":\"%s\",\"kind\":\"%s\",\"threads\":%lld,\"gflops\":%.6g,"
                           "\"selected\":%s}\n",
                           name, kind ? "bf16" : "fp32", (long long)threads[t], gf,
                           mark ? "true" : "false");
                else
                    printf("%-8s %-5s %7lld %10.1f%s\n", name, kind ? "bf16" : "fp32",
                           (long long)threads[t], gf, mark ? "  *" : "");
                fflush(stdout);
            }
    }
    return rc;
}
