"""PyTorch reference of the deepmt encoder-decoder (docs/model-format.md).

The same network as the C engine, written plainly: the golden outputs the C tests
compare against, the training recipe and the converters all use this module.
Parameter names are the checkpoint's tensor names, so `state_dict()` is what goes
into model.safetensors.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def dropout(x, p, training):
    """F.dropout, with the CPU's mask drawn a byte an element from 64-bit random words.

    torch's CPU bernoulli_ makes one generator call per element: 15% of a CPU training
    step (tools/train.py bench --profile); this is ~10x faster. p is rounded to a
    multiple of 1/256 (0.2 -> 51/256), the kept values scaled to match. Seeded by
    torch's generator like F.dropout, so runs stay reproducible. Other devices keep
    F.dropout."""
    if not training or p <= 0:
        return x
    if x.device.type != "cpu":
        return F.dropout(x, p, True)
    n = x.numel()
    words = torch.empty((n + 6) // 7, dtype=torch.int64).random_()
    # the low 7 bytes of each word: random_() draws from [0, 2^63), so the top byte's top bit is 0
    rand = words.view(torch.uint8).view(-1, 8)[:, :7].reshape(-1)[:n].view(x.shape)
    drop = min(255, max(1, round(p * 256)))
    return x.mul(rand >= drop).mul_(256.0 / (256 - drop))


def deepnorm_constants(encoder_layers, decoder_layers):
    """DeepNorm alpha/beta for an encoder-decoder (Wang et al., 2022, table 1)."""
    n, m = encoder_layers, decoder_layers
    return {
        "encoder_alpha": 0.81 * (n ** 4 * m) ** (1 / 16),
        "encoder_beta": 0.87 * (n ** 4 * m) ** (-1 / 16),
        "decoder_alpha": (3 * m) ** (1 / 4),
        "decoder_beta": (12 * m) ** (-1 / 4),
    }


def default_config(**overrides):
    """A complete config.json dict; alpha filled in from the layer counts for deepnorm."""
    cfg = {
        "format": "deepmt", "format_version": 1,
        "encoder_layers": 6, "decoder_layers": 6, "d_model": 256, "heads": 4,
        "ffn_dim": 1024, "vocab_size": 8000, "normalization": "deepnorm",
        "encoder_alpha": 1.0, "decoder_alpha": 1.0, "activation": "relu",
        "layer_norm_eps": 1e-5, "embed_scale": None, "positions": "sinusoidal",
        "position_offset": 2, "max_positions": 1024, "layernorm_embedding": False,
        "share_embeddings": True, "tie_output": True,
        "pad_id": 1, "bos_id": 0, "eos_id": 2, "unk_id": 3, "decoder_start_id": 2,
        "languages": [],
        "decoding": {"beam_size": 4, "length_penalty": 1.0, "max_len_a": 1.2,
                     "max_len_b": 10, "min_len": 1, "no_repeat_ngram_size": 0, "max_repeats": 3},
    }
    cfg.update(overrides)
    if cfg["embed_scale"] is None:
        cfg["embed_scale"] = math.sqrt(cfg["d_model"])
    if cfg["normalization"] == "deepnorm" and "encoder_alpha" not in overrides:
        c = deepnorm_constants(cfg["encoder_layers"], cfg["decoder_layers"])
        cfg["encoder_alpha"], cfg["decoder_alpha"] = c["encoder_alpha"], c["decoder_alpha"]
    return cfg


def sinusoidal_table(rows, dim):
    """fairseq's SinusoidalPositionalEmbedding table: row r = [sin(r f) | cos(r f)]."""
    half = dim // 2
    freq = torch.exp(torch.arange(half, dtype=torch.float64) * -(math.log(10000.0) / (half - 1)))
    ang = torch.arange(rows, dtype=torch.float64)[:, None] * freq[None, :]
    return torch.cat([torch.sin(ang), torch.cos(ang)], dim=1).float()


class Attention(nn.Module):
    def __init__(self, d, heads, dropout=0.0):
        super().__init__()
        self.heads, self.head_dim, self.dropout = heads, d // heads, dropout
        self.q_proj, self.k_proj = nn.Linear(d, d), nn.Linear(d, d)
        self.v_proj, self.out_proj = nn.Linear(d, d), nn.Linear(d, d)

    def project_kv(self, x):
        """[B, T, d] -> (k, v) as [B, H, T, hd]."""
        return self._split(self.k_proj(x)), self._split(self.v_proj(x))

    def _split(self, x):
        b, t, _ = x.shape
        return x.view(b, t, self.heads, self.head_dim).transpose(1, 2)

    def forward(self, x, k, v, mask=None):
        """x [B, Tq, d]; k, v [B, H, Tk, hd]; mask broadcastable to [B, H, Tq, Tk], True = blocked."""
        q = self._split(self.q_proj(x) * self.head_dim ** -0.5)
        scores = torch.matmul(q, k.transpose(-1, -2))
        if mask is not None:
            scores = scores.masked_fill(mask, float("-inf"))
        probs = torch.softmax(scores.float(), dim=-1).type_as(scores)
        if getattr(self, "keep_probs", False):  # the reference alignments (beam.search) read them
            self.last_probs = probs.detach()
        if self.dropout > 0 and self.training:
            probs = dropout(probs, self.dropout, True)
        out = torch.matmul(probs, v).transpose(1, 2).reshape(x.shape[0], x.shape[1], -1)
        return self.out_proj(out)


