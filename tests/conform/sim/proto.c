/* strand-conform sim — NCCL's protocols as the net proxy sees them: per-connection buffer sizes,
 * FIFO steps per message and per ring primitive (SIMPLE, LL), and the LL line format (8 data
 * bytes + two 4-byte flags per 16-byte line) that LL receives are polled on. */
#include <string.h>

#include "sim.h"

const sim_proto_t sim_proto_simple = {"SIMPLE", (size_t)4 << 20, 2, 4, false};
const sim_proto_t sim_proto_ll = {"LL", (size_t)512 << 10, 1, 1, true};

size_t sim_step_bytes(const sim_proto_t *p) { return p->buff_size / SIM_STEPS; }
/* Largest message (irecv size): stepSize x sliceSteps (§6.4). */
size_t sim_msg_bytes(const sim_proto_t *p) { return sim_step_bytes(p) * (size_t)p->slice_steps; }
/* User data carried by one message (LL lines carry half their size). */
size_t sim_slice_data_bytes(const sim_proto_t *p) { return p->ll ? sim_msg_bytes(p) / 2 : sim_msg_bytes(p); }
int sim_inflight(const sim_proto_t *p) { return SIM_STEPS / p->slice_steps; }

uint32_t sim_ll_flag(uint64_t msg) { return (uint32_t)(msg + 1); }

void sim_ll_encode(unsigned char *lines, const unsigned char *data, size_t bytes, uint32_t flag) {
  size_t nl = div_up(bytes, 8);
  for (size_t i = 0; i < nl; i++) {
    uint32_t d[2] = {0, 0};
    size_t take = bytes - i * 8 < 8 ? bytes - i * 8 : 8;
    memcpy(d, data + i * 8, take);
    uint32_t line[4] = {d[0], flag, d[1], flag};
    memcpy(lines + i * 16, line, 16);
  }
}

/* True when every flag of the message carries `flag` (the data has landed, as the GPU sees it). */
bool sim_ll_ready(const unsigned char *lines, size_t bytes, uint32_t flag) {
  size_t nl = div_up(bytes, 8);
  for (size_t i = 0; i < nl; i++) {
    uint32_t line[4];
    memcpy(line, lines + i * 16, 16);
    if (line[1] != flag || line[3] != flag) return false;
  }
  return true;
}

void sim_ll_decode(unsigned char *data, const unsigned char *lines, size_t bytes) {
  size_t nl = div_up(bytes, 8);
  for (size_t i = 0; i < nl; i++) {
    uint32_t line[4];
    memcpy(line, lines + i * 16, 16);
    uint32_t d[2] = {line[0], line[2]};
    size_t take = bytes - i * 8 < 8 ? bytes - i * 8 : 8;
    memcpy(data + i * 8, d, take);
  }
}
