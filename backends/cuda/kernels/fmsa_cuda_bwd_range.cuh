/*
 * The query tiles a key range of the backward meets, for kernels that share
 * no file with fmsa_cuda_bwd.cu (its fmsa_bwd_mrange is the same rule; that
 * file is left as it is so that its machine code stays unchanged).
 */
#ifndef FMSA_CUDA_BWD_RANGE_CUH
#define FMSA_CUDA_BWD_RANGE_CUH

/// Query tiles [*mb, *me) of bm rows whose rows can see keys [n0, n1) of a
/// sequence of sq queries and sk keys (bottom-right aligned; window bounds
/// wl / wr, -1 = unlimited; causal is wr = 0).
static __device__ __forceinline__ void fmsa_bwd_tile_range(long long n0, long long n1,
                                                           long long sq, long long sk,
                                                           long long wl, long long wr, int bm,
                                                           int *mb, int *me) {
    const long long off = sk - sq;
    long long ilo = 0, ihi = sq - 1;
    if (wr >= 0 && n0 - off - wr > ilo) ilo = n0 - off - wr;
    if (wl >= 0 && (n1 - 1) - off + wl < ihi) ihi = (n1 - 1) - off + wl;
    if (n1 <= n0 || ilo > ihi) {
        *mb = *me = 0;
        return;
    }
    *mb = (int)(ilo / bm);
    *me = (int)(ihi / bm) + 1;
}

#endif /* FMSA_CUDA_BWD_RANGE_CUH */
