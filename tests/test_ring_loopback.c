/*
 * Ring attention on the loopback transport: P ranks as P threads of this
 * process, each with its own context of the backend --backend names (the CPU
 * by default; on a GPU every rank's context is on device 0 and the blocks
 * move by device copies), every layout, causal and not, GQA, two dtypes, a
 * shard size the kernels' tiles do not divide; each rank's rows of O, LSE,
 * dQ, dK, dV against the whole problem's fp64 reference under the project's
 * rule (tests/support/fmsa_ring_case.c).
 *
 * The CPU runs P = 1, 2, 3, 8 (odd P included) with f32 and bf16; a GPU runs
 * P = 2, 4, 8 with bf16 and f16 and head dim 64 (the CUDA backward's f32 came later; this
 * suite does not run it yet).
 * ALiBi runs with every layout (striped: scaled slopes and lse shifts, odd P
 * on the CPU); bit masks with the contiguous and zigzag layouts (chunks a
 * multiple of 8); a mask with the striped layout or with chunks off a byte is
 * refused (checked by status and message).
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/support/fmsa_ring_case.h"
#include "tests/support/fmsa_test_options.h"

enum { MAX_P = 8 };

/// The backend under test and one context per rank, made once for the suite
/// (a GPU context loads every kernel module: per case it would dominate).
static fmsa_test_options g_opt;
static fmsa_context *g_ctx[MAX_P];

static int on_cpu(void) { return g_opt.backend == FMSA_BACKEND_CPU; }

/// FLASHMSA_RING_MAX_P=n keeps the grids to P <= n (a run under
/// compute-sanitizer, where every launch is slow); unset: every P.
static int p_wanted(int P) {
    const char *e = getenv("FLASHMSA_RING_MAX_P");
    return !e || !*e || P <= atoi(e);
}

/// OpenCL's buffers are cl_mem handles, which no transport can address: the
/// ring refuses it (checked in `refusals`), so the grids do not run there.
static int ring_runs_here(void) { return g_opt.backend != FMSA_BACKEND_OPENCL; }

typedef struct rank_job {
    const fmsa_ring_case *rc;
    fmsa_dist_comm *comm;
    fmsa_context *ctx;
    int result;
    char msg[512];
} rank_job;

static void *rank_main(void *arg) {
    rank_job *j = (rank_job *)arg;
    j->result = fmsa_ring_case_run_on(j->rc, j->comm, j->ctx, j->msg, sizeof j->msg);
    return NULL;
}

/* Runs one spec on P threads; returns failures (0), counting refusals apart. */
static int run_spec(const fmsa_ring_spec *s, int *refused) {
    fmsa_dist_comm *comms[MAX_P];
    pthread_t th[MAX_P];
    rank_job jobs[MAX_P];
    fmsa_ring_case *rc = fmsa_ring_case_make(s);
    char name[160];
    int bad = 0, ref = 0;
    fmsa_ring_spec_name(s, name, sizeof name);
    assert_non_null(rc);
    assert_int_equal(fmsa_dist_comm_loopback(s->P, comms), FMSA_SUCCESS);
    for (int r = 0; r < s->P; ++r) {
        jobs[r].rc = rc;
        jobs[r].comm = comms[r];
        jobs[r].ctx = g_ctx[r];
        jobs[r].result = -1;
        jobs[r].msg[0] = 0;
        assert_int_equal(pthread_create(&th[r], NULL, rank_main, &jobs[r]), 0);
    }
    for (int r = 0; r < s->P; ++r) pthread_join(th[r], NULL);
    for (int r = 0; r < s->P; ++r) {
        if (jobs[r].result == 77) ref = 1;
        else if (jobs[r].result != 0) {
            bad = 1;
            print_message("FAIL %s: %s\n", name, jobs[r].msg);
        }
        fmsa_dist_comm_destroy(comms[r]);
    }
    if (ref && !bad) {
        print_message("not supported by the %s backend yet: %s (%s)\n", g_opt.backend_name, name,
                      jobs[0].msg);
        ++*refused;
    }
    fmsa_ring_case_free(rc);
    return bad;
}

