/*
 * `flashmsa devices`: every device of every compiled-in backend, in the
 * order AUTO prefers them, with what the tile planner reads from each.
 */
#include <stdio.h>

#include "apps/cli.h"
#include "apps/cli_util.h"
#include "apps/cli_options.h"

static const char *cli_kind_name(fmsa_device_kind kind) {
    switch (kind) {
    case FMSA_DEVICE_KIND_CPU: return "cpu";
    case FMSA_DEVICE_KIND_GPU: return "gpu";
    default: return "other";
    }
}

/* Bytes as a short human string: "48K", "2M", "23.4G". */
static void cli_bytes(size_t bytes, char *buf, size_t n) {
    const double b = (double)bytes;
    if (bytes == 0) snprintf(buf, n, "-");
    else if (bytes % (1024u * 1024u * 1024u) == 0) snprintf(buf, n, "%.0fG", b / 1073741824.0);
    else if (bytes >= 1024u * 1024u * 1024u) snprintf(buf, n, "%.1fG", b / 1073741824.0);
    else if (bytes % (1024u * 1024u) == 0) snprintf(buf, n, "%.0fM", b / 1048576.0);
    else if (bytes >= 1024u * 1024u) snprintf(buf, n, "%.1fM", b / 1048576.0);
    else if (bytes % 1024u == 0) snprintf(buf, n, "%.0fK", b / 1024.0);
    else snprintf(buf, n, "%zuB", bytes);
}

int cmd_devices(int argc, char **argv) {
    cli_args a = cli_args_begin(argc, argv, 2);
    int count = 0, i;

    while (cli_args_next(&a)) {
        if (cli_flag(&a, "--help") || cli_flag(&a, "-h")) {
            printf("usage: flashmsa devices\n\n"
                   "Lists every usable device of every compiled-in backend in the order\n"
                   "FMSA_BACKEND_AUTO prefers them: GPUs first, then the host CPU through the\n"
                   "CPU backend, then other devices (an OpenCL CPU device such as PoCL's):\n"
                   "global index, backend, backend-local index (--device / FLASHMSA_DEVICE),\n"
                   "kind, name, planner arch key, on-chip memory per block by default and\n"
                   "after opt-in (CPU: L1d and L2 per core), multiprocessors (CPU: cores),\n"
                   "and device memory.  A backend whose runtime is missing lists no device.\n");
            return CLI_EXIT_OK;
        }
        cli_unknown(&a, "devices");
        return CLI_EXIT_ERROR;
    }
    if (cli_report(fmsa_device_count(&count), "fmsa_device_count") != FMSA_SUCCESS)
        return CLI_EXIT_ERROR;

    printf("%-3s %-7s %-4s %-6s %-40s %-14s %-15s %5s %9s\n", "#", "backend", "idx", "kind",
           "name", "arch", "sram/blk def/opt", "mps", "memory");
    for (i = 0; i < count; i++) {
        fmsa_device_info info;
        char def[16], opt[16], mem[16], sram[40];
        if (cli_report(fmsa_device_get(i, &info), "fmsa_device_get") != FMSA_SUCCESS)
            return CLI_EXIT_ERROR;
        cli_bytes(info.sram_per_block, def, sizeof def);
        cli_bytes(info.sram_per_block_optin, opt, sizeof opt);
        cli_bytes(info.global_memory, mem, sizeof mem);
        snprintf(sram, sizeof sram, "%s/%s", def, opt);
        printf("%-3d %-7s %-4d %-6s %-40.40s %-14s %-15s %5d %9s\n", i,
               fmsa_backend_name(info.backend), info.index, cli_kind_name(info.kind), info.name,
               info.arch, sram, info.multiprocessors, mem);
    }
    if (count == 0) printf("(no usable device)\n");
    else
        printf("\n"
               "idx      the index within its backend: --backend B --device idx, or\n"
               "         FLASHMSA_BACKEND / FLASHMSA_DEVICE; with --backend auto, --device takes #\n"
               "kind     gpu; cpu = the host CPU through the CPU backend; other = anything else,\n"
               "         such as a CPU through OpenCL (PoCL), which auto ranks after the CPU backend\n"
               "sram/blk on-chip memory one block may use, by default / after opt-in, as the tile\n"
               "def/opt  planner reads it: GPU shared (local) memory per block; CPU: L1d / L2 per\n"
               "         core; OpenCL: the device's local memory (\"-\": none)\n"
               "mps      multiprocessors (SMs, CUs; CPU: cores)   memory: device (host) memory\n");
    return CLI_EXIT_OK;
}
