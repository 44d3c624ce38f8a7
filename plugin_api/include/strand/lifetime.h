/* Strand SDK — plugin-wide state that lives from the first init to the last finalize.
 *
 * NCCL calls init once per communicator (v11+ cores) or once per process (v6..v10), from any
 * thread, and dlcloses the plugin after the last finalize; v6..v10 cores never call finalize.
 * Every plugin therefore needs the same bookkeeping around its global state (device lists, worker
 * threads, fabric endpoints): set it up on the first init, count contexts, tear it down on the last
 * finalize unless connections are still open, and tear it down at library unload at the latest so
 * that no thread outlives the code it runs. This helper does exactly that:
 *
 *   static strand_result_t my_setup(void);    // discover devices, start threads
 *   static void my_teardown(void);            // the reverse; only called after a setup succeeded
 *   static int my_open_comms(void);           // connections still open (or NULL)
 *   STRAND_LIFETIME(my_life, my_setup, my_teardown, my_open_comms);
 *
 *   init:     rc = strand_lifetime_acquire(&my_life);   // runs my_setup on the first call
 *   finalize: strand_lifetime_release(&my_life);        // runs my_teardown on the last call
 *
 * setup and teardown run under the helper's lock, so they never race each other or another init.
 * A failed setup is retried by the next init. */
#ifndef STRAND_LIFETIME_H
#define STRAND_LIFETIME_H

#include <pthread.h>
#include <stdbool.h>

#include "strand/abi/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct strand_lifetime {
  pthread_mutex_t lock;
  int contexts; /* live init contexts */
  bool ready;   /* setup succeeded and teardown has not run since */
  strand_result_t (*setup)(void);
  void (*teardown)(void);
  /* Optional. At the last finalize, a non-zero count means the core (or a buggy caller) left
   * connections open: tearing down would pull the state from under them, so teardown waits for
   * library unload and a WARN names the count. */
  int (*open_comms)(void);
} strand_lifetime_t;

/* Counts one more context; the first one runs setup. Returns setup's error (nothing is counted
 * then). */
strand_result_t strand_lifetime_acquire(strand_lifetime_t *lt);
/* Counts one context less; the last one runs teardown (see open_comms). A release without a
 * matching acquire is ignored. */
void strand_lifetime_release(strand_lifetime_t *lt);
/* Runs teardown if setup is in effect, whatever the count: for library unload. */
void strand_lifetime_unload(strand_lifetime_t *lt);
/* Live contexts (for logging and tests). */
int strand_lifetime_contexts(strand_lifetime_t *lt);
/* For calls that create connections (listen, connect): STRAND_SUCCESS while a context from init is
 * live, else a WARN naming `call` and STRAND_INVALID_USAGE. After the last finalize the plugin's
 * state is torn down (or held only for comms left open); a connection made then would reopen
 * devices nobody finalizes again, or hang on a context that is gone. */
strand_result_t strand_lifetime_require(strand_lifetime_t *lt, const char *plugin, const char *call);

/* Defines `name` and a destructor that calls strand_lifetime_unload at dlclose / process exit. */
#define STRAND_LIFETIME(name, setup_fn, teardown_fn, open_comms_fn)                                \
  static strand_lifetime_t name = {PTHREAD_MUTEX_INITIALIZER, 0, false, (setup_fn),                \
                                   (teardown_fn), (open_comms_fn)};                                \
  __attribute__((destructor)) static void name##_at_unload(void) { strand_lifetime_unload(&name); }

#ifdef __cplusplus
}
#endif

#endif
