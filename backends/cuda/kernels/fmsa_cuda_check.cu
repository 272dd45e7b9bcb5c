/*
 * The device-side half of validation (include/flashmsa/flashmsa.h, "CUDA:
 * what is checked where").  Metadata the host cannot read without a copy --
 * cu_seqlens when max_seqlen_q/k are given, block tables, seqused_k -- is
 * checked here, in stream order before the attention kernels, which return at
 * entry while the status word is non-zero; fmsa_synchronize reports the bits.
 * The same rules as common/validate.c's host checks.
 */
#include "backends/cuda/cuda_params.h"

__device__ static void fmsa_cuda_flag(const fmsa_cuda_fwd_params &p, unsigned bit) {
    atomicOr(p.status, bit);
}

/* cu[0] == 0, non-decreasing, cu[batch] == total, every length <= max_len. */
__device__ static void fmsa_cuda_check_cu(const fmsa_cuda_fwd_params &p, const int *cu,
                                          long long stride, int total, int max_len, int b) {
    const int cur = cu[(long long)b * stride];
    if (b == 0) {
        if (cur != 0) fmsa_cuda_flag(p, FMSA_CUDA_STATUS_BAD_CU_SEQLENS);
        return;
    }
    const int prev = cu[(long long)(b - 1) * stride];
    if (cur < prev || cur - prev > max_len || (b == p.batch && cur != total))
        fmsa_cuda_flag(p, FMSA_CUDA_STATUS_BAD_CU_SEQLENS);
}

extern "C" __global__ void fmsa_cuda_check_metadata(const fmsa_cuda_fwd_params p) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (p.is_varlen) {
        for (long long b = first; b <= p.batch; b += stride) {
            fmsa_cuda_check_cu(p, p.cu_seqlens_q, p.cu_q_s, p.total_q, p.seqlen_q, (int)b);
            fmsa_cuda_check_cu(p, p.cu_seqlens_k, p.cu_k_s, p.total_k, p.seqlen_k, (int)b);
        }
    }
    if (p.is_paged) {
        /* one item per (sequence, page slot); only the pages holding the
         * sequence's used keys must be valid, as on the host */
        const long long cap = (long long)p.max_pages * p.page_size;
        const long long items = (long long)p.batch * p.max_pages;
        for (long long i = first; i < items; i += stride) {
            const int b = (int)(i / p.max_pages), pg = (int)(i % p.max_pages);
            long long used = cap;
            if (p.has_seqused_k) {
                used = p.seqused_k[(long long)b * p.su_s];
                if (used < 0 || used > cap) {
                    if (pg == 0) fmsa_cuda_flag(p, FMSA_CUDA_STATUS_BAD_SEQUSED);
                    continue;
                }
            }
            if ((long long)pg * p.page_size >= used) continue;
            const int page = p.block_table[(long long)b * p.bt_sb + (long long)pg * p.bt_sp];
            if (page < 0 || page >= p.num_pages) fmsa_cuda_flag(p, FMSA_CUDA_STATUS_BAD_PAGE);
        }
    }
}
