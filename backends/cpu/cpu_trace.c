/* FLASHMSA_CPU_TRACE (cpu_trace.h). */
#include "backends/cpu/cpu_trace.h"

#include <string.h>
#include <time.h>

#include "backends/cpu/cpu_internal.h"
#include "common/error.h"

double fmsa_cpu_wall_seconds(void) {
#ifdef _OPENMP
    return omp_get_wtime();
#else
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
#endif /* _OPENMP */
}

void fmsa_cpu_trace_begin(fmsa_cpu_trace *tr, int on, int nthreads) {
    tr->on = on;
    tr->nthreads = nthreads;
    tr->busy = NULL;
    if (tr->on) {
        const size_t bytes = (size_t)nthreads * FMSA_CPU_TRACE_STRIDE * sizeof(double);
        tr->busy = (double *)fmsa_cpu_aligned_alloc(bytes);
        if (tr->busy) memset(tr->busy, 0, bytes);
        tr->on = tr->busy != NULL;
    }
    tr->t0 = tr->on ? fmsa_cpu_wall_seconds() : 0.0;
}

double fmsa_cpu_trace_now(const fmsa_cpu_trace *tr) {
    return tr && tr->on ? fmsa_cpu_wall_seconds() : 0.0;
}

void fmsa_cpu_trace_add(fmsa_cpu_trace *tr, int phase, double since) {
    const int t = fmsa_cpu_thread_num();
    if (tr && tr->on && t < tr->nthreads)
        tr->busy[(int64_t)t * FMSA_CPU_TRACE_STRIDE + phase] += fmsa_cpu_wall_seconds() - since;
}

void fmsa_cpu_trace_lap(fmsa_cpu_trace *tr, int phase, double *since) {
    fmsa_cpu_trace_add(tr, phase, *since);
    *since = fmsa_cpu_trace_now(tr);
}

void fmsa_cpu_trace_end(fmsa_cpu_trace *tr, const char *what, int64_t chunks) {
    double sum[FMSA_CPU_TRACE_PHASES] = {0}, max[FMSA_CPU_TRACE_PHASES] = {0};
    double most = 0.0, least = -1.0, wall;
    if (!tr->on) return;
    wall = fmsa_cpu_wall_seconds() - tr->t0;
    for (int t = 0; t < tr->nthreads; ++t) {
        double total = 0.0;
        for (int ph = 0; ph < FMSA_CPU_TRACE_PHASES; ++ph) {
            const double b = tr->busy[t * FMSA_CPU_TRACE_STRIDE + ph];
            sum[ph] += b;
            if (b > max[ph]) max[ph] = b;
            if (ph <= FMSA_CPU_TRACE_STAGE_B) total += b; /* the rest lie inside stage a */
        }
        if (total > most) most = total;
        if (least < 0.0 || total < least) least = total;
    }
    fmsa_log(FMSA_LOG_DEBUG,
             "cpu trace %s: %.3f ms wall, %d threads, %lld chunks; busy ms (sum / busiest "
             "thread): pack %.3f / %.3f, stage a %.3f / %.3f, stage b %.3f / %.3f; thread "
             "totals %.3f .. %.3f; within stage a (sums): S %.3f, softmax %.3f, P.V %.3f, "
             "store %.3f",
             what, 1e3 * wall, tr->nthreads, (long long)chunks, 1e3 * sum[0], 1e3 * max[0],
             1e3 * sum[1], 1e3 * max[1], 1e3 * sum[2], 1e3 * max[2], 1e3 * least, 1e3 * most,
             1e3 * sum[3], 1e3 * sum[4], 1e3 * sum[5], 1e3 * sum[6]);
    fmsa_cpu_aligned_free(tr->busy);
    tr->busy = NULL;
    tr->on = 0;
}
