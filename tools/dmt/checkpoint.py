"""Reading fairseq / torchscale checkpoints without running their code.

A checkpoint is a pickle, and unpickling runs whatever callables the file names. So the
file is never handed to torch.load: this module reads torch.save's formats itself.

- zip (torch >= 1.6): a zip archive (entries stored, not compressed) holding
  ARCHIVE/data.pkl (the object, tensors as persistent ids) and ARCHIVE/data/KEY (each
  storage's raw bytes, little-endian unless ARCHIVE/byteorder says "big");
- legacy (torch.save(..., _use_new_zipfile_serialization=False), and torch < 1.6): five
  pickles in a row (magic number, protocol 1001, sys_info, the object, the sorted storage
  keys), then each storage as an int64 element count and its raw bytes;
- legacy tar (torch < 0.4) is refused with a message saying how to re-save it.

Every pickle is first walked opcode by opcode (_prescan: memo indices, frame sizes and
nesting depth, which the C unpickler would otherwise act on before any check here), then
goes through _Unpickler, whose find_class is a strict allow-list. Allowed
names resolve to this module's own inert objects, never to the named Python object:
_rebuild_tensor_v2 and friends build _TensorRef records (checked against the storage
records and turned into tensors only after unpickling), OrderedDict/set/frozenset/bytes
are rebuilt from plain data, argparse.Namespace and configuration classes from a few
known packages (omegaconf, fairseq, ...) become _Stub placeholders that only keep their
pickled state. Every other name (os.system, builtins.eval, torch's own rebuild helpers
that take callables, ...) refuses the file. Nothing the file says is ever called.
Used by tools/convert_fairseq.py and tests/fuzz/fuzz_unpickler.py.
"""
import collections
import io
import os
import pickle
import pickletools
import re
import reprlib
import struct
import zipfile


class ConvertError(Exception):
    """A refusal or bad input: printed as one message, exit status 1."""


class CheckpointError(ConvertError):
    """The file is not a checkpoint this reader accepts (malformed, unsupported format, or
    a pickle that asks for something outside the allow-list)."""


class CheckpointRefused(CheckpointError):
    """The pickle asks for something outside the allow-list: the file may be crafted."""


# torch.save's legacy format starts with these two pickled ints.
_LEGACY_MAGIC = 0x1950a86a20f9469cfc6c
_LEGACY_PROTOCOL = 1001
_MAX_DIMS = 64
_MAX_INT = 1 << 62
_MAX_DIM_SIZE = (1 << 31) - 1  # no real weight has a longer dimension (an empty tensor could claim any)

# storage class name -> (torch dtype name, bytes per element)
_STORAGE_TYPES = {
    "FloatStorage": ("float32", 4), "DoubleStorage": ("float64", 8), "HalfStorage": ("float16", 2),
    "BFloat16Storage": ("bfloat16", 2), "LongStorage": ("int64", 8), "IntStorage": ("int32", 4),
    "ShortStorage": ("int16", 2), "CharStorage": ("int8", 1), "ByteStorage": ("uint8", 1),
    "BoolStorage": ("bool", 1),
}

# Packages whose classes a training checkpoint's configuration may pickle: they become
# _Stub placeholders (their code is never imported or run).
_STUB_PACKAGES = ("omegaconf", "fairseq", "torchscale", "hydra", "typing", "enum", "pathlib",
                  "argparse", "numpy")


_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother, _REPR.maxlong = 3, 60, 60, 40


def _short(x):
    """A bounded repr of something the pickle built (nested 100,000 deep, or an int of a
    million digits, the plain repr would raise)."""
    try:
        return _REPR.repr(x)
    except Exception:  # noqa: BLE001 - a message must not fail
        return f"<{type(x).__name__}>"


def _malformed(what):
    return CheckpointError(f"malformed checkpoint: {what}")


# --------------------------------------------------------------------------- inert objects

class _Frozen:
    """Base of the objects the unpickler hands out: attributes are fixed at creation, so the
    pickle's BUILD opcode cannot change them."""
    __slots__ = ()

    def __setattr__(self, key, value):
        raise _malformed(f"the pickle tries to set attribute {key!r} of {self!r}")

    def __delattr__(self, key):
        raise _malformed(f"the pickle tries to delete attribute {key!r} of {self!r}")

    def _init(self, **fields):
        for k, v in fields.items():
            object.__setattr__(self, k, v)