static void grid(void **state) {
    static const int cpu_Ps[] = {1, 2, 3, 8}, gpu_Ps[] = {2, 4, 8};
    static const fmsa_dtype cpu_dts[] = {FMSA_DTYPE_F32, FMSA_DTYPE_BF16},
                            gpu_dts[] = {FMSA_DTYPE_BF16, FMSA_DTYPE_F16};
    const int *Ps = on_cpu() ? cpu_Ps : gpu_Ps;
    const size_t nP = on_cpu() ? 4 : 3;
    const fmsa_dtype *dts = on_cpu() ? cpu_dts : gpu_dts;
    int failures = 0, cases = 0, refused = 0;
    (void)state;
    if (!ring_runs_here()) skip();
    for (size_t pi = 0; pi < nP; ++pi)
        for (int layout = 0; layout < 3; ++layout)
            for (int causal = 0; causal < 2; ++causal)
                for (size_t di = 0; di < 2; ++di) {
                    fmsa_ring_spec s = {0};
                    if (!p_wanted(Ps[pi])) continue;
                    s.P = Ps[pi];
                    s.layout = (fmsa_ring_layout)layout;
                    s.causal = causal;
                    s.dtype = dts[di];
                    s.B = 2;
                    s.c = 6; /* zigzag halves of 3 rows: no tile divides them */
                    s.Hq = 4;
                    s.Hkv = 2;
                    s.D = on_cpu() ? 32 : 64;
                    s.Dv = s.D;
                    s.backend = g_opt.backend;
                    s.softcap = (pi + layout) % 2 ? 20.0f : 0.0f;
                    s.seed = 17u * (unsigned)(pi * 16 + layout * 4 + causal * 2 + di) + 1u;
                    failures += run_spec(&s, &refused);
                    ++cases;
                }
    print_message("ring loopback: %d cases, %d failed, %d not supported\n", cases, failures,
                  refused);
    assert_int_equal(refused, 0); /* everything here is plain attention: nothing may be refused */
    assert_int_equal(failures, 0);
}

/* The 2026-model features across ranks: sinks counted once per row (dsink
 * summed over every rank), an lse gradient, a value head dim of its own. */
static void features(void **state) {
    static const int cpu_Ps[] = {1, 3, 4}, gpu_Ps[] = {2, 4, 8};
    const int *Ps = on_cpu() ? cpu_Ps : gpu_Ps;
    int failures = 0, cases = 0, refused = 0;
    (void)state;
    if (!ring_runs_here()) skip();
    for (size_t pi = 0; pi < 3; ++pi)
        for (int layout = 0; layout < 3; ++layout)
            for (int causal = 0; causal < 2; ++causal) {
                fmsa_ring_spec s = {0};
                if (!p_wanted(Ps[pi])) continue;
                s.P = Ps[pi];
                s.layout = (fmsa_ring_layout)layout;
                s.causal = causal;
                s.dtype = (layout + causal) % 2 ? FMSA_DTYPE_BF16
                                                : (on_cpu() ? FMSA_DTYPE_F32 : FMSA_DTYPE_F16);
                s.B = 1;
                s.c = 4;
                s.Hq = 4;
                s.Hkv = 1;
                /* a value head dim of its own in the zigzag layout (on a GPU the
                 * backward's padded (64, 256) row) */
                s.D = on_cpu() ? 24 : 64;
                s.Dv = layout == 1 ? 40 : s.D;
                s.backend = g_opt.backend;
                s.sinks = 1;
                s.dlse = causal;
                s.seed = 31u * (unsigned)(pi * 8 + layout * 2 + causal) + 5u;
                failures += run_spec(&s, &refused);
                ++cases;
            }
    print_message("ring loopback features: %d cases, %d failed, %d not supported\n", cases,
                  failures, refused);
    assert_int_equal(refused, 0);
    assert_int_equal(failures, 0);
}

/* Windows across ranks (the plan's bands, ring_plan.c): sliding windows with
 * causal, two-sided windows and a right-only window without, each reaching
 * across several ranks' blocks (S = P c is 2-8 windows long), sinks on some. */
