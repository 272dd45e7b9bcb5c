/*
 * The CUDA decode's split-KV count comes from the planner
 * (fmsa_plan_split_count with the split kernel described in the request),
 * and it is the count the backend launched before the rule moved there: its
 * own function in cuda_fwd_instances.h at commit 2fa5910, kept below as the
 * oracle (commit 93b0f02 ran this grid against the header's function itself
 * before it was deleted).  Through the real pick (fmsa_cuda_plan_make on made-up
 * devices, no GPU): a wide grid of batch, query / KV heads, query and key
 * lengths, head dims, dtypes, SM counts, shared memory, causal, windows,
 * varlen and the FULL variant; every case must launch the same kernel with
 * the same split count, and the count must be the planner's answer.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "backends/cuda/cuda_fwd_instances.h"
#include "backends/cuda/cuda_internal.h"
#include "common/planner.h"

/* Fake device addresses: the pick only checks their alignment. */
#define DEV(n) ((void *)(uintptr_t)(0x7f0000000000ull + (unsigned long long)(n) * 0x10000000ull))

static fmsa_view4 view4(int n, int64_t sb, int64_t ss, int64_t sh) {
    fmsa_view4 v = {DEV(n), 0, sb, ss, sh};
    return v;
}

/* fmsa_cuda_fwd_num_splits of cuda_fwd_instances.h at 2fa5910, as it was:
 * the fewest splits within 85% of the best wave efficiency (in doubles), at
 * least 2 key stages per split, at most 64. */
static int old_num_splits(const fmsa_cuda_fwd_params *p, int keys_per_stage, int blocks_per_sm,
                          int num_sms) {
    const long long blocks = (long long)p->batch * p->heads_kv;
    const long long tiles = ((long long)p->seqlen_k + keys_per_stage - 1) / keys_per_stage;
    const long long slots = (long long)num_sms * blocks_per_sm;
    double eff[65], best = 0.0;
    int s, max_s = 64;
    if (tiles / 2 < max_s) max_s = (int)(tiles / 2);
    if (max_s <= 1 || blocks >= slots) return 1;
    for (s = 1; s <= max_s; ++s) {
        const double waves = (double)(blocks * s) / (double)slots;
        const double whole = (double)((blocks * s + slots - 1) / slots);
        eff[s] = waves / whole;
        if (eff[s] > best) best = eff[s];
    }
    for (s = 1; s <= max_s; ++s)
        if (eff[s] >= 0.85 * best) return s;
    return 1;
}

/*
 * The oracle: what the backend launched at 2fa5910 for a validated problem,
 * the split kernel's name (NULL: the main kernel) and its split count.  The
 * split instance selection and the blocks per SM are that commit's
 * fmsa_cuda_fwd_make_plan, written out; the count is its
 * fmsa_cuda_fwd_num_splits (old_num_splits above).
 */
static const char *old_split_plan(int dtype, const fmsa_cuda_fwd_params *p, int num_sms,
                                  long long smem_max, int *splits) {
    const int variant = fmsa_cuda_fwd_variant(p);
    const long long group = p->heads_kv > 0 ? p->heads_q / p->heads_kv : 0;
    const int dmax = p->head_dim > p->head_dim_v ? p->head_dim : p->head_dim_v;
    int n, i, best = -1;
    *splits = 1;
    if (p->seqlen_q <= 0) return NULL;
    if (p->seqlen_q * group <= 16 && p->heads_kv <= 65535) {
        const fmsa_cuda_fwd_instance *t = fmsa_cuda_fwd_split_table(&n);
        for (i = 0; i < n; ++i)
            if (t[i].dtype == dtype && t[i].variant == variant && t[i].head_dim >= dmax &&
                t[i].smem_bytes <= smem_max && (best < 0 || t[i].head_dim < t[best].head_dim))
                best = i;
        if (best >= 0) {
            const int per_sm = t[best].smem_bytes <= 112 * 1024 ? 2 : 1;
            *splits = old_num_splits(p, t[best].block_n, per_sm, num_sms);
            if (*splits > 65535) *splits = 65535;
            return t[best].name;
        }
    }
    return NULL;
}

/* Feature sets of the grid. */
enum { F_NONE, F_CAUSAL, F_WINDOW, F_VARLEN, F_SOFTCAP, F_COUNT };

