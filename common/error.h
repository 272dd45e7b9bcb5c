/*
 * Internal error/log plumbing.  fmsa_fail() records the thread-local detail
 * message that fmsa_last_error() returns and logs it at ERROR; every failing
 * path in the library returns through it so the message always names the
 * field or the vendor call.
 */
#ifndef FMSA_COMMON_ERROR_H
#define FMSA_COMMON_ERROR_H

#include "flashmsa/flashmsa.h"

#if defined(__GNUC__)
#define FMSA_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define FMSA_PRINTF(a, b)
#endif /* defined(__GNUC__) */

/// Records "fmt..." as the last error of this thread and returns status.
fmsa_status fmsa_fail(fmsa_status status, const char *fmt, ...) FMSA_PRINTF(2, 3);
/// Clears the thread's last error (called on entry of every public call).
void fmsa_clear_error(void);
/// Sends a formatted line to the log callback if level passes the threshold.
void fmsa_log(fmsa_log_level level, const char *fmt, ...) FMSA_PRINTF(2, 3);

/// Propagates a non-success status.
#define FMSA_TRY(expr)                                                         \
    do {                                                                       \
        fmsa_status fmsa_try_status_ = (expr);                                 \
        if (fmsa_try_status_ != FMSA_SUCCESS) return fmsa_try_status_;         \
    } while (0)

#endif /* FMSA_COMMON_ERROR_H */