class _StorageType(_Frozen):
    """torch.<X>Storage as named in a pickle: a dtype and an element size."""
    __slots__ = ("name", "dtype", "itemsize")

    def __init__(self, name):
        dtype, itemsize = _STORAGE_TYPES[name]
        self._init(name=name, dtype=dtype, itemsize=itemsize)

    def __repr__(self):
        return f"torch.{self.name}"


class _StorageRef(_Frozen):
    """A storage record of the file: key, element type, element count, and (legacy views)
    the element offset into its root storage."""
    __slots__ = ("key", "stype", "numel", "root", "offset")

    def __init__(self, key, stype, numel, root=None, offset=0):
        self._init(key=key, stype=stype, numel=numel, root=root if root is not None else key, offset=offset)

    def __repr__(self):
        return f"<storage {self.key}: {self.numel} x {self.stype.dtype}>"


class _TensorRef(_Frozen):
    """What _rebuild_tensor_v2 meant to build: checked, materialised after unpickling."""
    __slots__ = ("storage", "offset", "size", "stride")

    def __init__(self, storage, offset, size, stride):
        self._init(storage=storage, offset=offset, size=size, stride=stride)

    def __repr__(self):
        return f"<tensor {list(self.size)} {self.storage.stype.dtype}>"


class _Marker(_Frozen):
    """A name the pickle may use as a value but not call (torch.Tensor as new_type)."""
    __slots__ = ("name",)

    def __init__(self, name):
        self._init(name=name)

    def __repr__(self):
        return self.name


class _Call(_Frozen):
    """An allowed callable: one of this module's functions under the name the pickle used.
    Arguments of the wrong number or kind refuse the file."""
    __slots__ = ("name", "fn")

    def __init__(self, name, fn):
        self._init(name=name, fn=fn)

    def __call__(self, *args, **kwargs):
        try:
            return self.fn(*args, **kwargs)
        except TypeError as e:  # wrong arity from the pickle's REDUCE
            raise _malformed(f"{self.name} called with {len(args)} bad argument(s) ({e})")

    def __repr__(self):
        return self.name


class _StubMeta(type):
    """Placeholder classes cannot be changed by the pickle either (BUILD on a class)."""

    def __setattr__(cls, key, value):
        raise _malformed(f"the pickle tries to set attribute {key!r} of class {cls._stub_name}")

    def __delattr__(cls, key):
        raise _malformed(f"the pickle tries to delete attribute {key!r} of class {cls._stub_name}")


class _Stub(metaclass=_StubMeta):
    """Stands in for a configuration class the checkpoint pickled (omegaconf, fairseq,
    argparse.Namespace, ...): keeps whatever state the pickle gives it, runs nothing."""
    _stub_name = "?"

    def __new__(cls, *args, **kwargs):
        obj = object.__new__(cls)
        obj.__dict__["_args"] = args
        return obj

    def __init__(self, *args, **kwargs):
        pass

    def __setstate__(self, state):
        self.__dict__["_state"] = state

    def __setattr__(self, key, value):
        self.__dict__.setdefault("_attrs", {})[key] = value

    def __setitem__(self, key, value):
        self.__dict__.setdefault("_items", {})[key] = value

    def append(self, value):
        self.__dict__.setdefault("_list", []).append(value)

    def extend(self, values):
        if not isinstance(values, (list, tuple)):
            raise _malformed(f"extend of {self._stub_name} with a {type(values).__name__}")
        self.__dict__.setdefault("_list", []).extend(values)

    def __repr__(self):
        return f"<{self._stub_name} (not loaded)>"


# --------------------------------------------------------------------------- allowed callables

def _is_int(x, lo=0, hi=_MAX_INT):
    return type(x) is int and lo <= x <= hi


def _int_tuple(x, what, name, hi=_MAX_INT):
    if not isinstance(x, (tuple, list)) or len(x) > _MAX_DIMS or not all(_is_int(v, 0, hi) for v in x):
        raise _malformed(f"{name}: {what} is not a tuple of at most {_MAX_DIMS} ints in 0..{hi}")
    return tuple(x)


def _no_hooks(hooks, name):
    # Backward hooks are callables: a checkpoint has none; any would be the file's code.
    if hooks is not None and not (isinstance(hooks, dict) and not hooks):
        raise CheckpointRefused(f"refused: {name} with backward hooks (callables in the file); "
                              "a checkpoint of weights has none")