/* An aligned forward of the given shape (strides multiples of 8 elements). */
static fmsa_problem make_problem(fmsa_dtype dt, int64_t b, int64_t hq, int64_t hkv, int64_t sq,
                                 int64_t sk, int64_t d, int64_t dv, int feat) {
    fmsa_problem p;
    memset(&p, 0, sizeof p);
    p.pass = FMSA_PASS_FORWARD;
    p.dtype = dt;
    p.batch = b, p.seqlen_q = sq, p.seqlen_k = sk, p.heads_q = hq, p.heads_kv = hkv;
    p.head_dim = d, p.head_dim_v = dv, p.total_q = sq, p.total_k = sk;
    p.softmax_scale = 0.1f, p.window_left = p.window_right = -1;
    p.q = view4(1, sq * hq * d, hq * d, d);
    p.k = view4(2, sk * hkv * d, hkv * d, d);
    p.v = view4(3, sk * hkv * dv, hkv * dv, dv);
    p.o = view4(4, sq * hq * dv, hq * dv, dv);
    switch (feat) {
    case F_CAUSAL: p.causal = 1, p.window_right = 0; break;
    case F_WINDOW: p.window_left = 100, p.window_right = 3; break;
    case F_VARLEN:
        /* packed sequences: lengths up to seqlen_q / seqlen_k, batch strides 0 */
        p.is_varlen = 1;
        p.total_q = b * sq, p.total_k = b * sk;
        p.q.sb = p.k.sb = p.v.sb = p.o.sb = 0;
        p.cu_seqlens_q.data = DEV(8), p.cu_seqlens_q.s0 = 1;
        p.cu_seqlens_k.data = DEV(9), p.cu_seqlens_k.s0 = 1;
        break;
    case F_SOFTCAP: p.softcap = 30.0f; break; /* the FULL variant */
    default: break;
    }
    return p;
}

static fmsa_dtype dtype_of(int dt) {
    return dt == FMSA_CUDA_DT_BF16 ? FMSA_DTYPE_BF16
           : dt == FMSA_CUDA_DT_F32 ? FMSA_DTYPE_F32 : FMSA_DTYPE_F16;
}

static void decode_splits_unchanged(void **state) {
    static const int64_t batches[] = {1, 2, 3, 8, 64};
    static const int64_t heads[][2] = {{1, 1}, {8, 8}, {8, 1}, {32, 8}, {16, 2}, {6, 2}, {64, 4}, {4, 4}};
    static const int64_t sqs[] = {1, 2, 3, 4, 16, 17};
    static const int64_t sks[] = {1, 16, 64, 65, 129, 1000, 4096, 32768, 131072, 1 << 20};
    static const int64_t dims[][2] = {{64, 64}, {128, 128}, {256, 256}, {96, 96}, {192, 128},
                                      {64, 256}, {8, 8}, {512, 512}};
    static const int sms[] = {108, 132, 0, 1, 7, 16, 64, 78, 114, 264};
    static const size_t smems[] = {227u << 10, 163u << 10, 99u << 10, 48u << 10};
    long cases = 0, split_cases = 0, multi = 0, refused = 0;
    (void)state;
    for (size_t e = 0; e < sizeof smems / sizeof smems[0]; e++)
        for (size_t m = 0; m < sizeof sms / sizeof sms[0]; m++) {
            fmsa_cuda_device dev;
            fmsa_cuda_state st;
            memset(&dev, 0, sizeof dev);
            memset(&st, 0, sizeof st);
            dev.info.backend = FMSA_BACKEND_CUDA;
            dev.cc_major = smems[e] > (163u << 10) ? 9 : 8;
            snprintf(dev.info.arch, sizeof dev.info.arch, "sm%d0", dev.cc_major);
            dev.info.sram_per_block = 48 << 10;
            dev.info.sram_per_block_optin = smems[e];
            dev.info.multiprocessors = sms[m];
            dev.max_threads_per_block = 1024;
            st.dev = &dev;
            for (int dt = FMSA_CUDA_DT_F16; dt <= FMSA_CUDA_DT_F32; dt++)
                for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++)
                    for (size_t bi = 0; bi < sizeof batches / sizeof batches[0]; bi++)
                        for (size_t hi = 0; hi < sizeof heads / sizeof heads[0]; hi++)
                            for (size_t qi = 0; qi < sizeof sqs / sizeof sqs[0]; qi++)
                                for (size_t ki = 0; ki < sizeof sks / sizeof sks[0]; ki++)
                                    for (int f = 0; f < F_COUNT; f++) {
                                        fmsa_problem p = make_problem(
                                            dtype_of(dt), batches[bi], heads[hi][0], heads[hi][1],
                                            sqs[qi], sks[ki], dims[di][0], dims[di][1], f);
                                        fmsa_cuda_plan plan;
                                        fmsa_cuda_fwd_params fp;
                                        const char *want;
                                        int want_splits;
                                        ++cases;
                                        if (fmsa_cuda_plan_make(&st, &p, &plan) != FMSA_SUCCESS) {
                                            ++refused; /* f32 above 256, 512 on sm_80 */
                                            continue;
                                        }
                                        fmsa_cuda_fwd_params_fill(&p, &plan, 0, 0, &fp);
                                        want = old_split_plan(dt, &fp, sms[m], (long long)smems[e],
                                                              &want_splits);
                                        if (want) ++split_cases;
                                        if (want_splits > 1) ++multi;
                                        if ((want == NULL) != (strstr(plan.instance, "_split_") == NULL) ||
                                            (want && strcmp(want, plan.instance) != 0) ||
                                            plan.num_splits != want_splits ||
                                            (want && plan.launch[0].grid[0] != (unsigned)want_splits) ||
                                            plan.launches != (want_splits > 1 ? 2 : 1))
                                            fail_msg("dt %d d %lld/%lld b %lld h %lld/%lld sq %lld sk "
                                                     "%lld feat %d sms %d smem %zu: %s x %d "
                                                     "(%d launches), was %s x %d",
                                                     dt, (long long)dims[di][0], (long long)dims[di][1],
                                                     (long long)batches[bi], (long long)heads[hi][0],
                                                     (long long)heads[hi][1], (long long)sqs[qi],
                                                     (long long)sks[ki], f, sms[m], smems[e],
                                                     plan.instance, plan.num_splits, plan.launches,
                                                     want ? want : "main", want_splits);
                                    }
        }
    print_message("%ld cases: %ld refused, %ld on the split kernel, %ld with more than one "
                  "split\n", cases, refused, split_cases, multi);
    /* the grid reaches the rule's every branch */
    assert_true(split_cases > cases / 10);
    assert_true(multi > split_cases / 4);
}

