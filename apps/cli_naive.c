/*
 * Naive same-precision attention, one row at a time (see cli_naive.h).
 */
#include "apps/cli_naive.h"

#include <math.h>
#include <stdlib.h>

#include "common/fmsa_half.h"
#include "common/fmsa_score.h"

float cli_naive_round(fmsa_dtype dtype, float x) {
    switch (dtype) {
    case FMSA_DTYPE_F16: return fmsa_f16_to_f32(fmsa_f32_to_f16(x));
    case FMSA_DTYPE_BF16: return fmsa_bf16_to_f32(fmsa_f32_to_bf16(x));
    default: return x;
    }
}

int cli_naive_row_alloc(const fmsa_problem *p, cli_naive_row *r) {
    size_t sk = (size_t)(p->seqlen_k > 0 ? p->seqlen_k : 1);
    size_t d = (size_t)p->head_dim;
    r->s = malloc(sizeof(float) * (2 * sk + 2 * d));
    if (r->s == NULL) return -1;
    r->p = r->s + sk;
    r->o = r->p + sk;
    r->dq = r->o + d;
    r->lse = 0.0f;
    r->any = 0;
    return 0;
}

void cli_naive_row_free(cli_naive_row *r) {
    free(r->s);
    r->s = r->p = r->o = r->dq = NULL;
}

static float cli_load(const fmsa_view4 *v, fmsa_dtype dt, int64_t off) {
    return fmsa_load_f32(fmsa_view4_host(v), (int)dt, off);
}

void cli_naive_forward_row(const fmsa_problem *p, int64_t b, int64_t h, int64_t i,
                           cli_naive_row *r) {
    const fmsa_seq seq = fmsa_problem_seq(p, b);
    const fmsa_dtype dt = p->dtype;
    const int64_t D = p->head_dim, hk = fmsa_problem_kv_head(p, h);
    const int64_t qoff = fmsa_problem_q_offset(&p->q, &seq, i, h);
    float m = -INFINITY, l = 0.0f;
    int64_t j, d;

    r->any = 0;
    for (j = 0; j < seq.sk; j++) {
        int64_t koff;
        float dot = 0.0f, s;
        r->p[j] = 0.0f;
        if (!fmsa_window_visible(i, j, seq.sq, seq.sk, p->window_left, p->window_right)) {
            r->s[j] = -INFINITY;
            continue;
        }
        koff = fmsa_problem_k_offset(p, &p->k, &seq, b, j, hk);
        for (d = 0; d < D; d++) dot += cli_load(&p->q, dt, qoff + d) * cli_load(&p->k, dt, koff + d);
        s = cli_naive_round(dt, dot * p->softmax_scale);
        if (p->softcap > 0.0f) s = cli_naive_round(dt, p->softcap * tanhf(s / p->softcap));
        r->s[j] = s;
        if (s > m) m = s;
        r->any = 1;
    }
    for (d = 0; d < D; d++) r->o[d] = 0.0f;
    if (!r->any) {
        r->lse = -INFINITY;
        return;
    }
    for (j = 0; j < seq.sk; j++) {
        if (r->s[j] == -INFINITY) continue;
        r->p[j] = expf(r->s[j] - m);
        l += r->p[j];
    }
    for (j = 0; j < seq.sk; j++) {
        int64_t voff;
        if (r->s[j] == -INFINITY) continue;
        r->p[j] = cli_naive_round(dt, r->p[j] / l);
        voff = fmsa_problem_k_offset(p, &p->v, &seq, b, j, hk);
        for (d = 0; d < D; d++) r->o[d] += r->p[j] * cli_load(&p->v, dt, voff + d);
    }
    for (d = 0; d < D; d++) r->o[d] = cli_naive_round(dt, r->o[d]);
    r->lse = m + logf(l);
}

void cli_naive_backward_row(const fmsa_problem *p, int64_t b, int64_t h, int64_t i,
                            cli_naive_row *r, float *dk, float *dv) {
    const fmsa_seq seq = fmsa_problem_seq(p, b);
    const fmsa_dtype dt = p->dtype;
    const int64_t D = p->head_dim, hk = fmsa_problem_kv_head(p, h);
    const int64_t qoff = fmsa_problem_q_offset(&p->q, &seq, i, h);
    const int64_t dooff = fmsa_problem_q_offset(&p->dout, &seq, i, h);
    float rowsum = 0.0f;
    int64_t j, d;

    for (d = 0; d < D; d++) r->dq[d] = 0.0f;
    if (!r->any) return;
    /* D_i = rowsum(dO * O), the FlashAttention-2 backward preprocess term */
    for (d = 0; d < D; d++) rowsum += cli_load(&p->dout, dt, dooff + d) * r->o[d];
    for (j = 0; j < seq.sk; j++) {
        int64_t koff, voff;
        float dp = 0.0f, ds;
        if (r->s[j] == -INFINITY) continue;
        koff = fmsa_problem_k_offset(p, &p->k, &seq, b, j, hk);
        voff = fmsa_problem_k_offset(p, &p->v, &seq, b, j, hk);
        for (d = 0; d < D; d++) dp += cli_load(&p->dout, dt, dooff + d) * cli_load(&p->v, dt, voff + d);
        dp = cli_naive_round(dt, dp);
        ds = cli_naive_round(dt, r->p[j] * (dp - rowsum));
        if (p->softcap > 0.0f)
            ds = cli_naive_round(dt, ds * fmsa_softcap_grad(r->s[j], p->softcap));
        for (d = 0; d < D; d++) r->dq[d] += ds * cli_load(&p->k, dt, koff + d);
        if (dk != NULL) {
            for (d = 0; d < D; d++) {
                dk[j * D + d] += p->softmax_scale * ds * cli_load(&p->q, dt, qoff + d);
                dv[j * D + d] += r->p[j] * cli_load(&p->dout, dt, dooff + d);
            }
        }
    }
    for (d = 0; d < D; d++) r->dq[d] = cli_naive_round(dt, p->softmax_scale * r->dq[d]);
}
