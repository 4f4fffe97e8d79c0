"""What the CPU offers the training run, read without importing torch (tools/train.py
must know it before torch loads OpenMP)."""


def cpu_has_bf16():
    """Native bfloat16 arithmetic (AVX512-BF16 or AMX-BF16), from /proc/cpuinfo; True
    where it cannot be read (not Linux: let --amp auto measure)."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = f.read()
    except OSError:
        return True
    return "avx512_bf16" in flags or "amx_bf16" in flags
