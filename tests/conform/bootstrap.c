/* strand-conform — our own small bootstrap: a coordinator on rank 0's host relays allgathers,
 * barriers and point-to-point blobs between the check children of every rank, and collects the
 * per-rank results. A relay (rather than a mesh) keeps the failure semantics simple: whoever dies,
 * the coordinator sees the socket close and tells everyone else at once, so no rank ever waits on
 * a dead one. Frames: bootstrap.h. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bootstrap.h"

/* ------------------------------------------------------------------ framing */

static int write_all(int fd, const void *buf, size_t len) {
  const char *p = buf;
  while (len) {
    ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

int bs_write_frame(int fd, uint32_t type, int32_t a, int32_t b, const void *payload, uint32_t len) {
  uint32_t h[4] = {htonl(type), htonl((uint32_t)a), htonl((uint32_t)b), htonl(len)};
  char stackbuf[512];
  if (len + sizeof h <= sizeof stackbuf) { /* one send: keeps small frames in one segment */
    memcpy(stackbuf, h, sizeof h);
    if (len) memcpy(stackbuf + sizeof h, payload, len);
    return write_all(fd, stackbuf, sizeof h + len);
  }
  if (write_all(fd, h, sizeof h)) return -1;
  return len ? write_all(fd, payload, len) : 0;
}

static int read_all(int fd, void *buf, size_t len, double deadline) {
  char *p = buf;
  while (len) {
    if (deadline > 0) {
      double left = deadline - conform_now();
      if (left <= 0) return -1;
      struct pollfd pfd = {fd, POLLIN, 0};
      int pr = poll(&pfd, 1, (int)(left * 1000) + 1);
      if (pr < 0 && errno == EINTR) continue;
      if (pr <= 0) return -1;
    }
    ssize_t n = recv(fd, p, len, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

int bs_read_frame(int fd, bs_hdr_t *h, void **payload, double deadline) {
  uint32_t raw[4];
  *payload = NULL;
  if (read_all(fd, raw, sizeof raw, deadline)) return -1;
  h->type = ntohl(raw[0]);
  h->a = (int32_t)ntohl(raw[1]);
  h->b = (int32_t)ntohl(raw[2]);
  h->len = ntohl(raw[3]);
  if (h->len > (64u << 20)) return -1; /* nothing legitimate is that large */
  if (h->len) {
    *payload = malloc(h->len + 1);
    if (!*payload) return -1;
    ((char *)*payload)[h->len] = '\0';
    if (read_all(fd, *payload, h->len, deadline)) {
      free(*payload);
      *payload = NULL;
      return -1;
    }
  }
  return 0;
}

/* ------------------------------------------------------------------ TCP */

int bs_parse_hostport(const char *hostport, char *host, size_t hlen, char *port, size_t plen) {
  const char *colon;
  if (hostport[0] == '[') { /* [v6addr]:port */
    const char *end = strchr(hostport, ']');
    if (!end || end[1] != ':') return -1;
    snprintf(host, hlen, "%.*s", (int)(end - hostport - 1), hostport + 1);
    colon = end + 1;
  } else {
    colon = strrchr(hostport, ':');
    if (!colon) return -1;
    snprintf(host, hlen, "%.*s", (int)(colon - hostport), hostport);
  }
  snprintf(port, plen, "%s", colon + 1);
  return port[0] ? 0 : -1;
}

static void tune_socket(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  /* Bounded writes: the coordinator must never block forever on a rank that stopped reading. */
  struct timeval tv = {10, 0};
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  fcntl(fd, F_SETFD, FD_CLOEXEC);
}

int bs_connect(const char *hostport, double deadline, char *err, size_t errlen) {
  char host[256], port[32];
  if (bs_parse_hostport(hostport, host, sizeof host, port, sizeof port)) {
    snprintf(err, errlen, "bad coordinator address \"%s\" (want HOST:PORT)", hostport);
    return -1;
  }
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
  int gai = getaddrinfo(host, port, &hints, &ai);
  if (gai) {
    snprintf(err, errlen, "cannot resolve coordinator %s: %s", hostport, gai_strerror(gai));
    return -1;
  }
  int last_errno = 0;
  for (;;) {
    for (struct addrinfo *a = ai; a; a = a->ai_next) {
      int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) continue;
      if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
        freeaddrinfo(ai);
        tune_socket(fd);
        return fd;
      }
      last_errno = errno;
      close(fd);
    }
    if (conform_now() > deadline) break;
    conform_sleep(0.05); /* the coordinator may not be listening yet (other host starting) */
  }
  freeaddrinfo(ai);
  snprintf(err, errlen, "cannot reach the coordinator at %s: %s (is rank 0 running, is the address "
           "reachable from this host?)", hostport, strerror(last_errno));
  return -1;
}

/* ------------------------------------------------------------------ coordinator */

typedef struct gather_item {
  struct gather_item *next;
  void *data;
  uint32_t len;
} gather_item_t;

typedef struct {
  bool active;
  int fd[CONFORM_MAX_RANKS];          /* session socket of each rank's child, -1 none */
  bool joined[CONFORM_MAX_RANKS];
  bool left[CONFORM_MAX_RANKS];       /* DONE received, socket closed or result reported */
  gather_item_t *gq[CONFORM_MAX_RANKS];
  bool aborted;
  char abort_reason[512];
  int n_results;
  conform_rank_result_t res[CONFORM_MAX_RANKS];
  char *log[CONFORM_MAX_RANKS];       /* each rank's captured output, until the row is merged */
  bool have_res[CONFORM_MAX_RANKS];
  double t_start;
} session_t;

struct conform_coord {
  int listen_fd;
  int nranks;
  int port;
  int ctl[CONFORM_MAX_RANKS];         /* control sockets */
  bool finished[CONFORM_MAX_RANKS];   /* rank finished every item */
  char *hello;                        /* rank 0's run description */
  int n_items;
  char **item_ids;                    /* "vN id" per item */
  session_t *sess;
  /* session sockets not yet joined */
  int pending[256];
  int n_pending;
};

conform_coord_t *conform_coord_create(const char *hostport, int nranks, char *err, size_t errlen) {
  char host[256] = "127.0.0.1", port[32] = "0";
  if (hostport && bs_parse_hostport(hostport, host, sizeof host, port, sizeof port)) {
    snprintf(err, errlen, "bad coordinator address \"%s\" (want HOST:PORT)", hostport);
    return NULL;
  }
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                           .ai_flags = AI_PASSIVE}, *ai = NULL;
  int gai = getaddrinfo(host[0] ? host : NULL, port, &hints, &ai);
  if (gai) {
    snprintf(err, errlen, "cannot resolve %s: %s", host, gai_strerror(gai));
    return NULL;
  }
  int fd = -1;
  for (struct addrinfo *a = ai; a; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 512) == 0) break;
    snprintf(err, errlen, "cannot listen on %s:%s: %s", host, port, strerror(errno));
    close(fd);
    fd = -1;
  }
  freeaddrinfo(ai);
  if (fd < 0) return NULL;
  conform_coord_t *co = calloc(1, sizeof *co);
  co->listen_fd = fd;
  co->nranks = nranks;
  for (int i = 0; i < CONFORM_MAX_RANKS; i++) co->ctl[i] = -1;
  struct sockaddr_storage ss;
  socklen_t sl = sizeof ss;
  getsockname(fd, (struct sockaddr *)&ss, &sl);
  co->port = ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
                                           : ((struct sockaddr_in6 *)&ss)->sin6_port);
  return co;
}

