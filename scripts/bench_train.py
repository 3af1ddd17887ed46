#!/usr/bin/python3
"""PyTorch (Python) reference for `tessera-bench train`: the same DiT and the same training
loop as common/torch (models/dit.cpp, rectified_flow.cpp, trainer.cpp), op for op, so the
C++/Python ratio measures the cost of driving LibTorch from Python. Prints one JSON line.
Needs Debian's python3-torch (the same LibTorch version as libtorch-dev)."""
import argparse
import contextlib
import json
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def modulate(x, shift, scale):
    # As models/dit.cpp: one fused pass (addcmul), and x + gate * y likewise.
    return torch.addcmul(shift, x, 1 + scale)


def attention(q, k, v, mask=None):
    # As models/dit.cpp: the fused kernel on a GPU with PyTorch 2, the plain product elsewhere.
    if q.is_cuda and hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, mask)
    scores = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(q.size(-1)))
    if mask is not None:
        scores = scores.masked_fill(mask.logical_not(), float("-inf"))
    return torch.softmax(scores, -1).matmul(v)


def timestep_features(t):
    half = 128
    freqs = torch.exp(-math.log(10000.0) * torch.arange(half, dtype=torch.float32, device=t.device) / half)
    args = (t.float() * 1000.0).unsqueeze(1) * freqs.unsqueeze(0)
    return torch.cat([torch.cos(args), torch.sin(args)], 1)


def sincos_position_embedding(hidden, grid):
    quarter = hidden // 4
    omega = 1.0 / torch.pow(10000.0, torch.arange(quarter, dtype=torch.float64) / quarter)
    coords = torch.arange(grid, dtype=torch.float64)
    ys, xs = coords.repeat_interleave(grid), coords.repeat(grid)

    def embed(pos):
        out = pos.unsqueeze(1) * omega.unsqueeze(0)
        return torch.cat([torch.sin(out), torch.cos(out)], 1)

    table = torch.cat([embed(ys), embed(xs)], 1).float()
    if table.size(1) < hidden:
        table = F.pad(table, (0, hidden - table.size(1)))
    return table.unsqueeze(0)


