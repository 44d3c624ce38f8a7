/* strand-ofi — the STRAND_OFI_* parameters (SDK parameter registry, documented in
 * docs/plugins/ofi.md and docs/configuration.md). The bottom of the plugin: calls nothing of ours
 * (the clock the other files read is the SDK's strand/clock.h). */
#include <stdio.h>
#include <string.h>

#include "ofi.h"
#include "strand/topo.h"

ofi_params_t ofi_params;

/* The rails profile STRAND_OFI_RAILS=0 (auto) picks on machines with this many CPUs or more: 4
 * rails whose threads keep off a rail a caller used in the last 100 us, a speed that makes NCCL
 * open 8 channels (one comm per channel, spread over the rails), and tuner bands that run
 * mid-size collectives on 2 channels with the Simple protocol. Measured through real NCCL on 2
 * H200s (32 cores, docs/benchmarks/ofi.md, 2026-11-27): 1.2-1.5x the built-in Socket from 16 MiB
 * where one rail was at 0.8-0.9x, and no 8-byte first-use stall; rail threads spin, so machines
 * with few CPUs keep one rail. Simple up to 1 MiB (2026-11-28): the 100 Gb/s speed otherwise keeps
 * NCCL on LL there, which doubles the bytes on the wire; with it 128 KiB went from 0.62-0.84x to
 * 1.03x the built-in and 256 KiB from 0.57-0.60x to 1.13x. */
#define OFI_AUTO_RAILS 4
#define OFI_AUTO_RAILS_MIN_CPUS 16
#define OFI_AUTO_SPEED_MBPS 100000
#define OFI_AUTO_TUNER_BANDS "16K:0,1M:2:simple"


static const strand_param_def_t ofi_param_defs[] = {
    STRAND_PARAM_STRING("STRAND_OFI_PROVIDER", NULL, NULL,
                        "libfabric provider to use, e.g. \"tcp;ofi_rxm\", sockets, efa, cxi, "
                        "psm3, verbs;ofi_rxm (unset: FI_PROVIDER, else the best RDM provider)"),
    STRAND_PARAM_STRING("STRAND_OFI_DOMAINS", NULL, NULL,
                        "comma-separated libfabric domain names to use as devices (unset: every "
                        "domain of the provider except loopback)"),
    STRAND_PARAM_BOOL("STRAND_OFI_HMEM", NULL, true,
                      "use FI_HMEM (GPU memory registration, NCCL_PTR_CUDA) when the provider "
                      "offers it and libcuda is present"),
    STRAND_PARAM_INT("STRAND_OFI_PROBE_MS", NULL, 1000, 10, 3600000,
                     "a request waiting this long makes its comm probe the peer's endpoint"),
    STRAND_PARAM_INT("STRAND_OFI_PEER_TIMEOUT_S", NULL, 30, 1, 86400,
                     "seconds a connected peer may stay unreachable (a link flap) before the comm "
                     "fails: a liveness probe not taken within this fails the comm"),
    STRAND_PARAM_INT("STRAND_OFI_CONNECT_TIMEOUT_S", NULL, 10, 1, 86400,
                     "seconds connect waits for the listener's answer before it fails (a dead or "
                     "closed listener); the same bound as strand-socket's connect timeout"),
    STRAND_PARAM_INT("STRAND_OFI_CLOSE_DRAIN_MS", NULL, 500, 0, 60000,
                     "how long close waits for in-flight operations before leaving them to drain"),
    STRAND_PARAM_INT("STRAND_OFI_RAILS", NULL, 0, 0, OFI_MAX_RAILS,
                     "endpoints per device, each with its own provider connections and progress "
                     "thread; comms are spread over them (1 = one endpoint, progressed by the "
                     "callers only; 0 = auto: 4 rails with a speed of 100 Gb/s and tuner bands "
                     "16K:0,1M:2:simple unless those are set, on machines with 16 CPUs or more, else 1)"),
    STRAND_PARAM_BOOL("STRAND_OFI_RAIL_THREADS", NULL, true,
                      "with several rails, give each rail a progress thread (0: the rails are "
                      "progressed by the callers' test/isend/irecv only)"),
    STRAND_PARAM_INT("STRAND_OFI_RAIL_QUIET_US", NULL, 100, 0, 1000000,
                     "a rail thread progresses its rail only when no caller has touched the rail "
                     "for this long (0: whenever the rail's lock is free)"),
    STRAND_PARAM_INT("STRAND_OFI_RAIL_BLOCK", NULL, 1, 1, 64,
                     "consecutive comms (NCCL opens one per channel and peer, channel 0 first) a "
                     "device puts on one rail before moving to the next: 2 puts channels 0-1 on "
                     "rail 0, 2-3 on rail 1, ... (1: round robin)"),
    STRAND_PARAM_INT("STRAND_OFI_SPEED_MBPS", NULL, 0, 0, 10000000,
                     "link speed reported to NCCL in Mb/s, from which NCCL sizes its channel count "
                     "(0: the speed libfabric or sysfs gives for the device)"),
    STRAND_PARAM_STRING("STRAND_OFI_TUNER_CHANNELS", NULL, NULL,
                        "channels per collective size for strand-ofi's tuner: SIZE:N[:PROTO],... "
                        "bands (a collective of at most SIZE bytes runs on N channels, 0 = "
                        "NCCL's count, an all-reduce on PROTO ll|ll128|simple; above the last "
                        "band NCCL's choices); unset: 16K:1,64K:1:ll,1M:2:simple,16M:2:simple on "
                        "communicators of 3 nodes or more, else the rails profile's or none"),
    STRAND_PARAM_INT("STRAND_OFI_TUNER_TREE_BYTES", NULL, 0, 0, 1073741824,
                     "strand-ofi's tuner runs an all-reduce of at most this many bytes on Tree "
                     "(its cheapest runnable protocol) where NCCL picked Ring: one send and one "
                     "receive per rank instead of the ring's 2(n-1) (0: NCCL's algorithm; unset: "
                     "1024 on 2-node communicators, 0 on larger ones)"),
    STRAND_PARAM_INT("STRAND_OFI_SLOW_MS", NULL, 0, 0, 3600000,
                     "log (INFO) every request, isend/irecv/test call, fi_cq_read and rail-thread "
                     "lock hold that took at least this long, with the thread's involuntary context "
                     "switches, caller gaps that long, and every comm's first completion (0: off)"),
    STRAND_PARAM_BOOL("STRAND_OFI_INJECT", NULL, false,
                      "send host-memory messages no larger than the provider's inject_size with "
                      "fi_tinject: the request is done at once, with no completion to reap (0: "
                      "every send by fi_tsend)"),
};