int conform_coord_port(const conform_coord_t *co) { return co->port; }

static void sess_close_fd(session_t *s, int r) {
  if (s->fd[r] >= 0) close(s->fd[r]);
  s->fd[r] = -1;
}

static void sess_free_queue(session_t *s, int r) {
  while (s->gq[r]) {
    gather_item_t *g = s->gq[r];
    s->gq[r] = g->next;
    free(g->data);
    free(g);
  }
}

/* Tell every rank still in the check (children and parents) that it cannot succeed any more. */
static void sess_abort(conform_coord_t *co, int item, session_t *s, const char *reason) {
  if (s->aborted) return;
  s->aborted = true;
  snprintf(s->abort_reason, sizeof s->abort_reason, "%s", reason);
  for (int r = 0; r < co->nranks; r++) {
    if (s->fd[r] >= 0 && !s->left[r])
      bs_write_frame(s->fd[r], BS_ABORT, 0, 0, reason, (uint32_t)strlen(reason));
    if (!s->have_res[r] && co->ctl[r] >= 0)
      bs_write_frame(co->ctl[r], BS_ABORT_ITEM, item, 0, reason, (uint32_t)strlen(reason));
  }
}

/* Complete as many allgathers as every participant has contributed to. */
static void sess_try_gather(conform_coord_t *co, int item, session_t *s) {
  for (;;) {
    bool any = false, all = true;
    for (int r = 0; r < co->nranks; r++) {
      if (s->gq[r]) any = true;
      else all = false;
    }
    if (!any) return;
    if (!all) {
      for (int r = 0; r < co->nranks; r++)
        if (!s->gq[r] && s->left[r]) {
          char why[256];
          snprintf(why, sizeof why, "rank %d left the check without joining a collective the "
                   "others entered (inconsistent skip or early return on that rank)", r);
          sess_abort(co, item, s, why);
          return;
        }
      return;
    }
    uint32_t len = s->gq[0]->len;
    for (int r = 1; r < co->nranks; r++)
      if (s->gq[r]->len != len) {
        sess_abort(co, item, s, "ranks contributed allgathers of different sizes");
        return;
      }
    char *buf = malloc((size_t)len * (size_t)co->nranks + 1);
    for (int r = 0; r < co->nranks; r++) {
      gather_item_t *g = s->gq[r];
      if (len) memcpy(buf + (size_t)r * len, g->data, len);
      s->gq[r] = g->next;
      free(g->data);
      free(g);
    }
    for (int r = 0; r < co->nranks; r++)
      if (s->fd[r] >= 0) bs_write_frame(s->fd[r], BS_GATHER_RESULT, 0, 0, buf, len * (uint32_t)co->nranks);
    free(buf);
  }
}

