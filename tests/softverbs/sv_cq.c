/* softverbs completion queues and completion channels. A channel is a pipe carrying the CQ
 * pointer of each armed CQ that got a completion, so its fd can be polled and honours O_NONBLOCK
 * as the kernel's does. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sv.h"

SV_EXPORT struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *context)
{
  sv_comp_channel_t *ch = calloc(1, sizeof(*ch));
  if (!ch) {
    errno = ENOMEM;
    return NULL;
  }
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) {
    int e = errno;
    free(ch);
    errno = e;
    return NULL;
  }
  ch->ch.context = context;
  ch->ch.fd = p[0];
  ch->wr_fd = p[1];
  /* never block the progress thread on a reader that does not read: a full pipe drops (and
   * logs) the event instead */
  fcntl(p[1], F_SETFL, fcntl(p[1], F_GETFL) | O_NONBLOCK);
  return &ch->ch;
}

SV_EXPORT int ibv_destroy_comp_channel(struct ibv_comp_channel *channel)
{
  sv_comp_channel_t *ch = (sv_comp_channel_t *)channel;
  if (channel->refcnt) return EBUSY;
  close(ch->ch.fd);
  close(ch->wr_fd);
  free(ch);
  return 0;
}

SV_EXPORT struct ibv_cq *ibv_create_cq(struct ibv_context *context, int cqe, void *cq_context,
                                       struct ibv_comp_channel *channel, int comp_vector)
{
  if (cqe < 1 || cqe > SV_MAX_CQE || comp_vector < 0 || comp_vector >= context->num_comp_vectors) {
    errno = EINVAL;
    return NULL;
  }
  sv_cq_t *cq = calloc(1, sizeof(*cq));
  if (!cq) {
    errno = ENOMEM;
    return NULL;
  }
  cq->cap = (uint32_t)cqe;
  cq->ring = calloc(cq->cap, sizeof(*cq->ring));
  if (!cq->ring) {
    free(cq);
    errno = ENOMEM;
    return NULL;
  }
  pthread_mutex_init(&cq->lock, NULL);
  pthread_mutex_init(&cq->cq.mutex, NULL);
  pthread_cond_init(&cq->cq.cond, NULL);
  cq->cq.context = context;
  cq->cq.channel = channel;
  cq->cq.cq_context = cq_context;
  cq->cq.cqe = cqe;
  sv_async_obj_register(sv_ctx(context), &cq->async);
  if (channel) {
    pthread_mutex_lock(&context->mutex);
    channel->refcnt++;
    pthread_mutex_unlock(&context->mutex);
  }
  return &cq->cq;
}

SV_EXPORT int ibv_resize_cq(struct ibv_cq *cq, int cqe)
{
  (void)cq, (void)cqe;
  sv_report_refusal("ibv_resize_cq refused (not emulated)");
  return EOPNOTSUPP;
}

SV_EXPORT int ibv_destroy_cq(struct ibv_cq *ibcq)
{
  sv_cq_t *cq = sv_cq(ibcq);
  sv_context_t *c = sv_ctx(ibcq->context);
  pthread_mutex_lock(&c->lock);
  for (int i = 0; i < c->nlisteners * SV_QPS_PER_LISTENER; i++) {
    if (c->qps[i] && (c->qps[i]->qp.send_cq == ibcq || c->qps[i]->qp.recv_cq == ibcq)) {
      pthread_mutex_unlock(&c->lock);
      return EBUSY;
    }
  }
  pthread_mutex_unlock(&c->lock);
  sv_async_obj_retire(c, &cq->async, "ibv_destroy_cq");
  if (ibcq->channel) {
    pthread_mutex_lock(&ibcq->context->mutex);
    ibcq->channel->refcnt--;
    pthread_mutex_unlock(&ibcq->context->mutex);
  }
  pthread_mutex_destroy(&cq->lock);
  pthread_mutex_destroy(&cq->cq.mutex);
  pthread_cond_destroy(&cq->cq.cond);
  free(cq->ring);
  free(cq);
  return 0;
}

void sv_cq_push(sv_cq_t *cq, const struct ibv_wc *wc)
{
  bool notify = false, overflow = false;
  pthread_mutex_lock(&cq->lock);
  if (cq->count == cq->cap) {
    /* A real CQ overrun is fatal to the CQ; report it once instead of overwriting. */
    overflow = !cq->overflowed;
    cq->overflowed = true;
  } else {
    cq->ring[(cq->head + cq->count) % cq->cap] = *wc;
    cq->count++;
    notify = cq->armed;
    cq->armed = false;
  }
  pthread_mutex_unlock(&cq->lock);
  if (overflow) {
    sv_log("CQ %p overrun (capacity %u): completion of wr_id %llu lost", (void *)cq, cq->cap,
           (unsigned long long)wc->wr_id);
    sv_async_event(sv_ctx(cq->cq.context), IBV_EVENT_CQ_ERR, &cq->cq);
  }
  if (notify && cq->cq.channel) {
    sv_comp_channel_t *ch = (sv_comp_channel_t *)cq->cq.channel;
    struct ibv_cq *p = &cq->cq;
    if (write(ch->wr_fd, &p, sizeof(p)) != (ssize_t)sizeof(p))
      sv_log("completion event lost: %s", strerror(errno));
  }
}

int sv_poll_cq(struct ibv_cq *ibcq, int n, struct ibv_wc *wc)
{
  sv_cq_t *cq = sv_cq(ibcq);
  if (n < 0) return -1;
  pthread_mutex_lock(&cq->lock);
  int got = 0;
  while (got < n && cq->count > 0) {
    wc[got++] = cq->ring[cq->head];
    cq->head = (cq->head + 1) % cq->cap;
    cq->count--;
  }
  pthread_mutex_unlock(&cq->lock);
  if (got == 0) {
    sv_transport_poll(sv_ctx(ibcq->context));
    pthread_mutex_lock(&cq->lock);
    while (got < n && cq->count > 0) {
      wc[got++] = cq->ring[cq->head];
      cq->head = (cq->head + 1) % cq->cap;
      cq->count--;
    }
    pthread_mutex_unlock(&cq->lock);
  }
  return got;
}

int sv_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
  sv_cq_t *cq = sv_cq(ibcq);
  (void)solicited_only; /* every completion is treated as solicited */
  if (!ibcq->channel) return EINVAL;
  pthread_mutex_lock(&cq->lock);
  cq->armed = true;
  pthread_mutex_unlock(&cq->lock);
  return 0;
}

SV_EXPORT int ibv_get_cq_event(struct ibv_comp_channel *channel, struct ibv_cq **cq,
                               void **cq_context)
{
  struct ibv_cq *p = NULL;
  ssize_t n = read(channel->fd, &p, sizeof(p));
  if (n != (ssize_t)sizeof(p)) {
    if (n >= 0) errno = EIO;
    return -1;
  }
  *cq = p;
  *cq_context = p->cq_context;
  return 0;
}

SV_EXPORT void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents)
{
  pthread_mutex_lock(&cq->mutex);
  cq->comp_events_completed += nevents;
  pthread_cond_signal(&cq->cond);
  pthread_mutex_unlock(&cq->mutex);
}
