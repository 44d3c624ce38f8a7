/* strand-ofi — rails: opening one, its progress thread, and which rail a new connection uses.
 *
 * Why rails: with one endpoint per device every comm rides one provider connection per peer, and
 * all data moves inside the callers' test() calls, i.e. inside NCCL's single proxy thread; through
 * NCCL on tcp;ofi_rxm that caps a device near 2.8 GB/s. STRAND_OFI_RAILS=N opens N endpoints per
 * device (ofi_dev.c) and gives each one a thread that progresses it while it has comms, so N
 * provider connections move data on N threads at once. test() still progresses its own rail too:
 * a thread that is asleep in its back-off must not add latency to small messages.
 *
 * The thread takes its rail's lock only with trylock: when a caller holds it, that caller is
 * progressing the rail anyway, and waiting in line would only delay the caller. It never holds a
 * lock while sleeping. Back-off: OFI_RAIL_SPIN_POLLS empty polls in a row, then a short sleep after
 * each further empty one, until a completion comes; a rail without comms or listen entries sleeps
 * 1 ms at a time, so an idle process does not burn a core.
 * STRAND_OFI_RAIL_THREADS=0 opens the rails without threads: each rail is then progressed only by
 * the callers that use its comms, like the single rail, and N rails are N provider connections
 * driven from NCCL's one proxy thread. STRAND_OFI_RAIL_QUIET_US=Q keeps a thread off a rail any
 * caller entered in the last Q µs (ofi_rail_touch), so that the proxy thread never queues behind
 * a rail thread while it is polling that rail; the thread takes over when the caller goes quiet.
 * Calls ofi_progress.c and ofi_config.c only. */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "ofi.h"
#include "strand/clock.h"

#define OFI_RAIL_SPIN_POLLS 1024   /* empty polls before the thread starts sleeping */
#define OFI_RAIL_BACKOFF_NS 20000  /* sleep after each empty poll past that (20 us) */
#define OFI_RAIL_IDLE_NS 1000000   /* sleep of a rail with nothing on it (1 ms) */

static void sleep_ns(long ns) {
  struct timespec ts = {.tv_sec = 0, .tv_nsec = ns};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static void *rail_main(void *arg) {
  ofi_dev_t *d = arg;
  char name[16];
  snprintf(name, sizeof name, "strand-ofi-r%d", d->rail);
  pthread_setname_np(pthread_self(), name);
  unsigned empty = 0;
  while (!atomic_load_explicit(&d->progress_stop, memory_order_acquire)) {
    int handled = 0;
    bool live = true; /* assume so while a caller holds the lock: it is working the rail */
    /* STRAND_OFI_RAIL_QUIET_US: a caller touched the rail recently, so it is working the rail
     * (NCCL's proxy polls every active comm in a loop): stay out of its way, as if it held the
     * lock, and only step in once the rail has been left alone for that long. */
    uint64_t quiet = ofi_params.rail_quiet_ns;
    if (quiet && strand_now_ns() - atomic_load_explicit(&d->caller_ns, memory_order_relaxed) < quiet) {
      /* live: counted as an empty poll below, so the back-off still applies */
    } else if (pthread_mutex_trylock(&d->lock) == 0) {
      uint64_t t0 = ofi_params.slow_ms ? strand_now_ns() : 0;
      struct rusage ru0, ru1;
      if (t0 && getrusage(RUSAGE_THREAD, &ru0) != 0) ru0.ru_nivcsw = 0;
      live = d->open && (d->comms || d->listens);
      if (live) handled = ofi_progress(d);
      pthread_mutex_unlock(&d->lock);
      /* STRAND_OFI_SLOW_MS: a caller that waited this long for the lock was kept by us (the
       * thread preempted while holding it, or a slow provider call, traced in ofi_progress). */
      uint64_t held = t0 ? strand_now_ns() - t0 : 0;
      if (held >= ofi_params.slow_ms * 1000000u && t0) {
        long sw = getrusage(RUSAGE_THREAD, &ru1) == 0 ? ru1.ru_nivcsw - ru0.ru_nivcsw : -1;
        STRAND_INFO(STRAND_SUBSYS_NET, "trace t=%llu ms: rail %d's thread held the lock of %s "
                    "for %llu us (%d completion(s), %ld involuntary context switch(es))",
                    (unsigned long long)((t0 + held) / 1000000u), d->rail, d->name,
                    (unsigned long long)(held / 1000u), handled, sw);
      }
    }
    if (!live) {
      empty = 0;
      sleep_ns(OFI_RAIL_IDLE_NS);
    } else if (handled > 0) {
      empty = 0;
    } else if (++empty >= OFI_RAIL_SPIN_POLLS) {
      sleep_ns(OFI_RAIL_BACKOFF_NS);
    } else if ((empty & 63) == 0) {
      sched_yield(); /* let a caller waiting for the lock in */
    }
  }
  return NULL;
}

strand_result_t ofi_rail_open(ofi_dev_t *d,
                              void (*on_ctrl)(ofi_dev_t *, const ofi_ctrl_msg_t *, size_t)) {
  bool was_open = d->open;
  strand_result_t r = ofi_ctrl_open(d, on_ctrl);
  if (r != STRAND_SUCCESS || was_open || ofi_params.rails <= 1 || !ofi_params.rail_threads ||
      d->progress_running)
    return r;
  atomic_store(&d->progress_stop, false);
  int rc = pthread_create(&d->progress_thread, NULL, rail_main, d);
  if (rc != 0) {
    /* Not fatal: the callers' own test() calls still progress the rail, only more slowly. */
    STRAND_WARN("device %d (%s) rail %d: no progress thread (pthread_create: %s); the rail is "
                "progressed by the callers only",
                d->index, d->name, d->rail, strerror(rc));
    return STRAND_SUCCESS;
  }
  d->progress_running = true;
  return STRAND_SUCCESS;
}

void ofi_rail_stop(ofi_dev_t *d) {
  pthread_mutex_lock(&d->lock);
  bool running = d->progress_running;
  pthread_mutex_unlock(&d->lock);
  if (!running) return;
  atomic_store_explicit(&d->progress_stop, true, memory_order_release);
  pthread_join(d->progress_thread, NULL);
  pthread_mutex_lock(&d->lock);
  d->progress_running = false;
  pthread_mutex_unlock(&d->lock);
}

void ofi_rail_touch(ofi_dev_t *d) {
  if (ofi_params.rail_quiet_ns && d->progress_running)
    atomic_store_explicit(&d->caller_ns, strand_now_ns(), memory_order_relaxed);
}

/* Round robin per device over the rails both ends have, so that the comms NCCL opens between two
 * processes (one per channel and peer) spread evenly. STRAND_OFI_RAIL_BLOCK=B moves to the next
 * rail only every B comms: NCCL connects channel 0 first, and a tuner band that runs mid-size
 * collectives on the first B channels then keeps them on one rail, while the large sizes on all
 * channels still use every rail. */
int ofi_rail_pick(ofi_dev_t *d, int peer_rails) {
  int n = d->nrails < peer_rails ? d->nrails : peer_rails;
  if (n <= 1) return 0;
  uint32_t k = atomic_fetch_add(&d->next_rail, 1u) / (uint32_t)ofi_params.rail_block;
  return (int)(k % (uint32_t)n);
}
