"""The training objective and one optimizer step (tools/train.py): encoder once per
source, label-smoothed cross-entropy with the output projection fused into it."""
import torch

from dmt.precision import amp_context


def forward_loss(model, src, prev, scored, targets, n_tgt, eps):
    """Encoder once per source, states shared by its n_tgt targets -> (loss_sum, nll_sum).

    scored/targets come from D.scored_positions (flat positions of prev/tgt that are
    scored, and the ids there); only those rows go through the output projection
    (padding is ~30%), and nothing here waits on the device.
    """
    enc, pad_mask = model.encode(src)
    kv = [(k.repeat_interleave(n_tgt, 0), v.repeat_interleave(n_tgt, 0)) for k, v in model.cross_kv(enc)]
    x = model.decoder_states(prev, None, pad_mask.repeat_interleave(n_tgt, 0), kv=kv)
    x = x.reshape(-1, x.shape[-1]).index_select(0, scored)
    amp = torch.is_autocast_cpu_enabled() if x.device.type == "cpu" else torch.is_autocast_enabled()
    dtype = torch.bfloat16 if amp else torch.float32
    return OutputCrossEntropy.apply(x, model.output_weight(), targets, eps, dtype)


class OutputCrossEntropy(torch.autograd.Function):
    """The output projection and the label-smoothed cross-entropy in one, a chunk of
    rows at a time: x [N, d] (decoder states at the scored positions), weight [V, d],
    targets [N] -> (loss, nll), summed over rows. loss = (1 - eps) nll + eps/V
    sum_v -log p_v, with sum_v -log p_v = V lse - sum_v z_v (z = x W^T, lse =
    logsumexp z).

    Why: at a 16k vocabulary the [N, V] logits of a 6,000-token batch are 256 MB in
    fp32, and every pass over them (the bf16->fp32 copy, max, exp, sum, the backward's
    passes and copies) is bound by memory bandwidth: with autograd's log_softmax +
    gather + sum those passes took 35-45% of a CPU training step (torch.profiler,
    `train.py bench --one --profile 25`). Here the gradient is known in the forward,
    dz = g (softmax(z) - (1 - eps) onehot - eps/V) with g the loss's incoming
    gradient, so each chunk's logits are made, turned into dz, multiplied back into
    dx and dW and dropped while they are still in cache; the backward only scales.
    Only the loss is differentiable (nll is for logging: backpropagating it raises)."""

    CHUNK = 256  # rows: a chunk's logits are 16 MB at V = 16k

    @staticmethod
    def forward(ctx, x, weight, targets, eps, dtype):
        ctx.set_materialize_grads(False)
        need_grad = x.requires_grad or weight.requires_grad
        v = weight.shape[0]
        with torch.autocast(device_type=x.device.type, enabled=False):
            xc, w = x.to(dtype), weight.to(dtype)
            dx = torch.empty(x.shape, dtype=torch.float32, device=x.device) if need_grad else None
            dw = torch.zeros(weight.shape, dtype=torch.float32, device=x.device) if need_grad else None
            loss = torch.zeros((), dtype=torch.float32, device=x.device)
            nll = torch.zeros((), dtype=torch.float32, device=x.device)
            for a in range(0, x.shape[0], OutputCrossEntropy.CHUNK):
                b = min(a + OutputCrossEntropy.CHUNK, x.shape[0])
                z = (xc[a:b] @ w.t()).float()
                t = targets[a:b, None]
                zmax = z.max(-1, keepdim=True)[0]
                z_sum = z.sum(-1)
                z_t = z.gather(-1, t).squeeze(-1)
                p = z.sub_(zmax).exp_()  # z is p from here on
                total = p.sum(-1, keepdim=True)
                lse = (zmax + total.log()).squeeze(-1)
                row_nll = lse - z_t
                nll += row_nll.sum()
                loss += ((1 - eps) * row_nll + (eps / v) * (v * lse - z_sum)).sum()
                if need_grad:
                    dz = p.div_(total).sub_(eps / v)
                    dz.scatter_add_(-1, t, torch.full(t.shape, eps - 1.0, device=x.device))
                    dz = dz.to(dtype)
                    dx[a:b] = (dz @ w).float()
                    dw += (dz.t() @ xc[a:b]).float()
        if need_grad:
            ctx.save_for_backward(dx, dw)
        return loss, nll

    @staticmethod
    def backward(ctx, g_loss, g_nll):
        if g_nll is not None:
            raise RuntimeError("OutputCrossEntropy: nll is not differentiable (log it, train on the loss)")
        dx, dw = ctx.saved_tensors
        if g_loss is None:
            return None, None, None, None, None
        return dx.mul_(g_loss), dw.mul_(g_loss), None, None, None


def train_step(model, opt, lr, tensors, n_tgt, ntok, args, dev, amp):
    """One optimizer step on a batch (src, prev, scored, targets) -> (loss_sum, nll_sum)."""
    for g in opt.param_groups:
        g["lr"] = lr
    with amp_context(dev, amp):
        loss, nll = forward_loss(model, *tensors, n_tgt, args.label_smoothing)
    opt.zero_grad(set_to_none=True)
    (loss / ntok).backward()
    if args.clip_norm > 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip_norm)
    opt.step()
    return loss, nll


def to_device(dev, *tensors):
    return [t.to(dev, non_blocking=True) for t in tensors]
