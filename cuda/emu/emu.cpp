// Host emulator of the qkern CUDA kernels (see kernels/emu.h). Built by the qkern-cuda tests
// with the system C++ compiler into a shared library that the tests load; it includes every
// kernel source, so the emulated code is the GPU code.
//
// extern "C" int qk_emu_launch(name, grid, block, args, err, errlen): runs every CTA of the
// grid in order, each with `block` fibers; returns 0, or -1 with a message in `err`.

#include <ucontext.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "../kernels/emu.h"

namespace emu {
unsigned g_tid, g_bid, g_bdim, g_gdim;
uint32_t g_xchg[1024];
uint32_t g_mma[1024][6];

static std::map<std::string, KernelFn>& registry() {
    static std::map<std::string, KernelFn> r;
    return r;
}
Reg::Reg(const char* name, KernelFn f) { registry()[name] = f; }

struct Fiber {
    ucontext_t ctx;
    std::vector<char> stack;
    bool done = false;
};
static ucontext_t g_sched;
static std::vector<Fiber> g_fibers;
static KernelFn g_fn;
static const void* g_args;

void barrier() { swapcontext(&g_fibers[g_tid].ctx, &g_sched); }

static void trampoline(int tid) {
    g_fn(g_args);
    g_fibers[tid].done = true;
    swapcontext(&g_fibers[tid].ctx, &g_sched);
}

static void run_cta(unsigned bid, unsigned bdim) {
    g_bid = bid;
    g_bdim = bdim;
    if (g_fibers.size() < bdim) g_fibers.resize(bdim);
    for (unsigned t = 0; t < bdim; ++t) {
        Fiber& f = g_fibers[t];
        f.done = false;
        if (f.stack.empty()) f.stack.resize(256 * 1024);
        getcontext(&f.ctx);
        f.ctx.uc_stack.ss_sp = f.stack.data();
        f.ctx.uc_stack.ss_size = f.stack.size();
        f.ctx.uc_link = nullptr;
        makecontext(&f.ctx, (void (*)())trampoline, 1, (int)t);
    }
    // Round robin: each pass resumes every live fiber once; a fiber runs to its next barrier
    // (or its end), so after a pass all live fibers wait at the same barrier.
    for (;;) {
        bool any = false;
        for (unsigned t = 0; t < bdim; ++t) {
            if (g_fibers[t].done) continue;
            any = true;
            g_tid = t;
            swapcontext(&g_sched, &g_fibers[t].ctx);
        }
        if (!any) break;
    }
}
}  // namespace emu

extern "C" int qk_emu_launch(const char* name, unsigned grid, unsigned block, const void* args, char* err,
                             int errlen) {
    auto it = emu::registry().find(name);
    if (it == emu::registry().end()) {
        std::snprintf(err, errlen, "no emulated kernel named %s", name);
        return -1;
    }
    if (block == 0 || block > 1024 || block % 32 != 0) {
        std::snprintf(err, errlen, "bad block size %u", block);
        return -1;
    }
    emu::g_fn = it->second;
    emu::g_args = args;
    emu::g_gdim = grid;
    for (unsigned b = 0; b < grid; ++b) emu::run_cta(b, block);
    return 0;
}

// Every kernel source.
#include "../kernels/quant.cu"
#include "../kernels/q8_0.cu"
#include "../kernels/q5_1.cu"
#include "../kernels/q4_k.cu"
#include "../kernels/q5_k.cu"
#include "../kernels/q6_k.cu"
#include "../kernels/iq2_xxs.cu"
#include "../kernels/iq2_xs.cu"
#include "../kernels/iq2_s.cu"
#include "../kernels/iq3_xxs.cu"
#include "../kernels/iq3_s.cu"
#include "../kernels/iq4_nl.cu"
#include "../kernels/iq4_xs.cu"
#include "../kernels/nvfp4.cu"

// The constant-bank copy the host makes before a `qk_mmc_*` launch (backend.rs: a
// stream-ordered device-to-device copy into the module's `qk_cact`): 0, or -1 if `n` bytes do
// not fit the bank.
extern "C" int qk_emu_cact_fill(const void* src, unsigned long n) {
    if (n > sizeof(qk_cact)) return -1;
    std::memcpy(qk_cact, src, n);
    return 0;
}

// The shared-memory copy's size as the kernels compute it (mm_common.cuh `ActS<NTM>::bytes`,
// mmc_body's check, and the limit QK_SACT_BYTES), for the test that holds args.rs
// `sact_bytes` and `SACT_BYTES` to it: were they to differ, a launch would size its copy one
// way and the kernel check it another, and run the global-memory body (same bits, slower)
// without a word. 0 for an NTM outside 1..8, or built without the copy (QK_CACT_SMEM=0).
template <int NTM>
static unsigned long long sact_bytes_of(unsigned cols) {
#if QK_CACT_SMEM
    return ActS<NTM>::bytes(cols);
#else
    return 0 * cols;
#endif
}
extern "C" unsigned long long qk_emu_sact_bytes(unsigned cols, unsigned ntm) {
    switch (ntm) {
        case 1: return sact_bytes_of<1>(cols);
        case 2: return sact_bytes_of<2>(cols);
        case 3: return sact_bytes_of<3>(cols);
        case 4: return sact_bytes_of<4>(cols);
        case 5: return sact_bytes_of<5>(cols);
        case 6: return sact_bytes_of<6>(cols);
        case 7: return sact_bytes_of<7>(cols);
        case 8: return sact_bytes_of<8>(cols);
        default: return 0;
    }
}
extern "C" unsigned long long qk_emu_sact_limit() { return QK_SACT_BYTES; }
// The grouped quantize's argument block as the kernels see it (common.cuh QuantGroupArgs): its
// size times 1000 plus its job capacity, held to args.rs `QuantGroupArgs` by a test.
extern "C" unsigned long long qk_emu_qgroup_shape() { return sizeof(QuantGroupArgs) * 1000 + QK_QGROUP; }