class Layer(nn.Module):
    """One encoder (cross=False) or decoder (cross=True) layer."""

    def __init__(self, cfg, alpha, cross, dropout=0.0, attention_dropout=0.0, activation_dropout=0.0):
        super().__init__()
        d, eps = cfg["d_model"], cfg["layer_norm_eps"]
        self.pre = cfg["normalization"] == "pre"
        self.alpha = alpha
        self.self_attn = Attention(d, cfg["heads"], attention_dropout)
        self.self_attn_layer_norm = nn.LayerNorm(d, eps=eps)
        if cross:
            self.encoder_attn = Attention(d, cfg["heads"], attention_dropout)
            self.encoder_attn_layer_norm = nn.LayerNorm(d, eps=eps)
        self.fc1 = nn.Linear(d, cfg["ffn_dim"])
        self.fc2 = nn.Linear(cfg["ffn_dim"], d)
        self.final_layer_norm = nn.LayerNorm(d, eps=eps)
        self.act = F.gelu if cfg["activation"] == "gelu" else F.relu
        self.dropout, self.activation_dropout = dropout, activation_dropout

    def _residual(self, x, norm, f):
        if self.pre:
            return x + dropout(f(norm(x)), self.dropout, self.training)
        return norm(x * self.alpha + dropout(f(x), self.dropout, self.training))

    def _ffn(self, x):
        h = dropout(self.act(self.fc1(x)), self.activation_dropout, self.training)
        return self.fc2(h)

    def forward(self, x, self_mask=None, enc_kv=None, enc_mask=None, cache=None):
        """cache: dict holding this layer's past self-attention k/v (incremental decoding)."""
        def self_attention(h):
            k, v = self.self_attn.project_kv(h)
            if cache is not None:
                if "k" in cache:
                    k = torch.cat([cache["k"], k], dim=2)
                    v = torch.cat([cache["v"], v], dim=2)
                cache["k"], cache["v"] = k, v
            return self.self_attn(h, k, v, self_mask)

        x = self._residual(x, self.self_attn_layer_norm, self_attention)
        if enc_kv is not None:
            x = self._residual(x, self.encoder_attn_layer_norm,
                               lambda h: self.encoder_attn(h, enc_kv[0], enc_kv[1], enc_mask))
        return self._residual(x, self.final_layer_norm, self._ffn)


class Stack(nn.Module):
    """Embeddings + layers (+ final layer norm for pre-LN): the encoder or the decoder."""

    def __init__(self, cfg, n_layers, alpha, cross, embed_tokens, **drop):
        super().__init__()
        d = cfg["d_model"]
        self.cfg = cfg
        self.embed_tokens = embed_tokens
        if cfg["positions"] == "learned":
            self.embed_positions = nn.Embedding(cfg["max_positions"] + cfg["position_offset"], d)
        else:
            self.register_buffer("sinusoid",
                                 sinusoidal_table(cfg["max_positions"] + cfg["position_offset"], d),
                                 persistent=False)
        if cfg["layernorm_embedding"]:
            self.layernorm_embedding = nn.LayerNorm(d, eps=cfg["layer_norm_eps"])
        self.layers = nn.ModuleList(Layer(cfg, alpha, cross, **drop) for _ in range(n_layers))
        if cfg["normalization"] == "pre":
            self.layer_norm = nn.LayerNorm(d, eps=cfg["layer_norm_eps"])
        self.dropout = drop.get("dropout", 0.0)

    def embed(self, tokens, start=0):
        """tokens [B, T] at positions start..start+T-1."""
        pos = torch.arange(start, start + tokens.shape[1], device=tokens.device) + self.cfg["position_offset"]
        if self.cfg["positions"] == "learned":
            p = self.embed_positions(pos)
        else:
            p = self.sinusoid[pos]
        x = self.embed_tokens(tokens) * self.cfg["embed_scale"] + p[None]
        if self.cfg["layernorm_embedding"]:
            x = self.layernorm_embedding(x)
        return dropout(x, self.dropout, self.training)

    def finish(self, x):
        return self.layer_norm(x) if self.cfg["normalization"] == "pre" else x


