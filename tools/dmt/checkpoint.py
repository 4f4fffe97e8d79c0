"""Reading fairseq / torchscale checkpoints without running their code.

torch.load unpickles with a restricted pickle module: only tensors, containers and
argparse.Namespace are built; any other class (omegaconf, fairseq, ...) becomes an inert
placeholder, so neither framework needs to be installed and a crafted pickle cannot run
code. Used by tools/convert_fairseq.py.
"""
import builtins
import collections
import copyreg
import os
import pickle
import re


class ConvertError(Exception):
    """A refusal or bad input: printed as one message, exit status 1."""


class _Stub:
    """Stands in for a class the checkpoint pickled but that is not importable or not
    trusted (omegaconf, fairseq, ...): keeps whatever state the pickle gives it."""
    _stub_name = "?"
    _args = ()
    _state = None

    def __new__(cls, *args, **kwargs):
        obj = object.__new__(cls)
        obj._args = args
        return obj

    def __init__(self, *args, **kwargs):
        pass

    def __setstate__(self, state):
        self._state = state

    def __setitem__(self, key, value):
        self.__dict__.setdefault("_items", {})[key] = value

    def append(self, value):
        self.__dict__.setdefault("_list", []).append(value)

    def extend(self, values):
        self.__dict__.setdefault("_list", []).extend(values)

    def __repr__(self):
        return f"<{self._stub_name} (not loaded)>"


_SAFE_BUILTINS = {"set", "frozenset", "slice", "complex", "int", "float", "str", "bytes",
                  "bytearray", "list", "dict", "tuple", "bool", "range", "object"}


def _make_pickle_module():
    """A pickle module for torch.load that builds tensors, containers and argparse
    namespaces, and turns every other class into a _Stub (no foreign code runs)."""
    import argparse as _argparse
    import types

    import torch

    stubs = {}

    def find_class(mod, name):
        if mod == "collections" and name == "OrderedDict":
            return collections.OrderedDict
        if mod == "argparse" and name == "Namespace":
            return _argparse.Namespace
        if mod in ("builtins", "__builtin__") and name in _SAFE_BUILTINS:
            return getattr(builtins, name)
        if mod == "copyreg" and name == "_reconstructor":
            return copyreg._reconstructor
        if mod == "torch._utils" and name.startswith("_rebuild"):
            return getattr(torch._utils, name)
        if mod == "torch._tensor" and name == "_rebuild_from_type_v2":
            return torch._tensor._rebuild_from_type_v2
        if mod == "torch.nn.parameter" and name == "Parameter":
            return torch.nn.Parameter
        if mod == "torch":
            obj = getattr(torch, name, None)
            if name in ("Size", "device") or isinstance(obj, torch.dtype) or \
                    (isinstance(obj, type) and name.endswith("Storage")):
                return obj
        if mod in ("numpy.core.multiarray", "numpy._core.multiarray") and name in ("scalar", "_reconstruct"):
            import numpy
            return getattr(numpy.core.multiarray, name)
        if mod == "numpy" and name in ("dtype", "ndarray"):
            import numpy
            return getattr(numpy, name)
        if mod == "_codecs" and name == "encode":
            import codecs
            return codecs.encode
        key = (mod, name)
        if key not in stubs:
            stubs[key] = type(name, (_Stub,), {"_stub_name": f"{mod}.{name}"})
        return stubs[key]

    class Unpickler(pickle.Unpickler):
        def find_class(self, mod, name):
            return find_class(mod, name)

    def load(f, **kwargs):
        return Unpickler(f, **kwargs).load()

    module = types.ModuleType("deepmt_safe_pickle")
    module.Unpickler = Unpickler
    module.load = load
    module.__dict__["loads"] = lambda data, **kw: Unpickler(__import__("io").BytesIO(data), **kw).load()
    return module


