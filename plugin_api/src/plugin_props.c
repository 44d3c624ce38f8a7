/* Default properties of a host-memory device (strand_props_init_host in strand/plugin.h). */
#include <string.h>

#include "strand/plugin.h"

void strand_props_init_host(strand_props_t *props, int dev) {
  memset(props, 0, sizeof *props);
  props->guid = (uint64_t)dev;
  props->ptrSupport = STRAND_PTR_HOST;
  props->maxComms = 65536;
  props->maxRecvs = 1;
  props->netDeviceType = STRAND_DEV_HOST;
  props->netDeviceVersion = STRAND_NET_DEVICE_INVALID_VERSION;
  props->vProps.ndevs = 1;
  props->vProps.devs[0] = dev;
  props->maxP2pBytes = STRAND_MAX_NET_SIZE_V8;
  props->maxCollBytes = STRAND_MAX_COLLNET_SIZE_V8;
  props->maxMultiRequestSize = 1;
  props->railId = STRAND_NET_ID_UNDEF;
  props->planeId = STRAND_NET_ID_UNDEF;
}
