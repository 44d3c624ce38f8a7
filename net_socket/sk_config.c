/* strand-socket — configuration knobs and the defaults derived from link speed and core count,
 * and the plugin-wide state the data path reads (devices, configuration, open connections).
 *
 * The state is written only by global set-up and teardown (sk_dev.c, under the plugin lifetime's
 * lock) and read everywhere else; it lives here, at the bottom, so that the data path reads it
 * without calling up into the files that set it up.
 *
 * Every knob is in the SDK parameter registry, so NCCL_DEBUG=INFO prints the effective value and
 * where it came from, and a misspelt STRAND_SOCKET_* variable gets a WARN naming the closest one.
 * NCCL's own Socket variables are honoured where the meaning carries over (NCCL_SOCKET_NTHREADS,
 * NCCL_NSOCKS_PERTHREAD, NCCL_SOCKET_INLINE, NCCL_SOCKET_MIN_TASKSIZE, NCCL_SOCKET_SNDBUF/RCVBUF).
 * The measurements behind the automatic choices are in docs/benchmarks/socket.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sk.h"
#include "strand/log.h"
#include "strand/params.h"

#define SK_AUTO (-2)
/* The tuner's default policy, from the all-reduce sweep on one H100 with 2 fake nodes
 * (docs/benchmarks/socket.md, "The tuner's default"): NCCL's choices up to 8 KiB; one channel to
 * 16 KiB (at 4 ranks NCCL ran a 16 KiB tree on 4 channels, 0.6-0.75x the built-in Socket's one:
 * "Four GPUs"); 2 channels and LL128 at 32 KiB; 2 channels and Simple up to 4 MiB, where NCCL
 * would run LL (to 512 KiB) on 8; NCCL's choices above, where 8 channels win. */
#define SK_TUNER_DEFAULT_CHANNELS "8K:0,16K:1,32K:2:ll128,4M:2:simple"
/* All-gather of 512 KiB to 4 MiB (NCCL's byte count: the whole output, nRanks x one rank's share):
 * NCCL 2.28 picks PAT for the speed strand-socket reports (ring for the built-in Socket's), and PAT
 * ran 1.4-2.4x slower than ring there on 2 fake nodes; at 256 KiB PAT won by 1.5x, from 8 MiB on
 * they tie (docs/benchmarks/socket.md, "Every size again"). Up to 8 KiB as well: there NCCL's PAT
 * runs Simple on one channel, and ring (LL) took 1.1-1.6x less time on 2 and 4 GPUs, while PAT
 * was ahead again from 32 KiB ("Four GPUs"). */
#define SK_TUNER_DEFAULT_AG_RING "1-8K,512K-4M"

static struct {
  int ndev;
  sk_dev_t devs[SK_MAX_DEVS];
  sk_config_t cfg;
  _Atomic int comms;
} g;

const sk_config_t *sk_config(void) { return &g.cfg; }
const sk_dev_t *sk_device(int dev) { return &g.devs[dev]; }
int sk_device_count(void) { return g.ndev; }
void sk_comm_count_add(int delta) { atomic_fetch_add(&g.comms, delta); }
int sk_comm_count(void) { return atomic_load(&g.comms); }

void sk_devices_set(const sk_dev_t *devs, int ndev) {
  for (int i = 0; i < ndev; i++) g.devs[i] = devs[i];
  g.ndev = ndev;
}

void sk_devices_release(void) {
  for (int i = 0; i < g.ndev; i++) {
    free(g.devs[i].pci_path);
    g.devs[i].pci_path = NULL;
  }
  g.ndev = 0;
}

