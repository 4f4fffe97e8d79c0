"""The training process's memory: what it holds, and handing freed memory back.

A CPU training step allocates and frees gigabytes of tensors whose shapes change with
every batch (the logits alone are tokens x vocabulary). glibc's malloc raises its mmap
threshold after each large free, so later tensors come from the heap, and freed heap
memory in the middle of it stays in the process: the run's resident memory grew from
9 GB to 20 GB over an hour at 24,000-token batches, until the kernel's OOM killer ended
it. malloc_trim(0) gave 13.6 GB back at once (13.6 -> 2.5 GB). After every step it
costs a third of the speed (the next step faults the pages in again), so the loop calls
it only when the process holds more than a ceiling (train.py --memory-ceiling; by
default 60% of the machine's memory). The ceiling must sit well above what a few steps
re-grow to after a release (~11 GB at 24,000-token batches): at 9.4 GiB the run
released every 3-4 steps and lost ~40% of its speed; at 14 GiB, every ~30 steps.
"""
import ctypes
import ctypes.util

_libc = None


def _glibc():
    global _libc
    if _libc is None:
        _libc = False
        name = ctypes.util.find_library("c")
        if name:
            try:
                lib = ctypes.CDLL(name)
                lib.malloc_trim.argtypes = [ctypes.c_size_t]
                lib.malloc_trim.restype = ctypes.c_int
                _libc = lib
            except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to trim
                pass
    return _libc


def release_freed_memory():
    """Give memory that malloc holds free back to the kernel. True where that was
    possible (glibc), False elsewhere."""
    lib = _glibc()
    if not lib:
        return False
    lib.malloc_trim(0)
    return True


def _proc_kib(path, field):
    """The kB figure of `field:` in a /proc file (None where it cannot be read)."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def release_above(ceiling_gib):
    """After a training step: hand freed memory back if the process holds more than
    ceiling_gib resident. True when it did."""
    return (rss_gib() or 0) > ceiling_gib and release_freed_memory()


def _status_kib(field):
    return _proc_kib("/proc/self/status", field)


def rss_gib():
    """Resident memory now, in GiB (None where /proc cannot tell)."""
    kib = _status_kib("VmRSS")
    return None if kib is None else kib / 2**20


def peak_rss_gib():
    """The most resident memory this process has held, in GiB (None where unknown)."""
    kib = _status_kib("VmHWM")
    return None if kib is None else kib / 2**20


def physical_memory_gib():
    """The machine's memory in GiB (None where /proc/meminfo cannot tell)."""
    kib = _proc_kib("/proc/meminfo", "MemTotal")
    return None if kib is None else kib / 2**20


def default_memory_ceiling():
    """train.py's --memory-ceiling default: 60% of the machine's memory, leaving room for
    an evaluation or a server beside the run; 12 GiB where the total is unknown."""
    total = physical_memory_gib()
    return 12.0 if total is None else round(0.6 * total, 1)
