/* strand-conform — props.*: device properties as NCCL's topology and transport read them
 * (spec §2.6, §1.3, §5.1 item 10, §6.13). Every check covers every device. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "conform.h"

#define FOR_EACH_DEV(c, p)                                                                         \
  for (int dev = 0; dev < (c)->ndev; dev++)                                                        \
    if (conform_props((c), dev, &(p)) == 0)

static conform_status_t done(conform_ctx_t *c) {
  return c->status == CONFORM_FAIL ? CONFORM_FAIL : CONFORM_PASS;
}

/* Core never zeroes the struct (§5.1 item 10): fill it with a canary, call, and see which fields
 * still hold it. Two different canaries so that a field legitimately equal to one is not flagged. */
static conform_status_t props_fields_written(conform_ctx_t *c) {
  const conform_field_t *f;
  int nf = conform_props_fields(c->version, &f);
  size_t sz = conform_props_size(c->version);
  unsigned char *buf = malloc(sz + 64);
  for (int dev = 0; dev < c->ndev; dev++) {
    unsigned unwritten = 0; /* bit per field, AND over both canaries */
    bool first = true;
    for (int k = 0; k < 2; k++) {
      unsigned char canary = k ? 0x5A : 0xA5;
      memset(buf, canary, sz + 64);
      conform_phase(c, "getProperties(dev %d) with canary", dev);
      strand_result_t r = conform_raw_get_properties(c->plugin, false, dev, buf, NULL);
      if (r != STRAND_SUCCESS) {
        free(buf);
        return conform_fail(c, "getProperties(dev %d) returned %s", dev, conform_result_str(r));
      }
      for (size_t i = sz; i < sz + 64; i++)
        if (buf[i] != canary) {
          free(buf);
          return conform_fail(c, "getProperties(dev %d) wrote %zu bytes past the end of the v%d "
                              "struct (%zu bytes): it was built against another version's header",
                              dev, i - sz + 1, c->version, sz);
        }
      unsigned mask = 0;
      for (int i = 0; i < nf; i++) {
        bool same = true;
        for (size_t b = 0; b < f[i].size; b++)
          if (buf[f[i].off + b] != canary) same = false;
        if (same) mask |= 1u << i;
      }
      unwritten = first ? mask : (unwritten & mask);
      first = false;
    }
    for (int i = 0; i < nf; i++)
      if (unwritten & (1u << i))
        conform_fail(c, "dev %d: field %s (offset %zu) left unwritten; NCCL does not zero the struct",
                     dev, f[i].name, f[i].off);
  }
  free(buf);
  return done(c);
}

/* props.name's further rules (below): the same name on every call, NUL-terminated and printable
 * within 255 characters; each device's pointer keeps its own name. */
static void name_stable(conform_ctx_t *c);
static void name_per_device(conform_ctx_t *c);

static conform_status_t props_name(conform_ctx_t *c) {
  strand_props_v12_t p;
  char **names = calloc((size_t)c->ndev, sizeof *names);
  FOR_EACH_DEV(c, p) {
    if (!p.name || !p.name[0]) {
      conform_fail(c, "dev %d: name is %s", dev, p.name ? "empty" : "NULL");
      continue;
    }
    names[dev] = strdup(p.name);
    for (int o = 0; o < dev; o++)
      if (names[o] && !strcmp(names[o], p.name))
        conform_fail(c, "devices %d and %d share the name \"%s\"; NCCL's topology keys NICs by name",
                     o, dev, p.name);
  }
  for (int d = 0; d < c->ndev; d++) free(names[d]);
  free(names);
  name_stable(c);
  name_per_device(c);
  return done(c);
}

/* NCCL's topology XML stores attribute values (the <net name=...> key among them) in buffers of
 * 255 characters + NUL; a longer name is cut, a name without a NUL within reach runs into junk. */
#define NAME_SANE_MAX 255

/* The name must end within NAME_SANE_MAX bytes and hold printable ASCII only: a name that fills its
 * buffer without a NUL reads on into whatever follows it, which is rarely printable. strnlen never
 * reads past the NUL or the bound, so a terminated name is never over-read here. */
