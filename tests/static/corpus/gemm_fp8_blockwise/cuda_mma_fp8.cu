// Block-scaled fp8 GEMM in CUDA: A [M, K] and B [N, K] e4m3 (both K-major, TN), 128x128 CTA tiles, BK = 128.
// Each K block runs mma.sync m16n8k32 .e4m3.e4m3 into a temporary fp32 fragment that starts at zero, then folds it
// into the main accumulator with the block's scale product (explicit per-block promotion). A/B tiles are staged
// through shared memory with cp.async double buffering. One CTA per output tile, launched in row-major order.
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <torch/extension.h>

constexpr int BM = 128, BN = 128, BK = 128;
constexpr int WARPS_M = 4, WARPS_N = 2;             // 8 warps, each 32 x 64
constexpr int MI = 2, NI = 8;                        // m16 x n8 fragments per warp

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
    unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(s), "l"(gmem));
}

__device__ __forceinline__ void mma_e4m3(float* d, const unsigned* a, const unsigned* b) {
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__device__ __forceinline__ void load_stage(uint8_t* As, uint8_t* Bs, const uint8_t* A, const uint8_t* B, int m0,
                                           int n0, int k0, int M, int N, int K) {
    for (int i = threadIdx.x; i < BM * BK / 16; i += blockDim.x) {
        int r = i / (BK / 16), c = (i % (BK / 16)) * 16;
        int gm = min(m0 + r, M - 1), gn = min(n0 + r, N - 1);
        cp_async16(As + r * BK + c, A + (size_t)gm * K + k0 + c);
        cp_async16(Bs + r * BK + c, B + (size_t)gn * K + k0 + c);
    }
    asm volatile("cp.async.commit_group;\n" ::);
}

__global__ void __launch_bounds__(256) fp8_blockscaled_gemm(const uint8_t* __restrict__ A,
                                                            const uint8_t* __restrict__ B,
                                                            const float* __restrict__ a_s,
                                                            const float* __restrict__ b_s,
                                                            __nv_bfloat16* __restrict__ C, int M, int N, int K) {
    __shared__ __align__(128) uint8_t As[2][BM * BK];
    __shared__ __align__(128) uint8_t Bs[2][BN * BK];
    int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int wm = (warp / WARPS_N) * 32, wn = (warp % WARPS_N) * 64;
    int kblocks = K / BK, ks = K / BK;
    float acc[MI][NI][4] = {};
    load_stage(As[0], Bs[0], A, B, m0, n0, 0, M, N, K);
    for (int kb = 0; kb < kblocks; ++kb) {
        int st = kb & 1;
        if (kb + 1 < kblocks) {
            load_stage(As[st ^ 1], Bs[st ^ 1], A, B, m0, n0, (kb + 1) * BK, M, N, K);
            asm volatile("cp.async.wait_group 1;\n" ::);
        } else {
            asm volatile("cp.async.wait_group 0;\n" ::);
        }
        __syncthreads();
        float part[MI][NI][4];
#pragma unroll
        for (int i = 0; i < MI; ++i)
#pragma unroll
            for (int j = 0; j < NI; ++j)
#pragma unroll
                for (int v = 0; v < 4; ++v) part[i][j][v] = 0.f;
#pragma unroll
        for (int kk = 0; kk < BK; kk += 32) {
            unsigned af[MI][4], bf[NI][2];
            for (int i = 0; i < MI; ++i) {
                const uint8_t* p = &As[st][(wm + i * 16 + lane / 4) * BK + kk + (lane % 4) * 4];
                af[i][0] = *reinterpret_cast<const unsigned*>(p);
                af[i][1] = *reinterpret_cast<const unsigned*>(p + 8 * BK);
                af[i][2] = *reinterpret_cast<const unsigned*>(p + 16);
                af[i][3] = *reinterpret_cast<const unsigned*>(p + 8 * BK + 16);
            }
            for (int j = 0; j < NI; ++j) {
                const uint8_t* p = &Bs[st][(wn + j * 8 + lane / 4) * BK + kk + (lane % 4) * 4];
                bf[j][0] = *reinterpret_cast<const unsigned*>(p);
                bf[j][1] = *reinterpret_cast<const unsigned*>(p + 16);
            }
            for (int i = 0; i < MI; ++i)
                for (int j = 0; j < NI; ++j) mma_e4m3(part[i][j], af[i], bf[j]);
        }
        // promotion: acc += part * a_s[row, kb] * b_s[n0 / 128, kb]
        float sb = b_s[(n0 / 128) * ks + kb];
#pragma unroll
        for (int i = 0; i < MI; ++i) {
            int r0 = min(m0 + wm + i * 16 + lane / 4, M - 1), r1 = min(r0 + 8, M - 1);
            float s0 = a_s[r0 * ks + kb] * sb, s1 = a_s[r1 * ks + kb] * sb;
#pragma unroll
            for (int j = 0; j < NI; ++j) {
                acc[i][j][0] += part[i][j][0] * s0;
                acc[i][j][1] += part[i][j][1] * s0;
                acc[i][j][2] += part[i][j][2] * s1;
                acc[i][j][3] += part[i][j][3] * s1;
            }
        }
        __syncthreads();
    }
    for (int i = 0; i < MI; ++i)
        for (int j = 0; j < NI; ++j) {
            int r = m0 + wm + i * 16 + lane / 4, c = n0 + wn + j * 8 + (lane % 4) * 2;
            if (r < M) {
                C[(size_t)r * N + c] = __float2bfloat16(acc[i][j][0]);
                C[(size_t)r * N + c + 1] = __float2bfloat16(acc[i][j][1]);
            }
            if (r + 8 < M) {
                C[(size_t)(r + 8) * N + c] = __float2bfloat16(acc[i][j][2]);
                C[(size_t)(r + 8) * N + c + 1] = __float2bfloat16(acc[i][j][3]);
            }
        }
}

torch::Tensor fp8_gemm(torch::Tensor A, torch::Tensor B, torch::Tensor a_s, torch::Tensor b_s) {
    int M = A.size(0), K = A.size(1), N = B.size(0);
    auto C = torch::empty({M, N}, A.options().dtype(torch::kBFloat16));
    dim3 grid(N / BN, (M + BM - 1) / BM);
    fp8_blockscaled_gemm<<<grid, 256>>>(reinterpret_cast<const uint8_t*>(A.data_ptr()),
                                        reinterpret_cast<const uint8_t*>(B.data_ptr()), a_s.data_ptr<float>(),
                                        b_s.data_ptr<float>(), reinterpret_cast<__nv_bfloat16*>(C.data_ptr()), M, N,
                                        K);
    return C;
}