static const strand_param_def_t sk_params[] = {
    STRAND_PARAM_INT("STRAND_SOCKET_NTHREADS", "NCCL_SOCKET_NTHREADS", SK_AUTO, SK_AUTO, 64,
                     "worker threads moving data streams, per process (-2 = auto from cores and "
                     "link speed; 0 = the proxy thread moves the data itself)"),
    STRAND_PARAM_INT("STRAND_SOCKET_NSTREAMS", NULL, SK_AUTO, SK_AUTO, SK_MAX_STREAMS,
                     "TCP data streams per connection (-2 = auto; NCCL_NSOCKS_PERTHREAD x "
                     "threads when that is set)"),
    STRAND_PARAM_INT("NCCL_NSOCKS_PERTHREAD", NULL, SK_AUTO, SK_AUTO, SK_MAX_STREAMS,
                     "NCCL's sockets per thread: data streams = threads x this (-2 = unset)"),
    STRAND_PARAM_INT("STRAND_SOCKET_INLINE", "NCCL_SOCKET_INLINE", 16384, 0, 1 << 20,
                     "messages up to this many bytes ride inline on the control stream"),
    STRAND_PARAM_INT("STRAND_SOCKET_EAGER_BYTES", NULL, 32768, 0, SK_EAGER_MAX_LIMIT,
                     "messages up to this many bytes are sent without waiting for the receiver's "
                     "clear-to-send, and a steady stream of them makes the receiver stop writing "
                     "one per receive (0 = every message waits for its CTS; both ranks should "
                     "agree, the smaller value wins)"),
    STRAND_PARAM_INT("STRAND_SOCKET_MIN_CHUNK", "NCCL_SOCKET_MIN_TASKSIZE", 65536, 4096,
                     SK_MAX_CHUNK, "smallest chunk a large message is cut into"),
    STRAND_PARAM_INT("STRAND_SOCKET_SNDBUF", "NCCL_SOCKET_SNDBUF", -1, -1, 1LL << 30,
                     "SO_SNDBUF of every stream in bytes (-1 = OS autotuning)"),
    STRAND_PARAM_INT("STRAND_SOCKET_RCVBUF", "NCCL_SOCKET_RCVBUF", -1, -1, 1LL << 30,
                     "SO_RCVBUF of every stream in bytes (-1 = OS autotuning)"),
    STRAND_PARAM_INT("STRAND_SOCKET_PEER_TIMEOUT_S", NULL, 30, 1, 3600,
                     "seconds a connection may stay silent or unreachable (a peer that died "
                     "without FIN/RST, a link flap) before the comm fails with a remote error "
                     "(TCP_USER_TIMEOUT, keepalive); flaps shorter than this are ridden through"),
    STRAND_PARAM_INT("STRAND_SOCKET_TIMEOUT_MS", NULL, 30000, 1000, 3600000,
                     "deprecated: STRAND_SOCKET_PEER_TIMEOUT_S in milliseconds, used only when "
                     "that is not set"),
    STRAND_PARAM_INT("STRAND_SOCKET_CONNECT_TIMEOUT_MS", NULL, 10000, 100, 600000,
                     "connect gives up (error) after this long when the peer refuses or does not "
                     "answer: its listener is closed or its process is dead"),
    STRAND_PARAM_INT("STRAND_SOCKET_YIELD", NULL, SK_AUTO, SK_AUTO, 1,
                     "sched_yield() when test() finds a request not done (-2 = auto: only when "
                     "the proxy thread moves the data, i.e. nthreads 0)"),
    STRAND_PARAM_ENUM("STRAND_SOCKET_HANDOFF", NULL, "0", STRAND_PARAM_CHOICES("auto", "1", "0"),
                      "small control-stream writes (eager messages, CTS, credits) are handed to "
                      "a worker thread that is spinning, so the proxy thread returns from isend "
                      "at once (0 = the proxy thread writes them itself, the default: not faster "
                      "on 4 H200s yet; 1 needs worker threads; auto = on with worker threads and "
                      "at least 16 CPUs)"),
    STRAND_PARAM_ENUM("STRAND_SOCKET_SEND_WRITE", NULL, "isend",
                      STRAND_PARAM_CHOICES("isend", "test"),
                      "when the control bytes of a small send (eager, or header + inline payload) "
                      "are written: isend = inside isend (the default); test = isend only queues "
                      "them and the next test() or isend on that connection writes the queue, "
                      "several sends in one system call (ignored while the control hand-off is "
                      "on: STRAND_SOCKET_HANDOFF)"),
    STRAND_PARAM_INT("STRAND_SOCKET_HANDOFF_SPIN_US", NULL, 50, 1, 1000000,
                     "hand-off: microseconds a worker keeps spinning after its last control "
                     "write before it sleeps (the proxy writes itself while it sleeps)"),
    STRAND_PARAM_INT("STRAND_SOCKET_HANDOFF_MIN_BYTES", NULL, 0, 0, SK_HANDOFF_MAX,
                     "hand-off: control writes (header + payload) smaller than this stay with the "
                     "proxy thread, larger ones go to the worker (0 = all)"),
    STRAND_PARAM_INT("STRAND_SOCKET_ZEROCOPY_THRESHOLD", NULL, 0, 0, SK_MAX_CHUNK,
                     "MSG_ZEROCOPY for data chunks of at least this many bytes (0 = off; chunks "
                     "are at most 1 MiB); streams whose sends the kernel copies anyway drop it"),
    STRAND_PARAM_INT("STRAND_SOCKET_ZEROCOPY_COPIED_LIMIT", NULL, 4, 0, 1000000,
                     "a stream stops using MSG_ZEROCOPY after this many consecutive completions "
                     "saying the kernel copied anyway (0 = never stop: for tests and "
                     "measurements)"),
    STRAND_PARAM_BOOL("STRAND_SOCKET_NUMA_PIN", NULL, true,
                      "pin worker threads to the NIC's NUMA node when sysfs names one"),
    STRAND_PARAM_BOOL("STRAND_SOCKET_UNPACK", NULL, false,
                      "device-unpack mode: report NCCL_NET_DEVICE_UNPACK v7, land received bytes "
                      "in a GPU-mapped bounce arena and let NCCL's kernel gather them (needs "
                      "NCCL_PROTO=Simple; see docs/plugins/socket.md)"),
    STRAND_PARAM_INT("STRAND_SOCKET_UNPACK_ARENA_MB", NULL, 256, 1, 4095,
                     "unpack mode: bounce arena per GPU per process, in MiB (< 4 GiB: record "
                     "offsets are 32-bit); receives wait for space when it is full"),
    STRAND_PARAM_INT("STRAND_SOCKET_UNPACK_RECORD", NULL, 16384, 4096, 4 << 20,
                     "unpack mode: bytes per unpack record (rounded down to 16); each record is "
                     "gathered by one warp, and a receive may have at most 2048"),
    STRAND_PARAM_BOOL("STRAND_SOCKET_TUNER", NULL, true,
                      "the tuner in this library sets NCCL's channel count per collective size "
                      "(STRAND_SOCKET_TUNER_CHANNELS) for collectives across nodes; 0 = leave "
                      "NCCL's choices alone"),
    STRAND_PARAM_STRING("STRAND_SOCKET_TUNER_CHANNELS", NULL, SK_TUNER_DEFAULT_CHANNELS,
                        "the tuner's policy: comma list of SIZE:CHANNELS[:PROTO], sizes increasing, "
                        "e.g. 64K:2,2M:4:simple = up to 64 KiB 2 channels, up to 2 MiB 4 and "
                        "Simple for all-reduce, above NCCL's choices (CHANNELS 0 = NCCL's count; "
                        "PROTO ll|ll128|simple; STRAND_SOCKET_TUNER=0 turns the tuner off)"),
    STRAND_PARAM_STRING("STRAND_SOCKET_TUNER_ALLGATHER_RING", NULL, SK_TUNER_DEFAULT_AG_RING,
                        "MIN-MAX[,MIN-MAX...]: an all-gather of that many bytes (its whole output, as NCCL "
                        "counts) runs as ring where NCCL picked PAT and can run ring (off = leave the "
                        "algorithm to NCCL)"),
};

