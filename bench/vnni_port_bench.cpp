// What bounds the packed int8 kernels on an AVX-512 VNNI core (docs/benchmarks.md, Ice Lake, session
// 38): the rates of vpdpbusd from registers and beside its activation broadcasts (separate loads,
// embedded {1to16}, one broadcast per one or two dots), of zmm and ymm loads alone, of the ymm form,
// and of the wide prefill kernel's block (per 8 code groups: two code vectors, six tokens' broadcasts
// each feeding two dots) with and without its per-block float part. Instructions written out in asm,
// so the compiler adds nothing. One thread; pin it (taskset -c 0). AVX-512 VNNI hosts only.
//   g++ -O2 bench/vnni_port_bench.cpp -o /tmp/vnni_port && taskset -c 0 /tmp/vnni_port
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>

namespace {

alignas(64) int8_t data[8192];

double seconds() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

#define ZMM_CLOBBERS                                                                                             \
    "memory", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11",  \
        "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22",       \
        "xmm23", "xmm24", "xmm25", "xmm26", "xmm27", "xmm28", "xmm29", "xmm30", "xmm31"
#define LOOP(body)                                                                                               \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"))) void run(long n, const int8_t* p) {      \
        asm volatile("1:\n" body "dec %0\n jnz 1b\n" : "+r"(n) : "r"(p) : ZMM_CLOBBERS);                      \
    }
#define R16 ".irp r,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15\n"

// Each loop body: 16 instructions of the kind counted (the block shapes: 96 vpdpbusd).
namespace dot_registers { LOOP(R16 "vpdpbusd %%zmm20, %%zmm16, %%zmm\\r\n .endr\n") }
namespace dot_broadcast_1_1 { LOOP(R16 "vpbroadcastd 4*\\r(%1), %%zmm20\n vpdpbusd %%zmm20, %%zmm16, %%zmm\\r\n .endr\n") }
namespace dot_embedded_1_1 { LOOP(R16 "vpdpbusd 4*\\r(%1)%{1to16%}, %%zmm16, %%zmm\\r\n .endr\n") }
namespace dot_broadcast_1_2 {
LOOP(".irp r,0,1,2,3,4,5,6,7\n vpbroadcastd 4*\\r(%1), %%zmm20\n vpdpbusd %%zmm20, %%zmm16, %%zmm\\r\n"
     " vpdpbusd %%zmm20, %%zmm17, %%zmm1\\r\n .endr\n")
}
namespace zmm_broadcast_loads { LOOP(R16 "vpbroadcastd 4*\\r(%1), %%zmm\\r\n .endr\n") }
namespace zmm_loads { LOOP(R16 "vmovdqu64 64*\\r(%1), %%zmm\\r\n .endr\n") }
namespace ymm_broadcast_loads { LOOP(R16 "vpbroadcastd 4*\\r(%1), %%ymm\\r\n .endr\n") }
namespace ymm_dot_registers { LOOP(R16 "vpdpbusd %%ymm20, %%ymm16, %%ymm\\r\n .endr\n") }
namespace ymm_dot_broadcast_1_1 { LOOP(R16 "vpbroadcastd 4*\\r(%1), %%ymm20\n vpdpbusd %%ymm20, %%ymm16, %%ymm\\r\n .endr\n") }
// The wide kernel's block: sums of token t in zmm t and zmm 1t (t < 6), started from an offset;
// per code group k two code loads, then per token one broadcast feeding both.
#define WIDE_SUMS                                                                                            \
    ".irp t,0,1,2,3,4,5\n vmovdqa32 %%zmm30, %%zmm\\t\n vmovdqa32 %%zmm30, %%zmm1\\t\n .endr\n"              \
    ".irp k,0,1,2,3,4,5,6,7\n vmovdqa32 64*\\k(%1), %%zmm16\n vmovdqa32 512+64*\\k(%1), %%zmm17\n"            \
    " .irp t,0,1,2,3,4,5\n vpbroadcastd 2048+32*\\t+4*\\k(%1), %%zmm18\n"                                      \
    "  vpdpbusd %%zmm18, %%zmm16, %%zmm\\t\n vpdpbusd %%zmm18, %%zmm17, %%zmm1\\t\n .endr\n .endr\n"
// Its float part: acc (zmm 2t, zmm 2t + 6 as zmm20-25 / 26-29 reused) = fma(f32(sum), scale * d, acc).
#define WIDE_FLOAT                                                                                           \
    ".irp t,0,1,2,3,4,5\n vbroadcastss 4096+4*\\t(%1), %%zmm19\n vmulps 1024(%1), %%zmm19, %%zmm28\n"         \
    " vmulps 1088(%1), %%zmm19, %%zmm29\n vcvtdq2ps %%zmm\\t, %%zmm\\t\n vcvtdq2ps %%zmm1\\t, %%zmm1\\t\n"     \
    " vfmadd231ps %%zmm28, %%zmm\\t, %%zmm2\\t\n vfmadd231ps %%zmm29, %%zmm1\\t, %%zmm2\\t\n .endr\n"
namespace wide_block_sums { LOOP(WIDE_SUMS) }
namespace wide_block { LOOP(WIDE_SUMS WIDE_FLOAT) }

struct Loop {
    const char* name;
    void (*run)(long, const int8_t*);
    int per_iteration;  // counted instructions
    const char* counted;
};

}  // namespace

int main() {
    if (!__builtin_cpu_supports("avx512vnni")) {
        std::puts("vnni_port_bench: this CPU has no AVX-512 VNNI");
        return 0;
    }
    std::memset(data, 1, sizeof data);
    const Loop loops[] = {
        {"vpdpbusd zmm, registers only", dot_registers::run, 16, "vpdpbusd"},
        {"vpdpbusd zmm, one vpbroadcastd each", dot_broadcast_1_1::run, 16, "vpdpbusd"},
        {"vpdpbusd zmm, embedded {1to16}", dot_embedded_1_1::run, 16, "vpdpbusd"},
        {"vpdpbusd zmm, one vpbroadcastd per two", dot_broadcast_1_2::run, 16, "vpdpbusd"},
        {"vpbroadcastd zmm loads alone", zmm_broadcast_loads::run, 16, "loads"},
        {"vmovdqu64 zmm loads alone", zmm_loads::run, 16, "loads"},
        {"vpbroadcastd ymm loads alone", ymm_broadcast_loads::run, 16, "loads"},
        {"vpdpbusd ymm, registers only", ymm_dot_registers::run, 16, "vpdpbusd"},
        {"vpdpbusd ymm, one vpbroadcastd each", ymm_dot_broadcast_1_1::run, 16, "vpdpbusd"},
        {"wide kernel block, sums only", wide_block_sums::run, 96, "vpdpbusd"},
        {"wide kernel block, with float part", wide_block::run, 96, "vpdpbusd"},
    };
    std::puts("| loop | per ns, round 1 | round 2 | round 3 | counted |");
    std::puts("| --- | ---: | ---: | ---: | --- |");
    for (const Loop& l : loops) {
        double rate[3];
        for (double& r : rate) {
            const long n = 2000000;
            l.run(1000, data);
            const double t0 = seconds();
            l.run(n, data);
            r = double(n) * l.per_iteration / (seconds() - t0) / 1e9;
        }
        std::printf("| %s | %.2f | %.2f | %.2f | %s |\n", l.name, rate[0], rate[1], rate[2], l.counted);
    }
    return 0;
}
