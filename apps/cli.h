/*
 * The `flashmsa` command-line program: declarations shared by its files.
 *
 * flashmsa.c dispatches to one cmd_*() per subcommand.  Each command parses
 * its own options (cli_options.h), builds its problems through the shared
 * setup module (cli_workload.h) and checks results with cli_check.h.  The
 * program only reaches devices through the public API (fmsa_malloc and the
 * copy helpers), so every backend is driven the same way; the internal
 * headers it uses are the fp64 reference and problem validation.
 */
#ifndef FMSA_APPS_CLI_H
#define FMSA_APPS_CLI_H

#include "flashmsa/flashmsa.h"

/// Exit codes: 0 only when everything asked for ran and passed its check.
enum {
    CLI_EXIT_OK = 0,    ///< ran, and every check passed
    CLI_EXIT_FAIL = 1,  ///< ran, but a correctness check failed
    CLI_EXIT_ERROR = 2, ///< bad usage or a library call failed
};

/// `flashmsa devices`: lists every device of every compiled-in backend.
int cmd_devices(int argc, char **argv);
/// `flashmsa run`: one problem, timed and checked against the fp64 reference.
int cmd_run(int argc, char **argv);
/// `flashmsa bench`: the standard sweep, timed, each shape spot-checked.
int cmd_bench(int argc, char **argv);
/// `flashmsa peak`: the CPU's measured multiply-add peak per kernel path.
int cmd_peak(int argc, char **argv);
/// The CPU backend's kernel path ("avx2", ...) when info is a CPU device, else "-".
const char *cli_cpu_kernel_name(const fmsa_device_info *info);
/// The fp32 FMA and bf16 dot-product peaks (GFLOP/s) of the kernel path the
/// CPU backend runs, measured now on `threads` threads (0: all) for `seconds`
/// each (`flashmsa peak --selected`); 0 where the device is not the CPU or the
/// path has no such kind.
void cli_cpu_selected_peak(const fmsa_device_info *info, int threads, double seconds,
                           double *fp32, double *bf16);

/// Prints "flashmsa: <what>: <status>: <detail>" to stderr when st != success;
/// returns st so callers can write `if (cli_report(...)) goto out;`.
fmsa_status cli_report(fmsa_status st, const char *what);

/// Seconds on a monotonic clock.
double cli_now(void);

/// Sets the number of OpenMP threads the CPU backend uses (0 = leave as is).
void cli_set_threads(int threads);

#endif /* FMSA_APPS_CLI_H */