def load_checkpoint(path):
    import inspect

    import torch
    if not os.path.isfile(path):
        raise ConvertError(f"{path}: no such file")
    kwargs = {"map_location": "cpu", "pickle_module": _make_pickle_module()}
    if "weights_only" in inspect.signature(torch.load).parameters:
        kwargs["weights_only"] = False  # the custom unpickler above is the restriction
    # torch 1.13 ignores pickle_module unless weights_only (it falls back to the pickle
    # module), so the restricted Unpickler is also put in place there for the call.
    saved = pickle.Unpickler
    pickle.Unpickler = kwargs["pickle_module"].Unpickler
    try:
        ck = torch.load(path, **kwargs)
    except Exception as e:  # torch raises many kinds for a file that is not a checkpoint
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ConvertError(f"{path}: not a PyTorch checkpoint that torch.load can read ({msg})")
    finally:
        pickle.Unpickler = saved
    if not isinstance(ck, dict):
        raise ConvertError(f"{path}: the checkpoint is a {type(ck).__name__}, expected a dict "
                           "{'model': state_dict, 'args' or 'cfg': ...}")
    if "model" not in ck:
        raise ConvertError(f"{path}: the checkpoint has no 'model' entry (keys: {', '.join(map(str, ck))}); "
                           "expected {'model': state_dict, 'args' or 'cfg': ...} as fairseq and torchscale save")
    sd = ck["model"]
    if not isinstance(sd, dict):
        raise ConvertError(f"{path}: 'model' is a {type(sd).__name__}, expected a state dict (name -> tensor)")
    bad = [k for k, v in sd.items() if not isinstance(v, torch.Tensor)]
    if bad:
        raise ConvertError(f"{path}: 'model' entries that are not tensors: {', '.join(map(str, bad[:5]))}")
    if sd and all(k.startswith("module.") for k in sd):  # saved from a DistributedDataParallel wrapper
        sd = collections.OrderedDict((k[len("module."):], v) for k, v in sd.items())
    return ck, sd


def plain(x, depth=0):
    """argparse.Namespace / omegaconf (stubbed) / nested containers -> plain Python."""
    import argparse as _argparse
    if depth > 50:
        return None
    if isinstance(x, _argparse.Namespace):
        return {k: plain(v, depth + 1) for k, v in vars(x).items()}
    if isinstance(x, _Stub):
        st = x._state
        if isinstance(st, tuple) and len(st) == 2 and (st[0] is None or isinstance(st[0], dict)):
            st = dict(st[0] or {}, **(st[1] or {}))
        if isinstance(st, dict):
            if "_content" in st:  # omegaconf DictConfig / ListConfig
                return plain(st["_content"], depth + 1)
            if "_val" in st:  # omegaconf value node
                return plain(st["_val"], depth + 1)
            return {k: plain(v, depth + 1) for k, v in st.items() if k != "_parent"}
        if "_items" in x.__dict__:
            return {k: plain(v, depth + 1) for k, v in x.__dict__["_items"].items()}
        if "_list" in x.__dict__:
            return [plain(v, depth + 1) for v in x.__dict__["_list"]]
        return repr(x)
    if isinstance(x, dict):
        return {k: plain(v, depth + 1) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [plain(v, depth + 1) for v in x]
    return x


_INTERP = re.compile(r"^\$\{([A-Za-z0-9_.]+)\}$")


def resolve_interpolations(node, root, depth=0):
    """omegaconf's "${task.max_source_positions}" strings, resolved against the root config."""
    if isinstance(node, dict):
        return {k: resolve_interpolations(v, root, depth) for k, v in node.items()}
    if isinstance(node, list):
        return [resolve_interpolations(v, root, depth) for v in node]
    if isinstance(node, str) and depth < 10:
        m = _INTERP.match(node)
        if m:
            cur = root
            for part in m.group(1).split("."):
                if not isinstance(cur, dict) or part not in cur:
                    return node
                cur = cur[part]
            return resolve_interpolations(cur, root, depth + 1)
    return node


def checkpoint_args(ck):
    """-> (args dict, where they came from). fairseq's own rule: 'args' when it is set,
    else cfg['model'] (hydra / omegaconf checkpoints)."""
    if ck.get("args") is not None:
        a = plain(ck["args"])
        if not isinstance(a, dict):
            raise ConvertError(f"'args' is a {type(ck['args']).__name__}, expected a dict or argparse.Namespace")
        return a, "args"
    if ck.get("cfg") is not None:
        root = plain(ck["cfg"])
        if not isinstance(root, dict) or not isinstance(root.get("model"), dict):
            raise ConvertError("the checkpoint's 'cfg' has no 'model' section with the architecture")
        model = resolve_interpolations(root["model"], root)
        task = root.get("task") if isinstance(root.get("task"), dict) else {}
        for k in ("source_lang", "target_lang", "langs", "lang_pairs", "max_source_positions",
                  "max_target_positions"):
            if k not in model and k in task:
                model[k] = resolve_interpolations(task[k], root)
        return model, "cfg['model']"
    raise ConvertError("the checkpoint has neither 'args' nor 'cfg': the architecture options (deepnorm, "
                       "normalize_before, ...) cannot be read; supply them with --set KEY=VALUE")
