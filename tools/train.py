#!/usr/bin/python3
"""deepmt training recipe: SentencePiece, M2M-style multilingual training, export.

  train.py spm    --data DIR --out runs/spm/spm            joint unigram vocabulary (8k)
  train.py train  --data DIR --spm runs/spm/spm.model --run runs/main --time-budget 2.5
  train.py average --run runs/main --last 5 [--validate]   (-> runs/main/average.pt)
  train.py nll    CHECKPOINT... [--general-val-lines 400]  per-set NLL, to compare branches
  train.py export --run runs/main [--checkpoint best.pt] --out models/default

See docs/training.md. This file is the command line and the training loop; its parts
are in tools/dmt/: objective.py (the loss and one optimizer step), validation.py
(greedy decoding and BLEU), precision.py (device, --amp), runstate.py (checkpoints,
snapshots, their average), data.py (the data pipeline), memory.py (the malloc, resident memory,
handing freed memory back), runlog.py.
The network is tools/dmt/model.py (DeepNorm Post-LN); the
encoder reads `pieces </s>`, the decoder input is `</s> __tgt__ y` and the target
`__tgt__ y </s>`, with the loss on the forced `__tgt__` masked out. Multi30k is
4-way parallel, so each encoder pass feeds the source's three other languages.
"""
import argparse
import datetime as dt
import importlib.util
import json
import math
import os
import signal
import subprocess
import sys
import time


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dmt.cpuinfo import cpu_has_bf16  # noqa: E402
from dmt.memory import (ALLOCATOR_CHOICES, default_memory_ceiling, loaded_allocator, peak_rss_gib,  # noqa: E402
                        release_above, rss_gib, use_allocator)


def allocator_asked(argv):
    """--allocator's value for the commands that train (train, bench), read before
    argparse: the malloc has to be chosen before torch loads. None for the others."""
    if not argv or argv[0] not in ("train", "bench"):
        return None
    choice = "auto"
    for i, a in enumerate(argv):
        if a == "--allocator" and i + 1 < len(argv):
            choice = argv[i + 1]
        elif a.startswith("--allocator="):
            choice = a.split("=", 1)[1]
    return choice


# The training loop's malloc (tools/dmt/memory.py): tcmalloc where installed, as
# LD_PRELOAD of this same command started again.
ALLOCATOR_NOTE = None
if __name__ == "__main__" and (_allocator := allocator_asked(sys.argv[1:])):
    ALLOCATOR_NOTE = use_allocator(_allocator)

# Without native bf16 the products are fp32 through OpenBLAS, whose threads compete
# with OpenMP's spinning ones: passive waiting measured 1.37x target tokens/s on an
# AVX2-only EPYC (docs/training.md). libgomp reads this once, so before torch loads.
if not cpu_has_bf16():
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402

from dmt import data as D  # noqa: E402
from dmt import modeldir  # noqa: E402
from dmt.model import Transformer, default_config  # noqa: E402
from dmt.objective import to_device, train_step  # noqa: E402
from dmt.precision import pick_amp, pick_device  # noqa: E402
from dmt.runlog import fmt_dur, log  # noqa: E402
from dmt.runstate import average_states, list_snapshots, load_state, save_atomic  # noqa: E402
from dmt.validation import build_val_sets, joined_val_sets, nll_per_set, validate  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def clock_time(budget):
    """'HH:MM' -> (hours, minutes); None for any other form of --time-budget."""
    if budget and len(budget) <= 5 and ":" in budget:
        h, m = budget.split(":")
        return int(h), int(m)
    return None


def parse_end(budget, start):
    """'2.5' (hours from now) or 'HH:MM' (next such UTC time) or an ISO time -> epoch seconds."""
    if budget is None:
        return None
    try:
        return start + float(budget) * 3600
    except ValueError:
        pass
    if clock_time(budget):
        h, m = clock_time(budget)
        now = dt.datetime.fromtimestamp(start, dt.timezone.utc)
        end = now.replace(hour=h, minute=m, second=0, microsecond=0)
        if end <= now:
            end += dt.timedelta(days=1)
        return end.timestamp()
    end = dt.datetime.fromisoformat(budget)
    if end.tzinfo is None:
        end = end.replace(tzinfo=dt.timezone.utc)
    return end.timestamp()


