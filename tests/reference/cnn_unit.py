#!/usr/bin/python3
"""A second implementation of a cnn work unit, written from docs/protocol.md alone ("Training a
work unit", "Randomness", "Model presets") with Debian's python3-torch used only for tensor
arithmetic and autograd: it reads a unit's inputs from DIR (theta0.safetensors, shard.safetensors
with pixels and labels, unit.json with the unit's hyper fields) and writes its delta to
DIR/delta_python.safetensors. The test suite compares it with the reference client's delta.

Usage: cnn_unit.py DIR
"""
import json
import math
import struct
import sys

import torch

MASK64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
BATCH_ORDER, DROPOUT_MASK = 1, 5


def mix(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


class Stream:
    def __init__(self, seed, purpose, step):
        self.key = mix(mix(mix(seed) ^ purpose) ^ step)

    def word(self, i):
        return mix((self.key + (i + 1) * GOLDEN) & MASK64)

    def uniform(self, i):
        return (self.word(i) >> 11) * 2.0 ** -53

    def permutation(self, n):
        order = list(range(n))
        for k in range(n - 1):
            i = n - 1 - k
            j = (self.word(k) * (i + 1)) >> 64
            order[i], order[j] = order[j], order[i]
        return order


DTYPES = {"F32": (torch.float32, 4), "I64": (torch.int64, 8), "U8": (torch.uint8, 1)}


def read_safetensors(path):
    data = open(path, "rb").read()
    (header_size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + header_size])
    body = data[8 + header_size:]
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype, _ = DTYPES[info["dtype"]]
        begin, end = info["data_offsets"]
        flat = torch.frombuffer(bytearray(body[begin:end]), dtype=dtype)
        tensors[name] = flat.reshape(info["shape"]).clone()
    return tensors


def write_safetensors(path, tensors):
    header, chunks, offset = {}, [], 0
    for name in sorted(tensors):
        raw = tensors[name].contiguous().numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensors[name].shape), "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as out:
        out.write(struct.pack("<Q", len(text)) + text + b"".join(chunks))


def forward(w, x, dropout_scale):
    h = torch.nn.functional.conv2d(x, w["conv1.weight"], w["conv1.bias"], padding=2)
    h = torch.nn.functional.max_pool2d(torch.relu(h), 2)
    h = torch.nn.functional.conv2d(h, w["conv2.weight"], w["conv2.bias"], padding=2)
    h = torch.nn.functional.max_pool2d(torch.relu(h), 2).flatten(1) * dropout_scale
    h = torch.relu(torch.nn.functional.linear(h, w["fc1.weight"], w["fc1.bias"]))
    return torch.nn.functional.linear(h, w["fc2.weight"], w["fc2.bias"])


def train(directory):
    theta0 = read_safetensors(directory + "/theta0.safetensors")
    shard = read_safetensors(directory + "/shard.safetensors")
    hyper = json.load(open(directory + "/unit.json"))
    inputs = (shard["pixels"].to(torch.float32) / 255.0 - 0.2860) / 0.3530
    labels = shard["labels"]
    n, seed = labels.shape[0], hyper["seed"]
    batch = min(hyper["batch_size"], n)

    weights = {name: t.clone().requires_grad_(True) for name, t in theta0.items()}
    exp_avg = {name: torch.zeros_like(t) for name, t in theta0.items()}
    exp_avg_sq = {name: torch.zeros_like(t) for name, t in theta0.items()}
    epoch, order, cursor = 0, Stream(seed, BATCH_ORDER, 0).permutation(n), 0
    for step in range(hyper["local_steps"]):
        if cursor + hyper["batch_size"] > n:
            epoch += 1
            order, cursor = Stream(seed, BATCH_ORDER, epoch).permutation(n), 0
        rows = torch.tensor(order[cursor:cursor + batch])
        cursor += hyper["batch_size"]
        stream = Stream(seed, DROPOUT_MASK, step)
        keep = [0.0 if stream.uniform(k) < 0.25 else 1.0 for k in range(batch * 1568)]
        scale = torch.tensor(keep, dtype=torch.float32).reshape(batch, 1568) * torch.tensor(1.0 / 0.75, dtype=torch.float32)
        loss = torch.nn.functional.cross_entropy(forward(weights, inputs[rows], scale), labels[rows])
        grads = torch.autograd.grad(loss, list(weights.values()))
        grads = dict(zip(weights.keys(), grads))
        if hyper["grad_clip"] > 0:
            total = torch.stack([g.norm() for g in grads.values()]).norm().to(torch.float64)
            coefficient = torch.clamp(hyper["grad_clip"] / (total + 1e-6), max=1.0)
            grads = {name: g * coefficient for name, g in grads.items()}
        warm = min(1.0, (step + 1) / hyper["warmup_steps"]) if hyper["warmup_steps"] > 0 else 1.0
        lr, t = hyper["lr"] * warm, step + 1
        with torch.no_grad():
            for name, p in weights.items():
                g = grads[name]
                p.mul_(1 - lr * hyper["weight_decay"])
                exp_avg[name].mul_(0.9).add_(g, alpha=1 - 0.9)
                exp_avg_sq[name].mul_(0.999).addcmul_(g, g, value=1 - 0.999)
                denom = (exp_avg_sq[name].sqrt() / math.sqrt(1 - 0.999 ** t)).add_(1e-8)
                p.addcdiv_(exp_avg[name], denom, value=-lr / (1 - 0.9 ** t))
    delta = {name: (weights[name].detach() - theta0[name]) for name in theta0}
    write_safetensors(directory + "/delta_python.safetensors", delta)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    train(sys.argv[1])
