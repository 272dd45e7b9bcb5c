/*
 * Both OpenCL kernel families' adapters to common/fmsa_seq.h, which holds the
 * rules.  The host (ocl_args.c) passes each view as a long4 (element offset,
 * batch, seq and head strides), cu_seqlens as cv = (q offset, q stride,
 * k offset, k stride), seqused_k as uv = (offset, stride), the block table as
 * bv = (offset, batch stride, page stride, page size) and dims = (seqlen_q,
 * seqlen_k, Hq, group); these turn that packing into the header's arguments.
 * The switches are -D constants in the generic kernels and run-time flags in
 * the CPU-device ones; either way a branch not taken never reads its pointer.
 */

/* Sequence b of the call. */
inline fmsa_seq fmsa_ocl_seq(long b, long4 dims, int varlen, int paged, int seqused,
                             __global const int *cuq, __global const int *cuk, long4 cv,
                             __global const int *sused, long2 uv) {
    return fmsa_seq_resolve(b, varlen, paged, seqused, dims.x, dims.y, cuq + cv.x, cv.y,
                            cuk + cv.z, cv.w, sused + uv.x, uv.y);
}

/* Element offset of key row j of kv head hk in the k/v view kv. */
inline long fmsa_ocl_kv_row(long4 kv, const fmsa_seq *s, int paged, long b, long j, long hk,
                            __global const int *bt, long4 bv) {
    return kv.x + fmsa_seq_k_offset(s, b, j, hk, kv.y, kv.z, kv.w, paged, bt + bv.x, bv.y, bv.z,
                                    bv.w);
}

/* Element offset of query row i of head h in the q-shaped view qv. */
inline long fmsa_ocl_q_row(long4 qv, const fmsa_seq *s, long i, long h) {
    return qv.x + fmsa_seq_q_offset(s, i, h, qv.y, qv.z, qv.w);
}

/* Element offset of query row i's lse in lv = (offset, batch, head, row strides). */
inline long fmsa_ocl_lse_row(long4 lv, const fmsa_seq *s, long i, long h) {
    return lv.x + fmsa_seq_q_offset(s, i, h, lv.y, lv.w, lv.z);
}