def _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad=False, backward_hooks=None,
                       metadata=None):
    name = "torch._utils._rebuild_tensor_v2"
    if not isinstance(storage, _StorageRef):
        raise _malformed(f"{name}: the storage is a {type(storage).__name__}, not a storage record")
    if not _is_int(storage_offset):
        raise _malformed(f"{name}: storage offset {_short(storage_offset)}")
    size = _int_tuple(size, "size", name, hi=_MAX_DIM_SIZE)
    stride = _int_tuple(stride, "stride", name)
    if len(size) != len(stride):
        raise _malformed(f"{name}: size {list(size)} and stride {list(stride)} differ in length")
    if not isinstance(requires_grad, bool):
        raise _malformed(f"{name}: requires_grad {_short(requires_grad)}")
    _no_hooks(backward_hooks, name)
    return _TensorRef(storage, storage_offset, size, stride)


def _rebuild_parameter(data, requires_grad=False, backward_hooks=None, state=None):
    name = "torch._utils._rebuild_parameter"
    if not isinstance(data, _TensorRef):
        raise _malformed(f"{name}: data is a {type(data).__name__}, not a tensor")
    _no_hooks(backward_hooks, name)
    if state:
        raise CheckpointRefused(f"refused: {name} with extra state {type(state).__name__}")
    return data


def _rebuild_from_type_v2(func, new_type, args, state):
    # torch pickles a tensor with Python state this way; only a plain tensor or parameter
    # without state is accepted, and func must be the tensor rebuild above.
    name = "torch._tensor._rebuild_from_type_v2"
    if not (isinstance(func, _Call) and func.fn is _rebuild_tensor_v2):
        raise CheckpointRefused(f"refused: {name} with function {_short(func)}")
    if not (isinstance(new_type, _Marker) and new_type.name in ("torch.Tensor", "torch.nn.parameter.Parameter")):
        raise CheckpointRefused(f"refused: {name} with type {_short(new_type)}")
    if state:
        raise CheckpointRefused(f"refused: {name} with extra state {type(state).__name__}")
    if not isinstance(args, tuple):
        raise _malformed(f"{name}: args is a {type(args).__name__}")
    return _rebuild_tensor_v2(*args)


def _ordered_dict(items=()):
    out = collections.OrderedDict()
    if not isinstance(items, (list, tuple)):
        raise _malformed(f"collections.OrderedDict from a {type(items).__name__}")
    for kv in items:
        if not isinstance(kv, (list, tuple)) or len(kv) != 2:
            raise _malformed("collections.OrderedDict items are not pairs")
        try:
            out[kv[0]] = kv[1]
        except TypeError:
            raise _malformed(f"unhashable key {type(kv[0]).__name__} in collections.OrderedDict")
    return out


def _defaultdict(*args):
    return {}  # the factory is never needed (nothing is looked up that is missing)


def _set_of(kind):
    def build(items=()):
        if not isinstance(items, (list, tuple)):
            raise _malformed(f"{kind.__name__} from a {type(items).__name__}")
        try:
            return kind(items)
        except TypeError:
            raise _malformed(f"unhashable item in a {kind.__name__}")
    return build


def _bytes(*args):
    # Protocol-2 pickles write bytes as _codecs.encode(str, 'latin1') and b"" as bytes().
    if not args:
        return b""
    raise _malformed("builtins.bytes with arguments")


def _bytearray(*args):
    if not args:
        return bytearray()
    if len(args) == 2 and isinstance(args[0], str) and args[1] in ("latin1", "latin-1"):
        return bytearray(_codecs_encode(*args))
    if len(args) == 1 and isinstance(args[0], bytes):
        return bytearray(args[0])
    raise _malformed("builtins.bytearray with other arguments than (str, 'latin1') or (bytes,)")


def _codecs_encode(text, encoding="utf-8"):
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise _malformed("_codecs.encode other than (str, 'latin1')")
    try:
        return text.encode("latin-1")
    except UnicodeEncodeError:
        raise _malformed("_codecs.encode of a str beyond latin-1")


def _complex(real=0.0, imag=0.0):
    if not all(type(v) in (int, float) for v in (real, imag)):
        raise _malformed("builtins.complex of non-numbers")
    return complex(real, imag)


_NUMPY_SCALARS = {"f8": "d", "f4": "f", "f2": "e", "i8": "q", "i4": "i", "i2": "h", "i1": "b",
                  "u8": "Q", "u4": "I", "u2": "H", "u1": "B", "b1": "?"}