static void windows(void **state) {
    static const int cpu_Ps[] = {2, 3, 8}, gpu_Ps[] = {2, 4, 8};
    static const int64_t win[3][3] = {{1, 5, -1}, {0, 7, 3}, {0, -1, 4}}; /* causal, left, right */
    const int *Ps = on_cpu() ? cpu_Ps : gpu_Ps;
    int failures = 0, cases = 0, refused = 0;
    (void)state;
    if (!ring_runs_here()) skip();
    for (size_t pi = 0; pi < 3; ++pi)
        for (int layout = 0; layout < 3; ++layout)
            for (int w = 0; w < 3; ++w) {
                fmsa_ring_spec s = {0};
                if (!p_wanted(Ps[pi])) continue;
                s.P = Ps[pi];
                s.layout = (fmsa_ring_layout)layout;
                s.causal = (int)win[w][0];
                s.window = 1;
                s.window_left = win[w][1];
                s.window_right = win[w][2];
                s.dtype = (layout + w) % 2 ? FMSA_DTYPE_BF16
                                           : (on_cpu() ? FMSA_DTYPE_F32 : FMSA_DTYPE_F16);
                s.B = 1;
                s.c = 6;
                s.Hq = 4;
                s.Hkv = 2;
                s.D = on_cpu() ? 32 : 64;
                s.Dv = s.D;
                s.sinks = w == 1;
                s.dlse = w == 2;
                s.backend = g_opt.backend;
                s.seed = 41u * (unsigned)(pi * 9 + layout * 3 + w) + 3u;
                failures += run_spec(&s, &refused);
                ++cases;
            }
    print_message("ring loopback windows: %d cases, %d failed, %d not supported\n", cases,
                  failures, refused);
    assert_int_equal(refused, 0);
    assert_int_equal(failures, 0);
}

/// The features of variant v (0..3) of the ALiBi and mask suites: v 1 and 2
/// causal, v 2 and 3 a window (causal: sliding, wl_causal to the left; full:
/// two-sided, wl_full / wr_full), GQA 4:1 at v 1 (4:2 otherwise), sinks at v
/// 0 and 2, dlse at v 1, softcap at v 3, bf16 on every other (layout, v).
static fmsa_ring_spec variant_spec(int P, int layout, int v, int64_t c, int64_t wl_causal,
                                   int64_t wl_full, int64_t wr_full) {
    fmsa_ring_spec s = {0};
    s.P = P;
    s.layout = (fmsa_ring_layout)layout;
    s.causal = v == 1 || v == 2;
    if (v >= 2) {
        s.window = 1;
        s.window_left = v == 2 ? wl_causal : wl_full;
        s.window_right = v == 2 ? -1 : wr_full;
    }
    s.dtype = (layout + v) % 2 ? FMSA_DTYPE_BF16 : (on_cpu() ? FMSA_DTYPE_F32 : FMSA_DTYPE_F16);
    s.B = 2;
    s.c = c;
    s.Hq = 4;
    s.Hkv = v == 1 ? 1 : 2;
    s.D = on_cpu() ? 32 : 64;
    s.Dv = s.D;
    s.sinks = v == 0 || v == 2;
    s.dlse = v == 1;
    s.softcap = v == 3 ? 20.0f : 0.0f;
    s.backend = g_opt.backend;
    return s;
}

/* ALiBi over the whole sequence's distances (issue 16): contiguous and zigzag
 * (each local pass one pair of chunks with its own offset) and striped (each
 * side of the local diagonal a pass of its own, slopes times P, the side's
 * constant in the lse), [Hq] and [B, Hq] slopes, causal and not, a sliding and
 * a two-sided window reaching across ranks, GQA, sinks once per row, dlse and
 * softcap on some, fwd and bwd. */
static void alibi(void **state) {
    static const int cpu_Ps[] = {2, 3, 8}, gpu_Ps[] = {2, 4, 8};
    const int *Ps = on_cpu() ? cpu_Ps : gpu_Ps;
    int failures = 0, cases = 0, refused = 0;
    (void)state;
    if (!ring_runs_here()) skip();
    for (size_t pi = 0; pi < 3; ++pi)
        for (int layout = 0; layout < 3; ++layout)
            for (int v = 0; v < 4; ++v) {
                fmsa_ring_spec s;
                if (!p_wanted(Ps[pi])) continue;
                s = variant_spec(Ps[pi], layout, v, 6 /* zigzag halves of 3 rows */, 5, 4, 3);
                s.alibi = v % 2 ? 2 : 1;
                s.seed = 53u * (unsigned)(pi * 8 + layout * 4 + v) + 11u;
                failures += run_spec(&s, &refused);
                ++cases;
            }
    print_message("ring loopback alibi: %d cases, %d failed, %d not supported\n", cases,
                  failures, refused);
    assert_int_equal(refused, 0);
    assert_int_equal(failures, 0);
}

