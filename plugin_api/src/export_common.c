/* Strand SDK — what the net and CollNet export layers share: the core's logger and ABI version,
 * range-checked narrowing of the int sizes older cores pass, and the conversion of the plugin's
 * v12 properties to every older layout.
 *
 * This file must not reference strand_plugin_net or strand_plugin_collnet: it is pulled out of
 * libstrand-sdk.a by either export object, and a plugin without a CollNet table does not define
 * strand_plugin_collnet. */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "export_internal.h"

/* The logger NCCL handed to the last init (any version). The export layer only needs it for its
 * own warnings; the plugin gets the same pointer through its init and keeps its own copy.
 * Why a second path beside strand/log.h: that logger (its prefix, filter and fallback stream) is
 * the plugin's to set up, and a plugin may install another logger or none (tests capture it); the
 * export layer must still reach NCCL with the errors it finds itself, before or without the
 * plugin's init (a size an older core cannot carry, a table member the plugin left NULL). */
static _Atomic(strand_logger_t) export_logger;
static atomic_int net_version;
static atomic_int collnet_version;

void strand_export_set_logger(strand_logger_t logger) {
  if (logger != NULL) atomic_store(&export_logger, logger);
}

void strand_export_log(strand_log_level_t level, int line, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  strand_logger_t logger = atomic_load(&export_logger);
  if (logger != NULL) {
    logger(level, STRAND_SUBSYS_NET, __FILE__, line, "%s", msg);
  } else if (level == STRAND_LOG_WARN) {
    /* No init yet, so no NCCL logger: a warning must still reach someone. */
    fprintf(stderr, "strand WARN %s\n", msg);
  }
}

void strand_export_note_net_version(int version) { atomic_store(&net_version, version); }
void strand_export_note_collnet_version(int version) { atomic_store(&collnet_version, version); }

int strand_core_abi_version(void) { return atomic_load(&net_version); }
int strand_core_collnet_abi_version(void) { return atomic_load(&collnet_version); }
int strand_core_max_requests(void) {
  return atomic_load(&net_version) == 6 ? STRAND_NET_MAX_REQUESTS_V6 : STRAND_NET_MAX_REQUESTS;
}

strand_result_t strand_export_int_to_size(int value, const char *call, const char *what,
                                          size_t *out) {
  if (value < 0) {
    /* An older core passes sizes as int; a negative one means it overflowed on its side.
     * Widening it would hand the plugin a ~2^64 byte size, so refuse. */
    STRAND_EXPORT_WARN("%s: %s %d is negative; the core (older NCCL, int sizes) passed an "
                       "overflowed value; check the message/buffer size against 2 GiB",
                       call, what, value);
    return STRAND_INTERNAL_ERROR;
  }
  *out = (size_t)value;
  return STRAND_SUCCESS;
}

strand_result_t strand_export_int_sizes(int n, const int *sizes, const char *call, size_t *out) {
  if (n < 1 || n > STRAND_EXPORT_MAX_RECV_N) {
    STRAND_EXPORT_WARN("%s: n=%d outside 1..%d receives per call; the core and plugin disagree "
                       "on maxRecvs", call, n, STRAND_EXPORT_MAX_RECV_N);
    return STRAND_INTERNAL_ERROR;
  }
  if (sizes == NULL) {
    STRAND_EXPORT_WARN("%s: sizes array is NULL for n=%d", call, n);
    return STRAND_INTERNAL_ERROR;
  }
  for (int i = 0; i < n; i++) {
    if (sizes[i] < 0) {
      STRAND_EXPORT_WARN("%s: sizes[%d]=%d is negative; the core (older NCCL, int sizes) "
                         "passed an overflowed value", call, i, sizes[i]);
      return STRAND_INTERNAL_ERROR;
    }
    out[i] = (size_t)sizes[i];
  }
  return STRAND_SUCCESS;
}