def load_bleu():
    """The project's sacreBLEU-exact scorer, scripts/bleu.py (standard library only)."""
    spec = importlib.util.spec_from_file_location("deepmt_bleu", os.path.join(ROOT, "scripts", "bleu.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.corpus_bleu, "scripts/bleu.py"


# -- model and schedule ---------------------------------------------------------
def model_config(args, sp):
    ids = D.lang_ids(sp)
    langs = [{"code": c, "name": D.LANG_NAMES[c], "token": f"__{c}__", "id": ids[c]} for c in D.LANGS]
    return default_config(encoder_layers=args.encoder_layers, decoder_layers=args.decoder_layers,
                          d_model=args.d_model, heads=args.heads, ffn_dim=args.ffn_dim,
                          vocab_size=sp.get_piece_size(), max_positions=256, languages=langs,
                          source={"recipe": "tools/train.py", "data": "multi30k task1 train, 12 directions"})


def lr_at(step, args, rewarm_from=None, cooldown=None):
    """Linear warm-up, then inverse square root. rewarm_from: the step a fresh optimizer
    started at (--init-from): the rate climbs again from 0 over --rewarm steps, since
    Adam's first updates are about lr in size for every weight at once, whatever the
    gradient, and at the schedule's full rate they undo part of what the weights learnt.
    cooldown (start, steps): the steps after start fall linearly from the schedule's
    rate at start towards 0 (--cooldown): step start + 1 at the full rate, the last
    one at 1/steps of it, none at 0 (a step at rate 0 would be wasted)."""
    if cooldown is not None:
        start, steps = cooldown
        return lr_at(start, args, rewarm_from) * max(0.0, 1.0 - (step - start - 1) / steps)
    step = max(step, 1)
    lr = args.lr * min(step / args.warmup, math.sqrt(args.warmup / step))
    if rewarm_from is not None and args.rewarm > 0:
        lr *= min(1.0, (step - rewarm_from) / args.rewarm)
    return lr


# -- subcommands ---------------------------------------------------------------------
def cmd_spm(args):
    if args.derive_from:
        p = args.out + ".model"
        n = D.split_digits_vocab(args.derive_from, p)
        log(f"wrote {p}: {args.derive_from} with {n} multi-digit pieces disabled (digits split)")
    else:
        p = D.train_spm(args.data, args.out, args.vocab_size, general_dir=args.general,
                        split_digits=args.split_digits, max_sentences=args.max_sentences)
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=p)
    log(f"wrote {p}: {sp.get_piece_size()} pieces; language tokens {D.lang_ids(sp)}")


def cmd_train(args):
    import sentencepiece as spm
    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)
    dev = pick_device(args.device)
    args.spm = os.path.abspath(args.spm)
    start_wall = time.time()
    end = parse_end(args.time_budget, start_wall)
    os.makedirs(args.run, exist_ok=True)
    sp = spm.SentencePieceProcessor(model_file=args.spm)
    cache = os.path.join(os.path.dirname(os.path.abspath(args.spm)), "data")
    train = D.encode_split(sp, args.data, "train", cache, args.max_len)
    val_sets = build_val_sets(sp, args.data, cache, args.max_len, args.val_lines,
                              args.general, args.general_val_lines)
    general = None
    if args.general:
        # General-domain pairs (both directions) mixed with Multi30k, balanced by
        # temperature sampling, plus the robustness augmentation (tools/dmt/data.py).
        texts = general_texts(args)
        general = D.encode_general(sp, texts, cache, args.max_len)
        if not general:
            raise SystemExit(f"train: no general-domain pairs under {args.general}/train")
        log("general data: " + ", ".join(f"{a}-{b} {len(v[0])} pairs" for (a, b), v in general.items()) +
            (f" (joined through English: {args.pivot_share:.0%} of the examples)" if args.pivot_share > 0 else ""))
    ui = ui_pairs(args, sp, cache)
    bleu_fn, bleu_name = load_bleu()
    log(f"validation BLEU: {bleu_name}")
    ids = D.lang_ids(sp)
    ckpt_path = os.path.join(args.run, "checkpoint.pt")
    best_path = os.path.join(args.run, "best.pt")
    curve = os.path.join(args.run, "curve.csv")
    snap_dir = os.path.join(args.run, "snapshots")

    state = init = rewarm_from = cooldown = None
    init_step = 0
    if args.cooldown < 0:
        raise SystemExit(f"train: --cooldown {args.cooldown}: give a number of steps > 0")
    if not 0 < args.multi30k_share <= 1 or (args.multi30k_share < 1 and not args.general):
        raise SystemExit("train: --multi30k-share is a fraction in (0, 1], and below 1 only with --general "
                         "(Multi30k alone is the whole run)")
    if not 0 <= args.pivot_share < 1 or (args.pivot_share > 0 and not args.general):
        raise SystemExit("train: --pivot-share is a fraction in [0, 1), and above 0 only with --general "
                         "(the pairs are joined from the general data)")
    if args.cooldown and not args.resume:
        raise SystemExit("train: --cooldown continues a run with its optimizer: give --resume CHECKPOINT "
                         "(a run's checkpoint.pt) and a new --run for the branch")
    if args.init_from:
        # Continue from a shipped model directory (a new machine has no runs/ folder):
        # its weights, its step for the learning-rate schedule, a fresh optimizer.
        init = modeldir.load(args.init_from)
        cfg = {k: v for k, v in init.cfg.items() if k != "source"}
        init_step = int(init.cfg.get("source", {}).get("step", 0))
        cfg["source"] = {"recipe": "tools/train.py", "init_from": args.init_from}
        log(f"initialised from {args.init_from} (step {init_step})")
    elif args.resume:
        path = args.resume if isinstance(args.resume, str) and args.resume else ckpt_path
        state = load_state(path)
        cfg = state["cfg"]
        log(f"resuming from {path} at step {state['step']}")
        if args.cooldown and not state.get("cooldown") and \
                os.path.realpath(os.path.dirname(os.path.abspath(path))) == os.path.realpath(args.run):
            raise SystemExit(f"train: --cooldown ends a run at rate 0; start it as a branch in its own folder, "
                             f"e.g. --resume {path} --run {args.run.rstrip('/')}-cooldown, so that the main "
                             f"run can go on from {path}")
    else:
        cfg = model_config(args, sp)
    if state and args.amp == "auto" and state.get("amp"):
        # A resumed run keeps the numerics it started with: --amp auto measures, and a
        # second measurement could choose differently and fork the run.
        amp = state["amp"]
        log(f"--amp auto: {amp}, as the run was checkpointed with")
    else:
        amp = pick_amp(dev, args.amp, cfg["d_model"], cfg["ffn_dim"])
    if dev.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        log(f"device {torch.cuda.get_device_name(dev)}, autocast {amp}")
    if general is not None:
        joined = ", de-fr, de-cs, fr-cs joined through identical English sentences" if args.pivot_share > 0 else ""
        cfg["source"] = dict(cfg.get("source") or {}, recipe="tools/train.py",
                             data="multi30k task1 train (12 directions) + general-domain en-de, en-fr, en-cs"
                                  f"{joined} (both directions; Tatoeba, WMT news), case and pass-through augmentation"
                                  + (", user-interface strings (tools/ui_strings.py)" if ui else ""))
    model = Transformer(cfg, dropout=args.dropout, attention_dropout=args.attention_dropout,
                        activation_dropout=args.activation_dropout)
    if init is None and not state:
        torch.manual_seed(args.seed)
        model.init_weights(torch.Generator().manual_seed(args.seed))  # on the CPU: same weights anywhere
    model.to(dev)
    opt_kw = {"fused": True} if dev.type == "cuda" else {}
    opt = torch.optim.Adam(model.parameters(), lr=args.lr, betas=(0.9, 0.98), eps=1e-8, **opt_kw)
    batcher = D.Batcher(train, args.max_tokens, seed=args.seed + init_step)  # new order when continuing
    pairs = None
    if general is not None:
        pairs = D.PairBatcher(sp, general, texts, args.max_tokens, args.max_len,
                              epoch_examples=args.general_examples, temperature=args.temperature,
                              case_share=args.case_share, span_share=args.span_share,
                              keep_below=args.general_max_pieces, joined_share=args.pivot_share,
                              ui=ui, ui_share=args.ui_share)
        pairs.rng = batcher.rng  # one generator: the saved epoch_rng covers both

    def new_epoch():
        """dmt.data.epoch_batches, with the mix logged and written to RUN/mix.json."""
        out = D.epoch_batches(batcher, pairs, ids, args.multi30k_share)
        if pairs is None:
            return out
        mix = dict(pairs.last_mix)
        mix["multi30k"] = {"batches": sum(1 for n, _ in out if n > 1)}
        log(f"epoch mix: {mix}")
        for problem in D.check_mix(pairs.last_mix, args.min_direction_share):
            log(f"warning: direction drowned: {problem}")
        with open(os.path.join(args.run, "mix.json"), "w") as f:
            json.dump(mix, f, indent=1)
        return out
    if init is not None:
        model.load_state_dict(init.state_dict())
        src = init.cfg.get("source", {})
        hours = float(src.get("train_hours", 0))
        # a run continued on a new machine keeps counting its CPU hours and tokens
        cpu0, tokens_seen = float(src.get("cpu_hours", 0)) * 3600, int(src.get("target_tokens", 0))
        step, epoch, bidx, train_time, best = init_step, 0, 0, hours * 3600, -1.0
        rewarm_from = init_step
        torch.manual_seed(args.seed + step)
    if state:
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["torch_rng"])
        step, epoch, bidx = state["step"], state["epoch"], state["batch_index"]
        batcher.rng.bit_generator.state = state["epoch_rng"]
        train_time, cpu0, best = state["train_time"], state["cpu_time"], state["best_bleu"]
        tokens_seen = state["tokens"]
        rewarm_from = state.get("rewarm_from")
        cooldown = tuple(state["cooldown"]) if state.get("cooldown") else None
        if cooldown and args.cooldown and args.cooldown != cooldown[1]:
            log(f"--cooldown {args.cooldown} ignored: the checkpoint is in a cooldown of {cooldown[1]} "
                f"steps from step {cooldown[0]}, which goes on")
        elif not cooldown and args.cooldown:
            cooldown = (step, args.cooldown)
            best = -1.0  # the branch's best.pt: the best of its own validations
        if cooldown:
            log(f"cooldown: the rate falls linearly from {lr_at(cooldown[0], args, rewarm_from):.2e} (step "
                f"{cooldown[0] + 1}) towards 0 over {cooldown[1]} steps; the run stops after step {sum(cooldown)}")
    elif init is None:
        step, epoch, bidx, train_time, cpu0, best, tokens_seen = 0, 0, 0, 0.0, 0.0, -1.0, 0
    if not os.path.exists(curve):  # a new run, or a branch (--cooldown) in a new folder
            with open(curve, "w") as f:
                f.write("step,wall_hours,cpu_hours,target_tokens,train_loss,train_nll,val_nll,val_bleu,source_gain,"
                        + ",".join(f"bleu_{v[0]}" for v in val_sets) + "\n")
    model.train()
    nparam = sum(p.numel() for p in model.parameters())
    log(f"model {cfg['encoder_layers']}+{cfg['decoder_layers']} d{cfg['d_model']} ffn{cfg['ffn_dim']} "
        f"h{cfg['heads']} vocab {cfg['vocab_size']}: {nparam / 1e6:.1f}M params; alpha enc "
        f"{cfg['encoder_alpha']:.3f} dec {cfg['decoder_alpha']:.3f}")
    log(f"args {vars(args)}")
    log(f"allocator: {ALLOCATOR_NOTE or loaded_allocator()}")
    if end:
        left = end - time.time()
        log(f"time budget ends {dt.datetime.fromtimestamp(end, dt.timezone.utc):%Y-%m-%d %H:%M:%S} UTC, "
            f"{fmt_dur(left)} from now")
        if clock_time(args.time_budget) and left > 12 * 3600:
            # '2:38' meant as a duration runs until 02:38 UTC, maybe the next day
            h, m = clock_time(args.time_budget)
            log(f"note: --time-budget {args.time_budget} is an end time in UTC, more than 12 hours away; "
                f"a duration is given in hours ({h + m / 60:.2f})")

    epoch_rng = batcher.rng.bit_generator.state
    batches = new_epoch()
    cpu_start = time.process_time()
    seg_start = time.time()
    last_ckpt = last_val = time.time()
    # reserved before the deadline for the final validation + save; re-measured at each validation
    val_cost = (180.0 if dev.type == "cpu" else 30.0) if args.val_every else 20.0
    win_loss = win_nll = torch.zeros((), device=dev)
    win_tok = 0
    win_t0 = time.time()
    last_loss = last_nll = float("nan")
    failures = 0
    releases = 0  # times freed memory went back to the kernel (--memory-ceiling)
    injected = {}
    for item in (args.inject_failures or "").split(","):
        if item:
            at, _, times = item.partition(":")
            injected[int(at)] = int(times or 1)

    def elapsed():
        return train_time + time.time() - seg_start

    def cpu_hours():
        return (cpu0 + time.process_time() - cpu_start) / 3600

    def checkpoint(path):
        save_atomic({"cfg": cfg, "model": model.state_dict(), "optimizer": opt.state_dict(),
                     "step": step, "epoch": epoch, "batch_index": bidx, "epoch_rng": epoch_rng,
                     "torch_rng": torch.get_rng_state(), "train_time": elapsed(),
                     "cpu_time": cpu_hours() * 3600, "best_bleu": best, "tokens": tokens_seen, "amp": amp,
                     "rewarm_from": rewarm_from, "cooldown": cooldown, "args": {k: v for k, v in vars(args).items() if k != "fn"}}, path)

    def snapshot():
        """Weights alone, kept for averaging (`train.py average`): the newest
        --keep-snapshots of them, one per periodic checkpoint."""
        if args.keep_snapshots <= 0:
            return
        os.makedirs(snap_dir, exist_ok=True)
        save_atomic({"cfg": cfg, "model": {k: v.detach().float().cpu().clone() for k, v in model.state_dict().items()},
                     "step": step, "train_time": elapsed(), "cpu_time": cpu_hours() * 3600, "tokens": tokens_seen,
                     "best_bleu": best, "amp": amp, "args": {k: v for k, v in vars(args).items() if k != "fn"}},
                    os.path.join(snap_dir, f"step-{step:08d}.pt"))
        for old in list_snapshots(args.run)[:-args.keep_snapshots]:
            os.remove(old)

    validated_at = [None]  # the step of the newest validation: the run's end does not repeat it

    def run_validation(last_loss, last_nll):
        nonlocal best, val_cost
        validated_at[0] = step
        t0 = time.time()
        scores, vnll = validate(model, sp, val_sets, bleu_fn, batch=args.val_batch, amp=amp)
        bl = [scores[v[0]] for v in val_sets]
        mean = sum(bl) / len(bl)
        with open(curve, "a") as f:
            f.write(f"{step},{elapsed() / 3600:.4f},{cpu_hours():.4f},{tokens_seen},{last_loss:.4f},"
                    f"{last_nll:.4f},{vnll:.4f},{mean:.2f},{scores['source_gain']:.4f}," + ",".join(f"{b:.2f}" for b in bl) + "\n")
        log(f"valid step {step} | val_nll {vnll:.3f} | source gain {scores['source_gain']:.3f} | BLEU ({bleu_name}) mean {mean:.2f} | "
            + " ".join(f"{v[0]} {scores[v[0]]:.2f}" for v in val_sets))
        for v in val_sets[:2] + [v for v in val_sets if v[0].startswith("g:")][:2]:
            log(f"  {v[0]}: {scores[v[0] + ':example']}")
        if mean > best:
            best = mean
            checkpoint(best_path)
            log(f"new best {best:.2f}: wrote {best_path}")
        took = time.time() - t0
        log(f"validation took {took:.0f} s: {took / max(time.time() - last_val, 1):.1%} of the time since the last one")
        val_cost = 1.5 * took + (60 if dev.type == "cpu" else 15)
        return mean

    # SIGTERM / Ctrl-C: finish the current step, write the checkpoint, stop cleanly.
    stop = {"signal": None}

    def request_stop(signum, _frame):
        stop["signal"] = signum

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)

    while True:
        if stop["signal"]:
            log(f"signal {stop['signal']}: stopping after step {step}")
            break
        if bidx >= len(batches):
            epoch, bidx = epoch + 1, 0
            epoch_rng = batcher.rng.bit_generator.state
            batches = new_epoch()
        now = time.time()
        if end and now + val_cost >= end:
            log("time budget reached")
            break
        if args.max_steps and step >= args.max_steps:
            break
        if cooldown and step >= sum(cooldown):
            log(f"cooldown done after step {step}")
            break
        # The batch is built and indexed on the CPU while the device runs the previous
        # step: nothing in a step waits on the device, only the logging below does.
        n_tgt, batch = batches[bidx]
        src, prev, tgt = batcher.tensors(batch, ids) if n_tgt > 1 else D.PairBatcher.tensors(batch)
        scored, targets = D.scored_positions(tgt)
        ntok = len(scored)
        src, prev, scored, targets = to_device(dev, src, prev, scored, targets)
        bidx += 1
        step += 1
        lr = lr_at(step, args, rewarm_from, cooldown)
        rng = torch.get_rng_state()
        try:
            if injected.get(step, 0) > 0:  # --inject-failures (tests)
                injected[step] -= 1
                raise RuntimeError("std::bad_alloc (injected)")
            loss, nll = train_step(model, opt, lr, (src, prev, scored, targets), n_tgt, ntok, args, dev, amp)
        except RuntimeError as e:
            # PyTorch's CPU kernels have thrown std::bad_alloc / bad_array_new_length out of
            # a linear layer twice in ~15 hours, on batches that passed when replayed: a
            # transient failure, which used to end the run and the session's training.
            # The same batch is tried again (dropout's random state as before); only a
            # failure that repeats stops the run, with a checkpoint.
            failures += 1
            opt.zero_grad(set_to_none=True)
            torch.set_rng_state(rng)
            step, bidx = step - 1, bidx - 1
            if failures > args.step_retries:
                log(f"step {step + 1} failed {failures} times in a row ({type(e).__name__}: {e}): stopping")
                checkpoint(ckpt_path)
                log(f"wrote {ckpt_path} (step {step})")
                raise SystemExit(1)
            log(f"step {step + 1} failed ({type(e).__name__}: {e}): trying the batch again "
                f"({failures} of {args.step_retries})")
            continue
        failures = 0
        if release_above(args.memory_ceiling):
            releases += 1  # tools/dmt/memory.py: else the heap grows until the OOM killer comes
        tokens_seen += ntok
        win_loss, win_nll, win_tok = win_loss + loss.detach(), win_nll + nll.detach(), win_tok + ntok
        if step % args.log_every == 0:
            win_loss, win_nll = float(win_loss), float(win_nll)
            t = time.time()
            el = elapsed()
            eta = f" | eta {fmt_dur(end - t)}" if end else ""
            ep = epoch + bidx / len(batches)
            rss, peak = rss_gib(), peak_rss_gib()
            mem = (f" | rss {rss:.1f} GiB (peak {peak:.1f}, {releases} release{'' if releases == 1 else 's'})"
                   if rss is not None and peak else "")
            log(f"step {step} | loss {win_loss / win_tok:.3f} | nll {win_nll / win_tok:.3f} | lr {lr:.2e} | "
                f"tok/s {win_tok / (t - win_t0):.0f} | epoch {ep:.3f} | elapsed {fmt_dur(el)}{mem}{eta}")
            last_loss, last_nll = win_loss / win_tok, win_nll / win_tok
            win_loss = win_nll = torch.zeros((), device=dev)
            win_tok = 0
            win_t0 = time.time()
            if args.val_every and t - last_val >= args.val_every * 60:
                run_validation(last_loss, last_nll)
                last_val = time.time()
                win_t0 = time.time()
            if t - last_ckpt >= args.ckpt_every * 60:
                checkpoint(ckpt_path)
                snapshot()
                last_ckpt = time.time()
                log(f"wrote {ckpt_path} (step {step})")
                win_t0 = time.time()
    checkpoint(ckpt_path)
    snapshot()
    log(f"wrote {ckpt_path} (step {step})")
    if args.val_every and validated_at[0] != step:
        run_validation(last_loss, last_nll)
        checkpoint(ckpt_path)
    log(f"done: {step} steps, {tokens_seen} target tokens, {fmt_dur(elapsed())} training, "
        f"{cpu_hours():.2f} CPU hours, best mean val BLEU {best:.2f}")