static void sess_leave(conform_coord_t *co, int item, session_t *s, int r, bool clean,
                       const char *why) {
  if (s->left[r]) return;
  s->left[r] = true;
  sess_close_fd(s, r);
  if (!clean) {
    char reason[512];
    snprintf(reason, sizeof reason, "rank %d %s", r, why);
    sess_abort(co, item, s, reason);
    return;
  }
  for (int q = 0; q < co->nranks; q++)
    if (q != r && s->fd[q] >= 0) bs_write_frame(s->fd[q], BS_PEER_GONE, r, 0, NULL, 0);
  sess_try_gather(co, item, s);
}

static session_t *get_sess(conform_coord_t *co, int item) {
  if (item < 0 || item >= co->n_items) return NULL;
  session_t *s = &co->sess[item];
  if (!s->active) {
    memset(s, 0, sizeof *s);
    s->active = true;
    for (int r = 0; r < CONFORM_MAX_RANKS; r++) s->fd[r] = -1;
    s->t_start = conform_now();
  }
  return s;
}

/* A frame on a joined session socket. */
static void on_session_frame(conform_coord_t *co, int item, int r, bs_hdr_t *h, void *payload) {
  session_t *s = &co->sess[item];
  switch (h->type) {
  case BS_GATHER: {
    gather_item_t *g = calloc(1, sizeof *g), **tail = &s->gq[r];
    g->data = payload;
    g->len = h->len;
    while (*tail) tail = &(*tail)->next;
    *tail = g;
    sess_try_gather(co, item, s);
    return; /* payload owned by the queue */
  }
  case BS_SEND:
    if (h->a >= 0 && h->a < co->nranks && s->fd[h->a] >= 0)
      bs_write_frame(s->fd[h->a], BS_MSG, r, 0, payload, h->len);
    break;
  case BS_DONE: {
    bool failed = h->a == CONFORM_FAIL;
    char why[700];
    snprintf(why, sizeof why, "failed: %s", payload ? (char *)payload : "(no message)");
    /* A failing rank takes the others down at once; a passing one just leaves. */
    sess_leave(co, item, s, r, !failed, why);
    break;
  }
  default:
    break;
  }
  free(payload);
}

/* Merge the per-rank results of one item into a report row. */
static void merge_row(conform_coord_t *co, int item, conform_row_t *row) {
  session_t *s = &co->sess[item];
  row->status = CONFORM_PASS;
  row->msg[0] = '\0';
  double secs = 0;
  bool any_primary_fail = false;
  for (int r = 0; r < co->nranks; r++) {
    conform_rank_result_t *x = &s->res[r];
    if (x->seconds > secs) secs = x->seconds;
    if (x->status == CONFORM_FAIL && !x->aborted) any_primary_fail = true;
  }
  row->seconds = secs;
  bool any_env = false;
  for (int r = 0; r < co->nranks; r++) {
    conform_rank_result_t *x = &s->res[r];
    if (x->status == CONFORM_FAIL) row->status = CONFORM_FAIL;
    else if (x->status == CONFORM_SKIP && row->status == CONFORM_PASS) row->status = CONFORM_SKIP;
    if (x->status == CONFORM_ENV) any_env = true;
  }
  /* The environment refused something a rank needed: whatever the other ranks then saw (mostly
   * their peer going away) cannot be held against the plugin either. */
  if (any_env) row->status = CONFORM_ENV;
  /* Messages: for a failure, the ranks that failed on their own (not just aborted because
   * another rank failed); for a skip, the first reason; for a pass, notes. */
  char *m = row->msg;
  size_t cap = sizeof row->msg;
  for (int r = 0; r < co->nranks; r++) {
    conform_rank_result_t *x = &s->res[r];
    const char *text = NULL;
    if (row->status == CONFORM_ENV) {
      if (x->status == CONFORM_ENV) text = x->msg;
    } else if (row->status == CONFORM_FAIL) {
      if (x->status == CONFORM_FAIL && (!x->aborted || !any_primary_fail)) text = x->msg;
    } else if (row->status == CONFORM_SKIP) {
      if (x->status == CONFORM_SKIP && !m[0]) text = x->msg;
    } else if (x->note[0] && r == 0) {
      text = x->note;
    }
    if (!text || !text[0]) continue;
    size_t used = strlen(m);
    if (co->nranks > 1 && (row->status == CONFORM_FAIL || row->status == CONFORM_ENV))
      snprintf(m + used, cap - used, "%s[rank %d] %s", used ? " | " : "", r, text);
    else
      snprintf(m + used, cap - used, "%s%s", used ? " | " : "", text);
  }
  /* The captured output of every rank, rank by rank, each line tagged with its rank. */
  size_t need = 1;
  for (int r = 0; r < co->nranks; r++)
    if (s->log[r]) need += strlen(s->log[r]) * 2 + 16; /* worst case: every line empty */
  free(row->log);
  row->log = NULL;
  if (need > 1 && (row->log = malloc(need))) {
    size_t n = 0;
    for (int r = 0; r < co->nranks; r++) {
      for (const char *l = s->log[r]; l && *l;) {
        const char *e = strchr(l, '\n');
        size_t len = e ? (size_t)(e - l) : strlen(l);
        if (co->nranks > 1) n += (size_t)snprintf(row->log + n, need - n, "[rank %d] ", r);
        memcpy(row->log + n, l, len);
        n += len;
        row->log[n++] = '\n';
        l += len + (e ? 1 : 0);
      }
      free(s->log[r]);
      s->log[r] = NULL;
    }
    row->log[n] = '\0';
  }
}