static bool name_terminated(conform_ctx_t *c, int dev, const char *name) {
  size_t n = strnlen(name, NAME_SANE_MAX + 1);
  if (n > NAME_SANE_MAX) {
    conform_fail(c, "dev %d: name has no NUL within %d bytes (NCCL's topology keeps 255 characters)",
                 dev, NAME_SANE_MAX);
    return false;
  }
  for (size_t i = 0; i < n; i++) {
    unsigned char ch = (unsigned char)name[i];
    if (ch < 0x20 || ch > 0x7e) {
      conform_fail(c, "dev %d: name byte %zu is 0x%02x after \"%.*s\": the name is not "
                   "NUL-terminated within its buffer (junk follows it)", dev, i, ch, (int)i, name);
      return false;
    }
  }
  return true;
}

/* A device's name is the topology's key for it: each getProperties of the same device must give
 * the same string, and it must be a proper C string. */
static void name_stable(conform_ctx_t *c) {
  strand_props_v12_t p, q;
  FOR_EACH_DEV(c, p) {
    if (!p.name || !p.name[0]) continue; /* props.name reports it */
    if (!name_terminated(c, dev, p.name)) continue;
    char first[NAME_SANE_MAX + 1];
    snprintf(first, sizeof first, "%s", p.name);
    /* Another device's call in between, as NCCL's topology discovery makes them. */
    if (c->ndev > 1) conform_props(c, (dev + 1) % c->ndev, &q);
    if (conform_props(c, dev, &q)) continue;
    if (!q.name || strncmp(first, q.name, NAME_SANE_MAX + 1) != 0)
      conform_fail(c, "dev %d: name \"%s\" on one getProperties call, \"%.*s\" on the next: NCCL "
                   "keys its topology on the name, so one NIC would look like two", dev, first,
                   NAME_SANE_MAX, q.name ? q.name : "(null)");
  }
}

/* NCCL keeps the name pointer of each device while it queries the others (the topology holds
 * props for every device at once). A buffer shared by all devices then names every device after
 * the last one queried. */
static void name_per_device(conform_ctx_t *c) {
  if (c->ndev < 2) return; /* one device has no other to share its buffer with */
  const char **ptr = calloc((size_t)c->ndev, sizeof *ptr);
  char (*copy)[NAME_SANE_MAX + 1] = calloc((size_t)c->ndev, sizeof *copy);
  strand_props_v12_t p;
  FOR_EACH_DEV(c, p) {
    ptr[dev] = p.name;
    if (p.name) snprintf(copy[dev], sizeof copy[dev], "%.*s", NAME_SANE_MAX, p.name);
  }
  for (int dev = 0; dev < c->ndev; dev++) {
    if (!ptr[dev] || !copy[dev][0]) continue;
    if (strncmp(ptr[dev], copy[dev], NAME_SANE_MAX + 1) != 0)
      conform_fail(c, "dev %d: the name pointer it returned read \"%s\" then, \"%.*s\" after the "
                   "other devices were queried: the devices share one name buffer", dev, copy[dev],
                   NAME_SANE_MAX, ptr[dev]);
  }
  free(copy);
  free(ptr);
}

static conform_status_t props_pcipath(conform_ctx_t *c) {
  strand_props_v12_t p;
  FOR_EACH_DEV(c, p) {
    if (!p.pciPath) continue;
    struct stat st;
    if (stat(p.pciPath, &st) != 0 || !S_ISDIR(st.st_mode))
      conform_fail(c, "dev %d: pciPath \"%s\" is not an existing directory (use NULL for virtual "
                   "devices)", dev, p.pciPath);
  }
  return done(c);
}

static conform_status_t props_speed(conform_ctx_t *c) {
  strand_props_v12_t p;
  /* NCCL's core treats speed <= 0 as 10 Gb/s (spec §2.6); NICs that do not know their link speed
   * report -1. Tolerated, so a warning, not a failure. */
  FOR_EACH_DEV(c, p) if (p.speed <= 0)
    conform_warn(c, "dev %d: speed %d Mbps: NCCL's core treats a speed <= 0 as 10 Gb/s (10000 Mbps),"
                 " so topology and tuning assume 10 Gb/s whatever the link really does", dev, p.speed);
  return done(c);
}

static conform_status_t props_max_comms(conform_ctx_t *c) {
  strand_props_v12_t p;
  FOR_EACH_DEV(c, p) if (p.maxComms <= 0) conform_fail(c, "dev %d: maxComms %d (must be > 0)", dev, p.maxComms);
  return done(c);
}

