/*
 * `flashmsa`: the command-line front end of the library.
 *
 *   flashmsa devices   every device of every compiled-in backend
 *   flashmsa run       one problem, timed, checked against the fp64 reference
 *   flashmsa bench     the standard benchmark sweep, each shape spot-checked
 *   flashmsa peak      the CPU's multiply-add peak per kernel path
 *
 * This file holds main(), the subcommand table and the log callback; the
 * helpers the commands share are in cli_util.c.
 */
#include <stdio.h>
#include <string.h>

#include "apps/cli.h"
#include "common/backend_list.h"
#include "common/registry.h"

/* The library never prints; the program shows what it logs (threshold from
 * FLASHMSA_LOG, default warn) on stderr.  ERROR lines are the failures of
 * calls, which cli_report() already prints with the call's name. */
static void cli_log(fmsa_log_level level, const char *message, void *user) {
    static const char *const names[] = {"error", "warn", "info", "debug"};
    (void)user;
    if (level == FMSA_LOG_ERROR) return;
    fprintf(stderr, "flashmsa [%s] %s\n",
            (int)level >= 0 && (int)level < 4 ? names[level] : "log", message);
}

/* The values FLASHMSA_CPU_KERNEL takes, from the CPU backend's own list of
 * kernel paths, so the help cannot fall behind the dispatcher. */
static void cli_usage_kernels(FILE *f) {
    const fmsa_backend_vtable *vt = fmsa_registry_find(FMSA_BACKEND_CPU);
    if (!vt || !vt->peak) {
        fprintf(f, "(a CPU kernel path name)");
        return;
    }
    for (int i = 0; i < vt->peak->path_count; i++)
        fprintf(f, "%s%s", i ? "|" : "", vt->peak->path_name(i));
}

static void cli_usage(FILE *f) {
    int v = fmsa_version();
    fprintf(f,
            "flashmsa %d.%d.%d - portable exact flash attention\n"
            "\n"
            "usage: flashmsa <command> [options]\n"
            "\n"
            "commands:\n"
            "  devices   list every device of every compiled-in backend\n"
            "  run       run one attention problem (default: fp32, batch 2, 8 heads,\n"
            "            seqlen 1024, dim 128, causal, forward + backward), time it and\n"
            "            check O, LSE, dQ, dK, dV against the fp64 reference\n"
            "  bench     sweep the standard benchmark shapes (GFLOP/s + sampled check)\n"
            "  peak      the CPU's measured multiply-add peak per kernel path\n"
            "  version   print the library version\n"
            "\n"
            "Run 'flashmsa <command> --help' for the options of a command.\n"
            "\n"
            "environment:\n"
            "  FLASHMSA_BACKEND  " FMSA_BACKEND_NAMES ": where --backend auto runs\n"
            "  FLASHMSA_DEVICE   device index used with --backend auto\n"
            "                    (an explicit --backend/--device wins over both)\n"
            "  FLASHMSA_LOG      error|warn|info|debug  library log level (stderr)\n"
            "  FLASHMSA_CPU_KERNEL  ",
            v / 10000, v / 100 % 100, v % 100);
    cli_usage_kernels(f);
    fprintf(f, ": force a CPU kernel path\n"
               "\n"
               "exit status: 0 success/PASS, 1 a check failed, 2 usage or library error\n");
}

int main(int argc, char **argv) {
    const char *cmd;
    fmsa_set_log_callback(cli_log, NULL);
    if (argc < 2) {
        cli_usage(stderr);
        return CLI_EXIT_ERROR;
    }
    cmd = argv[1];
    if (strcmp(cmd, "devices") == 0) return cmd_devices(argc, argv);
    if (strcmp(cmd, "run") == 0) return cmd_run(argc, argv);
    if (strcmp(cmd, "bench") == 0) return cmd_bench(argc, argv);
    if (strcmp(cmd, "peak") == 0) return cmd_peak(argc, argv);
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
        int v = fmsa_version();
        printf("flashmsa %d.%d.%d\n", v / 10000, v / 100 % 100, v % 100);
        return CLI_EXIT_OK;
    }
    if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        cli_usage(stdout);
        return CLI_EXIT_OK;
    }
    fprintf(stderr, "flashmsa: unknown command '%s'\n\n", cmd);
    cli_usage(stderr);
    return CLI_EXIT_ERROR;
}
