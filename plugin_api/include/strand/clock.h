/* strand/clock.h — the monotonic clock in nanoseconds, and absolute deadlines for timed waits.
 *
 * Why: pthread_cond_timedwait and friends take an absolute struct timespec on the condition's
 * clock, and every such wait in the tree (collnet_stub's progress thread, strand-conform's raw-TCP
 * reference, softverbs' async events) built one by adding nanoseconds to clock_gettime by hand,
 * each with its own carry into tv_sec. One helper keeps that arithmetic in one place; and the
 * plugins' bounds and timestamps read one monotonic clock (strand_now_ns here, strand_now_s in
 * strand/net_layer.h, the same clock in seconds) instead of a private copy per file. */
#ifndef STRAND_CLOCK_H
#define STRAND_CLOCK_H

#include <stdint.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The time `ns` nanoseconds after `from`, with tv_nsec in [0, 1e9). `from` may hold any tv_nsec
 * in [0, 1e9) (as clock_gettime gives). */
struct timespec strand_timespec_add_ns(struct timespec from, uint64_t ns);

/* `ns` nanoseconds from now on `clock` (CLOCK_MONOTONIC for a condition variable whose attribute
 * says so, CLOCK_REALTIME for a default one): the deadline to hand to a timed wait. */
struct timespec strand_deadline_in_ns(clockid_t clock, uint64_t ns);

/* CLOCK_MONOTONIC in nanoseconds: for bounds and intervals, never for wall time. */
uint64_t strand_now_ns(void);
/* The same clock in whole milliseconds (truncated), for bounds given in ms. */
uint64_t strand_now_ms(void);

#ifdef __cplusplus
}
#endif

#endif /* STRAND_CLOCK_H */