strand_result_t sk_params_register(void) {
  return strand_params_register(sk_params, STRAND_PARAM_COUNT(sk_params));
}

/* STRAND_SOCKET_TUNER_ALLGATHER_RING: "off" or a comma list of MIN-MAX ranges (the SDK's range
 * grammar for each), increasing and not overlapping: small all-gathers and large ones gain from
 * ring for different reasons (docs/benchmarks/socket.md), with PAT ahead in between. */
static strand_result_t ag_ring_parse(const char *text, sk_tuner_policy_t *policy, char *err,
                                     size_t errlen) {
  sk_tuner_policy_t p = *policy;
  p.nag_ring = 0;
  const char *s = text != NULL ? text : "";
  for (int item = 1;; item++) {
    size_t n = strcspn(s, ",");
    char piece[64];
    if (n >= sizeof piece) {
      snprintf(err, errlen, "range %d is too long", item);
      return STRAND_INVALID_USAGE;
    }
    memcpy(piece, s, n);
    piece[n] = '\0';
    uint64_t lo = 0, hi = 0;
    char why[160];
    if (strand_tuner_size_range_parse(piece, &lo, &hi, why, sizeof why) != STRAND_SUCCESS) {
      snprintf(err, errlen, "range %d ('%s'): %s", item, piece, why);
      return STRAND_INVALID_USAGE;
    }
    if (hi == 0) { /* "off": alone only */
      if (item > 1 || s[n] != '\0') {
        snprintf(err, errlen, "range %d: 'off' cannot be combined with ranges", item);
        return STRAND_INVALID_USAGE;
      }
      break;
    }
    if (p.nag_ring == SK_TUNER_AG_RING_RANGES) {
      snprintf(err, errlen, "more than %d ranges", SK_TUNER_AG_RING_RANGES);
      return STRAND_INVALID_USAGE;
    }
    if (p.nag_ring > 0 && lo <= p.ag_ring[p.nag_ring - 1].max) {
      snprintf(err, errlen, "range %d ('%s') must start above the previous range's end", item,
               piece);
      return STRAND_INVALID_USAGE;
    }
    p.ag_ring[p.nag_ring].min = lo;
    p.ag_ring[p.nag_ring].max = hi;
    p.nag_ring++;
    if (s[n] == '\0') break;
    s += n + 1;
  }
  *policy = p;
  return STRAND_SUCCESS;
}