static conform_status_t props_max_recvs(conform_ctx_t *c) {
  strand_props_v12_t p;
  FOR_EACH_DEV(c, p) if (p.maxRecvs < 1 || p.maxRecvs > 8)
    conform_fail(c, "dev %d: maxRecvs %d (must be 1..8)", dev, p.maxRecvs);
  return done(c);
}

static conform_status_t props_ptr_support(conform_ctx_t *c) {
  strand_props_v12_t p;
  FOR_EACH_DEV(c, p) {
    if (!(p.ptrSupport & STRAND_PTR_HOST))
      conform_fail(c, "dev %d: ptrSupport 0x%x lacks NCCL_PTR_HOST", dev, (unsigned)p.ptrSupport);
    if (p.ptrSupport & ~(STRAND_PTR_HOST | STRAND_PTR_CUDA | STRAND_PTR_DMABUF))
      conform_fail(c, "dev %d: ptrSupport 0x%x has unknown bits", dev, (unsigned)p.ptrSupport);
  }
  return done(c);
}

static conform_status_t props_device_type(conform_ctx_t *c) {
  strand_props_v12_t p;
  FOR_EACH_DEV(c, p) {
    bool ok = p.netDeviceType == STRAND_DEV_HOST ||
              (p.netDeviceType == STRAND_DEV_UNPACK &&
               p.netDeviceVersion == STRAND_NET_DEVICE_UNPACK_VERSION);
    if (!ok)
      conform_fail(c, "dev %d: (netDeviceType %d, netDeviceVersion 0x%x) is not HOST or UNPACK/0x7",
                   dev, p.netDeviceType, (unsigned)p.netDeviceVersion);
  }
  return done(c);
}

static conform_status_t props_max_bytes(conform_ctx_t *c) {
  strand_props_v12_t p;
  FOR_EACH_DEV(c, p) {
    if (p.maxP2pBytes == 0 || p.maxP2pBytes > STRAND_MAX_NET_SIZE_BYTES)
      conform_fail(c, "dev %d: maxP2pBytes %zu outside (0, 2^40]: NCCL's proxy setup fails", dev,
                   p.maxP2pBytes);
    if (p.maxCollBytes == 0 || p.maxCollBytes > STRAND_MAX_NET_SIZE_BYTES)
      conform_fail(c, "dev %d: maxCollBytes %zu outside (0, 2^40]", dev, p.maxCollBytes);
  }
  if (c->version <= 8) conform_note(c, "v%d has no maxP2pBytes/maxCollBytes: core defaults apply", c->version);
  return done(c);
}

static conform_status_t props_vprops(conform_ctx_t *c) {
  if (c->version < 9) return conform_skip(c, "vProps appear in v9");
  int max = c->version >= 12 ? STRAND_NET_MAX_DEVS_PER_NIC_V12 : STRAND_NET_MAX_DEVS_PER_NIC_V11;
  strand_props_v12_t p;
  FOR_EACH_DEV(c, p) {
    if (p.vProps.ndevs < 1 || p.vProps.ndevs > max) {
      conform_fail(c, "dev %d: vProps.ndevs %d (must be 1..%d)", dev, p.vProps.ndevs, max);
      continue;
    }
    for (int i = 0; i < p.vProps.ndevs; i++)
      if (p.vProps.devs[i] < 0 || p.vProps.devs[i] >= c->ndev)
        conform_fail(c, "dev %d: vProps.devs[%d] = %d is not a device index", dev, i, p.vProps.devs[i]);
  }
  return done(c);
}

static conform_status_t props_rail_plane(conform_ctx_t *c) {
  if (c->version < 12) return conform_skip(c, "railId/planeId appear in v12");
  strand_props_v12_t p;
  FOR_EACH_DEV(c, p) {
    if (p.railId < -1) conform_fail(c, "dev %d: railId %d (-1 = unknown)", dev, p.railId);
    if (p.planeId < -1) conform_fail(c, "dev %d: planeId %d (-1 = unknown)", dev, p.planeId);
  }
  return done(c);
}

static conform_status_t props_bad_device(conform_ctx_t *c) {
  strand_props_v12_t p;
  int bad[2] = {-1, c->ndev};
  for (int i = 0; i < 2; i++) {
    memset(&p, 0, sizeof p);
    conform_phase(c, "getProperties(dev %d) out of range", bad[i]);
    strand_result_t r = c->net->getProperties(bad[i], &p);
    if (r == STRAND_SUCCESS)
      conform_fail(c, "getProperties(%d) with %d devices returned ncclSuccess", bad[i], c->ndev);
  }
  return done(c);
}

