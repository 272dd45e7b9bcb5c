/*
 * fmsa_merge_states on host memory: one pass over the rows, the state
 * machine's merge (fmsa_softmax_merge_lse) per row, outputs converted to
 * their own dtype.  Each row reads both partials before it writes, so the
 * output may be either input (in place).
 */
#include "backends/cpu/cpu_internal.h"
#include "common/fmsa_half.h"
#include "common/fmsa_softmax.h"

static float cpu_merge_lse_at(const fmsa_viewn *v, int64_t b, int64_t h, int64_t i) {
    return ((const float *)fmsa_viewn_host(v))[b * v->s0 + h * v->s1 + i * v->s2];
}

fmsa_status fmsa_cpu_merge(void *state, const fmsa_merge_problem *mp, void *stream) {
    const int64_t rows = mp->batch * mp->seqlen * mp->heads, D = mp->head_dim_v;
    (void)state;
    (void)stream;
#if defined(_OPENMP)
#pragma omp parallel for schedule(static)
#endif /* defined(_OPENMP) */
    for (int64_t r = 0; r < rows; ++r) {
        const int64_t h = r % mp->heads, i = (r / mp->heads) % mp->seqlen,
                      b = r / (mp->heads * mp->seqlen);
        const int64_t ia = b * mp->o_a.sb + i * mp->o_a.ss + h * mp->o_a.sh,
                      ib = b * mp->o_b.sb + i * mp->o_b.ss + h * mp->o_b.sh,
                      io = b * mp->o.sb + i * mp->o.ss + h * mp->o.sh;
        const void *oa = fmsa_view4_host(&mp->o_a), *ob = fmsa_view4_host(&mp->o_b);
        void *oo = fmsa_view4_host(&mp->o);
        float wa, wb;
        const float lse = fmsa_softmax_merge_lse(cpu_merge_lse_at(&mp->lse_a, b, h, i),
                                                 cpu_merge_lse_at(&mp->lse_b, b, h, i), &wa, &wb);
        for (int64_t d = 0; d < D; ++d) {
            /* a weight-0 side is skipped, not multiplied: its row may hold anything */
            const float a = wa != 0.0f ? wa * fmsa_load_f32(oa, mp->dtype_a, ia + d) : 0.0f;
            const float c = wb != 0.0f ? wb * fmsa_load_f32(ob, mp->dtype_b, ib + d) : 0.0f;
            fmsa_store_f32(oo, mp->dtype_o, io + d, a + c);
        }
        ((float *)fmsa_viewn_host(&mp->lse))[b * mp->lse.s0 + h * mp->lse.s1 + i * mp->lse.s2] =
            lse;
    }
    return FMSA_SUCCESS;
}