/* ---- properties ----
 * Each converter assigns a whole compound literal, so every field of the older layout is written
 * (and any field a future edit forgets becomes 0, which the canary tests catch). */

void strand_props_v12_to_v6(const strand_props_v12_t *in, strand_props_v6_t *out) {
  *out = (strand_props_v6_t){
      .name = in->name,
      .pciPath = in->pciPath,
      .guid = in->guid,
      .ptrSupport = in->ptrSupport,
      .speed = in->speed,
      .port = in->port,
      .latency = in->latency,
      .maxComms = in->maxComms,
      .maxRecvs = in->maxRecvs,
  };
}

void strand_props_v12_to_v7(const strand_props_v12_t *in, strand_props_v7_t *out) {
  *out = (strand_props_v7_t){
      .name = in->name,
      .pciPath = in->pciPath,
      .guid = in->guid,
      .ptrSupport = in->ptrSupport,
      .speed = in->speed,
      .port = in->port,
      .latency = in->latency,
      .maxComms = in->maxComms,
      .maxRecvs = in->maxRecvs,
      .netDeviceType = in->netDeviceType,
      .netDeviceVersion = in->netDeviceVersion,
  };
}

void strand_props_v12_to_v8(const strand_props_v12_t *in, strand_props_v8_t *out) {
  *out = (strand_props_v8_t){
      .name = in->name,
      .pciPath = in->pciPath,
      .guid = in->guid,
      .ptrSupport = in->ptrSupport,
      .regIsGlobal = in->regIsGlobal,
      .speed = in->speed,
      .port = in->port,
      .latency = in->latency,
      .maxComms = in->maxComms,
      .maxRecvs = in->maxRecvs,
      .netDeviceType = in->netDeviceType,
      .netDeviceVersion = in->netDeviceVersion,
  };
}

static strand_result_t vprops_v12_to_v11(const strand_vprops_v12_t *in, strand_vprops_v11_t *out,
                                         const char *call, int dev) {
  if (in->ndevs < 0 || in->ndevs > STRAND_NET_MAX_DEVS_PER_NIC_V11) {
    STRAND_EXPORT_WARN("%s: device %d fuses %d NICs but this core's vProps holds at most %d; "
                       "load the plugin with an NCCL that takes ncclNetPlugin_v12 or fuse fewer "
                       "NICs", call, dev, in->ndevs, STRAND_NET_MAX_DEVS_PER_NIC_V11);
    return STRAND_INTERNAL_ERROR;
  }
  memset(out, 0, sizeof *out);
  out->ndevs = in->ndevs;
  for (int i = 0; i < in->ndevs; i++) out->devs[i] = in->devs[i];
  return STRAND_SUCCESS;
}

strand_result_t strand_props_v12_to_v9(const strand_props_v12_t *in, strand_props_v9_t *out,
                                       const char *call, int dev) {
  strand_vprops_v9_t vprops;
  strand_result_t rc = vprops_v12_to_v11(&in->vProps, &vprops, call, dev);
  if (rc != STRAND_SUCCESS) return rc;
  *out = (strand_props_v9_t){
      .name = in->name,
      .pciPath = in->pciPath,
      .guid = in->guid,
      .ptrSupport = in->ptrSupport,
      .regIsGlobal = in->regIsGlobal,
      .forceFlush = in->forceFlush,
      .speed = in->speed,
      .port = in->port,
      .latency = in->latency,
      .maxComms = in->maxComms,
      .maxRecvs = in->maxRecvs,
      .netDeviceType = in->netDeviceType,
      .netDeviceVersion = in->netDeviceVersion,
      .vProps = vprops,
      .maxP2pBytes = in->maxP2pBytes,
      .maxCollBytes = in->maxCollBytes,
  };
  return STRAND_SUCCESS;
}