static conform_status_t props_make_vdevice(conform_ctx_t *c) {
  if (!c->net->makeVDevice) return conform_skip(c, "makeVDevice is NULL (NIC fusion disabled)");
  if (c->ndev < 2) return conform_skip(c, "needs >= 2 devices, the plugin has %d", c->ndev);
  strand_props_v12_t p0, p1, pv;
  if (conform_props(c, 0, &p0) || conform_props(c, 1, &p1)) return CONFORM_FAIL;
  strand_vprops_v12_t vp;
  memset(&vp, 0, sizeof vp);
  vp.ndevs = 2;
  vp.devs[0] = 0;
  vp.devs[1] = 1;
  int d = -1, before = c->ndev, after = -1;
  conform_phase(c, "makeVDevice");
  strand_result_t r = c->net->makeVDevice(&d, &vp);
  if (r != STRAND_SUCCESS)
    return conform_skip(c, "makeVDevice({0,1}) returned %s (allowed: NCCL then marks the devices "
                        "unmergeable)", conform_result_str(r));
  if (d != before) conform_fail(c, "makeVDevice returned index %d, expected the next index %d", d, before);
  conform_phase(c, "devices after makeVDevice");
  r = c->net->devices(&after);
  if (r != STRAND_SUCCESS || after != before + 1)
    return conform_fail(c, "devices() after makeVDevice: %s, %d devices (expected %d)",
                        conform_result_str(r), after, before + 1);
  if (conform_props(c, d, &pv)) return CONFORM_FAIL;
  if (pv.vProps.ndevs != 2 || pv.vProps.devs[0] != 0 || pv.vProps.devs[1] != 1)
    conform_fail(c, "virtual device %d lists vProps {%d: %d,%d}, expected {2: 0,1}", d,
                 pv.vProps.ndevs, pv.vProps.devs[0], pv.vProps.devs[1]);
  if (!pv.name || (p0.name && !strcmp(pv.name, p0.name)) || (p1.name && !strcmp(pv.name, p1.name)))
    conform_fail(c, "virtual device name \"%s\" is not distinct from its members'", pv.name ? pv.name : "(null)");
  return done(c);
}

const conform_check_t conform_checks_props[] = {
  {"props.fields-written", "§2.6, §5.1 item 10", "getProperties writes every field, nothing past the struct",
   props_fields_written, 20, 0},
  {"props.name", "§2.6 name", "name non-empty, unique per device, NUL-terminated printable <= 255 chars, "
   "the same on every call, each device's pointer keeps its own name", props_name, 20, 0},
  {"props.pcipath", "§2.6 pciPath", "pciPath NULL or an existing directory", props_pcipath, 20, 0},
  {"props.speed-positive", "§2.6 speed", "speed > 0 (<= 0: a warning, the core assumes 10 Gb/s)", props_speed, 20, 0},
  {"props.max-comms-positive", "§2.6 maxComms", "maxComms > 0", props_max_comms, 20, 0},
  {"props.max-recvs-range", "§2.6 maxRecvs, §6.7", "1 <= maxRecvs <= 8", props_max_recvs, 20, 0},
  {"props.ptr-support-host", "§2.6 ptrSupport, §6.10", "ptrSupport has NCCL_PTR_HOST, no unknown bits",
   props_ptr_support, 20, 0},
  {"props.device-type", "§1.3 step 6, §2.4, §7.2", "(netDeviceType, version) is HOST or UNPACK/0x7",
   props_device_type, 20, 0},
  {"props.max-bytes-range", "§6.1 step 1, §8.2, §5", "maxP2pBytes, maxCollBytes in (0, 2^40]",
   props_max_bytes, 20, 0},
  {"props.vprops", "§2.6 vProps, §2.5", "vProps lists 1..4/8 valid device indices (v9+)",
   props_vprops, 20, 0},
  {"props.rail-plane", "§2.6 railId/planeId", "railId, planeId >= -1 (v12)", props_rail_plane, 20, 0},
  {"props.bad-device", "§2.1", "getProperties(-1) and getProperties(ndev) return an error",
   props_bad_device, 20, 0},
  {"props.make-vdevice", "§6.13 NIC fusion", "makeVDevice appends a fused device listing its members",
   props_make_vdevice, 20, 0},
  {0},
};