def _numpy_scalar(dtype, data=None):
    # A numpy scalar in args (e.g. a float from numpy): decoded with struct, numpy not used.
    spec = getattr(dtype, "__dict__", {}).get("_args") if isinstance(dtype, _Stub) else None
    code = spec[0] if isinstance(spec, tuple) and spec and isinstance(spec[0], str) else None
    state = dtype.__dict__.get("_state") if isinstance(dtype, _Stub) else None
    order = state[1] if isinstance(state, tuple) and len(state) > 1 and state[1] in ("<", ">") else "<"
    if getattr(dtype, "_stub_name", "") != "numpy.dtype" or code not in _NUMPY_SCALARS or not isinstance(data, bytes):
        raise _malformed("numpy scalar other than a plain number")
    try:
        return struct.unpack(order + _NUMPY_SCALARS[code], data)[0]
    except struct.error:
        raise _malformed(f"numpy scalar {code} of {len(data)} bytes")


def _reconstructor(cls, base, state):
    # copyreg._reconstructor (protocol 0/1 objects): only for placeholder classes.
    if not (isinstance(cls, type) and issubclass(cls, _Stub)):
        raise CheckpointRefused(f"refused: copyreg._reconstructor of {_short(cls)}")
    obj = cls()
    if state is not None:
        obj.__setstate__(state)
    return obj


_CALLS = {
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor_v2,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    ("torch._utils", "_rebuild_parameter_with_state"): _rebuild_parameter,
    ("torch._tensor", "_rebuild_from_type_v2"): _rebuild_from_type_v2,
    ("collections", "OrderedDict"): _ordered_dict,
    ("collections", "defaultdict"): _defaultdict,
    ("builtins", "set"): _set_of(set),
    ("builtins", "frozenset"): _set_of(frozenset),
    ("builtins", "bytes"): _bytes,
    ("builtins", "bytearray"): _bytearray,
    ("builtins", "complex"): _complex,
    ("_codecs", "encode"): _codecs_encode,
    ("copyreg", "_reconstructor"): _reconstructor,
    ("numpy.core.multiarray", "scalar"): _numpy_scalar,
    ("numpy._core.multiarray", "scalar"): _numpy_scalar,
}
_MARKERS = {("torch", "Tensor"): "torch.Tensor", ("torch.nn.parameter", "Parameter"): "torch.nn.parameter.Parameter",
            ("builtins", "object"): "builtins.object"}
_PY2_MODULES = {"__builtin__": "builtins", "copy_reg": "copyreg"}
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


class _Unpickler(pickle.Unpickler):
    """pickle.Unpickler with find_class as an allow-list and persistent ids resolved
    through the reader's storage table. One per pickle: it owns its placeholder classes."""

    def __init__(self, f, persistent=None):
        super().__init__(f, encoding="utf-8")
        self._persistent = persistent
        self._calls = {}
        self._stubs = {}

    def find_class(self, module, name):
        module = _PY2_MODULES.get(module, module)
        key = (module, name)
        if key in _CALLS:
            if key not in self._calls:
                self._calls[key] = _Call(f"{module}.{name}", _CALLS[key])
            return self._calls[key]
        if key in _MARKERS:
            return _Marker(_MARKERS[key])
        if module == "torch" and name in _STORAGE_TYPES:
            return _StorageType(name)
        if module.split(".")[0] in _STUB_PACKAGES and _NAME.match(module) and _NAME.match(name):
            if key not in self._stubs:
                self._stubs[key] = _StubMeta(name.rpartition(".")[2], (_Stub,), {"_stub_name": f"{module}.{name}",
                                                                                 "__slots__": ()})
            return self._stubs[key]
        shown = f"{module}.{name}"
        raise CheckpointRefused(f"refused: the pickle asks for {shown[:120]!r}, which is not on the converter's "
                              "allow-list (tensors, containers and configuration objects only); a checkpoint of "
                              "weights does not need it, so the file may be crafted to run code")

    def persistent_load(self, pid):
        if self._persistent is None:
            raise _malformed("a persistent id outside the object pickle")
        return self._persistent(pid)


_MAX_NESTING = 1000  # a checkpoint nests a few levels; CPython hashes nested tuples recursively in C


