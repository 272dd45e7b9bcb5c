/*
 * The ring's elementwise op (kernels/fmsa_cuda_accumulate.cu, one launch, a
 * grid-stride loop) and the device-to-device copy (cuMemcpyDtoDAsync), both
 * on the caller's stream with no synchronisation, so the ring's steps stay
 * asynchronous.
 */
#include <stdint.h>
#include <string.h>

#include "backends/cuda/cuda_internal.h"
#include "common/error.h"

#define FMSA_CUDA_ACC_THREADS 256u
#define FMSA_CUDA_ACC_MAX_BLOCKS 4096ull /* the grid-stride loop covers the rest */

static int fmsa_cuda_acc_dtype(fmsa_dtype d) {
    return d == FMSA_DTYPE_F32 ? FMSA_CUDA_MERGE_F32
                               : (d == FMSA_DTYPE_BF16 ? FMSA_CUDA_MERGE_BF16 : FMSA_CUDA_MERGE_F16);
}

fmsa_status fmsa_cuda_run_accumulate(fmsa_cuda_state *st, const fmsa_accumulate_problem *ap,
                                     fmsa_cu_stream stream) {
    fmsa_cuda_acc_params q;
    fmsa_cuda_fwd_params none; /* no metadata to check */
    fmsa_cuda_plan plan;
    unsigned long long blocks = ((unsigned long long)ap->count + FMSA_CUDA_ACC_THREADS - 1) /
                                FMSA_CUDA_ACC_THREADS;
    if (blocks > FMSA_CUDA_ACC_MAX_BLOCKS) blocks = FMSA_CUDA_ACC_MAX_BLOCKS;
    memset(&q, 0, sizeof q);
    q.dst = (void *)((uintptr_t)ap->dst.data + (uintptr_t)ap->dst.byte_offset);
    q.src = ap->src.data ? (const void *)((uintptr_t)ap->src.data + (uintptr_t)ap->src.byte_offset)
                         : NULL;
    for (int i = 0; i < 4; ++i) {
        q.ds[i] = ap->dst.strides[i];
        q.ss[i] = ap->src.strides[i];
    }
    q.n1 = ap->shape[1];
    q.n2 = ap->shape[2];
    q.n3 = ap->shape[3];
    q.count = ap->count;
    q.fill = ap->fill;
    q.mode = (int)ap->mode;
    q.dtype_dst = fmsa_cuda_acc_dtype(ap->dst.dtype);
    q.dtype_src = ap->src.data ? fmsa_cuda_acc_dtype(ap->src.dtype) : q.dtype_dst;
    memset(&none, 0, sizeof none);
    memset(&plan, 0, sizeof plan);
    plan.instance = "fmsa_cuda_accumulate";
    plan.launches = 1;
    plan.launch[0].kernel = "fmsa_cuda_accumulate";
    plan.launch[0].grid[0] = (unsigned)blocks;
    plan.launch[0].grid[1] = plan.launch[0].grid[2] = 1;
    plan.launch[0].threads = FMSA_CUDA_ACC_THREADS;
    return fmsa_cuda_enqueue_pass(st, &plan, &none, &q, 0, stream);
}

fmsa_status fmsa_cuda_run_copy_device(fmsa_cuda_state *st, void *dst, size_t dst_offset,
                                      const void *src, size_t src_offset, size_t bytes,
                                      fmsa_cu_stream stream) {
    fmsa_cu_result rc;
    FMSA_TRY(fmsa_cuda_push(st));
    rc = st->cu->cuMemcpyDtoDAsync((fmsa_cu_deviceptr)(uintptr_t)dst + dst_offset,
                                   (fmsa_cu_deviceptr)(uintptr_t)src + src_offset, bytes, stream);
    fmsa_cuda_pop(st);
    if (rc != FMSA_CU_SUCCESS) return fmsa_cuda_fail(st->cu, "cuMemcpyDtoDAsync", rc);
    return FMSA_SUCCESS;
}
