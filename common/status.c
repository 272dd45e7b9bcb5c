/*
 * Status strings, the thread-local last-error message and the log callback.
 * The library never prints: log lines go to the user's callback or nowhere.
 */
#include "common/error.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* 1 KiB holds the longest message we build (a field name, values and a
 * vendor error string); longer ones are truncated, never overflowed. */
static _Thread_local char fmsa_error_message[1024];

static fmsa_log_fn fmsa_log_callback;
static void *fmsa_log_user;
static int fmsa_log_threshold = FMSA_LOG_WARN;
static pthread_once_t fmsa_log_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t fmsa_log_mutex = PTHREAD_MUTEX_INITIALIZER;

const char *fmsa_status_string(fmsa_status status) {
    switch (status) {
    case FMSA_SUCCESS: return "FMSA_SUCCESS: success";
    case FMSA_ERR_INVALID_ARGUMENT: return "FMSA_ERR_INVALID_ARGUMENT: invalid argument";
    case FMSA_ERR_NOT_SUPPORTED: return "FMSA_ERR_NOT_SUPPORTED: not supported";
    case FMSA_ERR_OUT_OF_MEMORY: return "FMSA_ERR_OUT_OF_MEMORY: out of memory";
    case FMSA_ERR_BACKEND_UNAVAILABLE: return "FMSA_ERR_BACKEND_UNAVAILABLE: backend unavailable";
    case FMSA_ERR_DEVICE: return "FMSA_ERR_DEVICE: device error";
    case FMSA_ERR_INSUFFICIENT_WORKSPACE: return "FMSA_ERR_INSUFFICIENT_WORKSPACE: insufficient workspace";
    case FMSA_ERR_INTERNAL: return "FMSA_ERR_INTERNAL: internal error";
    }
    return "unknown fmsa_status";
}

const char *fmsa_last_error(void) { return fmsa_error_message; }

void fmsa_clear_error(void) { fmsa_error_message[0] = '\0'; }

/* FLASHMSA_LOG is read once, lazily, so that setting it before the first
 * call is enough and no constructor runs at load time. */
static void fmsa_log_init_from_env(void) {
    const char *env = getenv("FLASHMSA_LOG");
    if (!env) return;
    if (!strcmp(env, "error")) fmsa_log_threshold = FMSA_LOG_ERROR;
    else if (!strcmp(env, "warn")) fmsa_log_threshold = FMSA_LOG_WARN;
    else if (!strcmp(env, "info")) fmsa_log_threshold = FMSA_LOG_INFO;
    else if (!strcmp(env, "debug")) fmsa_log_threshold = FMSA_LOG_DEBUG;
}

void fmsa_set_log_callback(fmsa_log_fn fn, void *user) {
    pthread_once(&fmsa_log_once, fmsa_log_init_from_env);
    pthread_mutex_lock(&fmsa_log_mutex);
    fmsa_log_callback = fn;
    fmsa_log_user = user;
    pthread_mutex_unlock(&fmsa_log_mutex);
}

void fmsa_set_log_level(fmsa_log_level level) {
    pthread_once(&fmsa_log_once, fmsa_log_init_from_env);
    pthread_mutex_lock(&fmsa_log_mutex);
    fmsa_log_threshold = (int)level;
    pthread_mutex_unlock(&fmsa_log_mutex);
}

static void fmsa_vlog(fmsa_log_level level, const char *fmt, va_list ap) {
    char line[1024];
    fmsa_log_fn fn;
    void *user;
    int threshold;
    pthread_once(&fmsa_log_once, fmsa_log_init_from_env);
    pthread_mutex_lock(&fmsa_log_mutex);
    fn = fmsa_log_callback;
    user = fmsa_log_user;
    threshold = fmsa_log_threshold;
    pthread_mutex_unlock(&fmsa_log_mutex);
    if (!fn || (int)level > threshold) return;
    vsnprintf(line, sizeof line, fmt, ap);
    fn(level, line, user);
}

void fmsa_log(fmsa_log_level level, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fmsa_vlog(level, fmt, ap);
    va_end(ap);
}

fmsa_status fmsa_fail(fmsa_status status, const char *fmt, ...) {
    /* Formatted into a local buffer first: callers wrap a backend's failure
     * by passing fmsa_last_error() as an argument, and vsnprintf into the
     * very buffer it reads from is undefined behaviour (restrict). */
    char message[sizeof fmsa_error_message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    memcpy(fmsa_error_message, message, sizeof message);
    fmsa_log(FMSA_LOG_ERROR, "%s: %s", fmsa_status_string(status), fmsa_error_message);
    return status;
}