def _prescan(f):
    """Walks one pickle's opcodes (pickletools, pure Python) before the C unpickler sees it,
    for what would crash or exhaust the process before any of this module's checks:
    - memo indices and frame sizes: the C unpickler allocates what they say first
      (LONG_BINPUT 4294967295 resizes the memo to 32 GiB);
    - nesting: a tuple nested a million deep used as a dict key overflows the C stack in
      hash() (a segmentation fault, not an exception). Each stack item's nesting depth is
      followed through the memo; containers changed in place (APPENDS, SETITEMS, BUILD)
      update the record every reference to them shares."""
    start = f.tell()
    size = f.seek(0, os.SEEK_END) - start
    f.seek(start)
    stack, marks, memo = [], [], {}  # marks: stack lengths at each MARK
    try:
        for n, (op, arg, pos) in enumerate(pickletools.genops(f)):
            name = op.name
            if name in ("PUT", "BINPUT", "LONG_BINPUT") and not (type(arg) is int and 0 <= arg <= n):
                raise _malformed(f"memo index {arg} at opcode {n} (a pickle numbers its memo from 0)")
            if name == "FRAME" and arg > size:
                raise _malformed(f"frame of {arg} bytes in a pickle of {size}")
            if name == "PROTO" and arg > pickle.HIGHEST_PROTOCOL:
                raise _malformed(f"pickle protocol {arg}")
            if name == "MARK":
                marks.append(len(stack))
                continue
            before = op.stack_before
            below = before.index(pickletools.markobject) if pickletools.markobject in before else len(before)
            above = []
            if below < len(before):  # pops everything down to the last MARK
                if not marks:
                    raise _malformed(f"{name} without a MARK")
                i = marks.pop()
                above = stack[i:]
                del stack[i:]
            if below:
                if len(stack) - (marks[-1] if marks else 0) < below:
                    raise _malformed(f"{name} on a stack of {len(stack)}")
                consumed = stack[-below:] + above
                del stack[-below:]
            else:
                consumed = above
            if name in ("PUT", "BINPUT", "LONG_BINPUT"):  # the top stays on the stack
                if len(stack) <= (marks[-1] if marks else 0):
                    raise _malformed(f"{name} without an object")
                memo[arg] = stack[-1]
            elif name == "MEMOIZE":
                memo[len(memo)] = consumed[0]
                stack.append(consumed[0])
            elif name in ("GET", "BINGET", "LONG_BINGET"):
                stack.append(memo.get(arg, [0]))
            elif name == "DUP":
                stack += [consumed[0], consumed[0]]
            elif name in ("APPEND", "APPENDS", "SETITEM", "SETITEMS", "ADDITEMS", "BUILD"):
                rec = consumed[0]
                rec[0] = max([rec[0]] + [1 + c[0] for c in consumed[1:]])
                if rec[0] > _MAX_NESTING:
                    raise _malformed(f"objects nested deeper than {_MAX_NESTING} levels")
                stack.append(rec)
            elif op.stack_after:
                depth = 1 + max((c[0] for c in consumed), default=0)
                if depth > _MAX_NESTING:
                    raise _malformed(f"objects nested deeper than {_MAX_NESTING} levels")
                stack.append([depth])
    except CheckpointError:
        raise
    except (ValueError, EOFError, UnicodeDecodeError, struct.error, OverflowError) as e:
        raise _malformed(f"bad pickle ({type(e).__name__}: {str(e)[:200]})")
    f.seek(start)


def _unpickle(f, persistent=None):
    """One pickle from f with the allow-list; any failure of a malformed pickle becomes a
    CheckpointError. MemoryError is not hidden."""
    _prescan(f)
    try:
        return _Unpickler(f, persistent).load()
    except CheckpointError:
        raise
    except MemoryError:
        raise
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, KeyError, IndexError, AttributeError,
            OverflowError, RecursionError, struct.error) as e:
        raise _malformed(f"bad pickle ({type(e).__name__}: {str(e)[:200]})")


def _storage_pid(pid, numel_items):
    # ('storage', storage_type, key, location, numel[, view_metadata])
    if not isinstance(pid, tuple) or len(pid) != numel_items or pid[0] != "storage":
        raise _malformed(f"persistent id {_short(pid)}")
    stype, key, location, numel = pid[1:5]
    if not isinstance(stype, _StorageType):
        raise _malformed(f"storage type {_short(stype)}")
    if not isinstance(key, str) or not re.fullmatch(r"[0-9A-Za-z_]{1,64}", key):
        raise _malformed(f"storage key {_short(key)}")
    if not isinstance(location, str):
        raise _malformed(f"storage location {_short(location)}")
    if not _is_int(numel):
        raise _malformed(f"storage size {_short(numel)}")
    return stype, key, numel


# --------------------------------------------------------------------------- formats

