// Inclusive prefix sum along the last dim of x [B, N] (int32 or fp32), written the way CUB's single-pass
// DeviceScan is: a decoupled look-back over per-tile states for long arrays, and a block-per-row walk with a
// BlockScan prefix callback for many long rows. Built as a torch extension (setup.py / load with sources=[...]).
//
// Look-back path (few long rows): 256 threads x 16 items = 4096 elements per tile, loaded as int4/float4
// vectors. The tile id comes from a global counter (thread 0, broadcast through shared memory). Each tile
// publishes (AGGREGATE, sum) as one 64-bit word with atomicExch, then warp 0 looks back over 32 predecessors
// at a time: __ballot_sync finds the nearest INCLUSIVE, the aggregates in front of it are summed with a
// shuffle reduction. Then (INCLUSIVE, prefix + sum) is published and the outputs written.
// Row path (B >= 2 x SMs): one block per row, cub::BlockScan with a running-total callback functor.
#include <torch/extension.h>
#include <cub/cub.cuh>
#include <stdint.h>

#define THREADS 256
#define ITEMS 16
#define TILE (THREADS * ITEMS)

#define ST_INVALID 0u
#define ST_AGGREGATE 1u
#define ST_INCLUSIVE 2u

template <typename T>
__device__ __forceinline__ uint32_t to_bits(T v) { return *reinterpret_cast<uint32_t*>(&v); }

template <typename T>
__device__ __forceinline__ T from_bits(uint32_t b) { return *reinterpret_cast<T*>(&b); }

template <typename T>
__device__ __forceinline__ unsigned long long pack_state(uint32_t status, T v) {
    return ((unsigned long long)status << 32) | (unsigned long long)to_bits<T>(v);
}

template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffff, v, o);
    return v;
}

template <typename T, typename V>
__global__ void __launch_bounds__(THREADS) lookback_scan_kernel(const T* __restrict__ x, T* __restrict__ y,
                                                                unsigned long long* __restrict__ states,
                                                                int* __restrict__ counter, long long n,
                                                                int tiles_per_row) {
    typedef cub::BlockScan<T, THREADS, cub::BLOCK_SCAN_WARP_SCANS> BlockScanT;
    __shared__ typename BlockScanT::TempStorage scan_tmp;
    __shared__ int s_tile;
    __shared__ T s_prefix;

    if (threadIdx.x == 0) s_tile = atomicAdd(counter, 1);
    __syncthreads();
    const int tile = s_tile;
    const int row = tile / tiles_per_row;
    const int t = tile % tiles_per_row;
    const long long row_base = (long long)row * n;
    const long long first = (long long)t * TILE + (long long)threadIdx.x * ITEMS;

    T items[ITEMS];
    if (first + ITEMS <= n) {
        const V* src = reinterpret_cast<const V*>(x + row_base + first);
        #pragma unroll
        for (int q = 0; q < ITEMS / 4; ++q) {
            V v = src[q];
            items[4 * q + 0] = v.x; items[4 * q + 1] = v.y; items[4 * q + 2] = v.z; items[4 * q + 3] = v.w;
        }
    } else {
        #pragma unroll
        for (int k = 0; k < ITEMS; ++k) items[k] = (first + k < n) ? x[row_base + first + k] : T(0);
    }

    T tile_agg;
    BlockScanT(scan_tmp).InclusiveSum(items, items, tile_agg);

    unsigned long long* row_states = states + (long long)row * tiles_per_row;
    if (threadIdx.x == 0) {
        atomicExch(&row_states[t], pack_state<T>(t == 0 ? ST_INCLUSIVE : ST_AGGREGATE, tile_agg));
        if (t == 0) s_prefix = T(0);
    }
    if (t > 0 && threadIdx.x < 32) {
        const int lane = threadIdx.x;
        T prefix = T(0);
        int end = t;
        for (;;) {
            const int j = end - 1 - lane;
            unsigned long long st = (j >= 0) ? atomicAdd(&row_states[j], 0ull)
                                             : pack_state<T>(ST_INCLUSIVE, T(0));
            const uint32_t status = (uint32_t)(st >> 32);
            const T val = from_bits<T>((uint32_t)(st & 0xffffffffull));
            const unsigned incl = __ballot_sync(0xffffffff, status == ST_INCLUSIVE);
            const unsigned none = __ballot_sync(0xffffffff, status == ST_INVALID);
            const int first_incl = incl ? __ffs(incl) - 1 : 32;
            const int first_none = none ? __ffs(none) - 1 : 32;
            if (first_incl < first_none) {
                prefix += warp_sum<T>(lane <= first_incl ? val : T(0));
                break;
            }
            prefix += warp_sum<T>(lane < first_none ? val : T(0));
            end -= first_none;
        }
        if (lane == 0) {
            __threadfence();
            atomicExch(&row_states[t], pack_state<T>(ST_INCLUSIVE, prefix + tile_agg));
            s_prefix = prefix;
        }
    }
    __syncthreads();
    const T prefix = s_prefix;
    if (first + ITEMS <= n) {
        V* dst = reinterpret_cast<V*>(y + row_base + first);
        #pragma unroll
        for (int q = 0; q < ITEMS / 4; ++q) {
            V v;
            v.x = items[4 * q + 0] + prefix; v.y = items[4 * q + 1] + prefix;
            v.z = items[4 * q + 2] + prefix; v.w = items[4 * q + 3] + prefix;
            dst[q] = v;
        }
    } else {
        #pragma unroll
        for (int k = 0; k < ITEMS; ++k) if (first + k < n) y[row_base + first + k] = items[k] + prefix;
    }
}