strand_result_t sk_tuner_config_read(bool *enabled, sk_tuner_policy_t *policy) {
  strand_result_t rc = sk_params_register();
  if (rc != STRAND_SUCCESS) return rc;
  if ((rc = strand_param_get_bool("STRAND_SOCKET_TUNER", enabled)) != STRAND_SUCCESS) return rc;
  const char *text = NULL;
  if ((rc = strand_param_get_string("STRAND_SOCKET_TUNER_CHANNELS", &text)) != STRAND_SUCCESS)
    return rc;
  char err[256];
  if (strand_tuner_bands_parse(text, &policy->bands, err, sizeof err) != STRAND_SUCCESS) {
    STRAND_WARN("STRAND_SOCKET_TUNER_CHANNELS='%s' is invalid: %s. Expected a comma list of "
                "SIZE:CHANNELS with increasing sizes, e.g. 64K:2,2M:4; set "
                "STRAND_SOCKET_TUNER=0 to turn the tuner off instead", text ? text : "", err);
    return STRAND_INVALID_USAGE;
  }
  if ((rc = strand_param_get_string("STRAND_SOCKET_TUNER_ALLGATHER_RING", &text)) != STRAND_SUCCESS)
    return rc;
  if (ag_ring_parse(text, policy, err, sizeof err) != STRAND_SUCCESS) {
    STRAND_WARN("STRAND_SOCKET_TUNER_ALLGATHER_RING='%s' is invalid: %s", text ? text : "", err);
    return STRAND_INVALID_USAGE;
  }
  return STRAND_SUCCESS;
}

static strand_result_t get_int(const char *name, int64_t *v, bool *from_env) {
  strand_result_t rc = strand_param_get_int(name, v);
  if (rc != STRAND_SUCCESS) return rc;
  if (from_env) {
    strand_param_source_t src = STRAND_PARAM_SOURCE_DEFAULT;
    const char *env = NULL;
    rc = strand_param_get_source(name, &src, &env);
    if (rc != STRAND_SUCCESS) return rc;
    *from_env = src != STRAND_PARAM_SOURCE_DEFAULT && *v != SK_AUTO;
  }
  return STRAND_SUCCESS;
}

/* Automatic worker count. Below 5 cores the proxy thread (which NCCL keeps spinning in test())
 * moves the bytes itself: extra threads would only compete with it for the same cores. Above that,
 * 3 workers per 8 cores (12 on a 32-core host: the best of 4..24 measured on 2xH200, see
 * docs/benchmarks/socket.md), limited by what a slower link can use. */
static int auto_threads(int speed_mbps, bool speed_known, int ncpus) {
  if (ncpus <= 4) return 0;
  int t = ncpus * 3 / 8;
  if (t < 2) t = 2;
  if (t > 16) t = 16;
  if (speed_known && speed_mbps <= 25000 && t > 2) t = 2;
  else if (speed_known && speed_mbps <= 100000 && t > 4) t = 4;
  return t;
}

/* One data stream per worker, so every connection spreads over the whole pool. */
static int auto_streams(int nthreads, int speed_mbps, bool speed_known) {
  if (nthreads == 0) return 2;
  int s = nthreads;
  if (speed_known && speed_mbps <= 25000 && s > 4) s = 4;
  if (s < 4) s = 4;
  if (s > 16) s = 16;
  return s;
}

/* STRAND_SOCKET_PEER_TIMEOUT_S, or its deprecated predecessor STRAND_SOCKET_TIMEOUT_MS (another
 * unit, so the registry's alias cannot carry it): the old name still works, with a WARN. */