def general_texts(args):
    """The general-domain training pairs, and with --pivot-share those joined through
    English (dmt.data.join_through)."""
    texts = D.read_general(args.general, "train")
    if args.pivot_share > 0:
        joined = D.join_through(texts)
        if not joined:
            raise SystemExit(f"train: --pivot-share {args.pivot_share}: no pairs under {args.general}/train share "
                             "an English sentence (it needs two of en-de, en-fr, en-cs), so there is nothing to join")
        texts.update(joined)
    return texts


def ui_pairs(args, sp, cache):
    """--ui: the user-interface string pairs (tools/ui_strings.py), encoded, or None."""
    if not getattr(args, "ui", None):
        return None
    if not args.general:
        raise SystemExit("train: --ui needs --general (its strings are a share of the general examples)")
    if not 0 < args.ui_share < 1:
        raise SystemExit(f"train: --ui-share {args.ui_share}: give a share between 0 and 1 (0.05 is 5%)")
    texts = D.read_general(args.ui, "train")
    if not texts:
        raise SystemExit(f"train: --ui {args.ui}: no pairs under {args.ui}/train (write them with tools/ui_strings.py)")
    ui = D.encode_general(sp, texts, cache, args.max_len, name="ui")
    log("ui strings: " + ", ".join(f"{a}-{b} {len(v[0])} pairs" for (a, b), v in ui.items()) +
        f" ({args.ui_share:.0%} of the general examples)")
    return ui


