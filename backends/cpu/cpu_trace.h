/*
 * FLASHMSA_CPU_TRACE=1: a developer's view of where one CPU pass spends its
 * time, logged at debug level (FLASHMSA_LOG=debug) when the pass ends: wall
 * time, and per phase (packing panels, each main stage) the busy time summed
 * over threads and that of the busiest thread, plus the least busy thread's
 * total.  Busy time is measured per work item, so barrier waits count as
 * idle: wall - busiest total is time lost to imbalance or barriers.  Off
 * (read once per context, cpu_options.c) unless set.
 */
#ifndef FMSA_CPU_TRACE_H
#define FMSA_CPU_TRACE_H

#include <stdint.h>

/// Phases a pass reports (unused ones print as 0).  The forward's stage a
/// (its work items) is also split: the bf16-product forward times its S
/// products, softmax rows, P·V products and output stores inside it.
enum {
    FMSA_CPU_TRACE_PACK,
    FMSA_CPU_TRACE_STAGE_A,
    FMSA_CPU_TRACE_STAGE_B,
    FMSA_CPU_TRACE_S,
    FMSA_CPU_TRACE_SOFTMAX,
    FMSA_CPU_TRACE_PV,
    FMSA_CPU_TRACE_STORE,
    FMSA_CPU_TRACE_PHASES,
    /// doubles per thread in the busy table: one cache line, so the threads'
    /// counters never share one (the trace must not slow what it measures)
    FMSA_CPU_TRACE_STRIDE = 8
};

typedef struct fmsa_cpu_trace {
    int on;          ///< FLASHMSA_CPU_TRACE was set when the context was created
    int nthreads;    ///< threads the busy table has rows for
    double t0;       ///< wall clock at the start
    double *busy;    ///< [nthreads][FMSA_CPU_TRACE_STRIDE] seconds (NULL when off)
} fmsa_cpu_trace;

/// Wall clock in seconds (omp_get_wtime, else timespec_get): the CPU
/// backend's one clock, for the trace and the peak probe (cpu_peak.c).
double fmsa_cpu_wall_seconds(void);

/// Starts the trace of one pass (on: the context's FLASHMSA_CPU_TRACE option;
/// allocation failure turns it off).
void fmsa_cpu_trace_begin(fmsa_cpu_trace *tr, int on, int nthreads);
/// Wall clock in seconds (0 when tr is NULL or off: every call below accepts both).
double fmsa_cpu_trace_now(const fmsa_cpu_trace *tr);
/// Adds the time since `since` (from fmsa_cpu_trace_now) to this thread's phase.
void fmsa_cpu_trace_add(fmsa_cpu_trace *tr, int phase, double since);
/// fmsa_cpu_trace_add, then *since = now: consecutive phases of one thread.
void fmsa_cpu_trace_lap(fmsa_cpu_trace *tr, int phase, double *since);
/// Logs the pass's summary (`what`: e.g. "forward", chunks: slot chunks run) and frees.
void fmsa_cpu_trace_end(fmsa_cpu_trace *tr, const char *what, int64_t chunks);

#endif /* FMSA_CPU_TRACE_H */