static void parse_items(conform_coord_t *co, const char *hello) {
  /* hello: description line, then one "vN id" line per item */
  const char *nl = strchr(hello, '\n');
  int n = 0;
  for (const char *p = nl; p && *p; p = strchr(p + 1, '\n'))
    if (p[1]) n++;
  co->n_items = n;
  co->item_ids = calloc((size_t)n + 1, sizeof(char *));
  co->sess = calloc((size_t)n + 1, sizeof(session_t));
  int i = 0;
  for (const char *p = nl; p && *p && i < n; i++) {
    const char *e = strchr(p + 1, '\n');
    size_t len = e ? (size_t)(e - p - 1) : strlen(p + 1);
    co->item_ids[i] = strndup(p + 1, len);
    p = e;
  }
}

static void send_final(conform_coord_t *co, conform_run_result_t *out) {
  int pass = 0, fail = 0, skip = 0;
  conform_report_counts(out, &pass, &fail, &skip);
  char pl[600];
  int n = snprintf(pl, sizeof pl, "%d", skip) + 1;
  n += snprintf(pl + n, sizeof pl - (size_t)n, "%s", out->fatal);
  for (int r = 0; r < co->nranks; r++)
    if (co->ctl[r] >= 0) bs_write_frame(co->ctl[r], BS_FINAL, pass, fail, pl, (uint32_t)n + 1);
}

/* ------------------------------------------------------------------ coordinator: serving */

/* What one entry of the poll set watches. */
typedef enum {
  FD_STALE = -1, /* a pending entry made stale by an earlier handler in the same poll round */
  FD_LISTEN,     /* the listening socket: a new connection */
  FD_CONTROL,    /* a rank parent's control socket (who = rank) */
  FD_PENDING,    /* accepted, first frame not read yet (who = index into co->pending) */
  FD_SESSION,    /* a check child's session socket (who = rank, item = item) */
} fd_kind_t;

#define SERVE_POLL_MAX (1 + CONFORM_MAX_RANKS + 256 + CONFORM_MAX_RANKS * 4)

/* The state of one conform_coord_serve call. */
typedef struct {
  conform_coord_t *co;
  conform_run_result_t *out;
  struct pollfd pf[SERVE_POLL_MAX];
  fd_kind_t kind[SERVE_POLL_MAX];
  int who[SERVE_POLL_MAX], item[SERVE_POLL_MAX];
  int np;
  int n_hello;        /* rank parents that said HELLO */
  bool fatal;         /* the run broke: out->fatal says why */
  int *item_done;     /* per item: every rank's result merged */
  int n_items_done;
  char *ids_rank0;    /* rank 0's item list, every rank must announce the same */
} serve_t;

