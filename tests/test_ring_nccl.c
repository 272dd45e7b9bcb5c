/*
 * The NCCL transport end to end on one GPU: a communicator of size 1
 * (ncclGetUniqueId + ncclCommInitRank), wrapped by fmsa_dist_comm_from_nccl
 * over a CUDA context, runs the ring forward and backward (the backward's
 * dK/dV exchange is an ncclSend/ncclRecv to itself; the verdict and dsink go
 * through ncclAllReduce) for every layout, causal and not, bf16 and f16,
 * sinks and dlse, ALiBi ([B, Hq] slopes, every layout), a bit mask (contiguous and zigzag),
 * against the fp64 reference under the rule
 * (tests/support/fmsa_ring_case.c).  NCCL is dlopened here too (no header):
 * put libnccl.so.2's folder on LD_LIBRARY_PATH.  Exit 77 (skipped) without a
 * CUDA device or without NCCL.  The transport logs (INFO) whether its
 * exchanges run on a communication stream of their own (the CUDA runtime
 * loaded) or on the default stream; FLASHMSA_TEST_NCCL_STREAM=1 makes the
 * first a requirement.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/fmsa_ring_case.h"
#include "tests/support/fmsa_test_options.h"

typedef struct nccl_unique_id {
    char internal[128]; /* NCCL_UNIQUE_ID_BYTES */
} nccl_unique_id;

static int g_stream_mode = -1; /* 1: comm stream, 0: default stream, -1: no line seen */

static void on_log(fmsa_log_level level, const char *message, void *user) {
    (void)level;
    (void)user;
    if (!strstr(message, "nccl transport")) return;
    printf("log: %s\n", message);
    g_stream_mode = strstr(message, "stream of their own") != NULL;
}

int main(void) {
    int (*get_id)(nccl_unique_id *);
    int (*init_rank)(void **, int, nccl_unique_id, int);
    int (*destroy)(void *);
    void *lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL), *ncomm = NULL;
    nccl_unique_id id;
    fmsa_context *ctx = NULL;
    fmsa_dist_comm *comm = NULL;
    int failures = 0, cases = 0, refused = 0, rc;
    if (fmsa_context_create(FMSA_BACKEND_CUDA, 0, &ctx) != FMSA_SUCCESS) {
        printf("skipped: no CUDA device (%s)\n", fmsa_last_error());
        return FMSA_TEST_EXIT_SKIP;
    }
    if (!lib) {
        printf("skipped: libnccl.so.2 not found (%s)\n", dlerror());
        fmsa_context_destroy(ctx);
        return FMSA_TEST_EXIT_SKIP;
    }
    *(void **)&get_id = dlsym(lib, "ncclGetUniqueId");
    *(void **)&init_rank = dlsym(lib, "ncclCommInitRank");
    *(void **)&destroy = dlsym(lib, "ncclCommDestroy");
    if (!get_id || !init_rank || !destroy || get_id(&id) != 0 ||
        (rc = init_rank(&ncomm, 1, id, 0)) != 0) {
        printf("FAIL: NCCL communicator of size 1 could not be made\n");
        return 1;
    }
    fmsa_set_log_callback(on_log, NULL);
    fmsa_set_log_level(FMSA_LOG_INFO);
    if (fmsa_dist_comm_from_nccl(ncomm, ctx, &comm) != FMSA_SUCCESS) {
        printf("FAIL: fmsa_dist_comm_from_nccl: %s\n", fmsa_last_error());
        return 1;
    }
    for (int layout = 0; layout < 3; ++layout)
        for (int causal = 0; causal < 2; ++causal)
            for (int di = 0; di < 4; ++di) { /* di = 2: bf16 with ALiBi [B, Hq]; 3: a mask */
                fmsa_ring_spec s;
                fmsa_ring_case *rcase;
                char msg[512], name[160];
                memset(&s, 0, sizeof s);
                s.P = 1;
                s.layout = (fmsa_ring_layout)layout;
                s.causal = causal;
                s.dtype = di ? FMSA_DTYPE_F16 : FMSA_DTYPE_BF16;
                s.B = 2;
                s.c = 34; /* zigzag halves of 17 rows */
                s.Hq = 4;
                s.Hkv = 2;
                s.D = 64;
                s.Dv = 64;
                s.sinks = di;
                s.dlse = causal;
                s.softcap = layout == 1 ? 20.0f : 0.0f;
                if (di == 2) {
                    s.dtype = FMSA_DTYPE_BF16;
                    s.alibi = 2;
                }
                if (di == 3) { /* a bit mask [B, Hq] (not striped: refused, test_ring_loopback) */
                    if (layout == FMSA_RING_STRIPED) continue;
                    s.c = 32; /* zigzag chunks of 16 keys: each starts at a byte of the mask */
                    s.mask = 1;
                    s.alibi = causal ? 1 : 0;
                    s.sinks = 1;
                }
                s.seed = 7u + 13u * (unsigned)(layout * 4 + causal * 2 + di) + (di == 2 ? 1000u : 0u);
                s.backend = FMSA_BACKEND_CUDA;
                fmsa_ring_spec_name(&s, name, sizeof name);
                if (!(rcase = fmsa_ring_case_make(&s))) {
                    printf("FAIL %s: harness\n", name);
                    return 1;
                }
                rc = fmsa_ring_case_run_on(rcase, comm, ctx, msg, sizeof msg);
                if (rc == 77) ++refused;
                if (rc != 0) {
                    ++failures;
                    printf("FAIL %s: %s\n", name, msg);
                }
                ++cases;
                fmsa_ring_case_free(rcase);
            }
    printf("ring over NCCL, 1 rank, exchanges on %s: %d cases, %d failed (%d of them refusals)\n",
           g_stream_mode == 1 ? "a comm stream" : "the default stream", cases, failures, refused);
    if (getenv("FLASHMSA_TEST_NCCL_STREAM") && atoi(getenv("FLASHMSA_TEST_NCCL_STREAM")) &&
        g_stream_mode != 1) {
        printf("FAIL: FLASHMSA_TEST_NCCL_STREAM=1 but the exchanges ran on the default stream\n");
        ++failures;
    }
    fmsa_dist_comm_destroy(comm);
    destroy(ncomm);
    fmsa_context_destroy(ctx);
    return failures == 0 ? 0 : 1;
}
