"""Tiny TAP helper for the Python tests (standard library only).

    import tap
    tap.ok(a == b, "what is checked", detail=f"got {a}, want {b}")
    tap.skip("why")          # prints "ok N - # SKIP why"
    sys.exit(tap.done())     # prints the plan; 1 when anything failed

tests/run.sh counts the "ok" / "not ok" / "# SKIP" lines.
"""

import sys

_count = 0
_failed = 0


def ok(cond, what, detail=''):
    """Print one result line; on failure, the detail as '#' comment lines."""
    global _count, _failed
    _count += 1
    if cond:
        print(f"ok {_count} - {what}", flush=True)
    else:
        _failed += 1
        print(f"not ok {_count} - {what}", flush=True)
        for line in str(detail).splitlines() or ['(no detail)']:
            print(f"#   {line}", flush=True)
    return bool(cond)


def skip(why):
    """Record a skipped check."""
    global _count
    _count += 1
    print(f"ok {_count} - # SKIP {why}", flush=True)


def diag(msg):
    """A '#' comment line (ignored by the counters)."""
    for line in str(msg).splitlines():
        print(f"# {line}", flush=True)


def done():
    """Print the plan and return the exit code: 0 when nothing failed, else 1."""
    print(f"1..{_count}", flush=True)
    if _failed:
        print(f"# {_failed} of {_count} failed", flush=True)
    sys.stdout.flush()
    return 1 if _failed else 0


def failed():
    return _failed
