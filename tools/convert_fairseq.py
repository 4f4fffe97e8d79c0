#!/usr/bin/env python3
"""Convert a torchscale or fairseq checkpoint to a deepmt model directory.

    tools/convert_fairseq.py CHECKPOINT.pt OUT_DIR [--dict dict.txt] [--spm spm.model]
                             [--languages en,de,...] [--dtype F32|F16|BF16]

CHECKPOINT is a torch.save file holding {'model': state_dict, 'args' or 'cfg': ...}. It is
untrusted input: it is never given to torch.load (whose unpickling runs code the file
names) but read by tools/dmt/checkpoint.py with an allow-list unpickler. The model:
torchscale's EncoderDecoder (the DeepNet authors' code, also through its fairseq
machine-translation example) or a fairseq `transformer`. Everything the engine needs is
read from the checkpoint's args and tensors; an option that is absent from the args gets
the framework's documented default, and the converter says which. What deepmt cannot
represent (MoE, xPos, relative position buckets, multiway, sub-LayerNorm, bias-free
linears, unknown tensors, other activations) is refused with a message naming it.

The result is validated before it is moved into place: reloaded with
tools/dmt/modeldir.load and compared tensor by tensor. docs/converting.md has the rest.
Exit status: 0 converted, 1 refused / bad input, 2 usage or environment problem.
"""
import argparse
import collections
import json
import math
import os
import re
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
PROG = "convert_fairseq"
sys.path.insert(0, HERE)
from dmt.checkpoint import ConvertError, checkpoint_args, load_checkpoint  # noqa: E402

# fairseq Dictionary specials: bos 0, pad 1, eos 2, unk 3.
SPECIALS = ["<s>", "<pad>", "</s>", "<unk>"]
BOS, PAD, EOS, UNK = 0, 1, 2, 3

LANGUAGE_NAMES = {
    "ar": "Arabic", "bg": "Bulgarian", "cs": "Czech", "da": "Danish", "de": "German",
    "el": "Greek", "en": "English", "es": "Spanish", "et": "Estonian", "fa": "Persian",
    "fi": "Finnish", "fr": "French", "he": "Hebrew", "hi": "Hindi", "hr": "Croatian",
    "hu": "Hungarian", "id": "Indonesian", "it": "Italian", "ja": "Japanese", "ko": "Korean",
    "lt": "Lithuanian", "lv": "Latvian", "nl": "Dutch", "no": "Norwegian", "pl": "Polish",
    "pt": "Portuguese", "ro": "Romanian", "ru": "Russian", "sk": "Slovak", "sl": "Slovenian",
    "sr": "Serbian", "sv": "Swedish", "th": "Thai", "tr": "Turkish", "uk": "Ukrainian",
    "vi": "Vietnamese", "zh": "Chinese",
}

# Framework defaults for options a checkpoint's args may leave out.
#   torchscale:          torchscale.architecture.config.EncoderDecoderConfig
#   torchscale-fairseq:  torchscale's examples/fairseq/models/machine_translation.py (base_architecture + argparse)
#   fairseq:             fairseq.models.transformer (base_architecture)
DEFAULTS = {
    "torchscale": {
        "deepnorm": False, "subln": True, "encoder_normalize_before": True,
        "decoder_normalize_before": True, "normalize_output": True, "activation_fn": "gelu",
        "no_scale_embedding": True, "layernorm_embedding": False, "layernorm_eps": 1e-5,
        "share_all_embeddings": False, "share_decoder_input_output_embed": False,
        "max_source_positions": 1024, "max_target_positions": 1024,
        "encoder_attention_heads": 12, "decoder_attention_heads": 12,
        "moe_freq": 0, "rel_pos_buckets": 0, "xpos_rel_pos": False, "multiway": False,
    },
    "torchscale-fairseq": {
        "deepnorm": False, "subln": False, "encoder_normalize_before": False,
        "decoder_normalize_before": False, "normalize_output": True, "activation_fn": "relu",
        "no_scale_embedding": False, "layernorm_embedding": False, "layernorm_eps": 1e-5,
        "share_all_embeddings": False, "share_decoder_input_output_embed": False,
        "max_source_positions": 1024, "max_target_positions": 1024,
        "encoder_attention_heads": 8, "decoder_attention_heads": 8,
        "encoder_learned_pos": False, "decoder_learned_pos": False,
        "no_token_positional_embeddings": False,
        "moe_freq": 0, "rel_pos_buckets": 0, "xpos_rel_pos": False, "multiway": False,
    },
    "fairseq": {
        "deepnorm": False, "subln": False, "encoder_normalize_before": False,
        "decoder_normalize_before": False, "activation_fn": "relu",
        "no_scale_embedding": False, "layernorm_embedding": False, "layernorm_eps": 1e-5,
        "share_all_embeddings": False, "share_decoder_input_output_embed": False,
        "max_source_positions": 1024, "max_target_positions": 1024,
        "encoder_attention_heads": 8, "decoder_attention_heads": 8,
        "encoder_learned_pos": False, "decoder_learned_pos": False,
        "no_token_positional_embeddings": False,
        "moe_freq": 0, "rel_pos_buckets": 0, "xpos_rel_pos": False, "multiway": False,
    },
}