def bench_batches(args, sp, n):
    """The first n batches of a training epoch as the run would see them (Multi30k and
    general data mixed, augmentation included): [(n_targets, src, prev, tgt)]."""
    cache = os.path.join(os.path.dirname(os.path.abspath(args.spm)), "data")
    ids = D.lang_ids(sp)
    batcher = D.Batcher(D.encode_split(sp, args.data, "train", cache, args.max_len), args.max_tokens, seed=1)
    pairs = None
    if args.general:
        texts = general_texts(args)
        pairs = D.PairBatcher(sp, D.encode_general(sp, texts, cache, args.max_len), texts, args.max_tokens,
                              args.max_len, epoch_examples=args.general_examples, seed=1,
                              joined_share=args.pivot_share)
        pairs.rng = batcher.rng
    # The run's epoch, its whole general sample (length buckets as narrow as the run's)
    # beside its share of Multi30k. (A whole Multi30k epoch beside 40,000 general
    # examples was 85% caption batches, cheaper per target token with 3 targets a
    # source, in wider buckets: the table said 5,330 target tokens/s where the run's
    # own mix made 4,496, docs/training.md.)
    out = D.epoch_batches(batcher, pairs, ids, args.multi30k_share)[:n]
    return [(k,) + (batcher.tensors(b, ids) if k > 1 else D.PairBatcher.tensors(b)) for k, b in out]