strand_result_t strand_props_v12_to_v11(const strand_props_v12_t *in, strand_props_v11_t *out,
                                        const char *call, int dev) {
  strand_vprops_v11_t vprops;
  strand_result_t rc = vprops_v12_to_v11(&in->vProps, &vprops, call, dev);
  if (rc != STRAND_SUCCESS) return rc;
  *out = (strand_props_v11_t){
      .name = in->name,
      .pciPath = in->pciPath,
      .guid = in->guid,
      .ptrSupport = in->ptrSupport,
      .regIsGlobal = in->regIsGlobal,
      .forceFlush = in->forceFlush,
      .speed = in->speed,
      .port = in->port,
      .latency = in->latency,
      .maxComms = in->maxComms,
      .maxRecvs = in->maxRecvs,
      .netDeviceType = in->netDeviceType,
      .netDeviceVersion = in->netDeviceVersion,
      .vProps = vprops,
      .maxP2pBytes = in->maxP2pBytes,
      .maxCollBytes = in->maxCollBytes,
      .maxMultiRequestSize = in->maxMultiRequestSize,
      /* railId / planeId do not exist before v12: a v11 core treats them as unknown. */
  };
  return STRAND_SUCCESS;
}

strand_result_t strand_vprops_v11_to_v12(const strand_vprops_v11_t *in, strand_vprops_v12_t *out,
                                         const char *call) {
  if (in == NULL || in->ndevs < 0 || in->ndevs > STRAND_NET_MAX_DEVS_PER_NIC_V11) {
    STRAND_EXPORT_WARN("%s: vNIC request with %d devices; a v9..v11 core may ask for at most %d",
                       call, in == NULL ? -1 : in->ndevs, STRAND_NET_MAX_DEVS_PER_NIC_V11);
    return STRAND_INTERNAL_ERROR;
  }
  memset(out, 0, sizeof *out);
  out->ndevs = in->ndevs;
  for (int i = 0; i < in->ndevs; i++) out->devs[i] = in->devs[i];
  return STRAND_SUCCESS;
}

/* ---- getProperties for older cores: fetch the plugin's v12 struct, convert ---- */

static strand_result_t fetch_v12(strand_export_getprops_fn get, int dev, strand_props_v12_t *p12) {
  memset(p12, 0, sizeof *p12);
  return get(dev, p12);
}

strand_result_t strand_export_props_v6(strand_export_getprops_fn get, int dev, strand_props_v6_t *out) {
  strand_props_v12_t p12;
  strand_result_t rc = fetch_v12(get, dev, &p12);
  if (rc == STRAND_SUCCESS) strand_props_v12_to_v6(&p12, out);
  return rc;
}
strand_result_t strand_export_props_v7(strand_export_getprops_fn get, int dev, strand_props_v7_t *out) {
  strand_props_v12_t p12;
  strand_result_t rc = fetch_v12(get, dev, &p12);
  if (rc == STRAND_SUCCESS) strand_props_v12_to_v7(&p12, out);
  return rc;
}
strand_result_t strand_export_props_v8(strand_export_getprops_fn get, int dev, strand_props_v8_t *out) {
  strand_props_v12_t p12;
  strand_result_t rc = fetch_v12(get, dev, &p12);
  if (rc == STRAND_SUCCESS) strand_props_v12_to_v8(&p12, out);
  return rc;
}
strand_result_t strand_export_props_v9(strand_export_getprops_fn get, int dev, strand_props_v9_t *out,
                                       const char *call) {
  strand_props_v12_t p12;
  strand_result_t rc = fetch_v12(get, dev, &p12);
  return rc != STRAND_SUCCESS ? rc : strand_props_v12_to_v9(&p12, out, call, dev);
}
strand_result_t strand_export_props_v11(strand_export_getprops_fn get, int dev,
                                        strand_props_v11_t *out, const char *call) {
  strand_props_v12_t p12;
  strand_result_t rc = fetch_v12(get, dev, &p12);
  return rc != STRAND_SUCCESS ? rc : strand_props_v12_to_v11(&p12, out, call, dev);
}
