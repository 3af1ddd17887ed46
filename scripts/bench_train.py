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
    return x * (1 + scale) + shift


def attention(q, k, v):
    # As models/dit.cpp: the fused kernel on a GPU with PyTorch 2, the plain product elsewhere.
    if q.is_cuda and hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v)
    return torch.softmax(torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.size(-1)), -1).matmul(v)


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
    def __init__(self, hidden, heads, grid, mlp_ratio=4):
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

    def self_attention(self, x):
        b, n = x.size(0), x.size(1)
        qkv = self.qkv(x).view(b, n, 3, self.heads, self.hidden // self.heads).permute(2, 0, 3, 1, 4)
        out = attention(qkv[0], qkv[1], qkv[2])
        return self.proj(out.transpose(1, 2).reshape(b, n, self.hidden))

    def mlp(self, x):
        b = x.size(0)
        h = self.fc1(x)
        channels = h.size(2)
        image = h.transpose(1, 2).reshape(b, channels, self.grid, self.grid)
        h = self.dwconv(image).flatten(2).transpose(1, 2)
        return self.fc2(F.gelu(h, approximate="tanh"))

    def forward(self, x, t6):
        shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = (
            self.scale_shift_table.unsqueeze(0) + t6).chunk(6, 1)
        x = x + gate_msa * self.self_attention(modulate(self.norm1(x), shift_msa, scale_msa))
        return x + gate_mlp * self.mlp(modulate(self.norm2(x), shift_mlp, scale_mlp))


class Dit(nn.Module):
    def __init__(self, hidden, depth, heads, patch=2, in_channels=4, input_size=8, num_classes=10):
        super().__init__()
        self.hidden, self.patch, self.in_channels, self.input_size = hidden, patch, in_channels, input_size
        self.num_classes = num_classes
        patch_dim = patch * patch * in_channels
        self.patch_embed = nn.Linear(patch_dim, hidden)
        self.t_fc1 = nn.Linear(256, hidden)
        self.t_fc2 = nn.Linear(hidden, hidden)
        self.t_block = nn.Linear(hidden, 6 * hidden)
        self.class_embed = nn.Embedding(num_classes + 1, hidden)
        self.blocks = nn.ModuleList(DitBlock(hidden, heads, input_size // patch) for _ in range(depth))
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

    def forward(self, x, t, labels):
        tokens = self.patch_embed(self.patchify(x)) + self.pos_embed
        c = self.t_fc2(F.silu(self.t_fc1(timestep_features(t).to(tokens.dtype)))) + self.class_embed(labels)
        t6 = self.t_block(F.silu(c)).view(x.size(0), 6, self.hidden)
        for block in self.blocks:
            tokens = block(tokens, t6)
        shift, scale = (self.final_table.unsqueeze(0) + c.unsqueeze(1)).chunk(2, 1)
        return self.unpatchify(self.out(modulate(self.norm_final(tokens), shift, scale)))


PRESETS = {"dit-tiny": (64, 2, 2), "dit-s": (384, 12, 6), "dit-b": (768, 12, 12)}


def flow_matching_loss(model, x0, labels, generator):
    b, device = x0.size(0), x0.device
    t = torch.sigmoid(torch.randn(b, generator=generator)).to(device, non_blocking=True)
    noise = torch.randn(x0.shape, generator=generator).to(device, non_blocking=True)
    drop = (torch.rand(b, generator=generator) < 0.1).to(device, non_blocking=True)
    labels = torch.where(drop, torch.full_like(labels, model.num_classes), labels)
    t4 = t.view(-1, 1, 1, 1)
    xt = (1 - t4) * x0 + t4 * noise
    return F.mse_loss(model(xt, t, labels).float(), noise - x0)


def run(model, inputs, labels, steps, batch, lr, warmup, device, generator):
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
        y = labels.index_select(0, index).to(device, non_blocking=True)
        optimizer.zero_grad()
        with torch.autocast("cuda", dtype=torch.bfloat16) if cuda else contextlib.nullcontext():
            loss = flow_matching_loss(model, x, y, generator)
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
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup-steps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--samples", type=int, default=4096)
    parser.add_argument("--profile", metavar="FILE",
                        help="profile the timed steps with torch.profiler; the kernel table goes to FILE")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    device = torch.device(args.device)
    hidden, depth, heads = PRESETS[args.model]
    model = Dit(hidden, depth, heads, input_size=args.latent_size).to(device)
    generator = torch.Generator().manual_seed(0)
    inputs = torch.randn(args.samples, 4, args.latent_size, args.latent_size, generator=generator)
    labels = torch.randint(0, 10, (args.samples,), generator=generator)
    if device.type == "cuda":
        inputs, labels = inputs.pin_memory(), labels.pin_memory()
    run(model, inputs, labels, args.warmup_steps, args.batch, 3e-4, 10, device, generator)
    if args.profile:
        seconds = profiled(args.profile, lambda: run(model, inputs, labels, args.steps, args.batch, 3e-4, 10, device,
                                                     generator))
    else:
        seconds = run(model, inputs, labels, args.steps, args.batch, 3e-4, 10, device, generator)
    print(json.dumps({"torch": torch.__version__, "samples_per_s": args.steps * args.batch / seconds,
                      "seconds": seconds, "parameters": sum(p.numel() for p in model.parameters())}))


if __name__ == "__main__":
    main()