static strand_result_t peer_timeout(sk_config_t *cfg) {
  int64_t s = 0, ms = 0;
  bool env_s = false, env_ms = false;
  strand_result_t rc = get_int("STRAND_SOCKET_PEER_TIMEOUT_S", &s, &env_s);
  if (rc == STRAND_SUCCESS) rc = get_int("STRAND_SOCKET_TIMEOUT_MS", &ms, &env_ms);
  if (rc != STRAND_SUCCESS) return rc;
  if (env_ms && env_s) {
    STRAND_WARN("STRAND_SOCKET_TIMEOUT_MS=%lld is deprecated and ignored: "
                "STRAND_SOCKET_PEER_TIMEOUT_S=%lld is set too", (long long)ms, (long long)s);
  } else if (env_ms) {
    STRAND_WARN("STRAND_SOCKET_TIMEOUT_MS is deprecated; use STRAND_SOCKET_PEER_TIMEOUT_S=%lld "
                "(seconds) instead (honouring %lld ms for now)",
                (long long)((ms + 999) / 1000), (long long)ms);
    cfg->timeout_ms = (int)ms;
    return STRAND_SUCCESS;
  }
  cfg->timeout_ms = (int)(s * 1000);
  return STRAND_SUCCESS;
}

/* STRAND_SOCKET_HANDOFF. Off by default: on 4 H200s (2026-11-28, docs/benchmarks/socket.md) it
 * was not faster than the proxy writing itself. A worker that takes control writes spins after
 * each one, so auto turns it on only where cores are plentiful (16 or more) and workers exist: on
 * a 2-core CI machine a spinning worker would take the core the proxy thread needs. Forced on
 * without workers there is nobody to hand to: a WARN, and the proxy writes as before. */
#define SK_HANDOFF_AUTO_MIN_CPUS 16
static strand_result_t handoff_config(sk_config_t *cfg, int ncpus) {
  int which = 0;
  const char *word = NULL;
  strand_result_t rc = strand_param_get_enum("STRAND_SOCKET_HANDOFF", &which, &word);
  if (rc != STRAND_SUCCESS) return rc;
  if (which == 0) {
    cfg->handoff = cfg->nthreads > 0 && ncpus >= SK_HANDOFF_AUTO_MIN_CPUS;
    cfg->handoff_src = "auto";
  } else {
    cfg->handoff = which == 1;
    cfg->handoff_src = "env";
    if (cfg->handoff && cfg->nthreads == 0) {
      STRAND_WARN("STRAND_SOCKET_HANDOFF=1 needs worker threads, but STRAND_SOCKET_NTHREADS is 0 "
                  "(%s): the proxy thread writes the control stream itself",
                  cfg->nthreads_src);
      cfg->handoff = false;
    }
  }
  int64_t v = 0;
  if ((rc = get_int("STRAND_SOCKET_HANDOFF_SPIN_US", &v, NULL)) != STRAND_SUCCESS) return rc;
  cfg->handoff_spin_us = (int)v;
  if ((rc = get_int("STRAND_SOCKET_HANDOFF_MIN_BYTES", &v, NULL)) != STRAND_SUCCESS) return rc;
  cfg->handoff_min = (size_t)v;
  return STRAND_SUCCESS;
}

