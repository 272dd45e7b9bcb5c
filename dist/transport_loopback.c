/*
 * In-process loopback: P ranks as P threads of one process.  Rank r's
 * exchange posts its send buffer in the mailbox of rank r + 1; waiting copies
 * the message posted in its own mailbox into recv, marks it taken, then waits
 * until its own posted message was taken, so the send buffer is free again.
 * A sequence number per mailbox keeps consecutive exchanges apart.  The
 * all-reduce is a generation-counted barrier around a shared sum.
 *
 * The copy is the backend's device-to-device copy on the receiving rank's
 * context (a memcpy on the CPU), enqueued on its default stream without a
 * wait.  That is ordered without events because every rank's context on a
 * device shares one queue in issue order (CUDA: the primary context's legacy
 * stream): the sender enqueued the writes of its buffer before posting it,
 * the receiver enqueues the copy after seeing the post, and the sender
 * enqueues its next write of the buffer only after the copy was taken.  So
 * the loopback holds every rank on one device (GPU) or on the host.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/accumulate.h"
#include "common/error.h"
#include "dist/transport.h"

typedef struct loop_mailbox {
    const void *data;   ///< the posted send buffer (NULL: empty)
    size_t bytes;       ///< its size
    unsigned long seq;  ///< messages posted so far
    unsigned long took; ///< messages taken so far
} loop_mailbox;

typedef struct loop_group {
    int ranks, alive;          ///< size; handles not yet destroyed
    pthread_mutex_t mu;        ///< guards everything below
    pthread_cond_t cv;         ///< any change
    loop_mailbox *box;         ///< one per rank: messages for that rank
    float *sum;                ///< all-reduce accumulator
    size_t sum_n;              ///< its length
    int arrived;               ///< ranks in the current all-reduce
    unsigned long generation;  ///< completed all-reduces
    int readers;               ///< ranks still to read the finished sum
} loop_group;

typedef struct loop_rank {
    loop_group *g;
    int rank;
    fmsa_dist_comm *comm; ///< this rank's handle (its ctx is the ring pass's)
    void *recv;          ///< the pending exchange's receive buffer
    size_t bytes;        ///< its size
    unsigned long sent;  ///< seq of the message this rank posted last
} loop_rank;

static fmsa_status loop_start(void *impl, const void *send, void *recv, size_t bytes) {
    loop_rank *me = (loop_rank *)impl;
    loop_group *g = me->g;
    loop_mailbox *next = &g->box[(me->rank + 1) % g->ranks];
    pthread_mutex_lock(&g->mu);
    while (next->took != next->seq) pthread_cond_wait(&g->cv, &g->mu); /* previous one taken */
    next->data = send;
    next->bytes = bytes;
    me->sent = ++next->seq;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
    me->recv = recv;
    me->bytes = bytes;
    return FMSA_SUCCESS;
}

static fmsa_status loop_wait(void *impl) {
    loop_rank *me = (loop_rank *)impl;
    loop_group *g = me->g;
    loop_mailbox *mine = &g->box[me->rank], *next = &g->box[(me->rank + 1) % g->ranks];
    fmsa_status st = FMSA_SUCCESS;
    pthread_mutex_lock(&g->mu);
    while (mine->seq == mine->took) pthread_cond_wait(&g->cv, &g->mu);
    if (mine->bytes != me->bytes)
        st = fmsa_fail(FMSA_ERR_INVALID_ARGUMENT,
                       "ring: rank %d receives %zu bytes from rank %d, which sends %zu: the "
                       "ranks' shapes differ",
                       me->rank, me->bytes, (me->rank + g->ranks - 1) % g->ranks, mine->bytes);
    else if (me->bytes && me->comm->ctx)
        st = fmsa_copy_device(me->comm->ctx, me->recv, 0, mine->data, 0, me->bytes, NULL);
    else if (me->bytes)
        memcpy(me->recv, mine->data, me->bytes);
    mine->data = NULL;
    mine->took = mine->seq;
    pthread_cond_broadcast(&g->cv);
    while (next->took < me->sent) pthread_cond_wait(&g->cv, &g->mu); /* our send is free */
    pthread_mutex_unlock(&g->mu);
    return st;
}

