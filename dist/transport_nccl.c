/*
 * The NCCL and RCCL transports (flashmsa_dist.h): libnccl.so.2 / librccl.so.1
 * loaded with dlopen at the first wrap, so libflashmsa links neither and runs
 * where neither is installed.  The few types and constants used are declared
 * here from the documented API (ncclResult_t, ncclDataType_t, ncclRedOp_t
 * are C enums; ncclComm_t and the stream are pointers), so no NCCL header is
 * needed to build.  RCCL has the same API with hipStream_t; this file is
 * ISA-free host C and serves both.
 *
 * Exchanges are ncclSend to rank + 1 and ncclRecv from rank - 1 in one
 * ncclGroupStart/End on a communication stream of the transport's own, so
 * they run while the ring's passes run on the context's default stream (the
 * legacy stream, NULL): exchange_start records an event on the default stream
 * (everything enqueued so far, the writes of the send buffer and the last
 * reads of the receive buffer included) that the comm stream waits for, then
 * posts the group there and records a second event; exchange_wait makes the
 * default stream wait for that one.  Neither waits on the host.  The comm
 * stream is non-blocking (the legacy stream would otherwise serialise with
 * it); streams and events come from the vendor runtime already in the
 * process (libcudart / libamdhip64: the caller's NCCL program has it), and
 * where none loads the exchanges fall back to the default stream (correct,
 * without overlap; logged at INFO).  The all-reduce (host floats: the ring's
 * verdict and dsink) goes through a small device buffer of the context and
 * waits.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "dist/transport.h"

#ifndef _WIN32
#include <dlfcn.h>
#include <pthread.h>
#endif

typedef int nccl_result;     /* ncclResult_t: ncclSuccess = 0 */
typedef void *nccl_comm_t;   /* ncclComm_t */
enum { NCCL_UINT8 = 1, NCCL_FLOAT32 = 7 }; /* ncclDataType_t: ncclUint8, ncclFloat32 */
enum { NCCL_SUM = 0 };                     /* ncclRedOp_t: ncclSum */

/// The entry points the transport calls, resolved from one library.
typedef struct nccl_api {
    nccl_result (*group_start)(void);
    nccl_result (*group_end)(void);
    nccl_result (*send)(const void *, size_t, int, int, nccl_comm_t, void *);
    nccl_result (*recv)(void *, size_t, int, int, nccl_comm_t, void *);
    nccl_result (*all_reduce)(const void *, void *, size_t, int, int, nccl_comm_t, void *);
    nccl_result (*count)(nccl_comm_t, int *);
    nccl_result (*user_rank)(nccl_comm_t, int *);
    const char *(*error_string)(nccl_result);
    int loaded;      ///< every entry resolved
    char why[160];   ///< why not, otherwise
} nccl_api;

/// Streams and events of the vendor runtime (CUDA runtime / HIP: the same
/// shapes and flag values), for the communication stream.
typedef struct nccl_rt {
    int (*stream_create)(void **, unsigned);        ///< cudaStreamCreateWithFlags
    int (*stream_destroy)(void *);                  ///< cudaStreamDestroy
    int (*event_create)(void **, unsigned);         ///< cudaEventCreateWithFlags
    int (*event_destroy)(void *);                   ///< cudaEventDestroy
    int (*event_record)(void *, void *);            ///< cudaEventRecord(event, stream)
    int (*stream_wait)(void *, void *, unsigned);   ///< cudaStreamWaitEvent(stream, event, 0)
    int loaded;
    const char *soname; ///< the one that loaded
} nccl_rt;

enum { RT_STREAM_NON_BLOCKING = 1, RT_EVENT_DISABLE_TIMING = 2 }; /* cuda/hip: same values */

/// Which library: NCCL (0) or RCCL (1).
typedef struct nccl_lib {
    const char *label;            ///< "nccl", "rccl": messages and the transport name
    const char *const *names;     ///< sonames to try, in order
    const char *const *rt_names;  ///< the vendor runtime's sonames
    const char *const *rt_syms;   ///< its six entry points, in nccl_rt's order
    nccl_api api;
    nccl_rt rt;
#ifndef _WIN32
    pthread_once_t once;
#endif
} nccl_lib;