def bench_one(args):
    """One configuration of cmd_bench, in its own process (thread pools are fixed at
    start-up): prints one JSON line."""
    import sentencepiece as spm
    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)
    dev = torch.device("cpu")
    sp = spm.SentencePieceProcessor(model_file=args.spm)
    batches = bench_batches(args, sp, args.warmup + args.steps)
    model = Transformer(model_config(args, sp), dropout=0.2, attention_dropout=0.1)
    model.init_weights(torch.Generator().manual_seed(1))
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-8)
    tok = padded = src_tok = src_padded = releases = 0
    prof = None
    for i, (n_tgt, src, prev, tgt) in enumerate(batches):
        if i == args.warmup:
            if args.profile:
                prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
                prof.__enter__()
            t0, c0 = time.perf_counter(), time.process_time()
        scored, targets = D.scored_positions(tgt)
        train_step(model, opt, 1e-4, (src, prev, scored, targets), n_tgt, len(scored), args, dev, args.amp)
        if release_above(args.memory_ceiling):
            releases += 1
        if i >= args.warmup:
            tok += len(scored)
            padded += tgt.numel()
            src_tok += int(src.ne(D.PAD).sum())
            src_padded += src.numel()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    if prof is not None:
        prof.__exit__(None, None, None)
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.profile), file=sys.stderr)
    print(json.dumps({"amp": args.amp, "threads": args.threads, "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS", "default"),
                      "max_tokens": args.max_tokens, "steps": args.steps, "target_tokens": tok,
                      "memory_ceiling": args.memory_ceiling, "releases": releases,
                      "allocator": loaded_allocator(), "peak_rss_gib": peak_rss_gib() or 0.0,
                      "multi30k_batches": sum(n > 1 for n, *_ in batches[args.warmup:]) / max(1, args.steps),
                      "tok_s": tok / wall, "tok_cpu_s": tok / cpu, "cpu_per_wall": cpu / wall,
                      "target_padding": 1 - tok / padded, "source_padding": 1 - src_tok / src_padded}), flush=True)


def cmd_bench(args):
    """Training speed on this machine: forward + backward + Adam on real batches, for
    every combination of --amp, --threads, --max-tokens and --blas-threads. Each
    combination runs in a fresh process on the same batches; target tokens/s (wall)
    and per CPU-second are the figures to compare (docs/training.md)."""
    if args.one:
        return bench_one(args)
    rows = []
    grid = [(a, t, m, b, c, al) for a in args.amps.split(",") for t in map(int, args.thread_list.split(","))
            for m in map(int, args.max_tokens_list.split(",")) for b in args.blas_threads.split(",")
            for c in args.memory_ceilings.split(",") for al in args.allocators.split(",")]
    log(f"{len(grid)} configurations, {args.warmup} + {args.steps} steps each, on "
        f"{open('/proc/cpuinfo').read().split('model name')[1].split(':')[1].splitlines()[0].strip()}")
    print("| autocast | threads | OpenBLAS threads | batch (tokens) | allocator | memory ceiling (GiB) | target tok/s "
          "| tok per CPU-s | CPU/wall | peak RSS (GiB) | target padding | source padding |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|", flush=True)
    for amp, threads, max_tokens, blas, ceiling, allocator in grid:
        env = dict(os.environ, OMP_NUM_THREADS=str(threads))
        if blas != "default":
            env["OPENBLAS_NUM_THREADS"] = blas
        cmd = [sys.executable, os.path.abspath(__file__), "bench", "--one", "--amp", amp, "--threads", str(threads),
               "--max-tokens", str(max_tokens), "--steps", str(args.steps), "--warmup", str(args.warmup),
               "--memory-ceiling", ceiling, "--allocator", allocator,
               "--data", args.data, "--spm", args.spm, "--general-examples", str(args.general_examples),
               "--multi30k-share", str(args.multi30k_share), "--pivot-share", str(args.pivot_share)]
        for flag in ("encoder_layers", "decoder_layers", "d_model", "ffn_dim", "heads"):
            cmd += ["--" + flag.replace("_", "-"), str(getattr(args, flag))]
        if args.general:
            cmd += ["--general", args.general]
        r = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(f"bench: {' '.join(cmd)} failed:\n{r.stderr[-2000:]}")
        row = json.loads(r.stdout.strip().splitlines()[-1])
        rows.append(row)
        print(f"| {'bf16' if amp == 'bf16' else 'fp32'} | {threads} | {row['blas_threads']} | {max_tokens} | "
              f"{row['allocator']} | {ceiling} ({row['releases']} releases) | {row['tok_s']:,.0f} | {row['tok_cpu_s']:,.0f} | {row['cpu_per_wall']:.2f} | "
              f"{row['peak_rss_gib']:.1f} | "
              f"{row['target_padding']:.1%} | {row['source_padding']:.1%} |", flush=True)
    best = max(rows, key=lambda r: r["tok_s"])
    log(f"fastest: autocast {best['amp']}, {best['threads']} threads, OpenBLAS threads {best['blas_threads']}, "
        f"{best['allocator']} malloc, {best['max_tokens']}-token batches: {best['tok_s']:,.0f} target tokens/s "
        f"({best['multi30k_batches']:.0%} of the timed batches Multi30k's)")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)


def cmd_average(args):
    paths = list_snapshots(args.run)
    if len(paths) < args.last:
        raise SystemExit(f"average: {len(paths)} snapshots under {args.run}/snapshots, --last {args.last} asked "
                         f"(train writes one per checkpoint; --keep-snapshots)")
    paths = paths[-args.last:]
    avg = average_states([load_state(p) for p in paths])
    out = args.out or os.path.join(args.run, "average.pt")
    save_atomic(avg, out)
    log(f"averaged {len(paths)} snapshots, steps {avg['averaged_steps'][0]}-{avg['averaged_steps'][-1]}: wrote {out}")
    if not args.validate:
        return
    # the run's own validation sets, for the average, the newest snapshot and best.pt
    import sentencepiece as spm
    a = avg["args"]
    torch.set_num_threads(args.threads)
    sp = spm.SentencePieceProcessor(model_file=args.spm or a["spm"])
    cache = os.path.join(os.path.dirname(os.path.abspath(args.spm or a["spm"])), "data")
    sets = build_val_sets(sp, a["data"], cache, a["max_len"], a["val_lines"], a.get("general"),
                          a.get("general_val_lines", 0))
    bleu_fn, _ = load_bleu()
    amp = avg.get("amp")  # the numerics the run validated with, for comparable scores
    rows = [("average", avg), ("newest snapshot", load_state(paths[-1]))]
    best_path = os.path.join(args.run, "best.pt")
    if os.path.isfile(best_path):
        rows.append(("best.pt", load_state(best_path)))
    for name, st in rows:
        model = Transformer(st["cfg"])
        model.load_state_dict(st["model"])
        scores, vnll = validate(model.eval(), sp, sets, bleu_fn, batch=a.get("val_batch", 50), amp=amp)
        mean = sum(scores[v[0]] for v in sets) / len(sets)
        log(f"{name} (step {st['step']}): val_nll {vnll:.3f} | mean val BLEU {mean:.2f} | "
            + " ".join(f"{v[0]} {scores[v[0]]:.2f}" for v in sets))