static fmsa_status loop_allreduce(void *impl, float *buf, size_t n) {
    loop_rank *me = (loop_rank *)impl;
    loop_group *g = me->g;
    unsigned long gen;
    fmsa_status st = FMSA_SUCCESS;
    pthread_mutex_lock(&g->mu);
    while (g->readers > 0) pthread_cond_wait(&g->cv, &g->mu); /* the last sum is still read */
    gen = g->generation;
    if (g->arrived == 0) {
        float *s = (float *)realloc(g->sum, n ? n * sizeof *s : 1);
        if (!s) st = fmsa_fail(FMSA_ERR_OUT_OF_MEMORY, "ring: loopback all-reduce of %zu floats", n);
        else {
            g->sum = s;
            g->sum_n = n;
            memset(s, 0, n * sizeof *s);
        }
    }
    /* ranks add in arrival order; the order is fixed per rank only for P <= 2, so the
     * loopback sum, like MPI's, is not promised bitwise-repeatable */
    if (st == FMSA_SUCCESS && g->sum_n == n)
        for (size_t i = 0; i < n; ++i) g->sum[i] += buf[i];
    if (++g->arrived == g->ranks) {
        g->arrived = 0;
        g->readers = g->ranks;
        g->generation++;
        pthread_cond_broadcast(&g->cv);
    } else {
        while (g->generation == gen) pthread_cond_wait(&g->cv, &g->mu);
    }
    if (g->sum_n == n) memcpy(buf, g->sum, n * sizeof *buf);
    else if (st == FMSA_SUCCESS)
        st = fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "ring: all-reduce lengths differ between ranks");
    if (--g->readers == 0) pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
    return st;
}

static void loop_destroy(void *impl) {
    loop_rank *me = (loop_rank *)impl;
    loop_group *g = me->g;
    int last;
    pthread_mutex_lock(&g->mu);
    last = --g->alive == 0;
    pthread_mutex_unlock(&g->mu);
    free(me);
    if (!last) return;
    pthread_mutex_destroy(&g->mu);
    pthread_cond_destroy(&g->cv);
    free(g->box);
    free(g->sum);
    free(g);
}

static const fmsa_dist_transport loop_ops = {
    .name = "loopback",
    .exchange_start = loop_start,
    .exchange_wait = loop_wait,
    .allreduce_sum_f32 = loop_allreduce,
    .destroy = loop_destroy,
};

fmsa_status fmsa_transport_loopback_make(int ranks, fmsa_dist_comm **comms) {
    loop_group *g;
    int r;
    if (ranks < 1 || ranks > 4096)
        return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "ranks = %d: must be in [1, 4096]", ranks);
    g = (loop_group *)calloc(1, sizeof *g);
    if (!g) return fmsa_fail(FMSA_ERR_OUT_OF_MEMORY, "ring: loopback group");
    g->box = (loop_mailbox *)calloc((size_t)ranks, sizeof *g->box);
    if (!g->box) {
        free(g);
        return fmsa_fail(FMSA_ERR_OUT_OF_MEMORY, "ring: loopback mailboxes");
    }
    g->ranks = ranks;
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    for (r = 0; r < ranks; ++r) {
        fmsa_dist_comm *c = (fmsa_dist_comm *)calloc(1, sizeof *c);
        loop_rank *me = (loop_rank *)calloc(1, sizeof *me);
        if (!c || !me) {
            const int failed = r;
            free(c);
            free(me);
            if (r == 0) { /* nothing handed out yet: the group is ours to free */
                pthread_mutex_destroy(&g->mu);
                pthread_cond_destroy(&g->cv);
                free(g->box);
                free(g);
            }
            while (r-- > 0) fmsa_dist_comm_destroy(comms[r]); /* the last frees the group */
            return fmsa_fail(FMSA_ERR_OUT_OF_MEMORY, "ring: loopback rank %d", failed);
        }
        me->g = g;
        me->rank = r;
        me->comm = c;
        c->rank = r;
        c->size = ranks;
        c->ops = &loop_ops;
        c->impl = me;
        g->alive++;
        comms[r] = c;
    }
    return FMSA_SUCCESS;
}