static const char *const nccl_names[] = {"libnccl.so.2", "libnccl.so", NULL};
static const char *const rccl_names[] = {"librccl.so.1", "librccl.so", NULL};
static const char *const cudart_names[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so",
                                           NULL};
static const char *const hip_names[] = {"libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so",
                                        NULL};
static const char *const cudart_syms[] = {"cudaStreamCreateWithFlags", "cudaStreamDestroy",
                                          "cudaEventCreateWithFlags",  "cudaEventDestroy",
                                          "cudaEventRecord",           "cudaStreamWaitEvent"};
static const char *const hip_syms[] = {"hipStreamCreateWithFlags", "hipStreamDestroy",
                                       "hipEventCreateWithFlags",  "hipEventDestroy",
                                       "hipEventRecord",           "hipStreamWaitEvent"};
static nccl_lib nccl_libs[2] = {
#ifndef _WIN32
    {"nccl", nccl_names, cudart_names, cudart_syms, {0}, {0}, PTHREAD_ONCE_INIT},
    {"rccl", rccl_names, hip_names, hip_syms, {0}, {0}, PTHREAD_ONCE_INIT},
#else
    {"nccl", nccl_names, cudart_names, cudart_syms, {0}, {0}},
    {"rccl", rccl_names, hip_names, hip_syms, {0}, {0}},
#endif
};

#ifndef _WIN32
static void nccl_load(nccl_lib *L) {
    void *lib = NULL;
    nccl_api *a = &L->api;
    for (int i = 0; L->names[i] && !lib; ++i) lib = dlopen(L->names[i], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(a->why, sizeof a->why, "%s not found (put its folder on LD_LIBRARY_PATH)",
                 L->names[0]);
        return;
    }
#define NCCL_RESOLVE(field, symbol)                                                    \
    *(void **)(&a->field) = dlsym(lib, symbol);                                        \
    if (!a->field) {                                                                   \
        snprintf(a->why, sizeof a->why, "%s lacks %s (older than 2.7?)", L->names[0], symbol); \
        return;                                                                        \
    }
    NCCL_RESOLVE(group_start, "ncclGroupStart")
    NCCL_RESOLVE(group_end, "ncclGroupEnd")
    NCCL_RESOLVE(send, "ncclSend")
    NCCL_RESOLVE(recv, "ncclRecv")
    NCCL_RESOLVE(all_reduce, "ncclAllReduce")
    NCCL_RESOLVE(count, "ncclCommCount")
    NCCL_RESOLVE(user_rank, "ncclCommUserRank")
    NCCL_RESOLVE(error_string, "ncclGetErrorString")
#undef NCCL_RESOLVE
    a->loaded = 1; /* kept loaded: communicators made through it outlive any handle */
    /* the runtime: the copy the program already holds first (RTLD_NOLOAD), else any */
    for (int pass = 0; pass < 2 && !L->rt.loaded; ++pass)
        for (int i = 0; L->rt_names[i] && !L->rt.loaded; ++i) {
            void *rt = dlopen(L->rt_names[i], RTLD_NOW | RTLD_LOCAL | (pass ? 0 : RTLD_NOLOAD));
            void **f[6] = {(void **)&L->rt.stream_create, (void **)&L->rt.stream_destroy,
                           (void **)&L->rt.event_create,  (void **)&L->rt.event_destroy,
                           (void **)&L->rt.event_record,  (void **)&L->rt.stream_wait};
            int ok = rt != NULL;
            for (int k = 0; ok && k < 6; ++k) ok = (*f[k] = dlsym(rt, L->rt_syms[k])) != NULL;
            if (ok) {
                L->rt.loaded = 1;
                L->rt.soname = L->rt_names[i];
            }
        }
}
static void nccl_load_0(void) { nccl_load(&nccl_libs[0]); }
static void nccl_load_1(void) { nccl_load(&nccl_libs[1]); }
#endif

static const nccl_api *nccl_get(int which) {
#ifndef _WIN32
    pthread_once(&nccl_libs[which].once, which ? nccl_load_1 : nccl_load_0);
#else
    snprintf(nccl_libs[which].api.why, sizeof nccl_libs[which].api.why,
             "not built on Windows");
#endif
    return nccl_libs[which].api.loaded ? &nccl_libs[which].api : NULL;
}