/* A bad STRAND_OFI_TUNER_CHANNELS fails the init that read it (net or tuner), with a WARN naming the
 * variable and the item that is wrong, as every other bad knob does. */
static strand_result_t parse_tuner_bands(const char *text, strand_tuner_bands_t *bands) {
  char err[256];
  if (strand_tuner_bands_parse(text, bands, err, sizeof err) == STRAND_SUCCESS) return STRAND_SUCCESS;
  STRAND_WARN("STRAND_OFI_TUNER_CHANNELS='%s' is invalid: %s. Expected a comma list of "
              "SIZE:N[:ll|ll128|simple] with increasing sizes, e.g. 16K:0,1M:2; unset it to leave "
              "NCCL's channel counts alone", text, err);
  return STRAND_INVALID_USAGE;
}

strand_result_t ofi_tuner_bands_read(strand_tuner_bands_t *bands) {
  strand_result_t r = strand_params_register(ofi_param_defs, STRAND_PARAM_COUNT(ofi_param_defs));
  if (r != STRAND_SUCCESS) return r;
  char text[sizeof ofi_params.tuner_channels];
  if ((r = strand_param_copy_string("STRAND_OFI_TUNER_CHANNELS", text, sizeof text)) !=
      STRAND_SUCCESS)
    return r;
  return parse_tuner_bands(text, bands);
}

