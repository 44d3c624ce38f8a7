/* A GPU kernel that waits, for GPU tests and tools (no nvcc: the driver JIT-compiles the PTX;
 * load it with cuModuleLoadData, entry "pt_wait_ge"). Shared by gin_proxy/tests/
 * test_gin_kernel_wait.c and tests/e2e/runs/ctx_probe.c.
 *
 * pt_wait_ge(u64 *word, u64 want, u64 bound_ns, u64 *out), one thread: spins until *word >= want
 * or bound_ns of the GPU's global timer passed (so a test that reproduces a hang ends), then
 * stores the last value read at out[0] and the ns waited at out[1]. want = 0 returns at once (a
 * launch to queue behind another). PTX 6.0 for sm_70, as the SDK's signal-add kernel. */
#ifndef STRAND_GPU_WAIT_PTX_H
#define STRAND_GPU_WAIT_PTX_H

static const char pt_wait_ge_ptx[] =
    ".version 6.0\n"
    ".target sm_70\n"
    ".address_size 64\n"
    ".visible .entry pt_wait_ge(.param .u64 p_word, .param .u64 p_want, .param .u64 p_bound,\n"
    "                           .param .u64 p_out)\n"
    "{\n"
    "  .reg .b64 %rd<10>;\n"
    "  .reg .pred %p<3>;\n"
    "  ld.param.u64 %rd1, [p_word];\n"
    "  ld.param.u64 %rd2, [p_want];\n"
    "  ld.param.u64 %rd3, [p_bound];\n"
    "  ld.param.u64 %rd4, [p_out];\n"
    "  cvta.to.global.u64 %rd1, %rd1;\n"
    "  cvta.to.global.u64 %rd4, %rd4;\n"
    "  mov.u64 %rd5, %globaltimer;\n"
    "LOOP:\n"
    "  ld.volatile.global.u64 %rd6, [%rd1];\n"
    "  mov.u64 %rd7, %globaltimer;\n"
    "  sub.u64 %rd8, %rd7, %rd5;\n"
    "  setp.ge.u64 %p1, %rd6, %rd2;\n"
    "  @%p1 bra DONE;\n"
    "  setp.lt.u64 %p2, %rd8, %rd3;\n"
    "  @%p2 bra LOOP;\n"
    "DONE:\n"
    "  st.global.u64 [%rd4], %rd6;\n"
    "  st.global.u64 [%rd4+8], %rd8;\n"
    "  ret;\n"
    "}\n";

#endif