static void serve_fatal(serve_t *S, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void serve_fatal(serve_t *S, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(S->out->fatal, sizeof S->out->fatal, fmt, ap);
  va_end(ap);
  S->fatal = true;
}

static void poll_add(serve_t *S, int fd, fd_kind_t kind, int who, int item) {
  S->pf[S->np] = (struct pollfd){fd, POLLIN, 0};
  S->kind[S->np] = kind;
  S->who[S->np] = who;
  S->item[S->np++] = item;
}

/* Poll set: listener, control sockets, pending sockets, session sockets. */
static void build_pollset(serve_t *S) {
  conform_coord_t *co = S->co;
  S->np = 0;
  poll_add(S, co->listen_fd, FD_LISTEN, -1, -1);
  for (int r = 0; r < co->nranks; r++)
    if (co->ctl[r] >= 0) poll_add(S, co->ctl[r], FD_CONTROL, r, -1);
  for (int i = 0; i < co->n_pending; i++) poll_add(S, co->pending[i], FD_PENDING, i, -1);
  /* live sessions: only a few at a time (ranks are at most a couple of items apart) */
  for (int it = 0; it < co->n_items && S->np < SERVE_POLL_MAX - 1; it++) {
    session_t *s = &co->sess[it];
    if (!s->active) continue;
    for (int r = 0; r < co->nranks; r++)
      if (s->fd[r] >= 0 && S->np < SERVE_POLL_MAX) poll_add(S, s->fd[r], FD_SESSION, r, it);
  }
}

static void on_accept(serve_t *S) {
  conform_coord_t *co = S->co;
  int fd = accept4(co->listen_fd, NULL, NULL, SOCK_CLOEXEC);
  if (fd < 0) return;
  tune_socket(fd);
  if (co->n_pending < 256) co->pending[co->n_pending++] = fd;
  else close(fd);
}

/* HELLO on a new connection: it is rank h->a's control socket. */
static void on_hello(serve_t *S, int fd, const bs_hdr_t *h, char *payload) {
  conform_coord_t *co = S->co;
  if (h->b != co->nranks)
    serve_fatal(S, "rank %d runs with --nranks %d, the coordinator with %d", h->a, h->b,
                co->nranks);
  const char *items = payload ? strchr(payload, '\n') : NULL;
  if (!S->ids_rank0 && items) {
    S->ids_rank0 = strdup(items);
    co->hello = strdup(payload);
    parse_items(co, payload);
    S->item_done = calloc((size_t)co->n_items + 1, sizeof(int));
    snprintf(S->out->plugin_desc, sizeof S->out->plugin_desc, "%.*s", (int)(items - payload),
             payload);
  } else if (!items || strcmp(items, S->ids_rank0) != 0) {
    serve_fatal(S, "rank %d would run a different list of checks (different strand-conform "
                "build, plugin, --abi/--all-abis or --only/--skip on that rank)", h->a);
  }
  co->ctl[h->a] = fd;
  if (++S->n_hello == co->nranks && !S->fatal)
    for (int r = 0; r < co->nranks; r++) bs_write_frame(co->ctl[r], BS_WELCOME, 0, 0, NULL, 0);
}

/* JOIN on a new connection: it is the session socket of rank h->b's child for item h->a. */
static void on_join(serve_t *S, int fd, const bs_hdr_t *h) {
  conform_coord_t *co = S->co;
  session_t *s = get_sess(co, h->a);
  if (!s || s->joined[h->b]) {
    close(fd);
    return;
  }
  s->joined[h->b] = true;
  s->fd[h->b] = fd;
  if (s->aborted)
    bs_write_frame(fd, BS_ABORT, 0, 0, s->abort_reason, (uint32_t)strlen(s->abort_reason));
  for (int q = 0; q < co->nranks; q++)
    if (s->left[q]) bs_write_frame(fd, BS_PEER_GONE, q, 0, NULL, 0);
}

/* The first frame of a pending connection decides what it is. */
static void on_first_frame(serve_t *S, int i, int rc, const bs_hdr_t *h, void *payload) {
  conform_coord_t *co = S->co;
  int fd = S->pf[i].fd;
  co->pending[S->who[i]] = co->pending[--co->n_pending];
  /* the pending array changed: the remaining pending entries of this poll round are stale */
  for (int j = i + 1; j < S->np; j++)
    if (S->kind[j] == FD_PENDING) S->kind[j] = FD_STALE;
  if (rc) {
    close(fd);
    return;
  }
  if (h->type == BS_HELLO && h->a >= 0 && h->a < co->nranks && co->ctl[h->a] < 0)
    on_hello(S, fd, h, payload);
  else if (h->type == BS_JOIN && h->b >= 0 && h->b < co->nranks)
    on_join(S, fd, h);
  else
    close(fd);
  free(payload);
}

/* Every rank reported item `item`: merge the row, close the session. */
static void on_item_complete(serve_t *S, int item) {
  conform_coord_t *co = S->co;
  conform_run_result_t *out = S->out;
  session_t *s = &co->sess[item];
  S->item_done[item] = 1;
  S->n_items_done++;
  if (S->n_items_done == 1 || out->rows == NULL)
    out->rows = calloc((size_t)co->n_items + 1, sizeof(conform_row_t));
  out->n_rows = co->n_items;
  merge_row(co, item, &out->rows[item]);
  for (int q = 0; q < co->nranks; q++) sess_close_fd(s, q), sess_free_queue(s, q);
  s->active = false;
  conform_report_progress(S->n_items_done, co->n_items, &out->rows[item]);
}

/* RESULT from rank r's parent: its child's result for item h->a. */
static void on_result(serve_t *S, int r, const bs_hdr_t *h, const void *payload) {
  conform_coord_t *co = S->co;
  session_t *s = get_sess(co, h->a);
  if (!s->have_res[r]) {
    memcpy(&s->res[r], payload, sizeof s->res[r]);
    if (h->len > sizeof s->res[r])
      s->log[r] = strndup((const char *)payload + sizeof s->res[r], h->len - sizeof s->res[r]);
    s->res[r].msg[sizeof s->res[r].msg - 1] = '\0';
    s->res[r].note[sizeof s->res[r].note - 1] = '\0';
    s->have_res[r] = true;
    s->n_results++;
    /* the child is gone whatever it said; a failure aborts the others */
    if (!s->left[r]) {
      char why[700];
      snprintf(why, sizeof why, "failed: %s", s->res[r].msg);
      sess_leave(co, h->a, s, r, s->res[r].status != CONFORM_FAIL && s->res[r].status != CONFORM_ENV, why);
    } else if ((s->res[r].status == CONFORM_FAIL || s->res[r].status == CONFORM_ENV) && !s->res[r].aborted) {
      char why[700];
      snprintf(why, sizeof why, "rank %d failed: %s", r, s->res[r].msg);
      sess_abort(co, h->a, s, why);
    }
    if (s->n_results == co->nranks && !S->item_done[h->a]) on_item_complete(S, h->a);
  }
  if (h->a == co->n_items - 1) co->finished[r] = true;
}

/* A frame (or EOF) on rank r's control socket. */
static void on_ctl_frame(serve_t *S, int i, int rc, const bs_hdr_t *h, void *payload) {
  conform_coord_t *co = S->co;
  int r = S->who[i];
  if (rc) {
    if (!co->finished[r])
      serve_fatal(S, "rank %d's process died or lost its connection to the coordinator before "
                  "finishing; the run was stopped", r);
    close(co->ctl[r]);
    co->ctl[r] = -1;
    return;
  }
  if (h->type == BS_RESULT && h->len >= sizeof(conform_rank_result_t) && h->a >= 0 &&
      h->a < co->n_items)
    on_result(S, r, h, payload);
  free(payload);
}

/* A frame (or EOF) on the session socket of rank r's child for one item. */
static void on_session_ready(serve_t *S, int i, int rc, bs_hdr_t *h, void *payload) {
  int it = S->item[i], r = S->who[i];
  session_t *s = &S->co->sess[it];
  if (s->fd[r] != S->pf[i].fd) {
    free(payload);
    return;
  }
  if (rc) {
    sess_leave(S->co, it, s, r, false, "exited or crashed without reporting (its result "
               "follows from its rank process)");
    return;
  }
  on_session_frame(S->co, it, r, h, payload);
}

/* After the loop: every item gets a row; items that never completed (fatal stop) are failures
 * that name the cause. */
static void finish_rows(serve_t *S) {
  conform_coord_t *co = S->co;
  conform_run_result_t *out = S->out;
  if (!out->rows) out->rows = calloc((size_t)co->n_items + 1, sizeof(conform_row_t));
  out->n_rows = co->n_items;
  for (int it = 0; it < co->n_items; it++) {
    conform_row_t *row = &out->rows[it];
    const char *id = co->item_ids[it];
    const char *sp = strchr(id, ' ');
    row->version = atoi(id + 1);
    row->check = conform_find_check(sp ? sp + 1 : id);
    if (!S->item_done || !S->item_done[it]) {
      row->status = CONFORM_FAIL;
      snprintf(row->msg, sizeof row->msg, "not completed: %s", out->fatal[0] ? out->fatal :
               "the run stopped");
    }
  }
}

int conform_coord_serve(conform_coord_t *co, conform_run_result_t *out) {
  memset(out, 0, sizeof *out);
  serve_t *S = calloc(1, sizeof *S);
  S->co = co;
  S->out = out;
  const double join_deadline = conform_now() + conform_opts.bootstrap_timeout_s;

  while (!(S->n_hello == co->nranks && S->n_items_done == co->n_items)) {
    build_pollset(S);
    int pr = poll(S->pf, (nfds_t)S->np, 200);
    if (pr < 0 && errno != EINTR) break;
    if (S->n_hello < co->nranks && conform_now() > join_deadline) {
      int missing = -1;
      for (int r = 0; r < co->nranks && missing < 0; r++)
        if (co->ctl[r] < 0) missing = r;
      serve_fatal(S, "rank %d did not join within %.0f s (--bootstrap-timeout); check that every "
                  "rank runs with the same --coordinator and --nranks",
                  missing, conform_opts.bootstrap_timeout_s);
      break;
    }
    if (pr <= 0) continue;
    for (int i = 0; i < S->np && !S->fatal; i++) {
      if (!(S->pf[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      if (S->kind[i] == FD_STALE) continue;
      if (S->kind[i] == FD_LISTEN) {
        on_accept(S);
        continue;
      }
      bs_hdr_t h;
      void *payload = NULL;
      int rc = bs_read_frame(S->pf[i].fd, &h, &payload, conform_now() + 10);
      switch (S->kind[i]) {
      case FD_PENDING: on_first_frame(S, i, rc, &h, payload); break;
      case FD_CONTROL: on_ctl_frame(S, i, rc, &h, payload); break;
      default: on_session_ready(S, i, rc, &h, payload); break;
      }
    }
    if (S->fatal) break;
  }
  finish_rows(S);
  send_final(co, out);
  int rc = S->fatal ? -1 : 0;
  free(S->ids_rank0);
  free(S->item_done);
  free(S);
  return rc;
}

void conform_coord_destroy(conform_coord_t *co) {
  if (!co) return;
  close(co->listen_fd);
  for (int r = 0; r < CONFORM_MAX_RANKS; r++)
    if (co->ctl[r] >= 0) close(co->ctl[r]);
  for (int i = 0; i < co->n_pending; i++) close(co->pending[i]);
  for (int it = 0; it < co->n_items; it++) {
    for (int r = 0; r < co->nranks; r++) {
      sess_close_fd(&co->sess[it], r);
      sess_free_queue(&co->sess[it], r);
    }
    free(co->item_ids[it]);
  }
  free(co->item_ids);
  free(co->sess);
  free(co->hello);
  free(co);
}

int conform_rank_connect(const char *hostport, int rank, int nranks, char *err, size_t errlen) {
  (void)rank; (void)nranks;
  return bs_connect(hostport, conform_now() + conform_opts.bootstrap_timeout_s, err, errlen);
}

/* ------------------------------------------------------------------ check-child session */

typedef struct msg_item {
  struct msg_item *next;
  int src;
  void *data;
  uint32_t len;
} msg_item_t;

/* A check child's session (conform_ctx_t.session). */
typedef struct conform_session {
  int fd;                    /* session socket to the coordinator, -1 none */
  msg_item_t *msgs;          /* point-to-point messages not consumed yet */
  void *gather;              /* last GATHER_RESULT, not consumed yet */
  uint32_t gather_len;
  bool have_gather;
  bool aborted;
  bool gone[CONFORM_MAX_RANKS];
} bs_client_t;

/* Read every frame available before `deadline` (0 = only what is already there). Returns -1
 * when the coordinator connection broke. */
static int pump(conform_ctx_t *c, double deadline) {
  bs_client_t *st = c->session;
  for (;;) {
    struct pollfd pfd = {st->fd, POLLIN, 0};
    int ms = deadline > 0 ? (int)((deadline - conform_now()) * 1000) : 0;
    if (ms < 0) ms = 0;
    int pr = poll(&pfd, 1, ms);
    if (pr < 0 && errno == EINTR) continue;
    if (pr <= 0) return 0;
    bs_hdr_t h;
    void *payload;
    if (bs_read_frame(st->fd, &h, &payload, conform_now() + 10)) {
      if (!st->aborted) {
        st->aborted = true;
        snprintf(c->bs_error, sizeof c->bs_error, "lost the connection to the coordinator");
      }
      return -1;
    }
    switch (h.type) {
    case BS_ABORT:
      if (!st->aborted) {
        st->aborted = true;
        snprintf(c->bs_error, sizeof c->bs_error, "aborted because %s",
                 payload ? (char *)payload : "another rank failed");
      }
      free(payload);
      break;
    case BS_GATHER_RESULT:
      free(st->gather);
      st->gather = payload;
      st->gather_len = h.len;
      st->have_gather = true;
      break;
    case BS_MSG: {
      msg_item_t *m = calloc(1, sizeof *m), **tail = &st->msgs;
      m->src = h.a;
      m->data = payload;
      m->len = h.len;
      while (*tail) tail = &(*tail)->next;
      *tail = m;
      break;
    }
    case BS_PEER_GONE:
      if (h.a >= 0 && h.a < CONFORM_MAX_RANKS) st->gone[h.a] = true;
      free(payload);
      break;
    default:
      free(payload);
    }
    deadline = 0; /* drain what is there, then return */
  }
}

int conform_session_open(conform_ctx_t *c, const char *hostport, int item) {
  char err[256];
  bs_client_t *st = calloc(1, sizeof *st);
  c->session = st;
  st->fd = bs_connect(hostport, conform_now() + 10, err, sizeof err);
  if (st->fd < 0) {
    snprintf(c->bs_error, sizeof c->bs_error, "%s", err);
    return -1;
  }
  if (bs_write_frame(st->fd, BS_JOIN, item, c->rank, NULL, 0)) {
    snprintf(c->bs_error, sizeof c->bs_error, "cannot join the check's session");
    return -1;
  }
  return 0;
}

void conform_session_done(conform_ctx_t *c) {
  bs_client_t *st = c->session;
  if (!st || st->fd < 0) return;
  bs_write_frame(st->fd, BS_DONE, c->status, 0, c->msg, (uint32_t)strlen(c->msg) + 1);
  close(st->fd);
  st->fd = -1;
}

static int bs_deadline_fail(conform_ctx_t *c, const char *what) {
  bs_client_t *st = c->session;
  if (st->aborted) return -1;
  snprintf(c->bs_error, sizeof c->bs_error, "bootstrap %s did not complete before the check's time "
           "bound (another rank is stuck)", what);
  return -1;
}

int conform_allgather(conform_ctx_t *c, const void *mine, size_t len, void *all) {
  bs_client_t *st = c->session;
  if (!st || st->fd < 0) {
    snprintf(c->bs_error, sizeof c->bs_error, "no bootstrap session");
    return -1;
  }
  if (st->aborted) return -1;
  if (bs_write_frame(st->fd, BS_GATHER, 0, 0, mine, (uint32_t)len)) {
    snprintf(c->bs_error, sizeof c->bs_error, "lost the connection to the coordinator");
    return -1;
  }
  while (!st->have_gather) {
    if (st->aborted) return -1;
    double left = conform_remaining(c) - 0.25;
    if (left <= 0) return bs_deadline_fail(c, "allgather");
    if (pump(c, conform_now() + (left < 0.1 ? left : 0.1)) < 0) return -1;
  }
  st->have_gather = false;
  if (st->gather_len != len * (size_t)c->nranks) {
    snprintf(c->bs_error, sizeof c->bs_error, "allgather size mismatch between ranks");
    return -1;
  }
  if (len) memcpy(all, st->gather, st->gather_len);
  free(st->gather);
  st->gather = NULL;
  return 0;
}

int conform_barrier(conform_ctx_t *c) {
  char one = 1, all[CONFORM_MAX_RANKS];
  return conform_allgather(c, &one, 1, all);
}

int conform_send(conform_ctx_t *c, int peer, const void *buf, size_t len) {
  bs_client_t *st = c->session;
  if (!st || st->aborted) return -1;
  if (bs_write_frame(st->fd, BS_SEND, peer, 0, buf, (uint32_t)len)) {
    snprintf(c->bs_error, sizeof c->bs_error, "lost the connection to the coordinator");
    return -1;
  }
  return 0;
}

int conform_recv(conform_ctx_t *c, int peer, void *buf, size_t len) {
  bs_client_t *st = c->session;
  if (!st) return -1;
  for (;;) {
    for (msg_item_t **pp = &st->msgs; *pp; pp = &(*pp)->next) {
      msg_item_t *m = *pp;
      if (m->src != peer) continue;
      *pp = m->next;
      int rc = 0;
      if (m->len != len) {
        snprintf(c->bs_error, sizeof c->bs_error, "bootstrap message from rank %d has %u bytes, "
                 "expected %zu", peer, m->len, len);
        rc = -1;
      } else if (len) {
        memcpy(buf, m->data, len);
      }
      free(m->data);
      free(m);
      return rc;
    }
    if (st->aborted) return -1;
    if (st->gone[peer]) {
      snprintf(c->bs_error, sizeof c->bs_error, "rank %d left the check without sending the "
               "expected bootstrap message", peer);
      return -1;
    }
    double left = conform_remaining(c) - 0.25;
    if (left <= 0) return bs_deadline_fail(c, "receive");
    if (pump(c, conform_now() + (left < 0.1 ? left : 0.1)) < 0) return -1;
  }
}

bool conform_peer_failed(conform_ctx_t *c) {
  bs_client_t *st = c->session;
  if (!st || st->fd < 0) return false;
  static double last;
  double now = conform_now();
  if (now - last < 0.005) return st->aborted; /* a poll() per 5 ms is plenty */
  last = now;
  pump(c, 0);
  return st->aborted;
}
