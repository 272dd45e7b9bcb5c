/*
 * Helpers every part of the flashmsa program shares: status reporting, the
 * clock, the OpenMP thread count, and what the CPU backend's peak probe says
 * about the kernel path it runs.  They sit below the commands (cmd_*.c) and
 * the setup module (cli_workload.c), so no file calls back into main's file.
 */
#ifndef FMSA_APPS_CLI_UTIL_H
#define FMSA_APPS_CLI_UTIL_H

#include "flashmsa/flashmsa.h"

/// Prints "flashmsa: <what>: <status>: <detail>" to stderr when st != success;
/// returns st so callers can write `if (cli_report(...)) goto out;`.
fmsa_status cli_report(fmsa_status st, const char *what);

/// Seconds on a monotonic clock.
double cli_now(void);

/// Sets the number of OpenMP threads the CPU backend uses (0 = leave as is).
void cli_set_threads(int threads);

/// The CPU backend's kernel path ("avx2", ...) when info is a CPU device, else "-".
const char *cli_cpu_kernel_name(const fmsa_device_info *info);

/// The fp32 FMA and bf16 dot-product peaks (GFLOP/s) of the kernel path the
/// CPU backend runs, measured now on `threads` threads (0: all) for `seconds`
/// each (`flashmsa peak --selected`); 0 where the device is not the CPU or the
/// path has no such kind.
void cli_cpu_selected_peak(const fmsa_device_info *info, int threads, double seconds,
                           double *fp32, double *bf16);

#endif /* FMSA_APPS_CLI_UTIL_H */
