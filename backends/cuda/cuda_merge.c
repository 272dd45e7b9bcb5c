/*
 * fmsa_merge_states on CUDA: the kernel of kernels/fmsa_cuda_merge.cu, one
 * warp per row (the split-KV combine runs the same merge step).  One launch,
 * no allocation and no synchronisation, so it can be captured into a graph.
 */
#include <stdint.h>
#include <string.h>

#include "backends/cuda/cuda_internal.h"
#include "common/error.h"

#define FMSA_CUDA_MERGE_THREADS 128u /* 4 rows per block */

static int fmsa_cuda_merge_dtype(fmsa_dtype d) {
    return d == FMSA_DTYPE_F32 ? FMSA_CUDA_MERGE_F32
                               : (d == FMSA_DTYPE_BF16 ? FMSA_CUDA_MERGE_BF16 : FMSA_CUDA_MERGE_F16);
}

static void *fmsa_cuda_merge_at(const void *data, int64_t byte_offset) {
    return (void *)((uintptr_t)data + (uintptr_t)byte_offset);
}

/* Whether a view's rows all start 4-element aligned (address and strides), so
 * the kernel's lanes can move 4 elements per access. */
static int fmsa_cuda_merge_rows_vec4(const void *at, const fmsa_view4 *v, fmsa_dtype dt) {
    const int64_t e = (int64_t)fmsa_dtype_size(dt);
    return (uintptr_t)at % (uintptr_t)(4 * e) == 0 && v->sb % 4 == 0 && v->ss % 4 == 0 &&
           v->sh % 4 == 0;
}

fmsa_status fmsa_cuda_run_merge(fmsa_cuda_state *st, const fmsa_merge_problem *mp,
                                fmsa_cu_stream stream) {
    fmsa_cuda_merge_params mq;
    fmsa_cuda_fwd_params none; /* neither varlen nor paged: no metadata check */
    fmsa_cuda_plan plan;
    const unsigned long long rows =
        (unsigned long long)mp->batch * (unsigned long long)mp->seqlen * (unsigned long long)mp->heads;
    const unsigned long long blocks = (rows + FMSA_CUDA_MERGE_THREADS / 32 - 1) / (FMSA_CUDA_MERGE_THREADS / 32);
    if (blocks > 0x7fffffffull)
        return fmsa_fail(FMSA_ERR_NOT_SUPPORTED,
                         "cuda: fmsa_merge_states of %llu rows exceeds the kernel's grid", rows);
    if (mp->batch > INT32_MAX || mp->seqlen > INT32_MAX || mp->heads > INT32_MAX ||
        mp->head_dim_v > INT32_MAX)
        return fmsa_fail(FMSA_ERR_NOT_SUPPORTED,
                         "cuda: fmsa_merge_states extents exceed the kernel's 32-bit geometry");
    memset(&mq, 0, sizeof mq);
    mq.o_a = fmsa_cuda_merge_at(mp->o_a.data, mp->o_a.byte_offset);
    mq.o_b = fmsa_cuda_merge_at(mp->o_b.data, mp->o_b.byte_offset);
    mq.o = fmsa_cuda_merge_at(mp->o.data, mp->o.byte_offset);
    mq.lse_a = (const float *)fmsa_cuda_merge_at(mp->lse_a.data, mp->lse_a.byte_offset);
    mq.lse_b = (const float *)fmsa_cuda_merge_at(mp->lse_b.data, mp->lse_b.byte_offset);
    mq.lse = (float *)fmsa_cuda_merge_at(mp->lse.data, mp->lse.byte_offset);
    mq.oa_sb = mp->o_a.sb, mq.oa_ss = mp->o_a.ss, mq.oa_sh = mp->o_a.sh;
    mq.ob_sb = mp->o_b.sb, mq.ob_ss = mp->o_b.ss, mq.ob_sh = mp->o_b.sh;
    mq.o_sb = mp->o.sb, mq.o_ss = mp->o.ss, mq.o_sh = mp->o.sh;
    mq.la_sb = mp->lse_a.s0, mq.la_sh = mp->lse_a.s1, mq.la_ss = mp->lse_a.s2;
    mq.lb_sb = mp->lse_b.s0, mq.lb_sh = mp->lse_b.s1, mq.lb_ss = mp->lse_b.s2;
    mq.l_sb = mp->lse.s0, mq.l_sh = mp->lse.s1, mq.l_ss = mp->lse.s2;
    mq.batch = (int)mp->batch, mq.seqlen = (int)mp->seqlen, mq.heads = (int)mp->heads;
    mq.head_dim_v = (int)mp->head_dim_v;
    mq.dtype_a = fmsa_cuda_merge_dtype(mp->dtype_a);
    mq.dtype_b = fmsa_cuda_merge_dtype(mp->dtype_b);
    mq.dtype_o = fmsa_cuda_merge_dtype(mp->dtype_o);
    mq.rows = rows;
    mq.vec4 = mp->head_dim_v % 4 == 0 && fmsa_cuda_merge_rows_vec4(mq.o_a, &mp->o_a, mp->dtype_a) &&
              fmsa_cuda_merge_rows_vec4(mq.o_b, &mp->o_b, mp->dtype_b) &&
              fmsa_cuda_merge_rows_vec4(mq.o, &mp->o, mp->dtype_o);
    memset(&none, 0, sizeof none);
    memset(&plan, 0, sizeof plan);
    plan.instance = "fmsa_cuda_merge";
    plan.launches = 1;
    plan.launch[0].kernel = "fmsa_cuda_merge";
    plan.launch[0].grid[0] = (unsigned)blocks; /* 0 rows: the launch is skipped */
    plan.launch[0].grid[1] = plan.launch[0].grid[2] = 1;
    plan.launch[0].threads = FMSA_CUDA_MERGE_THREADS;
    return fmsa_cuda_enqueue_pass(st, &plan, &none, &mq, 0, stream);
}
