/* strand-conform — load.*: the library as NCCL's loader sees it (spec §1.1-§1.3, §3.8). */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "conform.h"

static conform_status_t load_symbols(conform_ctx_t *c) {
  if (!c->plugin_loaded) return conform_fail(c, "%s", c->load_error);
  const conform_plugin_t *p = c->plugin;
  char nv[64] = "", cv[64] = "";
  for (int i = 0; i < p->n_net_versions; i++)
    snprintf(nv + strlen(nv), sizeof nv - strlen(nv), " v%d", p->net_versions[i]);
  for (int i = 0; i < p->n_collnet_versions; i++)
    snprintf(cv + strlen(cv), sizeof cv - strlen(cv), " v%d", p->collnet_versions[i]);
  conform_note(c, "%s exports ncclNetPlugin:%s; ncclCollNetPlugin:%s", p->resolved, nv,
               cv[0] ? cv : " none");
  return CONFORM_PASS;
}

static const char *const slot_names[] = {
  "name", "init", "devices", "getProperties", "listen", "connect", "accept", "regMr",
  "regMrDmaBuf", "deregMr", "isend", "irecv", "iflush", "test", "closeSend", "closeRecv",
  "closeListen", "getDeviceMr", "irecvConsumed", "makeVDevice", "finalize", "setNetAttr"};

static conform_status_t load_table_complete(conform_ctx_t *c) {
  const void *const *slots = c->plugin->raw_net;
  const char *name = slots[0];
  if (!name || !name[0]) conform_fail(c, "the table's name is %s", name ? "empty" : "NULL");
  if (!slots[1]) return conform_fail(c, "v%d member init is NULL", c->version);
  /* NCCL's core reads the other members only after init returned (§1.3): a plugin may export
   * name + init and fill the rest during init. Read them as the core does. */
  void *ctx = NULL;
  strand_result_t r = conform_plugin_init(c, &ctx, 0x5354524e5441424cULL);
  const char *when = "after init";
  if (r != STRAND_SUCCESS) {
    when = "as exported (init failed, see load.init)";
    conform_note(c, "init returned %s: members checked as exported", conform_result_str(r));
  }
  /* Slots 0..16 have the same meaning in every version (§3.1-§3.7). */
  for (int s = 2; s <= 16; s++) {
    if (s == 8 || s == 12) continue; /* regMrDmaBuf, iflush: optional (§3.8) */
    if (!slots[s]) conform_fail(c, "v%d member %s is NULL %s; NCCL calls it unconditionally",
                                c->version, slot_names[s], when);
  }
  if (c->version >= 11 && !slots[20])
    conform_fail(c, "v%d member finalize is NULL %s; NCCL calls it at every communicator "
                 "destruction", c->version, when);
  if (c->plugin->raw_collnet) {
    const void *const *cs = c->plugin->raw_collnet;
    const char *cname = cs[0];
    if (!cname || !cname[0]) conform_fail(c, "the CollNet table's name is %s", cname ? "empty" : "NULL");
  }
  /* finalize is slot 20 of v11/v12 only: a v6..v10 table is shorter (and those cores never
   * finalize). */
  if (r == STRAND_SUCCESS && c->version >= 11 && slots[20]) {
    r = conform_plugin_finalize(c, ctx);
    if (r != STRAND_SUCCESS) conform_fail(c, "finalize returned %s", conform_result_str(r));
  }
  return c->status == CONFORM_FAIL ? CONFORM_FAIL : CONFORM_PASS;
}

static conform_status_t load_name_distinct(conform_ctx_t *c) {
  const char *n = c->net->name;
  if (!n) return conform_fail(c, "name is NULL");
  if (!strcasecmp(n, "IB") || !strcasecmp(n, "Socket"))
    return conform_fail(c, "name \"%s\" equals one of NCCL's internal nets (IB, Socket): "
                        "NCCL_NET=%s would be ambiguous", n, n);
  conform_note(c, "name \"%s\"", n);
  return CONFORM_PASS;
}

static conform_status_t load_init(conform_ctx_t *c) {
  void *ctx = NULL;
  strand_result_t r = conform_plugin_init(c, &ctx, 0x5354524e4c4f4144ULL);
  if (r != STRAND_SUCCESS)
    return conform_fail(c, "init returned %s: NCCL would disable the plugin for the rest of the "
                        "process", conform_result_str(r));
  int n = -1;
  conform_phase(c, "devices");
  r = c->net->devices(&n);
  if (r != STRAND_SUCCESS) conform_fail(c, "devices() returned %s", conform_result_str(r));
  else if (n == 0) conform_skip(c, CONFORM_ZERO_DEVICES_MSG); /* no hardware here: clean */
  else if (n < 0) conform_fail(c, "devices() reported %d devices: NCCL would disable the plugin", n);
  else conform_note(c, "%d device(s)", n);
  r = conform_plugin_finalize(c, ctx);
  if (r != STRAND_SUCCESS) conform_fail(c, "finalize returned %s", conform_result_str(r));
  return c->status == CONFORM_FAIL ? CONFORM_FAIL : c->status == CONFORM_SKIP ? CONFORM_SKIP
                                                                               : CONFORM_PASS;
}

static conform_status_t load_device0(conform_ctx_t *c) {
  strand_props_v12_t p;
  if (conform_props(c, 0, &p)) return CONFORM_FAIL;
  if (p.netDeviceType == STRAND_DEV_HOST) return CONFORM_PASS;
  if (p.netDeviceType == STRAND_DEV_UNPACK && p.netDeviceVersion == STRAND_NET_DEVICE_UNPACK_VERSION)
    return CONFORM_PASS;
  return conform_fail(c, "device 0 reports netDeviceType %d version 0x%x: NCCL rejects the plugin "
                      "(only HOST, or UNPACK with version 0x7)", p.netDeviceType,
                      (unsigned)p.netDeviceVersion);
}

const conform_check_t conform_checks_load[] = {
  {"load.symbols", "§1.1, §1.2",
   "opens per NCCL_NET_PLUGIN rules, exports an ncclNetPlugin_v6..v12 symbol", load_symbols, 10,
   CONFORM_F_NO_INIT | CONFORM_F_NO_PLUGIN | CONFORM_F_ABI_INDEPENDENT},
  {"load.table-complete", "§3.8, §1.2", "name set; members core calls unconditionally non-NULL",
   load_table_complete, 10, CONFORM_F_NO_INIT},
  {"load.name-distinct", "§1.3 step 2", "name differs from NCCL's internal IB / Socket",
   load_name_distinct, 10, CONFORM_F_NO_INIT},
  {"load.init", "§1.3 steps 3-4, §1.4", "init succeeds and devices() >= 0 (0: not testable here)", load_init, 20,
   CONFORM_F_NO_INIT},
  {"load.device0-assignable", "§1.3 step 6, §2.4", "device 0 is HOST or UNPACK/0x7",
   load_device0, 20, 0},
  {0},
};