// Running total of one row, handed to BlockScan as its block prefix callback: thread 0 gets the tile's total and
// returns the prefix of everything scanned before it.
template <typename T>
struct RowCarry {
    T running;
    __device__ RowCarry(T start) : running(start) {}
    __device__ T operator()(T tile_total) {
        T old = running;
        running += tile_total;
        return old;
    }
};

template <typename T>
__global__ void __launch_bounds__(THREADS) row_scan_kernel(const T* __restrict__ x, T* __restrict__ y, int n) {
    typedef cub::BlockLoad<T, THREADS, ITEMS, cub::BLOCK_LOAD_WARP_TRANSPOSE> LoadT;
    typedef cub::BlockStore<T, THREADS, ITEMS, cub::BLOCK_STORE_WARP_TRANSPOSE> StoreT;
    typedef cub::BlockScan<T, THREADS, cub::BLOCK_SCAN_WARP_SCANS> ScanT;
    __shared__ union {
        typename LoadT::TempStorage load;
        typename StoreT::TempStorage store;
        typename ScanT::TempStorage scan;
    } tmp;
    const long long base = (long long)blockIdx.x * n;
    RowCarry<T> carry(T(0));
    for (int start = 0; start < n; start += TILE) {
        const int valid = min(TILE, n - start);
        T items[ITEMS];
        LoadT(tmp.load).Load(x + base + start, items, valid, T(0));
        __syncthreads();
        ScanT(tmp.scan).InclusiveSum(items, items, carry);
        __syncthreads();
        StoreT(tmp.store).Store(y + base + start, items, valid);
        __syncthreads();
    }
}

torch::Tensor prefix_scan(torch::Tensor x) {
    TORCH_CHECK(x.dim() == 2 && x.is_contiguous(), "x must be a contiguous [B, N] tensor");
    auto y = torch::empty_like(x);
    const int B = x.size(0);
    const int N = x.size(1);
    int sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, x.get_device());
    const bool is_float = x.scalar_type() == torch::kFloat;
    if (B >= 2 * sms) {
        if (is_float) row_scan_kernel<float><<<B, THREADS>>>(x.data_ptr<float>(), y.data_ptr<float>(), N);
        else row_scan_kernel<int><<<B, THREADS>>>(x.data_ptr<int>(), y.data_ptr<int>(), N);
        return y;
    }
    const int tiles_per_row = (N + TILE - 1) / TILE;
    auto states = torch::zeros({(long long)B * tiles_per_row}, x.options().dtype(torch::kLong));
    auto counter = torch::zeros({1}, x.options().dtype(torch::kInt));
    auto* st = reinterpret_cast<unsigned long long*>(states.data_ptr<int64_t>());
    if (is_float)
        lookback_scan_kernel<float, float4><<<B * tiles_per_row, THREADS>>>(
            x.data_ptr<float>(), y.data_ptr<float>(), st, counter.data_ptr<int>(), N, tiles_per_row);
    else
        lookback_scan_kernel<int, int4><<<B * tiles_per_row, THREADS>>>(
            x.data_ptr<int>(), y.data_ptr<int>(), st, counter.data_ptr<int>(), N, tiles_per_row);
    return y;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("prefix_scan", &prefix_scan); }
