/* One refusal message per missing feature (feature_gate.h). */
#include "common/feature_gate.h"

#include "common/error.h"

fmsa_status fmsa_problem_require(const fmsa_problem *p, const char *backend, unsigned have) {
    if (p->has_sinks && !(have & FMSA_FEATURE_SINKS))
        return fmsa_fail(FMSA_ERR_NOT_SUPPORTED,
                         "%s: attention sinks (desc.sinks) are not supported by this backend",
                         backend);
    if (p->has_dlse && !(have & FMSA_FEATURE_DLSE))
        return fmsa_fail(FMSA_ERR_NOT_SUPPORTED,
                         "%s: the lse gradient (dlse) is not supported by this backend", backend);
    if (p->head_dim_v != p->head_dim && !(have & FMSA_FEATURE_VALUE_DIM))
        return fmsa_fail(FMSA_ERR_NOT_SUPPORTED,
                         "%s: head_dim %lld with head_dim_v %lld: a value head dim of its own "
                         "is not supported by this backend",
                         backend, (long long)p->head_dim, (long long)p->head_dim_v);
    if ((p->head_dim > FMSA_HEAD_DIM_SMALL_MAX || p->head_dim_v > FMSA_HEAD_DIM_SMALL_MAX) &&
        !(have & FMSA_FEATURE_LARGE_DIM))
        return fmsa_fail(FMSA_ERR_NOT_SUPPORTED,
                         "%s: head_dim %lld / head_dim_v %lld: this backend runs head dims up "
                         "to %d",
                         backend, (long long)p->head_dim, (long long)p->head_dim_v,
                         FMSA_HEAD_DIM_SMALL_MAX);
    return FMSA_SUCCESS;
}