def cmd_nll(args):
    """Per-set teacher-forced NLL of checkpoints (or exported model directories, as
    shipped: F16 weights) on their run's validation data."""
    import sentencepiece as spm
    states = [(p, None if os.path.isdir(p) else load_state(p)) for p in args.checkpoints]
    # the data, vocabulary, length limit and precision: a checkpoint's run (--like, else the first one given)
    ref = load_state(args.like) if args.like else next((st for _, st in states if st is not None), None)
    if ref is None:
        raise SystemExit("nll: model directories need --like CHECKPOINT, a checkpoint of the run they come from "
                         "(its data, vocabulary, length limit and precision)")
    a = ref["args"]
    torch.set_num_threads(args.threads)
    spm_path = args.spm or a["spm"]
    sp = spm.SentencePieceProcessor(model_file=spm_path)
    cache = os.path.join(os.path.dirname(os.path.abspath(spm_path)), "data")
    general = a.get("general") if args.general_val_lines else None
    directions = [tuple(d.split("-")) for d in args.multi30k_directions.split(",")]
    if any(len(d) != 2 or d[0] == d[1] or not set(d) <= set(D.LANGS) for d in directions):
        raise SystemExit(f"nll: --multi30k-directions {args.multi30k_directions}: give pairs like en-de,fr-de "
                         f"of {', '.join(D.LANGS)}")
    sets = build_val_sets(sp, a["data"], cache, a["max_len"], args.val_lines, general, args.general_val_lines,
                          directions)
    if general:
        # de-cs and cs-de: reported, not in "mean general", which stays the six English directions
        sets += joined_val_sets(sp, general, args.general_val_lines, a["max_len"])
    names = [v[0] for v in sets]
    rows = []
    for path, st in states:
        if st is None:  # a model directory, widened from its F16 weights as the C engine does
            from dmt import modeldir
            try:
                model = modeldir.load(path)
                with open(os.path.join(path, "config.json")) as f:
                    step = (json.load(f).get("source") or {}).get("step", 0)
            except (OSError, ValueError, KeyError) as e:
                raise SystemExit(f"nll: {path}: not a model directory ({e})")
            st = {"step": step, "amp": ref.get("amp")}
        else:
            model = Transformer(st["cfg"])
            model.load_state_dict(st["model"])
        per = nll_per_set(model, sp, sets, batch=args.batch, amp=st.get("amp"))
        m30k = [per[n] for n in names if ":" not in n]
        gen = [per[n] for n in names if n.startswith("g:")]
        joined = [per[n] for n in names if n.startswith("j:")]
        per["mean multi30k"] = sum(m30k) / len(m30k)
        beside = [per[n] for n in names if ":" not in n and "en" not in n.split("-")]
        if beside:
            per["mean multi30k without en"] = sum(beside) / len(beside)
        if gen:
            per["mean general"] = sum(gen) / len(gen)
        if joined:
            per["mean joined"] = sum(joined) / len(joined)
        rows.append({"checkpoint": path, "step": st["step"], "nll": per})
        log(f"{path} (step {st['step']}): " + " ".join(f"{k} {v:.4f}" for k, v in per.items()))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)


