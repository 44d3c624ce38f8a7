/* Plugin-wide state from the first init to the last finalize (strand/lifetime.h). */
#include "strand/lifetime.h"

#include "strand/log.h"

strand_result_t strand_lifetime_acquire(strand_lifetime_t *lt) {
  strand_result_t rc = STRAND_SUCCESS;
  pthread_mutex_lock(&lt->lock);
  if (!lt->ready) {
    rc = lt->setup ? lt->setup() : STRAND_SUCCESS;
    lt->ready = rc == STRAND_SUCCESS;
  }
  if (rc == STRAND_SUCCESS) lt->contexts++;
  pthread_mutex_unlock(&lt->lock);
  return rc;
}

void strand_lifetime_release(strand_lifetime_t *lt) {
  pthread_mutex_lock(&lt->lock);
  if (lt->contexts > 0 && --lt->contexts == 0 && lt->ready) {
    int open = lt->open_comms ? lt->open_comms() : 0;
    if (open == 0) {
      if (lt->teardown) lt->teardown();
      lt->ready = false;
    } else {
      STRAND_WARN("finalize: %d connections were not closed; keeping the plugin's threads and "
                  "devices until the library is unloaded", open);
    }
  }
  pthread_mutex_unlock(&lt->lock);
}

void strand_lifetime_unload(strand_lifetime_t *lt) {
  pthread_mutex_lock(&lt->lock);
  if (lt->ready) {
    if (lt->teardown) lt->teardown();
    lt->ready = false;
  }
  lt->contexts = 0;
  pthread_mutex_unlock(&lt->lock);
}

int strand_lifetime_contexts(strand_lifetime_t *lt) {
  pthread_mutex_lock(&lt->lock);
  int n = lt->contexts;
  pthread_mutex_unlock(&lt->lock);
  return n;
}

strand_result_t strand_lifetime_require(strand_lifetime_t *lt, const char *plugin, const char *call) {
  if (strand_lifetime_contexts(lt) > 0) return STRAND_SUCCESS;
  STRAND_WARN("%s %s: no context is live (called before init or after the last finalize); refused",
              plugin, call);
  return STRAND_INVALID_USAGE;
}