class Transformer(nn.Module):
    def __init__(self, cfg, dropout=0.0, attention_dropout=0.0, activation_dropout=0.0):
        super().__init__()
        self.cfg = cfg
        drop = dict(dropout=dropout, attention_dropout=attention_dropout,
                    activation_dropout=activation_dropout)
        v, d, pad = cfg["vocab_size"], cfg["d_model"], cfg["pad_id"]
        enc_emb = nn.Embedding(v, d, padding_idx=pad)
        dec_emb = enc_emb if cfg["share_embeddings"] else nn.Embedding(v, d, padding_idx=pad)
        self.encoder = Stack(cfg, cfg["encoder_layers"], cfg["encoder_alpha"], False, enc_emb, **drop)
        self.decoder = Stack(cfg, cfg["decoder_layers"], cfg["decoder_alpha"], True, dec_emb, **drop)
        if not cfg["tie_output"]:
            self.decoder.output_projection = nn.Linear(d, v, bias=False)

    # -- initialisation -------------------------------------------------------
    def init_weights(self, generator=None, deepnorm_init=True):
        """Xavier-normal init; with DeepNorm, v/out/fc1/fc2 get gain beta (DESIGN.md)."""
        cfg = self.cfg
        betas = deepnorm_constants(cfg["encoder_layers"], cfg["decoder_layers"])
        use_beta = deepnorm_init and cfg["normalization"] == "deepnorm"
        for stack, beta in ((self.encoder, betas["encoder_beta"]), (self.decoder, betas["decoder_beta"])):
            for layer in stack.layers:
                for name, p in layer.named_parameters():
                    if name.endswith("bias"):
                        nn.init.zeros_(p)
                    elif "layer_norm" in name:
                        nn.init.ones_(p)
                    else:
                        scaled = any(s in name for s in ("v_proj", "out_proj", "fc1", "fc2"))
                        gain = beta if (use_beta and scaled) else 1.0
                        _xavier_normal(p, gain, generator)
        d = cfg["d_model"]
        embeddings = {id(self.encoder.embed_tokens): self.encoder.embed_tokens,
                      id(self.decoder.embed_tokens): self.decoder.embed_tokens}
        for emb in embeddings.values():
            with torch.no_grad():
                emb.weight.normal_(0.0, d ** -0.5, generator=generator)
                emb.weight[cfg["pad_id"]].zero_()
        if hasattr(self.decoder, "output_projection"):
            with torch.no_grad():
                self.decoder.output_projection.weight.normal_(0.0, d ** -0.5, generator=generator)
        for stack in (self.encoder, self.decoder):
            if hasattr(stack, "embed_positions"):
                with torch.no_grad():
                    stack.embed_positions.weight.normal_(0.0, d ** -0.5, generator=generator)

    # -- forward ----------------------------------------------------------------
    def encode(self, src):
        """src [B, S] right-padded with pad_id -> (states [B, S, d], pad mask [B, S])."""
        pad_mask = src.eq(self.cfg["pad_id"])
        x = self.encoder.embed(src) * (~pad_mask)[..., None].to(torch.float32)
        attn_mask = pad_mask[:, None, None, :]
        for layer in self.encoder.layers:
            x = layer(x, self_mask=attn_mask)
        return self.encoder.finish(x), pad_mask

    def cross_kv(self, enc):
        return [layer.encoder_attn.project_kv(enc) for layer in self.decoder.layers]

    def output_weight(self):
        if hasattr(self.decoder, "output_projection"):
            return self.decoder.output_projection.weight
        return self.decoder.embed_tokens.weight

    def decode(self, prev, enc, pad_mask, kv=None, caches=None, start=0):
        """Decoder log-probs [B, T, V] for inputs prev [B, T] at positions start.. .

        Teacher-forced when caches is None; incremental (one step or more) when caches
        is a list of per-layer dicts carried between calls.
        """
        x = self.decoder_states(prev, enc, pad_mask, kv, caches, start)
        logits = F.linear(x, self.output_weight())
        return torch.log_softmax(logits.float(), dim=-1)

    def decoder_states(self, prev, enc, pad_mask, kv=None, caches=None, start=0):
        """The decoder's last hidden states [B, T, d] (decode() before the output projection)."""
        kv = kv if kv is not None else self.cross_kv(enc)
        t = prev.shape[1]
        x = self.decoder.embed(prev, start)
        causal = None
        if t > 1:
            total = start + t
            causal = torch.ones(t, total, dtype=torch.bool, device=prev.device).triu(start + 1)[None, None]
        enc_mask = pad_mask[:, None, None, :]
        for i, layer in enumerate(self.decoder.layers):
            cache = caches[i] if caches is not None else None
            x = layer(x, self_mask=causal, enc_kv=kv[i], enc_mask=enc_mask, cache=cache)
        return self.decoder.finish(x)

    def forward(self, src, prev):
        enc, pad_mask = self.encode(src)
        return self.decode(prev, enc, pad_mask)


def _xavier_normal(p, gain, generator):
    fan_out, fan_in = p.shape
    std = gain * math.sqrt(2.0 / (fan_in + fan_out))
    with torch.no_grad():
        p.normal_(0.0, std, generator=generator)
