/*
 * Ring attention on the loopback transport: P ranks as P threads of this
 * process, each with its own CPU context, every layout, causal and not, GQA,
 * f32 and bf16, odd P and a shard size the kernels' tiles do not divide;
 * each rank's rows of O, LSE, dQ, dK, dV against the whole problem's fp64
 * reference under the project's rule (tests/support/fmsa_ring_case.c).
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

enum { MAX_P = 8 };

typedef struct rank_job {
    const fmsa_ring_case *rc;
    fmsa_dist_comm *comm;
    int result;
    char msg[512];
} rank_job;

static void *rank_main(void *arg) {
    rank_job *j = (rank_job *)arg;
    j->result = fmsa_ring_case_run(j->rc, j->comm, j->msg, sizeof j->msg);
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
        print_message("not supported by the CPU backend yet: %s (%s)\n", name, jobs[0].msg);
        ++*refused;
    }
    fmsa_ring_case_free(rc);
    return bad;
}

static void grid(void **state) {
    static const int Ps[] = {1, 2, 3, 8};
    static const fmsa_dtype dts[] = {FMSA_DTYPE_F32, FMSA_DTYPE_BF16};
    int failures = 0, cases = 0, refused = 0;
    (void)state;
    for (size_t pi = 0; pi < sizeof Ps / sizeof Ps[0]; ++pi)
        for (int layout = 0; layout < 3; ++layout)
            for (int causal = 0; causal < 2; ++causal)
                for (size_t di = 0; di < sizeof dts / sizeof dts[0]; ++di) {
                    fmsa_ring_spec s = {0};
                    s.P = Ps[pi];
                    s.layout = (fmsa_ring_layout)layout;
                    s.causal = causal;
                    s.dtype = dts[di];
                    s.B = 2;
                    s.c = 6; /* zigzag halves of 3 rows: no tile divides them */
                    s.Hq = 4;
                    s.Hkv = 2;
                    s.D = 32;
                    s.Dv = 32;
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
    static const int Ps[] = {1, 3, 4};
    int failures = 0, cases = 0, refused = 0;
    (void)state;
    for (size_t pi = 0; pi < sizeof Ps / sizeof Ps[0]; ++pi)
        for (int layout = 0; layout < 3; ++layout)
            for (int causal = 0; causal < 2; ++causal) {
                fmsa_ring_spec s = {0};
                s.P = Ps[pi];
                s.layout = (fmsa_ring_layout)layout;
                s.causal = causal;
                s.dtype = (layout + causal) % 2 ? FMSA_DTYPE_BF16 : FMSA_DTYPE_F32;
                s.B = 1;
                s.c = 4;
                s.Hq = 4;
                s.Hkv = 1;
                s.D = 24;
                s.Dv = layout == 1 ? 40 : 24;
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
    desc.window_left = 4;
    assert_int_equal(fmsa_ring_workspace_size(ctx, comms[0], FMSA_RING_CONTIGUOUS,
                                              FMSA_PASS_FORWARD, &desc, &q, &q, &q, &bytes),
                     FMSA_ERR_NOT_SUPPORTED);
    assert_non_null(strstr(fmsa_last_error(), "window"));
    desc.window_left = -1;
    assert_int_equal(fmsa_ring_workspace_size(ctx, comms[0], (fmsa_ring_layout)9,
                                              FMSA_PASS_FORWARD, &desc, &q, &q, &q, &bytes),
                     FMSA_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(fmsa_last_error(), "layout"));
    fmsa_dist_comm_destroy(comms[0]);
    assert_int_equal(fmsa_dist_comm_loopback(0, comms), FMSA_ERR_INVALID_ARGUMENT);
    fmsa_context_destroy(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(grid),
        cmocka_unit_test(features),
        cmocka_unit_test(refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