/// One rank's state.
typedef struct nccl_rank {
    const nccl_api *api;
    const nccl_rt *rt; ///< NULL: exchanges on the default stream
    const char *label;
    nccl_comm_t comm;
    fmsa_context *ctx;  ///< for the all-reduce's device buffer
    void *cs;           ///< the communication stream
    void *posted, *done; ///< events: default stream's work so far; the exchange's end
    int rank, size;
} nccl_rank;

static fmsa_status rt_check(const nccl_rank *me, int rc, const char *call) {
    if (rc == 0) return FMSA_SUCCESS;
    return fmsa_fail(FMSA_ERR_DEVICE, "ring: %s: %s (%s) failed on rank %d with %d", me->label,
                     call, me->rt ? "runtime" : "?", me->rank, rc);
}

static fmsa_status nccl_check(const nccl_rank *me, nccl_result rc, const char *call) {
    if (rc == 0) return FMSA_SUCCESS;
    return fmsa_fail(FMSA_ERR_DEVICE, "ring: %s: %s failed on rank %d: %s (%d)", me->label, call,
                     me->rank, me->api->error_string ? me->api->error_string(rc) : "?", rc);
}

static fmsa_status nccl_start(void *impl, const void *send, void *recv, size_t bytes) {
    nccl_rank *me = (nccl_rank *)impl;
    const int next = (me->rank + 1) % me->size, prev = (me->rank + me->size - 1) % me->size;
    void *stream = me->cs; /* NULL without a runtime: the default stream */
    fmsa_status st;
    if (me->cs) { /* the comm stream starts after everything the default stream holds now */
        FMSA_TRY(rt_check(me, me->rt->event_record(me->posted, NULL), "EventRecord"));
        FMSA_TRY(rt_check(me, me->rt->stream_wait(me->cs, me->posted, 0), "StreamWaitEvent"));
    }
    FMSA_TRY(nccl_check(me, me->api->group_start(), "ncclGroupStart"));
    st = nccl_check(me, me->api->send(send, bytes, NCCL_UINT8, next, me->comm, stream),
                    "ncclSend");
    if (st == FMSA_SUCCESS)
        st = nccl_check(me, me->api->recv(recv, bytes, NCCL_UINT8, prev, me->comm, stream),
                        "ncclRecv");
    {
        const fmsa_status ge = nccl_check(me, me->api->group_end(), "ncclGroupEnd");
        if (st == FMSA_SUCCESS) st = ge;
    }
    if (st == FMSA_SUCCESS && me->cs)
        st = rt_check(me, me->rt->event_record(me->done, me->cs), "EventRecord");
    return st;
}

static fmsa_status nccl_wait(void *impl) {
    nccl_rank *me = (nccl_rank *)impl;
    if (!me->cs) return FMSA_SUCCESS; /* one stream: its order is the wait */
    /* what the default stream enqueues from now on runs after the exchange */
    return rt_check(me, me->rt->stream_wait(NULL, me->done, 0), "StreamWaitEvent");
}

static fmsa_status nccl_allreduce(void *impl, float *buf, size_t n) {
    nccl_rank *me = (nccl_rank *)impl;
    void *dev = NULL;
    fmsa_status st;
    if (n == 0) return FMSA_SUCCESS;
    FMSA_TRY(fmsa_malloc(me->ctx, n * sizeof *buf, &dev));
    st = fmsa_copy_to_device(me->ctx, dev, 0, buf, n * sizeof *buf);
    if (st == FMSA_SUCCESS)
        st = nccl_check(me, me->api->all_reduce(dev, dev, n, NCCL_FLOAT32, NCCL_SUM, me->comm, NULL),
                        "ncclAllReduce");
    if (st == FMSA_SUCCESS) st = fmsa_copy_to_host(me->ctx, buf, dev, 0, n * sizeof *buf);
    fmsa_free(me->ctx, dev);
    return st;
}