/* The planner answers the count itself: a request describing the split
 * kernel gets it from fmsa_plan_tiles, one that says no split kernel runs
 * gets 1, and the H200's standard decode (b 8, 32 / 8 heads, d 128, 32k keys)
 * takes the 4 splits the instance list's comment cites (256 blocks on 264
 * slots). */
static void planner_counts_the_split_kernel(void **state) {
    fmsa_device_info dev;
    fmsa_plan_request req;
    fmsa_tile_plan tiles;
    int n;
    const fmsa_cuda_fwd_instance *t = fmsa_cuda_fwd_split_table(&n);
    int d128 = -1;
    (void)state;
    for (int i = 0; i < n; i++)
        if (t[i].dtype == FMSA_CUDA_DT_BF16 && t[i].variant == FMSA_CUDA_FWD_FAST &&
            t[i].head_dim == 128)
            d128 = i;
    assert_true(d128 >= 0);
    memset(&dev, 0, sizeof dev);
    dev.backend = FMSA_BACKEND_CUDA;
    snprintf(dev.arch, sizeof dev.arch, "sm90");
    dev.sram_per_block = 48 << 10, dev.sram_per_block_optin = 227 << 10;
    dev.multiprocessors = 132;
    memset(&req, 0, sizeof req);
    req.head_dim = req.head_dim_v = 128, req.dtype = FMSA_DTYPE_BF16, req.pass = FMSA_PASS_FORWARD;
    req.seqlen_q = 1, req.seqlen_k = 32768, req.batch_heads = 8 * 32, req.batch_heads_kv = 8 * 8;
    req.split.block_m = t[d128].block_m, req.split.block_n = t[d128].block_n;
    req.split.blocks_per_sm = fmsa_cuda_fwd_split_blocks_per_sm(&t[d128]);
    assert_int_equal(req.split.blocks_per_sm, 2);
    assert_int_equal(fmsa_plan_tiles(&dev, &req, &tiles), FMSA_SUCCESS);
    assert_int_equal(tiles.num_splits, 4);
    assert_int_equal(fmsa_plan_split_count(&dev, &req, tiles.block_m, tiles.block_n), 4);
    req.split.block_m = FMSA_PLAN_SPLIT_NONE;
    assert_int_equal(fmsa_plan_tiles(&dev, &req, &tiles), FMSA_SUCCESS);
    assert_int_equal(tiles.num_splits, 1);
    /* the backward never splits, whatever the request says */
    req.split.block_m = t[d128].block_m;
    req.pass = FMSA_PASS_BACKWARD;
    assert_int_equal(fmsa_plan_tiles(&dev, &req, &tiles), FMSA_SUCCESS);
    assert_int_equal(tiles.num_splits, 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(decode_splits_unchanged),
        cmocka_unit_test(planner_counts_the_split_kernel),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
