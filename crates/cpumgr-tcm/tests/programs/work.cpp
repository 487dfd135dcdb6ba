// A compute-bound oneTBB program for the libtcm benchmark: one parallel_for over CHUNKS chunks
// (grain 1) of ITERS iterations of floating-point work each, no barriers inside.
//
//   work CHUNKS ITERS  ->  "elapsed SECONDS", "threads W1 W2 ..." (the distinct threads that ran
//                           chunks in each 250 ms window), "result R"
#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/task_arena.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char** argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: work CHUNKS ITERS\n");
        return 2;
    }
    const int chunks = std::atoi(argv[1]);
    const long iters = std::atol(argv[2]);
    const int windows = 4096;
    std::vector<std::atomic<uint64_t>> seen(windows);
    std::vector<double> out(chunks);
    auto start = std::chrono::steady_clock::now();
    tbb::parallel_for(tbb::blocked_range<int>(0, chunks, 1), [&](const tbb::blocked_range<int>& r) {
        for (int c = r.begin(); c != r.end(); ++c) {
            double x = 1.0 + c * 1e-9;
            for (long i = 0; i < iters; ++i) x = x * 1.0000001 + 1e-9;
            out[c] = x;
            auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
            int w = static_cast<int>(ms / 250);
            int t = tbb::this_task_arena::current_thread_index();
            if (w < windows && t >= 0 && t < 64) seen[w].fetch_or(uint64_t{1} << t, std::memory_order_relaxed);
        }
    });
    double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    double sum = 0;
    for (double x : out) sum += x;
    std::printf("elapsed %.3f\nthreads", elapsed);
    int last = static_cast<int>(elapsed * 4);
    for (int w = 0; w <= last && w < windows; ++w) std::printf(" %d", __builtin_popcountll(seen[w].load()));
    std::printf("\nresult %.6f\n", sum);
    return 0;
}