strand_result_t sk_config_load(int speed_mbps, int ncpus) {
  sk_config_t *cfg = &g.cfg;
  strand_result_t rc = sk_params_register();
  if (rc != STRAND_SUCCESS) return rc;
  strand_params_check_unknown("STRAND_SOCKET_");
  rc = strand_params_validate();
  if (rc != STRAND_SUCCESS) return rc;

  /* speed_mbps < 0 means "unknown" (virtual or loopback interface): size for a fast link. */
  const bool speed_known = speed_mbps > 0;
  int64_t v;
  bool env_threads = false, env_streams = false, env_nsocks = false;
  if ((rc = get_int("STRAND_SOCKET_NTHREADS", &v, &env_threads)) != STRAND_SUCCESS) return rc;
  cfg->nthreads = env_threads ? (int)v : auto_threads(speed_mbps, speed_known, ncpus);
  cfg->nthreads_src = env_threads ? "env" : "auto";
  if (cfg->nthreads < 0) cfg->nthreads = 0;

  int64_t nsocks;
  if ((rc = get_int("NCCL_NSOCKS_PERTHREAD", &nsocks, &env_nsocks)) != STRAND_SUCCESS) return rc;
  if ((rc = get_int("STRAND_SOCKET_NSTREAMS", &v, &env_streams)) != STRAND_SUCCESS) return rc;
  if (env_streams) {
    cfg->nstreams = (int)v;
    cfg->nstreams_src = "env";
  } else if (env_nsocks) {
    int per = nsocks < 1 ? 1 : (int)nsocks;
    int th = cfg->nthreads < 1 ? 1 : cfg->nthreads;
    cfg->nstreams = per * th;
    cfg->nstreams_src = "NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD";
  } else {
    cfg->nstreams = auto_streams(cfg->nthreads, speed_mbps, speed_known);
    cfg->nstreams_src = "auto";
  }
  if (cfg->nstreams < 1) cfg->nstreams = 1;
  if (cfg->nstreams > SK_MAX_STREAMS) cfg->nstreams = SK_MAX_STREAMS;

  if ((rc = get_int("STRAND_SOCKET_INLINE", &v, NULL)) != STRAND_SUCCESS) return rc;
  cfg->inline_max = (size_t)v;
  if ((rc = get_int("STRAND_SOCKET_EAGER_BYTES", &v, NULL)) != STRAND_SUCCESS) return rc;
  cfg->eager_max = (size_t)v;
  if ((rc = get_int("STRAND_SOCKET_MIN_CHUNK", &v, NULL)) != STRAND_SUCCESS) return rc;
  cfg->min_chunk = (size_t)v;
  if ((rc = get_int("STRAND_SOCKET_SNDBUF", &v, NULL)) != STRAND_SUCCESS) return rc;
  cfg->sndbuf = (int)v;
  if ((rc = get_int("STRAND_SOCKET_RCVBUF", &v, NULL)) != STRAND_SUCCESS) return rc;
  cfg->rcvbuf = (int)v;
  if ((rc = peer_timeout(cfg)) != STRAND_SUCCESS) return rc;
  if ((rc = get_int("STRAND_SOCKET_CONNECT_TIMEOUT_MS", &v, NULL)) != STRAND_SUCCESS) return rc;
  cfg->connect_timeout_ms = (int)v;
  bool env_yield = false;
  if ((rc = get_int("STRAND_SOCKET_YIELD", &v, &env_yield)) != STRAND_SUCCESS) return rc;
  cfg->yield = env_yield ? v == 1 : cfg->nthreads == 0;
  if ((rc = handoff_config(cfg, ncpus)) != STRAND_SUCCESS) return rc;
  int send_write = 0;
  if ((rc = strand_param_get_enum("STRAND_SOCKET_SEND_WRITE", &send_write, NULL)) !=
      STRAND_SUCCESS)
    return rc;
  cfg->send_write_test = send_write == 1;
  if ((rc = get_int("STRAND_SOCKET_ZEROCOPY_THRESHOLD", &v, NULL)) != STRAND_SUCCESS) return rc;
  cfg->zc_threshold = (size_t)v;
  if ((rc = get_int("STRAND_SOCKET_ZEROCOPY_COPIED_LIMIT", &v, NULL)) != STRAND_SUCCESS) return rc;
  cfg->zc_copied_limit = (int)v;
  bool pin = true;
  if ((rc = strand_param_get_bool("STRAND_SOCKET_NUMA_PIN", &pin)) != STRAND_SUCCESS) return rc;
  cfg->numa_pin = pin;
  bool unpack = false;
  if ((rc = strand_param_get_bool("STRAND_SOCKET_UNPACK", &unpack)) != STRAND_SUCCESS) return rc;
  cfg->unpack = unpack;
  if ((rc = get_int("STRAND_SOCKET_UNPACK_ARENA_MB", &v, NULL)) != STRAND_SUCCESS) return rc;
  cfg->unpack_arena = (size_t)v << 20;
  if ((rc = get_int("STRAND_SOCKET_UNPACK_RECORD", &v, NULL)) != STRAND_SUCCESS) return rc;
  cfg->unpack_record = (size_t)v & ~(size_t)15;
  /* Parsed here although only the tuner uses it, so that a bad policy fails init like any knob. */
  if ((rc = sk_tuner_config_read(&cfg->tuner_enabled, &cfg->tuner_policy)) != STRAND_SUCCESS)
    return rc;
  strand_params_dump();
  return STRAND_SUCCESS;
}