static void nccl_destroy(void *impl) { /* the communicator stays the caller's */
    nccl_rank *me = (nccl_rank *)impl;
    if (me->rt) {
        if (me->posted) me->rt->event_destroy(me->posted);
        if (me->done) me->rt->event_destroy(me->done);
        if (me->cs) me->rt->stream_destroy(me->cs);
    }
    free(me);
}

static const fmsa_dist_transport nccl_ops = {
    .name = "nccl",
    .exchange_start = nccl_start,
    .exchange_wait = nccl_wait,
    .allreduce_sum_f32 = nccl_allreduce,
    .destroy = nccl_destroy,
};
static const fmsa_dist_transport rccl_ops = {
    .name = "rccl",
    .exchange_start = nccl_start,
    .exchange_wait = nccl_wait,
    .allreduce_sum_f32 = nccl_allreduce,
    .destroy = nccl_destroy,
};

static fmsa_status nccl_wrap(int which, fmsa_backend want, void *ncomm, fmsa_context *ctx,
                             fmsa_dist_comm **comm) {
    const nccl_api *api;
    nccl_rank *me;
    fmsa_device_info info;
    fmsa_status st;
    const char *label = nccl_libs[which].label;
    fmsa_clear_error();
    if (!comm) return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "comm is NULL");
    *comm = NULL;
    if (!ncomm || !ctx)
        return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "%s is NULL", !ncomm ? "the communicator" : "ctx");
    FMSA_TRY(fmsa_context_device(ctx, &info));
    if (info.backend != want)
        return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "%s: ctx is a %s context; %s moves %s memory",
                         label, fmsa_backend_name(info.backend), label, fmsa_backend_name(want));
    if (!(api = nccl_get(which)))
        return fmsa_fail(FMSA_ERR_BACKEND_UNAVAILABLE, "%s: %s", label, nccl_libs[which].api.why);
    me = (nccl_rank *)calloc(1, sizeof *me);
    if (!me) return fmsa_fail(FMSA_ERR_OUT_OF_MEMORY, "%s: rank state", label);
    me->api = api;
    me->label = label;
    me->comm = ncomm;
    me->ctx = ctx;
    st = nccl_check(me, api->user_rank(ncomm, &me->rank), "ncclCommUserRank");
    if (st == FMSA_SUCCESS) st = nccl_check(me, api->count(ncomm, &me->size), "ncclCommCount");
    if (st == FMSA_SUCCESS && nccl_libs[which].rt.loaded) {
        const nccl_rt *rt = &nccl_libs[which].rt;
        me->rt = rt;
        if (rt->stream_create(&me->cs, RT_STREAM_NON_BLOCKING) != 0 ||
            rt->event_create(&me->posted, RT_EVENT_DISABLE_TIMING) != 0 ||
            rt->event_create(&me->done, RT_EVENT_DISABLE_TIMING) != 0) {
            /* no stream of our own: the default stream's order still holds */
            if (me->posted) rt->event_destroy(me->posted);
            if (me->cs) rt->stream_destroy(me->cs);
            me->cs = me->posted = me->done = NULL;
        }
    }
    if (st == FMSA_SUCCESS)
        fmsa_log(FMSA_LOG_INFO, "ring: %s transport, rank %d of %d: exchanges on %s", label,
                 me->rank, me->size,
                 me->cs ? "a communication stream of their own (overlapping the passes)"
                        : "the context's default stream (no vendor runtime loaded: no overlap)");
    if (st == FMSA_SUCCESS)
        st = fmsa_dist_comm_create(which ? &rccl_ops : &nccl_ops, me, me->rank, me->size, comm);
    if (st != FMSA_SUCCESS) nccl_destroy(me);
    return st;
}

fmsa_status fmsa_dist_comm_from_nccl(void *nccl_comm, fmsa_context *ctx, fmsa_dist_comm **comm) {
    return nccl_wrap(0, FMSA_BACKEND_CUDA, nccl_comm, ctx, comm);
}

fmsa_status fmsa_dist_comm_from_rccl(void *rccl_comm, fmsa_context *ctx, fmsa_dist_comm **comm) {
    return nccl_wrap(1, FMSA_BACKEND_HIP, rccl_comm, ctx, comm);
}
