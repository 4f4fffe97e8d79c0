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

tcmalloc avoids most of that: under Debian's libtcmalloc-minimal4 the run made 1.5x
glibc's target tokens/s at a third of its memory (docs/training.md, "Memory"). A
malloc must be in place before the process's first allocation, so use_allocator()
starts train.py again with it in LD_PRELOAD, before torch loads.
"""
import ctypes
import ctypes.util
import os
import sys

TCMALLOC = "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4"
ALLOCATOR_CHOICES = "auto (tcmalloc where installed), tcmalloc, system (glibc), or a malloc library's path"
# set for the one re-executed process: a preload the loader refused must not loop
_TRIED = "DEEPMT_ALLOCATOR_TRIED"

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
    possible (glibc, tcmalloc), False elsewhere."""
    if loaded_allocator() == "tcmalloc":
        ctypes.CDLL(None).MallocExtension_ReleaseFreeMemory()
        return True
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


def _maps():
    try:
        with open("/proc/self/maps") as f:
            return f.read()
    except OSError:
        return ""


def loaded_allocator():
    """The malloc this process runs on: 'tcmalloc', 'jemalloc' or 'glibc'."""
    maps = _maps()
    for name in ("tcmalloc", "jemalloc"):
        if "/lib" + name in maps:
            return name
    return "glibc"


def _library_loaded(path):
    return os.path.realpath(path) in _maps()


def _without(preload, path):
    """LD_PRELOAD's entries (space- or colon-separated) without `path`."""
    real = os.path.realpath(path)
    keep = [e for e in preload.replace(":", " ").split() if os.path.realpath(e) != real]
    return " ".join(keep)


def _restart(env):
    """Run this same command again, in place, under `env`."""
    sys.stdout.flush()
    sys.stderr.flush()
    argv = getattr(sys, "orig_argv", None) or [sys.executable] + sys.argv
    os.execve(sys.executable, argv, env)


def use_allocator(choice, tcmalloc=TCMALLOC):
    """Make this process run on the malloc `choice` asks for, restarting it (same
    command) with LD_PRELOAD changed where needed. Call before anything large is
    allocated (before torch loads). Returns a line for the run's log; raises SystemExit
    where the asked-for library is missing."""
    tried = os.environ.pop(_TRIED, None) is not None
    preload = os.environ.get("LD_PRELOAD", "")
    if choice == "system":
        # a parent process (make train, a bench) may have preloaded one: take it out
        loaded = [lib for lib in (tcmalloc, *preload.replace(":", " ").split())
                  if "malloc" in os.path.basename(lib) and _library_loaded(lib)]
        if loaded and not tried:
            _restart(dict(os.environ, LD_PRELOAD=_without(preload, loaded[0]), **{_TRIED: "1"}))
        return f"{loaded_allocator()} malloc (--allocator system)"
    if choice in ("auto", "tcmalloc"):
        lib = tcmalloc
        if loaded_allocator() != "glibc" and not tried:
            return f"{loaded_allocator()} (preloaded by the caller)"
        if not os.path.isfile(lib):
            if choice == "tcmalloc":
                raise SystemExit(f"--allocator tcmalloc: {lib} is missing (scripts/deps.sh train installs "
                                 "libtcmalloc-minimal4)")
            return (f"glibc malloc: {lib} is missing, so the run is ~1.5x slower and holds ~3x the memory "
                    "(scripts/deps.sh train installs libtcmalloc-minimal4)")
    else:
        lib = choice
        if not os.path.isfile(lib):
            raise SystemExit(f"--allocator {lib}: no such file ({ALLOCATOR_CHOICES})")
    if _library_loaded(lib):
        return f"{loaded_allocator()} ({lib}{', preloaded by a restart' if tried else ''})"
    if tried:  # the loader said why on stderr
        return f"{loaded_allocator()} malloc: preloading {lib} failed"
    _restart(dict(os.environ, LD_PRELOAD=(preload + " " + lib).strip(), **{_TRIED: "1"}))
