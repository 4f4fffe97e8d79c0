"""Read and write deepmt model directories (docs/model-format.md) without extra packages.

safetensors is simple enough to write by hand: 8-byte header length, JSON header,
raw little-endian data.
"""
import json
import os
import struct

import numpy as np
import torch

from .model import Transformer

_DTYPES = {"F32": (np.float32, 4), "F16": (np.float16, 2), "BF16": (None, 2)}


def write_safetensors(path, tensors, dtype="F32", metadata=None):
    """tensors: ordered dict name -> torch tensor or numpy array. dtype: F32, F16 or BF16."""
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        t = t.detach().cpu().float() if isinstance(t, torch.Tensor) else torch.from_numpy(np.asarray(t, np.float32))
        if dtype == "BF16":
            raw = t.contiguous().to(torch.bfloat16).view(torch.int16).numpy().tobytes()
        else:
            raw = t.numpy().astype(_DTYPES[dtype][0]).tobytes()
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    if metadata:
        header["__metadata__"] = {k: str(v) for k, v in metadata.items()}
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)  # keep the data 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)))
        f.write(head)
        for b in blobs:
            f.write(b)


def read_safetensors(path):
    """-> dict name -> float32 torch tensor."""
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    base, out = 8 + n, {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, en = e["data_offsets"]
        raw = data[base + b:base + en]
        if e["dtype"] == "BF16":
            t = torch.from_numpy(np.frombuffer(raw, np.int16).copy()).view(torch.bfloat16).float()
        else:
            t = torch.from_numpy(np.frombuffer(raw, _DTYPES[e["dtype"]][0]).astype(np.float32))
        out[name] = t.reshape(e["shape"])
    return out


def model_tensors(model):
    """The tensors that go into model.safetensors: parameters, tied ones stored once."""
    out, seen = {}, set()
    for name, p in model.state_dict(keep_vars=False).items():
        if id(p) in seen or p.data_ptr() in seen:
            continue
        if name == "decoder.embed_tokens.weight" and model.cfg["share_embeddings"]:
            continue
        seen.add(p.data_ptr())
        out[name] = p
    return out


def save(model, directory, dtype="F32", sentencepiece=None, metadata=None):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(model.cfg, f, indent=2)
        f.write("\n")
    write_safetensors(os.path.join(directory, "model.safetensors"), model_tensors(model), dtype, metadata)
    if sentencepiece:
        # read whole before writing: exporting over the model directory the run's
        # vocabulary came from (--init-from DIR, export --out DIR) must not truncate it
        with open(sentencepiece, "rb") as src:
            data = src.read()
        if not data:
            raise ValueError(f"{sentencepiece} is empty")
        with open(os.path.join(directory, "sentencepiece.model"), "wb") as dst:
            dst.write(data)


def load(directory):
    """-> Transformer in eval mode with the directory's weights (widened to F32)."""
    with open(os.path.join(directory, "config.json")) as f:
        cfg = json.load(f)
    model = Transformer(cfg)
    tensors = read_safetensors(os.path.join(directory, "model.safetensors"))
    missing, unexpected = model.load_state_dict(tensors, strict=False)
    missing = [m for m in missing if not (m == "decoder.embed_tokens.weight" and cfg["share_embeddings"])]
    if missing or unexpected:
        raise ValueError(f"{directory}: missing {missing}, unexpected {unexpected}")
    return model.eval()