class DitBlock(nn.Module):
    def __init__(self, hidden, heads, grid, text, mlp_ratio=4):
        super().__init__()
        m = hidden * mlp_ratio
        self.hidden, self.heads, self.grid = hidden, heads, grid
        self.norm1 = nn.LayerNorm(hidden, elementwise_affine=False, eps=1e-6)
        self.norm2 = nn.LayerNorm(hidden, elementwise_affine=False, eps=1e-6)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.fc1 = nn.Linear(hidden, m)
        self.dwconv = nn.Conv2d(m, m, 3, padding=1, groups=m)
        self.fc2 = nn.Linear(m, hidden)
        self.scale_shift_table = nn.Parameter(torch.randn(6, hidden) / math.sqrt(hidden))
        self.text = text
        if text:
            self.cross_q = nn.Linear(hidden, hidden)
            self.cross_kv = nn.Linear(hidden, 2 * hidden)
            self.cross_proj = nn.Linear(hidden, hidden)

    def self_attention(self, x):
        b, n = x.size(0), x.size(1)
        qkv = self.qkv(x).view(b, n, 3, self.heads, self.hidden // self.heads).permute(2, 0, 3, 1, 4)
        out = attention(qkv[0], qkv[1], qkv[2])
        return self.proj(out.transpose(1, 2).reshape(b, n, self.hidden))

    def cross_attention(self, x, caption, mask):
        b, n, l, d = x.size(0), x.size(1), caption.size(1), self.hidden // self.heads
        q = self.cross_q(x).view(b, n, self.heads, d).transpose(1, 2)
        kv = self.cross_kv(caption).view(b, l, 2, self.heads, d).permute(2, 0, 3, 1, 4)
        out = attention(q, kv[0], kv[1], mask)
        return self.cross_proj(out.transpose(1, 2).reshape(b, n, self.hidden))

    def mlp(self, x, keep):
        b = x.size(0)
        h = self.fc1(x)
        channels = h.size(2)
        if keep is not None:  # the kept tokens back in a zero grid for the conv
            h = h.new_zeros(b, self.grid * self.grid, channels).scatter(
                1, keep.unsqueeze(-1).expand(b, keep.size(1), channels), h)
        if h.is_cuda:  # as models/dit.cpp: the tokens read as a channels-last grid, no transposed copy
            image = h.contiguous().view(b, self.grid, self.grid, channels).permute(0, 3, 1, 2)
            h = self.dwconv(image).permute(0, 2, 3, 1).reshape(b, self.grid * self.grid, channels)
        else:
            image = h.transpose(1, 2).reshape(b, channels, self.grid, self.grid)
            h = self.dwconv(image).flatten(2).transpose(1, 2)
        if keep is not None:
            h = take(h, keep)
        return self.fc2(F.gelu(h, approximate="tanh"))

    def forward(self, x, t6, caption, mask, keep=None):
        shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = (
            self.scale_shift_table.unsqueeze(0) + t6).chunk(6, 1)
        x = torch.addcmul(x, gate_msa, self.self_attention(modulate(self.norm1(x), shift_msa, scale_msa)))
        if self.text:
            x = x + self.cross_attention(x, caption, mask)
        return torch.addcmul(x, gate_mlp, self.mlp(modulate(self.norm2(x), shift_mlp, scale_mlp), keep))


def take(x, keep):
    """Rows `keep` (B, K) of x (B, N, W)."""
    return x.gather(1, keep.unsqueeze(-1).expand(keep.size(0), keep.size(1), x.size(2)))


NULL_CAPTION_TOKENS = 8


class Dit(nn.Module):
    """The class DiT of models/dit.cpp or, with text_dim > 0, its text DiT (docs/protocol.md)."""

    def __init__(self, hidden, depth, heads, patch=2, in_channels=4, input_size=8, num_classes=10, text_dim=0,
                 mixer_depth=2):
        super().__init__()
        self.mixer_depth = mixer_depth
        self.hidden, self.patch, self.in_channels, self.input_size = hidden, patch, in_channels, input_size
        self.num_classes, self.text_dim = num_classes, text_dim
        patch_dim = patch * patch * in_channels
        self.patch_embed = nn.Linear(patch_dim, hidden)
        self.t_fc1 = nn.Linear(256, hidden)
        self.t_fc2 = nn.Linear(hidden, hidden)
        self.t_block = nn.Linear(hidden, 6 * hidden)
        if text_dim > 0:
            self.caption_fc1 = nn.Linear(text_dim, hidden)
            self.caption_fc2 = nn.Linear(hidden, hidden)
            self.null_caption = nn.Parameter(torch.randn(NULL_CAPTION_TOKENS, text_dim) / math.sqrt(text_dim))
        else:
            self.class_embed = nn.Embedding(num_classes + 1, hidden)
        self.blocks = nn.ModuleList(DitBlock(hidden, heads, input_size // patch, text_dim > 0) for _ in range(depth))
        self.norm_final = nn.LayerNorm(hidden, elementwise_affine=False, eps=1e-6)
        self.out = nn.Linear(hidden, patch_dim)
        self.final_table = nn.Parameter(torch.randn(2, hidden) / math.sqrt(hidden))
        self.register_buffer("pos_embed", sincos_position_embedding(hidden, input_size // patch))
        nn.init.zeros_(self.out.weight)
        nn.init.zeros_(self.out.bias)

    def patchify(self, x):
        b, ch, p = x.size(0), x.size(1), self.patch
        g = x.size(2) // p
        return x.view(b, ch, g, p, g, p).permute(0, 2, 4, 3, 5, 1).reshape(b, g * g, p * p * ch)

    def unpatchify(self, tokens):
        b, ch, p = tokens.size(0), self.in_channels, self.patch
        g = self.input_size // p
        return tokens.view(b, g, g, p, p, ch).permute(0, 5, 1, 3, 2, 4).reshape(b, ch, g * p, g * p)

    def forward(self, x, t, condition, keep=None):
        """The velocity (B, C, S, S); with `keep` (B, K), the kept patches' only (B, K, P)."""
        tokens = self.patch_embed(self.patchify(x)) + self.pos_embed
        c = self.t_fc2(F.silu(self.t_fc1(timestep_features(t).to(tokens.dtype))))
        caption = mask = None
        if self.text_dim > 0:
            text, lengths = condition
            caption = self.caption_fc2(F.gelu(self.caption_fc1(text.to(tokens.dtype)), approximate="tanh"))
            mask = torch.arange(caption.size(1), device=x.device).unsqueeze(0).lt(lengths.unsqueeze(1))
            mask = mask.view(-1, 1, 1, caption.size(1))
        else:
            c = c + self.class_embed(condition)
        t6 = self.t_block(F.silu(c)).view(x.size(0), 6, self.hidden)
        mixer = len(self.blocks) if keep is None else min(self.mixer_depth, len(self.blocks))
        for i, block in enumerate(self.blocks):
            if i == mixer:
                tokens = take(tokens, keep)
            tokens = block(tokens, t6, caption, mask, None if i < mixer else keep)
        if keep is not None and mixer == len(self.blocks):
            tokens = take(tokens, keep)
        shift, scale = (self.final_table.unsqueeze(0) + c.unsqueeze(1)).chunk(2, 1)
        out = self.out(modulate(self.norm_final(tokens), shift, scale))
        return out if keep is not None else self.unpatchify(out)


    def dropped(self, condition, drop):
        """The condition with the dropped rows' class or caption replaced by the null one."""
        if self.text_dim == 0:
            return torch.where(drop, torch.full_like(condition, self.num_classes), condition)
        text, lengths = condition
        tokens = max(text.size(1), NULL_CAPTION_TOKENS)
        text = F.pad(text.to(self.null_caption.dtype), (0, 0, 0, tokens - text.size(1)))
        null_text = F.pad(self.null_caption, (0, 0, 0, tokens - NULL_CAPTION_TOKENS))
        text = torch.where(drop.view(-1, 1, 1), null_text.unsqueeze(0).expand(text.size(0), tokens, self.text_dim), text)
        return text, torch.where(drop, torch.full_like(lengths, NULL_CAPTION_TOKENS), lengths)


PRESETS = {"dit-tiny": (64, 2, 2, 1), "dit-s": (384, 12, 6, 2), "dit-b": (768, 12, 12, 2)}  # hidden, depth, heads, mixer
PRESETS.update({name + "-text": shape for name, shape in list(PRESETS.items())})


def padded_captions(captions, index):
    """As ShardData's pad_captions: packed tokens (T, D), starts and lengths → the rows' (B, L, D)
    zero past each length, L the batch's longest."""
    tokens, start, len_all = captions
    lengths = len_all.index_select(0, index)
    position = torch.arange(int(lengths.max()), device=tokens.device).unsqueeze(0)
    inside = position.lt(lengths.unsqueeze(1))
    rows = start.index_select(0, index).unsqueeze(1) + torch.minimum(position, lengths.unsqueeze(1) - 1)
    text = tokens.index_select(0, rows.flatten()).view(index.size(0), position.size(1), tokens.size(1))
    return text * inside.unsqueeze(2).to(text.dtype), lengths


def flow_matching_loss(model, x0, condition, generator, patch_mask=0.0):
    b, device = x0.size(0), x0.device
    t = torch.sigmoid(torch.randn(b, generator=generator)).to(device, non_blocking=True)
    noise = torch.randn(x0.shape, generator=generator).to(device, non_blocking=True)
    drop = (torch.rand(b, generator=generator) < 0.1).to(device, non_blocking=True)
    condition = model.dropped(condition, drop)
    t4 = t.view(-1, 1, 1, 1)
    xt = (1 - t4) * x0 + t4 * noise
    if patch_mask <= 0:
        return F.mse_loss(model(xt, t, condition).float(), noise - x0)
    # As the trainer: K = max(1, floor((1 - r)·N + 0.5)) tokens kept per sample, ascending (drawn
    # here from torch's generator: the timing does not depend on which).
    tokens = (x0.size(2) // model.patch) ** 2
    kept = max(1, math.floor((1.0 - patch_mask) * tokens + 0.5))
    keep = torch.rand(b, tokens, generator=generator).argsort(1)[:, :kept].sort(1).values.to(device, non_blocking=True)
    return F.mse_loss(model(xt, t, condition, keep).float(), take(model.patchify(noise - x0), keep))


def run(model, inputs, labels, captions, steps, batch, lr, warmup, device, generator, patch_mask=0.0):
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    cuda = device.type == "cuda"
    order = torch.randperm(inputs.size(0), generator=generator)
    cursor = 0
    start = time.perf_counter()
    for step in range(steps):
        warm = min(1.0, (step + 1) / warmup) if warmup > 0 else 1.0
        for group in optimizer.param_groups:
            group["lr"] = lr * warm
        if cursor + batch > inputs.size(0):
            order = torch.randperm(inputs.size(0), generator=generator)
            cursor = 0
        index = order[cursor:cursor + batch]
        cursor += batch
        x = inputs.index_select(0, index).to(device, non_blocking=True)
        if captions is None:
            condition = labels.index_select(0, index).to(device, non_blocking=True)
        else:
            condition = padded_captions(captions, index.to(device))
        optimizer.zero_grad()
        with torch.autocast("cuda", dtype=torch.bfloat16) if cuda else contextlib.nullcontext():
            loss = flow_matching_loss(model, x, condition, generator, patch_mask)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        loss.item()
    if cuda:
        torch.cuda.synchronize()
    return time.perf_counter() - start


def profiled(path, steps):
    """Runs `steps` under torch.profiler; writes the operators and kernels by their own time on
    the device (the CPU's where there is no GPU), so the step's largest costs can be read."""
    from torch.profiler import ProfilerActivity, profile
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    with profile(activities=activities) as prof:
        seconds = steps()
    events = prof.key_averages()
    with open(path, "w") as out:
        for key in ("self_device_time_total", "self_cuda_time_total", "self_cpu_time_total"):
            try:
                out.write(events.table(sort_by=key, row_limit=45, max_name_column_width=70))
                break
            except (AttributeError, KeyError, ValueError):
                continue
    return seconds


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="dit-s", choices=sorted(PRESETS))
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--latent-size", type=int, default=8)
    parser.add_argument("--channels", type=int, default=4)
    parser.add_argument("--caption-tokens", type=int, default=120, help="text presets: the longest caption")
    parser.add_argument("--text-dim", type=int, default=4096, help="text presets: the caption features' width")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup-steps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--samples", type=int, default=4096)
    parser.add_argument("--patch-mask", type=float, default=0.0,
                        help="the fraction of each sample's patches dropped after the mixer (0: none)")
    parser.add_argument("--profile", metavar="FILE",
                        help="profile the timed steps with torch.profiler; the kernel table goes to FILE")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    device = torch.device(args.device)
    hidden, depth, heads, mixer_depth = PRESETS[args.model]
    text_dim = args.text_dim if args.model.endswith("-text") else 0
    model = Dit(hidden, depth, heads, in_channels=args.channels, input_size=args.latent_size,
                text_dim=text_dim, mixer_depth=mixer_depth).to(device)
    generator = torch.Generator().manual_seed(0)
    inputs = torch.randn(args.samples, args.channels, args.latent_size, args.latent_size, generator=generator)
    labels = torch.randint(0, 10, (args.samples,), generator=generator)
    captions = None
    if text_dim > 0:  # packed f16 tokens, as tessera-data import stores them; lengths in [L/2, L]
        lengths = torch.randint((args.caption_tokens + 1) // 2, args.caption_tokens + 1, (args.samples,),
                                generator=generator)
        tokens = torch.randn(int(lengths.sum()), text_dim, generator=generator).half()
        captions = tuple(c.to(device) for c in (tokens, lengths.cumsum(0) - lengths, lengths))
    if device.type == "cuda":
        inputs, labels = inputs.pin_memory(), labels.pin_memory()

    def steps(count):
        return run(model, inputs, labels, captions, count, args.batch, 3e-4, 10, device, generator, args.patch_mask)

    steps(args.warmup_steps)
    seconds = profiled(args.profile, lambda: steps(args.steps)) if args.profile else steps(args.steps)
    print(json.dumps({"torch": torch.__version__, "samples_per_s": args.steps * args.batch / seconds,
                      "seconds": seconds, "parameters": sum(p.numel() for p in model.parameters())}))


if __name__ == "__main__":
    main()
