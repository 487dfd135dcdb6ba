// A oneTBB program for the libtcm tests: checks results of parallel_for, parallel_reduce and
// nested task arenas, then runs a timeline of 100 ms windows of short parallel loops and prints
// how many distinct threads ran chunks in each window (the threads TBB uses at that moment).
//
//   phases SECONDS   ->  "check NAME GOT EXPECTED" lines, then "window MS threads N" lines, "done"
#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/parallel_reduce.h>
#include <oneapi/tbb/spin_mutex.h>
#include <oneapi/tbb/task_arena.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <thread>
#include <vector>

using clock_type = std::chrono::steady_clock;

static void spin_for(std::chrono::microseconds d) {
    auto end = clock_type::now() + d;
    while (clock_type::now() < end) {
    }
}

static void check(const char* name, unsigned long long got, unsigned long long expected) {
    std::printf("check %s %llu %llu\n", name, got, expected);
}

int main(int argc, char** argv) {
    double seconds = argc > 1 ? std::atof(argv[1]) : 2.0;
    std::printf("max_concurrency %d\n", tbb::this_task_arena::max_concurrency());

    const std::size_t n = 2000000;
    unsigned long long sum = tbb::parallel_reduce(
        tbb::blocked_range<std::size_t>(0, n), 0ULL,
        [](const tbb::blocked_range<std::size_t>& r, unsigned long long acc) {
            for (std::size_t i = r.begin(); i != r.end(); ++i) acc += i % 1000;
            return acc;
        },
        [](unsigned long long a, unsigned long long b) { return a + b; });
    check("reduce", sum, (n / 1000) * (999ULL * 1000 / 2));

    std::vector<unsigned> v(n);
    tbb::parallel_for(tbb::blocked_range<std::size_t>(0, n), [&](const tbb::blocked_range<std::size_t>& r) {
        for (std::size_t i = r.begin(); i != r.end(); ++i) v[i] = static_cast<unsigned>(i % 7);
    });
    unsigned long long vs = 0;
    for (unsigned x : v) vs += x;
    check("for", vs, (n / 7) * 21 + (n % 7) * (n % 7 - 1) / 2);

    // Nested arenas: an arena of 2 whose tasks each run a reduction in an arena of their own.
    std::vector<unsigned long long> part(8);
    tbb::task_arena outer(2);
    outer.execute([&] {
        tbb::parallel_for(0, 8, [&](int k) {
            tbb::task_arena inner(2);
            inner.execute([&] {
                part[k] = tbb::parallel_reduce(
                    tbb::blocked_range<int>(0, 100000), 0ULL,
                    [&](const tbb::blocked_range<int>& r, unsigned long long acc) {
                        for (int i = r.begin(); i != r.end(); ++i) acc += static_cast<unsigned long long>(i) * (k + 1);
                        return acc;
                    },
                    [](unsigned long long a, unsigned long long b) { return a + b; });
            });
        });
    });
    unsigned long long nested = 0;
    for (auto p : part) nested += p;
    check("nested", nested, 4999950000ULL * 36);

    auto start = clock_type::now();
    auto stop = start + std::chrono::duration<double>(seconds);
    while (clock_type::now() < stop) {
        auto window_start = clock_type::now();
        auto window_end = window_start + std::chrono::milliseconds(100);
        std::set<std::thread::id> seen;
        tbb::spin_mutex m;
        while (clock_type::now() < window_end) {
            tbb::parallel_for(tbb::blocked_range<int>(0, 16, 1), [&](const tbb::blocked_range<int>&) {
                spin_for(std::chrono::microseconds(500));
                tbb::spin_mutex::scoped_lock lock(m);
                seen.insert(std::this_thread::get_id());
            });
        }
        auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(window_start - start).count();
        std::printf("window %lld threads %zu\n", static_cast<long long>(ms), seen.size());
        std::fflush(stdout);
    }
    std::printf("done\n");
    return 0;
}