/* Bit masks across ranks: each rank passes its own rows over the whole
 * sequence's key columns; contiguous and zigzag (c = 16: chunks of 16 and 8
 * columns, each starting at a byte), [B, Hq] and broadcast [1, 1] masks with a
 * fully masked row, causal and not, windows, ALiBi, GQA, sinks, dlse and
 * softcap on some; and P = 1 with a shard no multiple of 8 (one block at
 * column 0). */
static void masks(void **state) {
    static const int cpu_Ps[] = {2, 3, 8}, gpu_Ps[] = {2, 4, 8};
    const int *Ps = on_cpu() ? cpu_Ps : gpu_Ps;
    int failures = 0, cases = 0, refused = 0;
    (void)state;
    if (!ring_runs_here()) skip();
    for (size_t pi = 0; pi < 4; ++pi)
        for (int layout = 0; layout < 2; ++layout)
            for (int v = 0; v < 4; ++v) {
                fmsa_ring_spec s;
                if (pi == 3 && (layout != 0 || v > 1)) continue;
                if (pi < 3 && !p_wanted(Ps[pi])) continue;
                s = variant_spec(pi == 3 ? 1 : Ps[pi], layout, v, pi == 3 ? 13 : 16, 9, 7, 5);
                s.mask = v % 2 ? 2 : 1;
                s.alibi = v == 1 ? 1 : v == 2 ? 2 : 0;
                s.seed = 59u * (unsigned)(pi * 8 + layout * 4 + v) + 7u;
                failures += run_spec(&s, &refused);
                ++cases;
            }
    print_message("ring loopback masks: %d cases, %d failed, %d not supported\n", cases, failures,
                  refused);
    assert_int_equal(refused, 0);
    assert_int_equal(failures, 0);
}