def _read_zip(path, f, file_size):
    try:
        zf = zipfile.ZipFile(f)
        infos = zf.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError, ValueError, struct.error,
            NotImplementedError, UnicodeDecodeError) as e:
        raise _malformed(f"not a readable zip archive ({type(e).__name__}: {str(e)[:200]})")
    names = [i.filename for i in infos]
    if len(set(names)) != len(names):
        raise _malformed("the zip archive has duplicate entries")
    pkls = [n for n in names if n.count("/") == 1 and n.endswith("/data.pkl")]
    if len(pkls) != 1:
        raise CheckpointError(f"{path}: not a PyTorch checkpoint (a zip archive without one ARCHIVE/data.pkl)")
    prefix = pkls[0][:-len("data.pkl")]
    by_name = {i.filename: i for i in infos}

    def read(name):
        info = by_name.get(prefix + name)
        if info is None:
            return None
        if info.flag_bits & 1:
            raise _malformed(f"entry {name} is encrypted")
        if info.compress_type != zipfile.ZIP_STORED or info.file_size != info.compress_size \
                or info.file_size > file_size:
            raise _malformed(f"entry {name} is compressed or larger than the file (torch.save stores entries)")
        try:
            with zf.open(info) as e:
                data = e.read(info.file_size + 1)
        except (zipfile.BadZipFile, EOFError, OSError, ValueError, struct.error, NotImplementedError,
                UnicodeDecodeError) as e:
            raise _malformed(f"entry {name}: {type(e).__name__}: {str(e)[:200]}")
        if len(data) != info.file_size:
            raise _malformed(f"entry {name} is {len(data)} bytes, its header says {info.file_size}")
        return data

    order = read("byteorder")
    if order not in (None, b"little", b"big"):
        raise _malformed(f"byteorder {order[:20]!r}")
    big = order == b"big"
    storages = {}

    def persistent(pid):
        stype, key, numel = _storage_pid(pid, 5)
        if key in storages:
            old = storages[key]
            if old.stype is not stype and old.stype.name != stype.name or old.numel != numel:
                raise _malformed(f"storage {key} is described twice differently")
            return old
        info = by_name.get(prefix + "data/" + key)
        if info is None:
            raise _malformed(f"no data/{key} entry for a storage of the pickle")
        if info.file_size != numel * stype.itemsize:
            raise _malformed(f"data/{key} holds {info.file_size} bytes, the pickle says {numel} x "
                             f"{stype.itemsize}-byte {stype.dtype}")
        storages[key] = _StorageRef(key, stype, numel)
        return storages[key]

    obj = _unpickle(io.BytesIO(read("data.pkl")), persistent)
    blobs = {key: read("data/" + key) for key in storages}
    return obj, blobs, big


def _read_legacy(path, f):
    not_torch = f"{path}: not a PyTorch checkpoint (neither a zip archive nor torch's legacy format)"
    try:
        magic = _unpickle(f)
    except CheckpointRefused:
        raise
    except CheckpointError:
        raise CheckpointError(not_torch)
    if type(magic) is not int or magic != _LEGACY_MAGIC:
        raise CheckpointError(not_torch)
    if _unpickle(f) != _LEGACY_PROTOCOL:
        raise _malformed("legacy protocol version is not 1001")
    sys_info = _unpickle(f)
    if not isinstance(sys_info, dict):
        raise _malformed("legacy sys_info is not a dict")
    little = sys_info.get("little_endian", True)
    if not isinstance(little, bool):
        raise _malformed("legacy sys_info little_endian is not a bool")
    roots = {}
    views = {}

    def persistent(pid):
        if isinstance(pid, tuple) and pid and pid[0] == "module":
            raise CheckpointRefused(f"refused: {path} pickles a module with its source code (torch.save of a "
                                  "whole model); save the state_dict instead")
        stype, key, numel = _storage_pid(pid, 6)
        if key in roots:
            if roots[key].stype.name != stype.name or roots[key].numel != numel:
                raise _malformed(f"storage {key} is described twice differently")
        else:
            roots[key] = _StorageRef(key, stype, numel)
        view = pid[5]
        if view is None:
            return roots[key]
        if not (isinstance(view, tuple) and len(view) == 3 and isinstance(view[0], str) and _is_int(view[1])
                and _is_int(view[2]) and view[1] + view[2] <= numel):
            raise _malformed(f"storage view {_short(view)}")
        vkey = view[0]
        if vkey not in views:
            views[vkey] = _StorageRef(vkey, stype, view[2], root=key, offset=view[1])
        return views[vkey]

    obj = _unpickle(f, persistent)
    keys = _unpickle(f)
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys) or len(set(keys)) != len(keys):
        raise _malformed("legacy storage keys are not a list of distinct strings")
    if set(keys) != set(roots):
        raise _malformed("legacy storage keys do not match the storages of the pickle")
    blobs = {}
    for key in keys:
        head = f.read(8)
        if len(head) != 8:
            raise _malformed(f"legacy storage {key}: file ends before its size")
        numel = int.from_bytes(head, "little" if little else "big", signed=True)
        ref = roots[key]
        if numel != ref.numel:
            raise _malformed(f"legacy storage {key} has {numel} elements, the pickle says {ref.numel}")
        data = f.read(numel * ref.stype.itemsize)
        if len(data) != numel * ref.stype.itemsize:
            raise _malformed(f"legacy storage {key}: file ends inside its data")
        blobs[key] = data
    return obj, blobs, not little