# Args recorded under config.json "source".
RELEVANT_ARGS = [
    "arch", "_name", "encoder_embed_dim", "decoder_embed_dim", "encoder_ffn_embed_dim",
    "decoder_ffn_embed_dim", "encoder_layers", "decoder_layers", "encoder_attention_heads",
    "decoder_attention_heads", "encoder_normalize_before", "decoder_normalize_before",
    "normalize_output", "deepnorm", "subln", "activation_fn", "no_scale_embedding",
    "layernorm_embedding", "layernorm_eps", "share_all_embeddings",
    "share_decoder_input_output_embed", "max_source_positions", "max_target_positions",
    "encoder_learned_pos", "decoder_learned_pos", "no_token_positional_embeddings",
    "moe_freq", "encoder_moe_freq", "decoder_moe_freq", "moe_expert_count", "rel_pos_buckets",
    "max_rel_pos", "xpos_rel_pos", "multiway", "vocab_size", "source_lang", "target_lang",
    "langs", "lang_pairs",
]


def note(msg):
    print(f"{PROG}: {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- dictionary

def read_dict(path):
    """fairseq dict.txt -> list of pieces for ids 4, 5, ... (duplicates handled as fairseq does)."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        raise ConvertError(f"{path}: no such file")
    except UnicodeDecodeError as e:
        raise ConvertError(f"{path}: not UTF-8 ({e})")
    symbols = list(SPECIALS)
    index = {s: i for i, s in enumerate(symbols)}
    for n, line in enumerate(lines, 1):
        line = line.rstrip("\r\n")
        if not line.strip():
            continue
        try:
            word, field = line.rstrip().rsplit(" ", 1)
            overwrite = False
            if field == "#fairseq:overwrite":
                overwrite = True
                word, field = word.rsplit(" ", 1)
            int(field)
        except ValueError:
            raise ConvertError(f"{path}:{n}: expected '<piece> <count>' (fairseq dictionary), got {line!r}")
        if word in index and not overwrite:
            raise ConvertError(f"{path}:{n}: duplicate piece {word!r} (fairseq refuses it too unless "
                               "the line ends with #fairseq:overwrite)")
        if word in index:  # fairseq appends a new id; the old id keeps a now unreachable symbol
            old = index[word]
            symbols[old] = f"<overwritten:{old}>"
        index[word] = len(symbols)
        symbols.append(word)
    return symbols


def build_vocab(dict_path, vocab_size, lang_tokens, append_lang_tokens):
    symbols = read_dict(dict_path)
    appended = []
    if append_lang_tokens:
        for tok in lang_tokens:
            if tok not in symbols:
                symbols.append(tok)
                appended.append(tok)
    if len(symbols) > vocab_size:
        raise ConvertError(f"{dict_path}: {len(symbols)} entries (4 specials + {len(symbols) - 4}"
                           f"{' incl. appended language tokens' if appended else ''}) but the embedding has "
                           f"only {vocab_size} rows: not this checkpoint's dictionary")
    padded = 0
    taken = set(symbols)
    i = 0
    while len(symbols) < vocab_size:  # fairseq's Dictionary.pad_to_multiple_
        name = f"madeupword{i:04d}"
        i += 1
        if name in taken:
            continue
        symbols.append(name)
        taken.add(name)
        padded += 1
    return symbols, appended, padded


# --------------------------------------------------------------------------- conversion

MAX_POSITIONS = 65536  # model/config.h, DMT_MAX_POSITIONS: the longest sequence deepmt serves
_LAYER = re.compile(r"^(encoder|decoder)\.layers\.(\d+)\.")


def parse_value(text):
    try:
        return json.loads(text)
    except ValueError:
        low = text.lower()
        if low in ("true", "false"):
            return low == "true"
        if low in ("none", "null"):
            return None
        return text


def detect_framework(ck, sd, args):
    nested_ffn = any(".ffn.fc1." in k or ".ffn.fc2." in k for k in sd)
    fairseq_keys = ("arch", "_name", "task", "criterion", "optimizer", "encoder_learned_pos",
                    "decoder_learned_pos", "no_token_positional_embeddings")
    fairseqish = any(k in args for k in fairseq_keys) or "cfg" in ck or "optimizer_history" in ck
    if nested_ffn:
        return "torchscale-fairseq" if fairseqish else "torchscale"
    if "deepnorm" in args and not fairseqish:
        return "torchscale"
    return "fairseq"


class Converter:
    def __init__(self, ck, sd, args, args_from, framework, log=note):
        import torch
        self.torch = torch
        self.ck, self.args, self.args_from, self.fw = ck, args, args_from, framework
        self.log = log
        self.defaults_used = {}
        self.notes = []
        self.dropped = []
        self.sd = collections.OrderedDict((k, v) for k, v in sd.items())

    # -- args with framework defaults -----------------------------------------
    def arg(self, key, default=None, why=None):
        v = self.args.get(key)
        if v is not None:
            return v
        table = DEFAULTS[self.fw]
        if key in table:
            d = table[key]
            if self.fw == "torchscale" and key in ("encoder_normalize_before", "decoder_normalize_before", "subln"):
                # EncoderDecoderConfig: deepnorm forces Post-LN and no subln; subln forces Pre-LN.
                if self.arg_bool("deepnorm"):
                    d = False
                elif key != "subln" and self.arg_bool("subln"):
                    d = True
        else:
            d = default
        if key not in self.defaults_used:
            self.defaults_used[key] = d
            self.log(f"note: checkpoint {self.args_from} do not set {key}; using {self.fw}'s default {d!r}"
                     + (f" ({why})" if why else ""))
        return d

    def arg_bool(self, key):
        v = self.arg(key)
        if isinstance(v, str):
            return v.lower() in ("true", "1", "yes")
        return bool(v)

    # -- refusals -----------------------------------------------------------------
    def refuse_unsupported(self):
        keys = list(self.sd)
        reasons = []
        moe = [k for k in ("moe_freq", "encoder_moe_freq", "decoder_moe_freq") if (self.args.get(k) or 0) > 0]
        moe_tensors = [k for k in keys if "moe_layer" in k or ".experts." in k or ".gate.wg." in k]
        if moe or moe_tensors:
            reasons.append("mixture-of-experts layers (" + (f"{moe[0]}={self.args[moe[0]]}" if moe else
                           f"tensor {moe_tensors[0]}") + "): deepmt has dense FFN layers only")
        xpos = [k for k in keys if ".xpos." in k]
        if self.args.get("xpos_rel_pos") or xpos:
            reasons.append("xPos rotary relative positions (" + ("xpos_rel_pos=True" if self.args.get("xpos_rel_pos")
                           else f"tensor {xpos[0]}") + "): deepmt has absolute positions only")
        rel = [k for k in keys if "relative_position" in k or "rel_pos_bias" in k or "relative_attention_bias" in k]
        if (self.args.get("rel_pos_buckets") or 0) > 0 or rel:
            reasons.append("relative position buckets (" + (f"rel_pos_buckets={self.args.get('rel_pos_buckets')}"
                           if (self.args.get("rel_pos_buckets") or 0) > 0 else f"tensor {rel[0]}")
                           + "): deepmt has no attention position bias")
        multi = [k for k in keys if re.search(r"\.(A|B)\.(weight|bias)$", k)]
        if self.args.get("multiway") or multi:
            reasons.append("multiway (per-modality) weights (" + ("multiway=True" if self.args.get("multiway")
                           else f"tensor {multi[0]}") + ")")
        subln_t = [k for k in keys if "inner_attn_ln" in k or "ffn_layernorm" in k]
        subln_arg = self.args.get("subln")  # when absent, the tensors decide (subln always adds some)
        if subln_arg or subln_t:
            reasons.append("sub-LayerNorm / Magneto (" + (f"tensor {subln_t[0]}" if subln_t else "subln=True")
                           + "): deepmt has no layer norm inside attention or FFN")
        act = str(self.arg("activation_fn"))
        if act not in ("relu", "gelu"):
            hint = " (tanh approximation; deepmt's gelu is the exact erf form)" if act in ("gelu_accurate", "gelu_fast") else ""
            reasons.append(f"activation_fn {act!r}{hint}: deepmt supports relu and gelu")
        if self.args.get("adaptive_softmax_cutoff"):
            reasons.append("adaptive softmax (adaptive_softmax_cutoff)")
        if self.args.get("adaptive_input"):
            reasons.append("adaptive input embeddings (adaptive_input)")
        if self.args.get("cross_self_attention"):
            reasons.append("cross+self-attention (cross_self_attention)")
        if self.args.get("no_cross_attention"):
            reasons.append("a decoder without cross-attention (no_cross_attention)")
        if self.args.get("no_token_positional_embeddings"):
            reasons.append("no position embeddings (no_token_positional_embeddings)")
        for side in ("encoder", "decoder"):
            if self.args.get(f"{side}_layers_to_keep"):
                reasons.append(f"pruned layers ({side}_layers_to_keep)")
        if reasons:
            raise ConvertError("cannot convert: deepmt cannot represent " + "; ".join(reasons))

    # -- names ----------------------------------------------------------------------
    def rename(self):
        out = collections.OrderedDict()
        self.origin = {}
        for k, v in self.sd.items():
            if k.endswith(".version") or k.endswith("._float_tensor"):
                self.dropped.append(k)  # fairseq bookkeeping buffers
                continue
            n = k.replace(".ffn.fc1.", ".fc1.").replace(".ffn.fc2.", ".fc2.")
            n = re.sub(r"^(encoder\.layers\.\d+)\.layer_norms\.0\.", r"\1.self_attn_layer_norm.", n)
            n = re.sub(r"^(encoder\.layers\.\d+)\.layer_norms\.1\.", r"\1.final_layer_norm.", n)
            n = re.sub(r"^(decoder\.layers\.\d+)\.layer_norms\.0\.", r"\1.self_attn_layer_norm.", n)
            n = re.sub(r"^(decoder\.layers\.\d+)\.layer_norms\.1\.", r"\1.encoder_attn_layer_norm.", n)
            n = re.sub(r"^(decoder\.layers\.\d+)\.layer_norms\.2\.", r"\1.final_layer_norm.", n)
            if n == "decoder.embed_out":
                n = "decoder.output_projection.weight"
            m = re.match(r"^(.*)\.in_proj_(weight|bias)$", n)
            if m:  # old fairseq: q, k, v stacked in one projection
                if v.shape[0] % 3:
                    raise ConvertError(f"tensor {k} has shape {list(v.shape)}: first dimension not divisible by 3")
                for part, chunk in zip(("q_proj", "k_proj", "v_proj"), v.chunk(3, dim=0)):
                    name = f"{m.group(1)}.{part}.{m.group(2)}"
                    out[name] = chunk
                    self.origin[name] = k
                continue
            if n in out:
                raise ConvertError(f"tensors {self.origin[n]} and {k} both map to {n}")
            out[n] = v
            self.origin[n] = k
        self.t = out

    def src_name(self, name):
        if name in self.origin:
            return self.origin[name]
        if self.fw.startswith("torchscale"):
            return name.replace(".fc1.", ".ffn.fc1.").replace(".fc2.", ".ffn.fc2.")
        return name

    # -- shapes & architecture -------------------------------------------------------
    def layer_count(self, side):
        """Layers 0..n-1 of a side; their indices must run without gaps: a tensor named
        encoder.layers.3000000.* in a small file would otherwise make every table below
        3,000,000 layers long (a 16.8 KB checkpoint ran out of memory after 40 s)."""
        idx = {int(m.group(2)) for k in self.t for m in [_LAYER.match(k)] if m and m.group(1) == side}
        if idx and len(idx) != max(idx) + 1:
            missing = min(set(range(max(idx) + 1)) - idx)
            raise ConvertError(f"{side} layer indices have gaps: the state dict has {side}.layers.{max(idx)}.* "
                               f"but {len(idx)} layers in all (no {side}.layers.{missing}.*)")
        return (max(idx) + 1) if idx else 0

    def same(self, a, b):
        if a is b:
            return True
        if a.shape != b.shape:
            return False
        if a.data_ptr() == b.data_ptr() and a.stride() == b.stride():
            return True
        return bool(self.torch.equal(a, b))

    def build_config(self):
        t = self.t
        if "encoder.embed_tokens.weight" not in t:
            raise ConvertError(f"missing tensor encoder.embed_tokens.weight (the state dict has {len(self.sd)} "
                               "entries; is this an encoder-decoder translation checkpoint?)")
        emb = t["encoder.embed_tokens.weight"]
        if emb.dim() != 2:
            raise ConvertError(f"tensor encoder.embed_tokens.weight has shape {list(emb.shape)}, expected [vocab, d]")
        vocab, d = emb.shape
        # dimensions: tensors, cross-checked with the args
        for key in ("encoder_embed_dim", "decoder_embed_dim"):
            if self.args.get(key) is not None and int(self.args[key]) != d:
                raise ConvertError(f"args say {key}={self.args[key]} but encoder.embed_tokens.weight has "
                                   f"shape {list(emb.shape)} (d_model {d})")
        n_enc, n_dec = self.layer_count("encoder"), self.layer_count("decoder")
        for side, n in (("encoder", n_enc), ("decoder", n_dec)):
            a = self.args.get(f"{side}_layers")
            if n == 0:
                raise ConvertError(f"the state dict has no {side}.layers.* tensors")
            if a is not None and int(a) != n:
                raise ConvertError(f"args say {side}_layers={a} but the state dict has {side} layers 0..{n - 1}")
        fc1 = t.get("encoder.layers.0.fc1.weight")
        ffn = fc1.shape[0] if fc1 is not None and fc1.dim() == 2 else None
        for key in ("encoder_ffn_embed_dim", "decoder_ffn_embed_dim"):
            v = self.args.get(key)
            if v is not None:
                if ffn is None:
                    ffn = int(v)
                elif int(v) != ffn:
                    raise ConvertError(f"args say {key}={v} but encoder.layers.0.fc1.weight (checkpoint name "
                                       f"{self.src_name('encoder.layers.0.fc1.weight')}) has shape {list(fc1.shape)}"
                                       + ("; deepmt needs one FFN width for encoder and decoder"
                                          if key.startswith("decoder") else ""))
        if ffn is None:
            raise ConvertError("missing tensor encoder.layers.0.fc1.weight "
                               f"(checkpoint name {self.src_name('encoder.layers.0.fc1.weight')}) and no "
                               "encoder_ffn_embed_dim in the args")
        heads_e = int(self.arg("encoder_attention_heads"))
        heads_d = int(self.arg("decoder_attention_heads"))
        if heads_e != heads_d:
            raise ConvertError(f"encoder_attention_heads={heads_e} differs from decoder_attention_heads={heads_d}: "
                               "deepmt uses one head count")
        if heads_e < 1 or d % heads_e:
            raise ConvertError(f"d_model {d} is not divisible by {heads_e} attention heads")

        # normalization
        deepnorm = self.arg_bool("deepnorm")
        pre_e = self.arg_bool("encoder_normalize_before")
        pre_d = self.arg_bool("decoder_normalize_before")
        if pre_e != pre_d:
            raise ConvertError(f"encoder_normalize_before={pre_e} but decoder_normalize_before={pre_d}: deepmt "
                               "needs the same (Pre- or Post-LN) placement in both stacks")
        if deepnorm and pre_e:
            raise ConvertError("deepnorm=True together with Pre-LN (normalize_before=True): torchscale would scale "
                               "the residual by alpha around a Pre-LN sublayer, which deepmt cannot represent")
        if pre_e and self.fw != "fairseq" and self.args.get("normalize_output") is False:
            raise ConvertError("Pre-LN encoder with normalize_output=False (no final encoder layer norm): "
                               "deepmt's Pre-LN always ends with encoder.layer_norm")
        if deepnorm:
            norm = "deepnorm"
            # torchscale computes alpha from the configured layer counts (checked equal above)
            enc_alpha = math.pow(math.pow(n_enc, 4) * n_dec, 0.0625) * 0.81
            dec_alpha = math.pow(3.0 * n_dec, 0.25)
        else:
            norm = "pre" if pre_e else "post"
            enc_alpha = dec_alpha = 1.0

        act = str(self.arg("activation_fn"))
        eps = float(self.arg("layernorm_eps"))
        scale = 1.0 if self.arg_bool("no_scale_embedding") else math.sqrt(d)
        lnemb = self.arg_bool("layernorm_embedding")

        # embeddings
        share_all_arg = self.arg_bool("share_all_embeddings")
        dec_emb = t.get("decoder.embed_tokens.weight")
        if dec_emb is None:
            if not share_all_arg and self.args.get("share_all_embeddings") is not None:
                raise ConvertError("missing tensor decoder.embed_tokens.weight and share_all_embeddings is False")
            share_all = True
        else:
            equal = self.same(emb, dec_emb)
            if share_all_arg and not equal:
                diff = (emb.float() - dec_emb.float()).abs().max().item() if emb.shape == dec_emb.shape else None
                raise ConvertError("args say share_all_embeddings=True but encoder.embed_tokens.weight and "
                                   "decoder.embed_tokens.weight differ ("
                                   + (f"max abs difference {diff:g})" if diff is not None else
                                      f"shapes {list(emb.shape)} and {list(dec_emb.shape)})"))
            if equal and not share_all_arg:
                self.log("note: encoder and decoder embeddings are identical tensors; storing them once "
                         "(share_embeddings = true)")
            share_all = equal
            if not equal and dec_emb.shape[0] != vocab:
                raise ConvertError(f"source and target vocabularies differ in size ({vocab} and {dec_emb.shape[0]} "
                                   "rows): deepmt needs one joined dictionary")
            if not equal:
                self.notes.append("separate source and target embeddings: deepmt assumes the same ids on both "
                                  "sides (one joined dictionary)")
        dec_in = emb if share_all else dec_emb
        if share_all and dec_emb is not None:
            self.dropped.append(self.src_name("decoder.embed_tokens.weight") + " (same as encoder.embed_tokens.weight)")
            del t["decoder.embed_tokens.weight"]

        tie_arg = self.arg_bool("share_decoder_input_output_embed") or share_all_arg
        out = t.get("decoder.output_projection.weight")
        if out is None:
            if not tie_arg and self.args.get("share_decoder_input_output_embed") is not None:
                raise ConvertError("missing tensor decoder.output_projection.weight (share_decoder_input_output_embed "
                                   "is False, so the output projection is its own tensor)")
            tie = True
        else:
            equal = self.same(out, dec_in)
            if tie_arg and not equal:
                raise ConvertError("args tie the output projection to the decoder embedding "
                                   "(share_decoder_input_output_embed / share_all_embeddings) but "
                                   f"{self.src_name('decoder.output_projection.weight')} differs from it")
            if equal and not tie_arg:
                self.log("note: the output projection is identical to the decoder embedding; storing it once "
                         "(tie_output = true)")
            tie = equal
            if tie:
                self.dropped.append(self.src_name("decoder.output_projection.weight") + " (tied to the decoder embedding)")
                del t["decoder.output_projection.weight"]

        # positions
        offset = PAD + 1  # fairseq: padding_idx + 1; torchscale's PositionalEmbedding: always 2
        learned = {s: f"{s}.embed_positions.weight" in t for s in ("encoder", "decoder")}
        if learned["encoder"] != learned["decoder"]:
            raise ConvertError("learned positions on one side and sinusoidal on the other: deepmt uses one kind")
        if learned["encoder"]:
            positions = "learned"
            rows = {s: t[f"{s}.embed_positions.weight"].shape[0] for s in ("encoder", "decoder")}
            for s in ("encoder", "decoder"):
                p = t[f"{s}.embed_positions.weight"]
                if p.dim() != 2 or p.shape[1] != d:
                    raise ConvertError(f"tensor {self.src_name(s + '.embed_positions.weight')} has shape "
                                       f"{list(p.shape)}, expected [positions, {d}]")
                if p.shape[0] <= offset + 1:
                    raise ConvertError(f"tensor {self.src_name(s + '.embed_positions.weight')} has only "
                                       f"{p.shape[0]} rows (positions start at row {offset})")
            max_pos = min(rows.values()) - offset
            if rows["encoder"] != rows["decoder"]:
                self.log(f"note: encoder/decoder position tables have {rows['encoder']}/{rows['decoder']} rows; "
                         f"deepmt uses one max_positions, keeping the first {max_pos + offset} rows of both")
                for s in ("encoder", "decoder"):
                    t[f"{s}.embed_positions.weight"] = t[f"{s}.embed_positions.weight"][:max_pos + offset]
        else:
            if (self.fw == "torchscale" and self.args.get("encoder_learned_pos") is None
                    and not any(k.endswith("embed_positions._float_tensor") for k in self.sd)):
                raise ConvertError("no encoder.embed_positions.weight: torchscale's EncoderDecoder was built without "
                                   "position embeddings, which deepmt cannot represent (if it was given fairseq's "
                                   "sinusoidal PositionalEmbedding, pass --set encoder_learned_pos=false)")
            for s in ("encoder", "decoder"):
                if self.args.get(f"{s}_learned_pos"):
                    raise ConvertError(f"args say {s}_learned_pos=True but there is no {s}.embed_positions.weight")
            positions = "sinusoidal"
            if d % 2 or d < 4:
                raise ConvertError(f"sinusoidal positions need an even d_model >= 4 (got {d})")
            max_pos = min(int(self.arg("max_source_positions")), int(self.arg("max_target_positions")))

        if not 2 <= int(max_pos) <= MAX_POSITIONS or offset > MAX_POSITIONS:
            raise ConvertError(f"max_positions {int(max_pos)} (position offset {offset}) is outside 2..{MAX_POSITIONS}, "
                               "what deepmt serves (model/config.h, DMT_MAX_POSITIONS); lower max_source_positions / "
                               "max_target_positions with --set")
        cfg = {
            "format": "deepmt", "format_version": 1,
            "encoder_layers": n_enc, "decoder_layers": n_dec, "d_model": int(d), "heads": heads_e,
            "ffn_dim": int(ffn), "vocab_size": int(vocab), "normalization": norm,
            "encoder_alpha": enc_alpha, "decoder_alpha": dec_alpha, "activation": act,
            "layer_norm_eps": eps, "embed_scale": scale, "positions": positions,
            "position_offset": offset, "max_positions": int(max_pos), "layernorm_embedding": lnemb,
            "share_embeddings": share_all, "tie_output": tie,
            "pad_id": PAD, "bos_id": BOS, "eos_id": EOS, "unk_id": UNK, "decoder_start_id": EOS,
            "languages": [],
        }
        self.cfg = cfg
        return cfg

    def expected(self):
        """deepmt tensor name -> shape, as docs/model-format.md lists them."""
        c = self.cfg
        d, f, v = c["d_model"], c["ffn_dim"], c["vocab_size"]
        e = collections.OrderedDict()
        e["encoder.embed_tokens.weight"] = [v, d]
        if not c["share_embeddings"]:
            e["decoder.embed_tokens.weight"] = [v, d]
        for s in ("encoder", "decoder"):
            if c["positions"] == "learned":
                e[f"{s}.embed_positions.weight"] = [c["max_positions"] + c["position_offset"], d]
            if c["layernorm_embedding"]:
                e[f"{s}.layernorm_embedding.weight"] = [d]
                e[f"{s}.layernorm_embedding.bias"] = [d]
            for i in range(c[f"{s}_layers"]):
                p = f"{s}.layers.{i}"
                attns = ["self_attn"] + (["encoder_attn"] if s == "decoder" else [])
                for a in attns:
                    for proj in ("q_proj", "k_proj", "v_proj", "out_proj"):
                        e[f"{p}.{a}.{proj}.weight"] = [d, d]
                        e[f"{p}.{a}.{proj}.bias"] = [d]
                    e[f"{p}.{a}_layer_norm.weight"] = [d]
                    e[f"{p}.{a}_layer_norm.bias"] = [d]
                e[f"{p}.fc1.weight"] = [f, d]
                e[f"{p}.fc1.bias"] = [f]
                e[f"{p}.fc2.weight"] = [d, f]
                e[f"{p}.fc2.bias"] = [d]
                e[f"{p}.final_layer_norm.weight"] = [d]
                e[f"{p}.final_layer_norm.bias"] = [d]
            if c["normalization"] == "pre":
                e[f"{s}.layer_norm.weight"] = [d]
                e[f"{s}.layer_norm.bias"] = [d]
        if not c["tie_output"]:
            e["decoder.output_projection.weight"] = [v, d]
        return e

    def check_tensors(self):
        exp = self.expected()
        t = self.t
        # bias-free linears / layer norms: every expected bias absent while its weight is present
        no_bias = [n for n in exp if n.endswith(".bias") and n not in t and n[:-5] + ".weight" in t]
        if no_bias and len(no_bias) >= max(1, len([n for n in exp if n.endswith(".bias")]) // 2):
            raise ConvertError(f"cannot convert: bias-free linear layers ({len(no_bias)} biases absent, e.g. "
                               f"{self.src_name(no_bias[0])}): deepmt's projections and layer norms all have biases")
        missing = [n for n in exp if n not in t]
        if missing:
            shown = ", ".join(self.src_name(n) for n in missing[:6])
            hint = ""
            if any(n.endswith(".layer_norm.weight") and n.count(".") == 2 for n in missing):
                hint = " (Pre-LN needs the final encoder/decoder layer_norm)"
            raise ConvertError(f"missing tensor{'s' if len(missing) > 1 else ''} {shown}"
                               f"{' and %d more' % (len(missing) - 6) if len(missing) > 6 else ''}"
                               f" that the checkpoint's args imply{hint}")
        for n, shape in exp.items():
            if list(t[n].shape) != shape:
                raise ConvertError(f"tensor {self.src_name(n)} has shape {list(t[n].shape)}, expected {shape} "
                                   f"(d_model {self.cfg['d_model']}, ffn {self.cfg['ffn_dim']}, vocab "
                                   f"{self.cfg['vocab_size']})")
            if not t[n].is_floating_point():
                raise ConvertError(f"tensor {self.src_name(n)} has dtype {t[n].dtype}, expected floating point")
        unknown = [n for n in t if n not in exp]
        if unknown:
            shown = ", ".join(self.src_name(n) for n in unknown[:6])
            if self.cfg["normalization"] != "pre" and any(n in unknown for n in ("encoder.layer_norm.weight",
                                                                                 "decoder.layer_norm.weight")):
                shown += (" (a final encoder/decoder layer_norm belongs to Pre-LN, but the args say "
                          "normalize_before=False; check them or use --set)")
            raise ConvertError(f"cannot convert: unknown tensor{'s' if len(unknown) > 1 else ''} {shown}"
                               f"{' and %d more' % (len(unknown) - 6) if len(unknown) > 6 else ''} "
                               "(not part of the network deepmt runs)")
        for n in exp:
            if not bool(self.torch.isfinite(t[n].float()).all()):
                raise ConvertError(f"tensor {self.src_name(n)} contains NaN or Inf")
        return collections.OrderedDict((n, t[n].detach().float().contiguous()) for n in exp)


def language_entries(codes, symbols, token_format):
    out = []
    for spec in codes:
        code, _, name = spec.partition("=")
        code = code.strip()
        if not code:
            continue
        name = name.strip() or LANGUAGE_NAMES.get(code, code)
        token = token_format.format(code)
        if len(code) > 15 or len(name) > 63 or len(token) > 31:
            raise ConvertError(f"language {code!r}: code, name or token {token!r} too long for config.json")
        if token not in symbols:
            raise ConvertError(f"language {code!r}: token {token!r} is not in the dictionary (fairseq's multilingual "
                               "tasks add language tokens after dict.txt; --append-lang-tokens does the same)")
        out.append({"code": code, "name": name, "token": token, "id": symbols.index(token)})
    if len({l["code"] for l in out}) != len(out):
        raise ConvertError("--languages lists a language twice")
    return out


def relevant_args(args):
    out = {}
    for k in RELEVANT_ARGS:
        if k in args and args[k] is not None:
            v = args[k]
            out[k] = v if isinstance(v, (bool, int, float, str)) else str(v)
    return out


def convert(opts):
    from dmt import modeldir

    ck, sd = load_checkpoint(opts.checkpoint)
    try:
        args, args_from = checkpoint_args(ck)
    except ConvertError:
        if not opts.set:
            raise
        args, args_from = {}, "--set"
    overrides = {}
    for item in opts.set or []:
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise ConvertError(f"--set {item!r}: expected KEY=VALUE")
        overrides[key.strip()] = parse_value(value.strip())
    args = dict(args, **overrides)
    framework = detect_framework(ck, sd, args) if opts.framework == "auto" else opts.framework
    note(f"{opts.checkpoint}: {framework} checkpoint, {len(sd)} tensors, architecture from {args_from}")

    conv = Converter(ck, sd, args, args_from, framework)
    conv.refuse_unsupported()
    conv.rename()
    cfg = conv.build_config()
    tensors = conv.check_tensors()

    # vocabulary and languages
    lang_codes = [c for c in (opts.languages or "").split(",") if c.strip()]
    lang_tokens = [opts.lang_token.format(c.partition("=")[0].strip()) for c in lang_codes]
    symbols = None
    vocab_info = {}
    if opts.dict:
        symbols, appended, padded = build_vocab(opts.dict, cfg["vocab_size"], lang_tokens, opts.append_lang_tokens)
        vocab_info = {"dict": os.path.abspath(opts.dict), "dict_entries": len(symbols) - padded - len(appended) - 4,
                      "appended_language_tokens": appended, "madeupword_padding": padded}
        if padded:
            note(f"note: padded the dictionary with {padded} madeupword entries to the embedding's {cfg['vocab_size']} rows")
    elif lang_codes:
        raise ConvertError("--languages needs --dict (the language tokens' ids are looked up in the dictionary)")
    if opts.spm and not opts.dict:
        note("warning: --spm without --dict: the model's ids are fairseq dictionary ids, which are not "
             "SentencePiece ids; pass the checkpoint's dict.txt so vocab.txt maps them")
    if symbols:
        cfg["languages"] = language_entries(lang_codes, symbols, opts.lang_token)

    cfg["decoding"] = {"beam_size": 4, "length_penalty": 1.0, "max_len_a": 1.2, "max_len_b": 10,
                       "min_len": 1, "no_repeat_ngram_size": 0}
    cfg["source"] = {
        "converter": "tools/convert_fairseq.py",
        "framework": framework,
        "checkpoint": os.path.abspath(opts.checkpoint),
        "args_from": args_from,
        "args": relevant_args(args),
        "defaults_used": {k: v for k, v in conv.defaults_used.items()},
        "overrides": overrides,
        "dropped": conv.dropped,
        "dtype": opts.dtype,
        **vocab_info,
    }
    if conv.notes:
        cfg["source"]["notes"] = conv.notes
        for n in conv.notes:
            note("note: " + n)

    # write into a temporary sibling, validate, then move into place
    out = os.path.abspath(opts.out_dir)
    if os.path.exists(out) and (not os.path.isdir(out) or os.listdir(out)) and not opts.force:
        raise ConvertError(f"{opts.out_dir}: exists and is not empty (use --force to replace it)")
    parent = os.path.dirname(out)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".convert-", dir=parent)
    try:
        with open(os.path.join(tmp, "config.json"), "w") as f:
            json.dump(cfg, f, indent=2)
            f.write("\n")
        modeldir.write_safetensors(os.path.join(tmp, "model.safetensors"), tensors, opts.dtype,
                                   metadata={"source": os.path.basename(opts.checkpoint), "converter": PROG})
        if symbols:
            bad = [s for s in symbols if not s or "\n" in s or "\r" in s]
            if bad:
                raise ConvertError(f"dictionary piece {bad[0]!r} cannot be written to vocab.txt")
            with open(os.path.join(tmp, "vocab.txt"), "w", encoding="utf-8") as f:
                f.write("\n".join(symbols) + "\n")
        if opts.spm:
            if not os.path.isfile(opts.spm):
                raise ConvertError(f"{opts.spm}: no such file")
            shutil.copyfile(opts.spm, os.path.join(tmp, "sentencepiece.model"))
        validate(tmp, tensors, cfg, opts.dtype, modeldir)
        if os.path.exists(out):
            shutil.rmtree(out) if os.path.isdir(out) else os.remove(out)
        os.rename(tmp, out)
    finally:
        if os.path.exists(tmp):
            shutil.rmtree(tmp, ignore_errors=True)

    desc = (f"{cfg['encoder_layers']}+{cfg['decoder_layers']} layers, d {cfg['d_model']}, {cfg['heads']} heads, "
            f"ffn {cfg['ffn_dim']}, vocab {cfg['vocab_size']}, {cfg['normalization']}"
            + (f" (alpha {cfg['encoder_alpha']:.4f}/{cfg['decoder_alpha']:.4f})" if cfg["normalization"] == "deepnorm" else "")
            + f", {cfg['activation']}, {cfg['positions']} positions (offset {cfg['position_offset']}, max "
              f"{cfg['max_positions']}), embed_scale {cfg['embed_scale']:g}"
            + (", shared embeddings" if cfg["share_embeddings"] else "")
            + (", tied output" if cfg["tie_output"] else "") + f", {opts.dtype}")
    print(f"wrote {opts.out_dir}: {desc}; reloaded and compared {len(tensors)} tensors")
    return 0


def validate(directory, tensors, cfg, dtype, modeldir):
    """Reload the written directory with the reference loader; every tensor must equal what
    was meant to be written (after rounding to the storage dtype)."""
    import torch
    try:
        model = modeldir.load(directory)
    except Exception as e:
        raise ConvertError(f"validation: the written directory does not load with tools/dmt/modeldir.load ({e})")
    got = model.state_dict()
    rnd = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}[dtype]
    for name, want in tensors.items():
        if name not in got:
            raise ConvertError(f"validation: {name} missing after reload")
        w = want.to(rnd).float()
        if got[name].shape != w.shape or not torch.equal(got[name].float(), w):
            raise ConvertError(f"validation: {name} differs after reload")
    if cfg["share_embeddings"] and model.decoder.embed_tokens is not model.encoder.embed_tokens:
        raise ConvertError("validation: shared embeddings not shared after reload")


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="convert_fairseq.py",
        description="Convert a torchscale (DeepNet authors' code) or fairseq translation checkpoint "
                    "to a deepmt model directory. See docs/converting.md.")
    ap.add_argument("checkpoint", help="checkpoint.pt: {'model': state_dict, 'args' or 'cfg': ...}")
    ap.add_argument("out_dir", help="model directory to write (config.json, model.safetensors, vocab.txt, ...)")
    ap.add_argument("--dict", metavar="DICT_TXT",
                    help="the checkpoint's fairseq dictionary (dict.txt): writes vocab.txt (model id -> piece)")
    ap.add_argument("--spm", metavar="MODEL", help="SentencePiece model to copy as sentencepiece.model")
    ap.add_argument("--languages", metavar="CODES",
                    help="comma-separated language codes (optionally code=Name) whose tokens are in the dictionary")
    ap.add_argument("--lang-token", default="__{}__", metavar="FORMAT",
                    help="language token format (default __{}__, e.g. __de__)")
    ap.add_argument("--append-lang-tokens", action="store_true",
                    help="append language tokens missing from dict.txt after it, in --languages order, "
                         "as fairseq's multilingual tasks do")
    ap.add_argument("--dtype", choices=["F32", "F16", "BF16"], default="F32", help="storage dtype (default F32)")
    ap.add_argument("--framework", choices=["auto", "torchscale", "torchscale-fairseq", "fairseq"], default="auto",
                    help="whose defaults apply to options absent from the args (default: detected)")
    ap.add_argument("--set", action="append", metavar="KEY=VALUE",
                    help="override or supply a checkpoint arg (e.g. --set encoder_normalize_before=false); "
                         "recorded in config.json")
    ap.add_argument("--force", action="store_true", help="replace OUT_DIR if it exists")
    ap.add_argument("--debug", action="store_true", help="show Python tracebacks")
    opts = ap.parse_args(argv)
    try:
        import torch  # noqa: F401
        import numpy  # noqa: F401
    except ImportError as e:
        print(f"{PROG}: error: needs PyTorch and numpy ({e}); on Debian: apt-get install python3-torch "
              "(scripts/deps.sh test)", file=sys.stderr)
        return 2
    try:
        return convert(opts)
    except ConvertError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except Exception as e:
        if opts.debug:
            raise
        print(f"{PROG}: error: unexpected {type(e).__name__}: {e} (run with --debug for the traceback)",
              file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
