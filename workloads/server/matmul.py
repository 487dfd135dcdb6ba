"""The shared-server workload's numpy job (workloads/server.toml): a loop of matrix products that
never imports cpumgr; OpenBLAS's pool is as wide as the machine unless `cpumgr launch`'s Python
hook sizes it to the allocation. Prints the products per second and the pool sizes it ran with.

    python3 workloads/server/matmul.py PRODUCTS [SIZE]
"""

import collections
import sys
import time

import numpy as np

try:
    from threadpoolctl import ThreadpoolController

    BLAS = ThreadpoolController().select(user_api="blas")
except ImportError:
    BLAS = None


def pool_size():
    """OpenBLAS's thread count now, 0 when threadpoolctl is missing."""
    return BLAS.info()[0]["num_threads"] if BLAS and BLAS.info() else 0


def main():
    products = int(sys.argv[1])
    size = int(sys.argv[2]) if len(sys.argv) > 2 else 400
    a = np.random.default_rng(0).random((size, size))
    b, c = a.copy(), np.empty_like(a)
    sizes = collections.Counter()
    start = time.monotonic()
    for _ in range(products):
        np.dot(a, b, out=c)
        sizes[pool_size()] += 1
    elapsed = time.monotonic() - start
    print(f"{products} products of {size}x{size} in {elapsed:.2f} s; pool sizes (threads: products):",
          dict(sorted(sizes.items())), flush=True)


if __name__ == "__main__":
    main()
