"""A training run's state on disk (tools/train.py): atomic saves, loading,
the snapshot list and their average."""
import inspect
import os

import torch


def load_state(path):
    """Our own training checkpoint (trusted: written by save_atomic). torch >= 2.6 loads
    weights only by default, which refuses the numpy RNG state kept here."""
    kw = {"weights_only": False} if "weights_only" in inspect.signature(torch.load).parameters else {}
    try:
        state = torch.load(path, map_location="cpu", **kw)
    except OSError as e:
        raise SystemExit(f"{path}: cannot read: {e.strerror or e}")
    except Exception as e:  # a truncated or foreign file: pickle, zip and torch all raise their own
        raise SystemExit(f"{path}: not a training checkpoint ({type(e).__name__}: {str(e)[:200]})")
    if not isinstance(state, dict) or "model" not in state or "step" not in state:
        raise SystemExit(f"{path}: not a training checkpoint (no weights and step: written by tools/train.py?)")
    return state


def save_atomic(obj, path):
    tmp = path + ".tmp"
    torch.save(obj, tmp)
    os.replace(tmp, path)


def list_snapshots(run):
    """RUN/snapshots/step-*.pt, oldest first."""
    d = os.path.join(run, "snapshots")
    if not os.path.isdir(d):
        return []
    return sorted(os.path.join(d, f) for f in os.listdir(d) if f.startswith("step-") and f.endswith(".pt"))


def average_states(states):
    """The element-wise mean of the weights of several snapshots of one run (checkpoint
    averaging: the mean of the last few points of a run sits nearer the middle of the
    valley the optimizer circles in, and usually translates better than any of them).
    The result carries the newest snapshot's step, hours and tokens."""
    first = states[0]
    for st in states[1:]:
        if st["cfg"] != first["cfg"] or set(st["model"]) != set(first["model"]):
            raise SystemExit("average: the snapshots are not of one model (different config or weights)")
    newest = max(states, key=lambda st: st["step"])
    model = {}
    for k, v in first["model"].items():
        if v.is_floating_point():
            acc = torch.zeros_like(v, dtype=torch.float64)
            for st in states:
                acc += st["model"][k].double()
            model[k] = (acc / len(states)).to(v.dtype)
        else:
            model[k] = v.clone()
    out = {k: newest.get(k) for k in ("cfg", "step", "train_time", "cpu_time", "tokens", "best_bleu", "amp", "args")}
    out["model"] = model
    out["averaged_steps"] = sorted(st["step"] for st in states)
    return out
