/* strand/clock.h: the monotonic clock, and absolute deadlines for timed waits (see the header for
 * why). */
#include "strand/clock.h"

#define NS_PER_S 1000000000ull

struct timespec strand_timespec_add_ns(struct timespec from, uint64_t ns) {
  uint64_t nsec = (uint64_t)from.tv_nsec + ns % NS_PER_S;
  from.tv_sec += (time_t)(ns / NS_PER_S + nsec / NS_PER_S);
  from.tv_nsec = (long)(nsec % NS_PER_S);
  return from;
}

struct timespec strand_deadline_in_ns(clockid_t clock, uint64_t ns) {
  struct timespec now;
  clock_gettime(clock, &now);
  return strand_timespec_add_ns(now, ns);
}

uint64_t strand_now_ns(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (uint64_t)now.tv_sec * NS_PER_S + (uint64_t)now.tv_nsec;
}

uint64_t strand_now_ms(void) { return strand_now_ns() / 1000000u; }