def _materialize(ref, blobs, big, cache):
    """A _TensorRef -> torch tensor, after checking it lies inside its storage record."""
    import torch
    st = ref.storage
    root = st.root
    extent = 0 if 0 in ref.size else ref.offset + sum((n - 1) * s for n, s in zip(ref.size, ref.stride)) + 1
    count = 1
    for n in ref.size:
        count *= n
    if extent > st.numel or ref.offset > st.numel:
        raise _malformed(f"tensor {list(ref.size)} stride {list(ref.stride)} offset {ref.offset} reaches past its "
                         f"storage of {st.numel} elements")
    if count > max(st.numel, 1):
        # Overlapping views (stride 0) would let a small file claim a huge tensor.
        raise _malformed(f"tensor {list(ref.size)} has more elements than its storage ({st.numel})")
    if root not in cache:
        dtype = getattr(torch, st.stype.dtype)
        data = blobs[root]
        if not data:
            cache[root] = torch.empty(0, dtype=dtype)
        else:
            base = torch.frombuffer(bytearray(data), dtype=torch.uint8)
            if big and st.stype.itemsize > 1:
                base = base.view(-1, st.stype.itemsize).flip(1).reshape(-1)
            cache[root] = base.view(dtype)
    base = cache[root]
    return base.as_strided(ref.size, ref.stride, st.offset + ref.offset)