def cmd_export(args):
    path = args.checkpoint or os.path.join(args.run, "best.pt")
    if not os.path.isfile(path) and args.run:
        path = os.path.join(args.run, args.checkpoint or "checkpoint.pt")
    state = load_state(path)
    cfg = dict(state["cfg"])
    cfg["source"] = dict(cfg.get("source") or {}, checkpoint=os.path.basename(path), step=state["step"],
                         train_hours=round(state["train_time"] / 3600, 3),
                         cpu_hours=round(state["cpu_time"] / 3600, 6), target_tokens=int(state["tokens"]),
                         best_val_bleu=round(state["best_bleu"], 2))
    # how the weights were made: averaged snapshots (steps), a --cooldown branch ([from, over])
    for key in ("averaged_steps", "cooldown"):
        cfg["source"].pop(key, None)
        if state.get(key):
            cfg["source"][key] = list(state[key])
    # the data mix the run ended with: the share of each Multi30k epoch beside the general data
    cfg["source"].pop("multi30k_share", None)
    run_args = state.get("args") or {}
    cfg["source"].pop("pivot_share", None)
    cfg["source"].pop("ui_share", None)
    if run_args.get("general"):
        cfg["source"]["multi30k_share"] = run_args.get("multi30k_share", 1.0)
        if run_args.get("pivot_share"):
            cfg["source"]["pivot_share"] = run_args["pivot_share"]
        if run_args.get("ui"):
            cfg["source"]["ui_share"] = run_args.get("ui_share", 0.05)
    # exporting over a shipped model directory (a new snapshot of models/default) keeps
    # what was chosen for it there: decoding options the recipe does not set
    # (all_caps, alignment_layer, ...) and the hand-written history in source.notes
    # (what a checkpoint cannot know, e.g. from which step a run's data mix changed).
    # Its precision_checks measured the old weights: they go, and the message says how
    # to measure the new ones.
    old_cfg_path = os.path.join(args.out, "config.json")
    if os.path.isfile(old_cfg_path):
        with open(old_cfg_path) as f:
            old_cfg = json.load(f)
        notes = (old_cfg.get("source") or {}).get("notes")
        if notes:
            cfg["source"]["notes"] = notes
            log(f"kept {args.out}'s source.notes")
        kept = {k: v for k, v in (old_cfg.get("decoding") or {}).items() if k not in (cfg.get("decoding") or {})}
        if kept and old_cfg.get("vocab_size") == cfg.get("vocab_size"):
            cfg["decoding"] = dict(cfg.get("decoding") or {}, **kept)
            log(f"kept {args.out}'s decoding options {sorted(kept)}")
        # the batch size measured fastest depends on the network's shape, not its weights
        shape = ("encoder_layers", "decoder_layers", "d_model", "ffn_dim", "heads", "vocab_size")
        if old_cfg.get("batching") and all(old_cfg.get(k) == cfg.get(k) for k in shape):
            cfg["batching"] = old_cfg["batching"]
            log(f"kept {args.out}'s batching {old_cfg['batching']}")
        if old_cfg.get("precision_checks"):
            log(f"{args.out} vouched for {sorted(old_cfg['precision_checks'])} on its old weights: measure again "
                f"with tools/check_precision.py {args.out} --sets multi30k/test_2016_flickr,flores101,tatoeba "
                f"--limit 500 --write (until then --precision auto runs F32)")
        if "pass_through_characters" in kept:
            log(f"{args.out}'s decoding.pass_through_characters was measured on its old weights: measure again "
                f"with tools/check_characters.py {args.out} --write")
    model = Transformer(cfg)
    model.load_state_dict(state["model"])
    spm_model = args.spm or state["args"]["spm"]
    if not args.spm and not os.path.isfile(spm_model) and os.path.isfile(os.path.join(args.out, "sentencepiece.model")):
        # the run's vocabulary moved (models/general became models/default): the
        # model directory's own copy is the same file
        spm_model = os.path.join(args.out, "sentencepiece.model")
        import sentencepiece as spm_lib
        if spm_lib.SentencePieceProcessor(model_file=spm_model).get_piece_size() != cfg["vocab_size"]:
            raise SystemExit(f"{state['args']['spm']} is gone and {spm_model} does not fit the model: pass --spm")
        log(f"{state['args']['spm']} is gone: using {spm_model} (pass --spm to choose)")
    # the engine's text rules (docs/decoding.md), on for a model of this recipe unless
    # the directory chose otherwise: ALL-CAPS in sentence case, URLs/addresses/emoji
    # passed through, numbers copied and format placeholders given as numbers (where the
    # vocabulary gives every digit its own piece)
    import sentencepiece as spm_lib
    sp = spm_lib.SentencePieceProcessor(model_file=spm_model)
    split = all(len(p) == 1 or p.startswith("<0x") or not any(ch.isdigit() for ch in p)
                for p in (sp.id_to_piece(i) for i in range(sp.get_piece_size())))
    rules = {"all_caps": "lower", "pass_through": True,
             **({"copy_numbers": True, "placeholders": True} if split else {})}
    model.cfg["decoding"] = dict(rules, **model.cfg.get("decoding", {}))
    modeldir.save(model.eval(), args.out, dtype=args.dtype, sentencepiece=spm_model,
                  metadata={"step": state["step"]})
    log(f"exported {path} (step {state['step']}) to {args.out} as {args.dtype}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("spm", help="train the joint SentencePiece model")
    p.add_argument("--data", default=os.path.join(ROOT, "..", "shared", "data", "multi30k"))
    p.add_argument("--out", default="runs/spm/spm", help="model prefix (writes PREFIX.model/.vocab)")
    p.add_argument("--vocab-size", type=int, default=8000)
    p.add_argument("--general", metavar="DIR", help="also learn from the general-domain pairs under DIR/train")
    p.add_argument("--split-digits", action="store_true", help="one piece per digit")
    p.add_argument("--max-sentences", type=int, default=0, help="sample at most this many lines (0: all)")
    p.add_argument("--derive-from", metavar="SPM_MODEL",
                   help="instead of training: copy SPM_MODEL with numbers split into digits (same ids)")
    p.set_defaults(fn=cmd_spm)

    p = sub.add_parser("train", help="train (or resume) a model")
    p.add_argument("--data", default=os.path.join(ROOT, "..", "shared", "data", "multi30k"))
    p.add_argument("--spm", default="runs/spm/spm.model")
    p.add_argument("--run", default="runs/main", help="folder for checkpoints, curve.csv")
    p.add_argument("--encoder-layers", type=int, default=6)
    p.add_argument("--decoder-layers", type=int, default=3)
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--ffn-dim", type=int, default=1024)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--dropout", type=float, default=0.2)
    p.add_argument("--attention-dropout", type=float, default=0.1)
    p.add_argument("--activation-dropout", type=float, default=0.0)
    p.add_argument("--label-smoothing", type=float, default=0.1)
    p.add_argument("--lr", type=float, default=1e-3, help="peak learning rate")
    p.add_argument("--warmup", type=int, default=1000, help="linear warmup steps, then inverse sqrt")
    p.add_argument("--rewarm", type=int, default=200,
                   help="with --init-from (a fresh optimizer): the rate climbs from 0 over this many steps")
    p.add_argument("--clip-norm", type=float, default=1.0)
    p.add_argument("--max-tokens", type=int, default=12000, help="padded target tokens per batch")
    p.add_argument("--max-len", type=int, default=128, help="pieces per sentence (longer are cut)")
    p.add_argument("--time-budget", help="hours (2.5) or an end time in UTC (00:25 or ISO)")
    p.add_argument("--max-steps", type=int, default=0)
    p.add_argument("--cooldown", type=int, default=0, metavar="STEPS",
                   help="with --resume CHECKPOINT and a new --run (a branch): the rate falls linearly to 0 "
                        "over STEPS steps, then the run stops; the weights to ship, while the main run goes on")
    p.add_argument("--resume", nargs="?", const="", default=None,
                   help="resume from RUN/checkpoint.pt or the given checkpoint")
    p.add_argument("--init-from", metavar="MODEL_DIR",
                   help="start from an exported model directory (e.g. models/default) with a fresh "
                        "optimizer; use its sentencepiece.model as --spm")
    p.add_argument("--ckpt-every", type=float, default=10, help="minutes")
    p.add_argument("--step-retries", type=int, default=3,
                   help="a step whose kernels throw is tried again up to this many times before the run stops")
    p.add_argument("--inject-failures", help=argparse.SUPPRESS)  # tests: STEP:TIMES,... throw at those steps
    p.add_argument("--memory-ceiling", type=float, default=default_memory_ceiling(), metavar="GIB",
                   help="after a step that leaves the process above GIB resident, hand memory malloc holds "
                        "free back to the kernel (glibc: malloc_trim; the heap otherwise grows with changing "
                        "batch shapes; tcmalloc: ReleaseFreeMemory); default 60%% of this machine's memory (%(default)s); 0: after every step")
    p.add_argument("--allocator", default="auto", help=f"the malloc the run uses: {ALLOCATOR_CHOICES}; "
                   "tcmalloc made 1.5x glibc's speed at a third of the memory (docs/training.md)")
    p.add_argument("--keep-snapshots", type=int, default=10,
                   help="weights kept at each checkpoint in RUN/snapshots, newest N (for `average`; 0: none)")
    p.add_argument("--val-every", type=float, default=35, help="minutes; 0: never")
    p.add_argument("--val-lines", type=int, default=200)
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--threads", type=int, default=2, help="CPU threads (the CPU device)")
    p.add_argument("--device", default="auto", help="auto (cuda if present, else cpu), cpu, cuda, cuda:1")
    p.add_argument("--amp", default="auto", choices=["auto", "bf16", "none"],
                   help="autocast: auto = bf16 on cuda; on a CPU bf16 where a quick "
                        "measurement shows it paying (native AVX512-BF16 or AMX), else none")
    p.add_argument("--val-batch", type=int, default=50, help="validation sentences per batch")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--general", metavar="DIR",
                   help="also train on general-domain pairs (../shared/data/general): DIR/train/en-de.{en,de}.gz ...")
    p.add_argument("--general-examples", type=int, default=400000,
                   help="directed general examples sampled per epoch (one Multi30k epoch, or --multi30k-share of one, rides along)")
    p.add_argument("--multi30k-share", type=float, default=1.0, metavar="F",
                   help="with --general: the part of each Multi30k epoch kept (random batches; 1: all)")
    p.add_argument("--pivot-share", type=float, default=0.0, metavar="F",
                   help="with --general: this part of the general examples from de-fr, de-cs and fr-cs pairs "
                        "joined where the training pairs share an English sentence (0: none)")
    p.add_argument("--temperature", type=float, default=2.0,
                   help="direction sampling weight n^(1/T): 1 = as in the data, higher = flatter")
    p.add_argument("--case-share", type=float, default=0.05, help="extra re-cased pairs (UPPER/lower/Title)")
    p.add_argument("--span-share", type=float, default=0.05, help="extra pairs with a pass-through span")
    p.add_argument("--min-direction-share", type=float, default=0.08,
                   help="warn when a direction gets less than this share of general target tokens")
    p.add_argument("--general-val-lines", type=int, default=100, help="dev lines per general direction")
    p.add_argument("--general-max-pieces", type=int, default=0,
                   help="only general pairs with both sides shorter than this (0: all; a cheaper CPU run)")
    p.add_argument("--ui", metavar="DIR",
                   help="with --general: also train on user-interface strings, DIR/train/en-de.{en,de}.gz ... "
                        "(written by tools/ui_strings.py)")
    p.add_argument("--ui-share", type=float, default=0.05, metavar="F",
                   help="with --ui: this part of the general examples are user-interface strings")
    p.set_defaults(fn=cmd_train)

    p = sub.add_parser("bench", help="training speed: fp32 vs bf16 autocast, threads, batch size")
    p.add_argument("--data", default=os.path.join(ROOT, "..", "shared", "data", "multi30k"))
    p.add_argument("--general", metavar="DIR", help="mix in the general-domain pairs, as the run does")
    p.add_argument("--spm", default="runs/spm16k/spm.model")
    p.add_argument("--amps", default="none,bf16", help="autocast modes to compare (none = fp32)")
    p.add_argument("--thread-list", default="1,2", help="PyTorch threads to compare")
    p.add_argument("--max-tokens-list", default="3000,6000,12000", help="batch sizes to compare")
    p.add_argument("--blas-threads", default="1", help="OPENBLAS_NUM_THREADS values ('default': unset)")
    p.add_argument("--steps", type=int, default=12, help="timed steps per configuration")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--general-examples", type=int, default=400000,
                   help="the run's --general-examples: the epoch the batches are drawn from")
    p.add_argument("--multi30k-share", type=float, default=0.25, help="the run's --multi30k-share")
    p.add_argument("--pivot-share", type=float, default=0.0, help="the run's --pivot-share")
    p.add_argument("--out", help="also write the rows as JSON here")
    p.add_argument("--profile", type=int, default=0, metavar="N",
                   help="with --one: torch.profiler's N most costly operators over the timed steps (stderr)")
    p.add_argument("--one", action="store_true", help="run one configuration here (--amp, --threads, --max-tokens)")
    p.add_argument("--amp", default="none", help="with --one: none or bf16")
    p.add_argument("--threads", type=int, default=2, help="with --one: PyTorch threads")
    p.add_argument("--max-tokens", type=int, default=6000, help="with --one: batch size")
    p.add_argument("--allocators", default="auto", help="--allocator values to compare (auto,system: tcmalloc "
                   "against glibc where tcmalloc is installed)")
    p.add_argument("--allocator", default="auto", help="with --one: " + ALLOCATOR_CHOICES)
    p.add_argument("--memory-ceilings", default=str(default_memory_ceiling()),
                   help="train's --memory-ceiling values to compare (GiB; 0: release after every step, inf: never)")
    p.add_argument("--memory-ceiling", type=float, default=default_memory_ceiling(), help="with --one: GiB")
    p.add_argument("--max-len", type=int, default=128, help=argparse.SUPPRESS)
    p.add_argument("--label-smoothing", type=float, default=0.1, help=argparse.SUPPRESS)
    p.add_argument("--clip-norm", type=float, default=1.0, help=argparse.SUPPRESS)
    p.add_argument("--encoder-layers", type=int, default=6)
    p.add_argument("--decoder-layers", type=int, default=3)
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--ffn-dim", type=int, default=1024)
    p.add_argument("--heads", type=int, default=4)
    p.set_defaults(fn=cmd_bench)

    p = sub.add_parser("nll", help="per-set NLL of checkpoints on the run's validation data (compare branches)")
    p.add_argument("checkpoints", nargs="+",
                   help="checkpoints or snapshots of one run (its data and vocabulary), or model directories "
                        "exported from it (with --like)")
    p.add_argument("--like", help="a checkpoint of the run whose data, vocabulary, length limit and precision "
                                  "to use (default: the first checkpoint given; needed for model directories alone)")
    p.add_argument("--val-lines", type=int, default=1014, help="Multi30k val lines per direction")
    p.add_argument("--general-val-lines", type=int, default=400, help="general dev lines per direction (0: none)")
    p.add_argument("--multi30k-directions", default="en-de,en-fr,de-en,cs-en",
                   help="Multi30k val directions (de-fr etc.: the pairs that only Multi30k teaches)")
    p.add_argument("--spm", help="sentencepiece model (default: the one the run trained with)")
    p.add_argument("--batch", type=int, default=50)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", help="also write the rows as JSON here")
    p.set_defaults(fn=cmd_nll)

    p = sub.add_parser("average", help="average the weights of a run's newest snapshots")
    p.add_argument("--run", default="runs/main")
    p.add_argument("--last", type=int, default=5, help="how many of the newest snapshots")
    p.add_argument("--out", help="checkpoint to write (default RUN/average.pt; export it with --checkpoint)")
    p.add_argument("--validate", action="store_true",
                   help="score the average, the newest snapshot and best.pt on the run's validation sets")
    p.add_argument("--spm", help="sentencepiece model (default: the one the run trained with)")
    p.add_argument("--threads", type=int, default=2)
    p.set_defaults(fn=cmd_average)

    p = sub.add_parser("export", help="write a model directory")
    p.add_argument("--run", default="runs/main")
    p.add_argument("--checkpoint", help="checkpoint file (default RUN/best.pt)")
    p.add_argument("--spm", help="sentencepiece model (default: the one the run trained with)")
    p.add_argument("--out", default="models/default")
    p.add_argument("--dtype", default="F16", choices=["F32", "F16", "BF16"])
    p.set_defaults(fn=cmd_export)
    args = ap.parse_args(argv)
    if args.cmd == "train" and args.resume is not None and args.resume == "":
        args.resume = True
    args.fn(args)


if __name__ == "__main__":
    main()
