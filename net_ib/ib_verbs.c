/* strand-ib — dlopen of libibverbs.so.1 and its symbol table (see ib_verbs.h for why). The only
 * file of the plugin that names the library. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "ib_verbs.h"

ib_verbs_t ibv;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static bool load_ok;
static char load_why[256];

/* dlsym into a function pointer without the object/function pointer conversion warning. */
static bool bind(void *lib, const char *sym, void *slot, bool required) {
  void *p = dlsym(lib, sym);
  memcpy(slot, &p, sizeof p);
  if (!p && required) {
    snprintf(load_why, sizeof load_why, "libibverbs.so.1 lacks %s", sym);
    return false;
  }
  return true;
}

static void load(void) {
  /* The library stays loaded for the life of the process, as NCCL keeps it: providers it loads
   * start threads of their own, and unloading under them is not safe. */
  void *lib = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char *e = dlerror();
    snprintf(load_why, sizeof load_why, "%s", e ? e : "dlopen(libibverbs.so.1) failed");
    return;
  }
  /* The versioned names rdma-core exports since 1.1 (IBVERBS_1.1); unversioned lookup also finds
   * them, and finds a stand-in library without symbol versions. */
  load_ok = bind(lib, "ibv_get_device_list", &ibv.get_device_list, true) &&
            bind(lib, "ibv_free_device_list", &ibv.free_device_list, true) &&
            bind(lib, "ibv_get_device_name", &ibv.get_device_name, true) &&
            bind(lib, "ibv_open_device", &ibv.open_device, true) &&
            bind(lib, "ibv_close_device", &ibv.close_device, true) &&
            bind(lib, "ibv_query_device", &ibv.query_device, true) &&
            bind(lib, "ibv_query_port", &ibv.query_port, true) &&
            bind(lib, "ibv_query_gid", &ibv.query_gid, true) &&
            bind(lib, "_ibv_query_gid_ex", &ibv.query_gid_ex, false) &&
            bind(lib, "ibv_alloc_pd", &ibv.alloc_pd, true) &&
            bind(lib, "ibv_dealloc_pd", &ibv.dealloc_pd, true) &&
            bind(lib, "ibv_reg_mr", &ibv.reg_mr, true) &&
            bind(lib, "ibv_reg_dmabuf_mr", &ibv.reg_dmabuf_mr, false) &&
            bind(lib, "ibv_dereg_mr", &ibv.dereg_mr, true) &&
            bind(lib, "ibv_create_cq", &ibv.create_cq, true) &&
            bind(lib, "ibv_destroy_cq", &ibv.destroy_cq, true) &&
            bind(lib, "ibv_create_qp", &ibv.create_qp, true) &&
            bind(lib, "ibv_modify_qp", &ibv.modify_qp, true) &&
            bind(lib, "ibv_destroy_qp", &ibv.destroy_qp, true) &&
            bind(lib, "ibv_get_async_event", &ibv.get_async_event, true) &&
            bind(lib, "ibv_ack_async_event", &ibv.ack_async_event, true) &&
            bind(lib, "ibv_wc_status_str", &ibv.wc_status_str, true) &&
            bind(lib, "ibv_event_type_str", &ibv.event_type_str, true);
  if (!load_ok) memset(&ibv, 0, sizeof ibv);
}

bool ib_verbs_load(char *why, size_t whylen) {
  pthread_once(&load_once, load);
  if (!load_ok && why && whylen) snprintf(why, whylen, "%s", load_why);
  return load_ok;
}