def read_checkpoint(path):
    """path -> (object, tensors): the unpickled object (tensors left as _TensorRef) and a
    function that turns a _TensorRef into a torch tensor. Raises CheckpointError."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            file_size = f.tell()
            f.seek(0)
            head = f.read(512)
            f.seek(0)
            if head[:4] == b"PK\x03\x04":
                obj, blobs, big = _read_zip(path, f, file_size)
            elif len(head) >= 262 and head[257:262] == b"ustar":
                raise CheckpointError(
                    f"{path}: a legacy tar checkpoint (torch < 0.4), which the converter does not read; re-save it "
                    "as zip where running its code is acceptable: python3 -c \"import torch; "
                    "torch.save(torch.load('OLD.pt'), 'NEW.pt')\" (torch.load runs code from the file)")
            else:
                obj, blobs, big = _read_legacy(path, io.BytesIO(f.read()))
    except OSError as e:
        raise CheckpointError(f"{path}: {e.strerror or e}")
    cache = {}
    return obj, lambda ref: _materialize(ref, blobs, big, cache)


def load_checkpoint(path):
    if not os.path.exists(path):
        raise ConvertError(f"{path}: no such file")
    if not os.path.isfile(path):  # a FIFO or device would block or never end
        raise ConvertError(f"{path}: not a regular file")
    try:
        ck, tensor = read_checkpoint(path)
    except CheckpointError as e:
        msg = str(e)
        raise type(e)(msg if msg.startswith(path) else f"{path}: {msg}")
    if not isinstance(ck, dict):
        raise ConvertError(f"{path}: the checkpoint is a {_type_name(ck)}, expected a dict "
                           "{'model': state_dict, 'args' or 'cfg': ...}")
    if "model" not in ck:
        keys = ", ".join(_short(k) for k in list(ck)[:20])
        raise ConvertError(f"{path}: the checkpoint has no 'model' entry (keys: {keys}); "
                           "expected {'model': state_dict, 'args' or 'cfg': ...} as fairseq and torchscale save")
    refs = ck["model"]
    if not isinstance(refs, dict):
        raise ConvertError(f"{path}: 'model' is a {_type_name(refs)}, expected a state dict (name -> tensor)")
    bad = [k for k, v in refs.items() if not isinstance(k, str) or not isinstance(v, _TensorRef)]
    if bad:
        raise ConvertError(f"{path}: 'model' entries that are not name -> tensor: "
                           f"{', '.join(_short(k) for k in bad[:5])}")
    try:
        sd = collections.OrderedDict((k, tensor(v)) for k, v in refs.items())
    except CheckpointError as e:
        raise type(e)(f"{path}: {e}")
    ck = dict(ck, model=sd)
    if sd and all(k.startswith("module.") for k in sd):  # saved from a DistributedDataParallel wrapper
        sd = collections.OrderedDict((k[len("module."):], v) for k, v in sd.items())
    return ck, sd


def _type_name(x):
    return x._stub_name if isinstance(x, _Stub) else type(x).__name__


# The args/cfg of a real checkpoint have hundreds of entries; a pickle can share one list
# many times over (or hold itself), which a tree walk would visit exponentially often.
_MAX_NODES = 200000


class _Budget:
    __slots__ = ("left",)

    def __init__(self):
        self.left = _MAX_NODES

    def spend(self):
        self.left -= 1
        if self.left < 0:
            raise CheckpointError(f"the checkpoint's args or cfg hold more than {_MAX_NODES} values "
                                  "(counting shared ones each time they are used)")


def plain(x, depth=0, budget=None):
    """Placeholders (argparse.Namespace, omegaconf, ...) and containers -> plain Python:
    dicts, lists, str, numbers, bool, None; anything else becomes its repr string.
    Deeper than 50 levels becomes None; more than _MAX_NODES values refuses the file."""
    budget = budget or _Budget()
    budget.spend()
    if depth > 50:
        return None
    rec = lambda v: plain(v, depth + 1, budget)  # noqa: E731
    if isinstance(x, _Stub):
        st = x.__dict__.get("_state")
        attrs = x.__dict__.get("_attrs")
        if isinstance(st, tuple) and len(st) == 2 and (st[0] is None or isinstance(st[0], dict)) \
                and (st[1] is None or isinstance(st[1], dict)):
            merged = dict(st[0] or {})
            merged.update(st[1] or {})
            st = merged
        if st is None and attrs:
            st = attrs
        if isinstance(st, dict):
            if "_content" in st:  # omegaconf DictConfig / ListConfig
                return rec(st["_content"])
            if "_val" in st:  # omegaconf value node
                return rec(st["_val"])
            return {_key(k): rec(v) for k, v in st.items() if k != "_parent"}
        if "_items" in x.__dict__:
            return {_key(k): rec(v) for k, v in x.__dict__["_items"].items()}
        if "_list" in x.__dict__:
            return [rec(v) for v in x.__dict__["_list"]]
        return _short(x)
    if isinstance(x, dict):
        return {_key(k): rec(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [rec(v) for v in x]
    if x is None or isinstance(x, (str, bool, int, float)):
        return x
    return _short(x)


def _key(k):
    return k if k is None or isinstance(k, (str, bool, int, float)) else _short(k)


_INTERP = re.compile(r"^\$\{([A-Za-z0-9_.]+)\}$")


def resolve_interpolations(node, root, depth=0, budget=None):
    """omegaconf's "${task.max_source_positions}" strings, resolved against the root config."""
    budget = budget or _Budget()
    budget.spend()
    if isinstance(node, dict):
        return {k: resolve_interpolations(v, root, depth, budget) for k, v in node.items()}
    if isinstance(node, list):
        return [resolve_interpolations(v, root, depth, budget) for v in node]
    if isinstance(node, str) and depth < 10:
        m = _INTERP.match(node)
        if m:
            cur = root
            for part in m.group(1).split("."):
                if not isinstance(cur, dict) or part not in cur:
                    return node
                cur = cur[part]
            return resolve_interpolations(cur, root, depth + 1, budget)
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
        budget = _Budget()
        model = resolve_interpolations(root["model"], root, budget=budget)
        task = root.get("task") if isinstance(root.get("task"), dict) else {}
        for k in ("source_lang", "target_lang", "langs", "lang_pairs", "max_source_positions",
                  "max_target_positions"):
            if k not in model and k in task:
                model[k] = resolve_interpolations(task[k], root, budget=budget)
        return model, "cfg['model']"
    raise ConvertError("the checkpoint has neither 'args' nor 'cfg': the architecture options (deepnorm, "
                       "normalize_before, ...) cannot be read; supply them with --set KEY=VALUE")