strand_result_t ofi_params_load(void) {
  strand_result_t r = strand_params_register(ofi_param_defs, STRAND_PARAM_COUNT(ofi_param_defs));
  if (r != STRAND_SUCCESS) return r;
  strand_params_check_unknown("STRAND_OFI_");
  r = strand_params_validate();
  if (r != STRAND_SUCCESS) return r;
  bool hmem = true;
  bool rail_threads = true;
  bool inject = false;
  int64_t probe = 0, timeout = 0, connect_timeout = 0, drain = 0, rails = 1, quiet = 0, speed = 0,
          slow = 0, block = 1, tree_bytes = 0;
  if ((r = strand_param_copy_string("STRAND_OFI_PROVIDER", ofi_params.provider,
                                    sizeof ofi_params.provider)) != STRAND_SUCCESS ||
      (r = strand_param_copy_string("STRAND_OFI_DOMAINS", ofi_params.domains,
                                    sizeof ofi_params.domains)) != STRAND_SUCCESS ||
      (r = strand_param_get_bool("STRAND_OFI_HMEM", &hmem)) != STRAND_SUCCESS ||
      (r = strand_param_get_int("STRAND_OFI_PROBE_MS", &probe)) != STRAND_SUCCESS ||
      (r = strand_param_get_int("STRAND_OFI_PEER_TIMEOUT_S", &timeout)) != STRAND_SUCCESS ||
      (r = strand_param_get_int("STRAND_OFI_CONNECT_TIMEOUT_S", &connect_timeout)) !=
          STRAND_SUCCESS ||
      (r = strand_param_get_int("STRAND_OFI_CLOSE_DRAIN_MS", &drain)) != STRAND_SUCCESS ||
      (r = strand_param_get_int("STRAND_OFI_RAILS", &rails)) != STRAND_SUCCESS ||
      (r = strand_param_get_bool("STRAND_OFI_RAIL_THREADS", &rail_threads)) != STRAND_SUCCESS ||
      (r = strand_param_get_int("STRAND_OFI_RAIL_QUIET_US", &quiet)) != STRAND_SUCCESS ||
      (r = strand_param_get_int("STRAND_OFI_SPEED_MBPS", &speed)) != STRAND_SUCCESS ||
      (r = strand_param_get_int("STRAND_OFI_RAIL_BLOCK", &block)) != STRAND_SUCCESS ||
      (r = strand_param_get_int("STRAND_OFI_SLOW_MS", &slow)) != STRAND_SUCCESS ||
      (r = strand_param_get_bool("STRAND_OFI_INJECT", &inject)) != STRAND_SUCCESS ||
      (r = strand_param_get_int("STRAND_OFI_TUNER_TREE_BYTES", &tree_bytes)) != STRAND_SUCCESS ||
      (r = strand_param_copy_string("STRAND_OFI_TUNER_CHANNELS", ofi_params.tuner_channels,
                                    sizeof ofi_params.tuner_channels)) != STRAND_SUCCESS)
    return r;
  ofi_params.hmem = hmem;
  ofi_params.probe_ms = (long)probe;
  ofi_params.peer_timeout_ms = (long)timeout * 1000;
  ofi_params.connect_timeout_ms = (long)connect_timeout * 1000;
  ofi_params.close_drain_ms = (long)drain;
  if (rails == 0) { /* auto: the rails profile on machines with the cores for its threads */
    rails = strand_topo_num_cpus() >= OFI_AUTO_RAILS_MIN_CPUS ? OFI_AUTO_RAILS : 1;
    if (rails > 1) {
      if (speed == 0) speed = OFI_AUTO_SPEED_MBPS;
      if (ofi_params.tuner_channels[0] == '\0')
        snprintf(ofi_params.tuner_channels, sizeof ofi_params.tuner_channels, "%s",
                 OFI_AUTO_TUNER_BANDS);
    }
  }
  if ((r = parse_tuner_bands(ofi_params.tuner_channels, &ofi_params.tuner_bands)) != STRAND_SUCCESS)
    return r;
  ofi_params.rails = (int)rails;
  ofi_params.rail_threads = rail_threads;
  ofi_params.rail_quiet_ns = (uint64_t)quiet * 1000u;
  ofi_params.speed_mbps = (int)speed;
  ofi_params.rail_block = (int)block;
  ofi_params.slow_ms = (uint64_t)slow;
  ofi_params.inject = inject;
  ofi_params.tuner_tree_bytes = (uint64_t)tree_bytes;
  /* Whether the user chose the tuner's values: if not, the tuner picks them per communicator by
   * its node count (ofi_tuner.c). An empty value counts as unset (the SDK's rule). */
  strand_param_source_t src;
  if ((r = strand_param_get_source("STRAND_OFI_TUNER_CHANNELS", &src, NULL)) != STRAND_SUCCESS)
    return r;
  ofi_params.tuner_channels_set = src != STRAND_PARAM_SOURCE_DEFAULT;
  if ((r = strand_param_get_source("STRAND_OFI_TUNER_TREE_BYTES", &src, NULL)) != STRAND_SUCCESS)
    return r;
  ofi_params.tuner_tree_bytes_set = src != STRAND_PARAM_SOURCE_DEFAULT;
  strand_params_dump();
  return STRAND_SUCCESS;
}