/* Arguments the ring refuses, on every rank alike, before anything moves. */
static void refusals(void **state) {
    fmsa_dist_comm *comms[1];
    fmsa_context *ctx;
    fmsa_attention_desc desc = fmsa_attention_desc_init(32);
    float buf[2 * 6 * 4 * 32];
    const int64_t sh[4] = {2, 5, 4, 32};
    fmsa_tensor q = fmsa_tensor_contiguous(buf, FMSA_DTYPE_F32, 4, sh);
    size_t bytes = 7;
    (void)state;
    assert_int_equal(fmsa_dist_comm_loopback(1, comms), FMSA_SUCCESS);
    assert_int_equal(fmsa_context_create(FMSA_BACKEND_CPU, 0, &ctx), FMSA_SUCCESS);
    /* an odd shard cannot be two zigzag chunks */
    assert_int_equal(fmsa_ring_workspace_size(ctx, comms[0], FMSA_RING_ZIGZAG, FMSA_PASS_FORWARD,
                                              &desc, &q, &q, &q, &bytes),
                     FMSA_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(fmsa_last_error(), "zigzag"));
    assert_int_equal(bytes, 0);
    /* ALiBi: every layout is accepted (striped: slopes times P, the lse shifted) */
    desc.alibi_slopes = fmsa_tensor_contiguous(buf, FMSA_DTYPE_F32, 1, &sh[2]);
    for (int layout = 0; layout < 3; layout += 2) {
        bytes = 0;
        assert_int_equal(fmsa_ring_workspace_size(ctx, comms[0], (fmsa_ring_layout)layout,
                                                  FMSA_PASS_BACKWARD, &desc, &q, &q, &q, &bytes),
                         FMSA_SUCCESS);
        assert_true(bytes > 0);
    }
    memset(&desc.alibi_slopes, 0, sizeof desc.alibi_slopes);
    /* bit masks: the rank's rows over every key column, read through byte views */
    {
        const int64_t ms[4] = {1, 1, 5, 1}, ms6[4] = {1, 1, 6, 2}, sh6[4] = {2, 6, 4, 32};
        const int64_t ms10[4] = {1, 1, 5, 2};
        const fmsa_tensor q6 = fmsa_tensor_contiguous(buf, FMSA_DTYPE_F32, 4, sh6);
        fmsa_dist_comm *two[2];
        desc.mask = fmsa_tensor_contiguous(buf, FMSA_DTYPE_U8, 4, ms);
        /* one rank, contiguous: one block at column 0, any shard */
        assert_int_equal(fmsa_ring_workspace_size(ctx, comms[0], FMSA_RING_CONTIGUOUS,
                                                  FMSA_PASS_BACKWARD, &desc, &q, &q, &q, &bytes),
                         FMSA_SUCCESS);
        /* striped keys are every P-th column */
        bytes = 7;
        assert_int_equal(fmsa_ring_workspace_size(ctx, comms[0], FMSA_RING_STRIPED,
                                                  FMSA_PASS_BACKWARD, &desc, &q, &q, &q, &bytes),
                         FMSA_ERR_NOT_SUPPORTED);
        assert_non_null(strstr(fmsa_last_error(), "desc.mask with the striped layout"));
        assert_int_equal(bytes, 0);
        /* zigzag chunks of 3 rows start off a byte */
        desc.mask = fmsa_tensor_contiguous(buf, FMSA_DTYPE_U8, 4, ms6);
        assert_int_equal(fmsa_ring_workspace_size(ctx, comms[0], FMSA_RING_ZIGZAG,
                                                  FMSA_PASS_FORWARD, &desc, &q6, &q6, &q6, &bytes),
                         FMSA_ERR_NOT_SUPPORTED);
        assert_non_null(strstr(fmsa_last_error(), "desc.mask with the zigzag layout needs"));
        /* two ranks of 5 rows: block 1 starts at column 5 */
        assert_int_equal(fmsa_dist_comm_loopback(2, two), FMSA_SUCCESS);
        desc.mask = fmsa_tensor_contiguous(buf, FMSA_DTYPE_U8, 4, ms10);
        assert_int_equal(fmsa_ring_workspace_size(ctx, two[1], FMSA_RING_CONTIGUOUS,
                                                  FMSA_PASS_FORWARD, &desc, &q, &q, &q, &bytes),
                         FMSA_ERR_NOT_SUPPORTED);
        assert_non_null(strstr(fmsa_last_error(), "desc.mask with the contiguous layout needs"));
        /* ... and a mask must cover the whole sequence's columns (10 keys: 2 bytes) */
        desc.mask = fmsa_tensor_contiguous(buf, FMSA_DTYPE_U8, 4, ms);
        assert_int_equal(fmsa_ring_workspace_size(ctx, two[1], FMSA_RING_CONTIGUOUS,
                                                  FMSA_PASS_FORWARD, &desc, &q, &q, &q, &bytes),
                         FMSA_ERR_INVALID_ARGUMENT);
        assert_non_null(strstr(fmsa_last_error(), "desc.mask.shape"));
        fmsa_dist_comm_destroy(two[0]);
        fmsa_dist_comm_destroy(two[1]);
        memset(&desc.mask, 0, sizeof desc.mask);
    }
    assert_int_equal(fmsa_ring_workspace_size(ctx, comms[0], (fmsa_ring_layout)9,
                                              FMSA_PASS_FORWARD, &desc, &q, &q, &q, &bytes),
                     FMSA_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(fmsa_last_error(), "layout"));
    if (!ring_runs_here()) { /* the backend under test is refused by name, before anything moves */
        assert_int_equal(fmsa_ring_workspace_size(g_ctx[0], comms[0], FMSA_RING_CONTIGUOUS,
                                                  FMSA_PASS_FORWARD, &desc, &q, &q, &q, &bytes),
                         FMSA_ERR_NOT_SUPPORTED);
        assert_non_null(strstr(fmsa_last_error(), "handles"));
    }
    fmsa_dist_comm_destroy(comms[0]);
    assert_int_equal(fmsa_dist_comm_loopback(0, comms), FMSA_ERR_INVALID_ARGUMENT);
    fmsa_context_destroy(ctx);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(grid),
        cmocka_unit_test(features),
        cmocka_unit_test(windows),
        cmocka_unit_test(alibi),
        cmocka_unit_test(masks),
        cmocka_unit_test(refusals),
    };
    int rc;
    if (fmsa_test_options_parse(argc, argv, &g_opt) != 0) return 2;
    for (int r = 0; r < MAX_P; ++r) {
        const fmsa_status st = fmsa_test_context_create(&g_opt, &g_ctx[r]);
        if (st == FMSA_ERR_BACKEND_UNAVAILABLE && !on_cpu()) {
            fprintf(stderr, "skipped: the %s backend is not usable here (%s)\n",
                    g_opt.backend_name, fmsa_last_error());
            return FMSA_TEST_EXIT_SKIP;
        }
        if (st != FMSA_SUCCESS) {
            fprintf(stderr, "context %d: %s\n", r, fmsa_last_error());
            return 1;
        }
    }
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    for (int r = 0; r < MAX_P; ++r) fmsa_context_destroy(g_ctx[r]);
    return rc;
}
