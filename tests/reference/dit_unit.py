#!/usr/bin/python3
"""A second implementation of a DiT work unit — the class DiT (`dit-tiny`, `dit-s`, `dit-b`), the
text DiT (the `-text` presets) and an expert group's router (`router`) — written from
docs/protocol.md ("Training a work unit",
"Randomness", "Model presets") and docs/dataset_format.md ("Captions") alone, with Debian's
python3-torch used only for tensor arithmetic and autograd. It reads a unit's inputs from DIR:
unit.json with the unit's `model` and its hyper fields (`local_steps`, `batch_size`, `lr`,
`warmup_steps`, `weight_decay`, `grad_clip`, `seed`, optionally `caption_drop` and `patch_mask`; `shard_files`,
the shard files in the unit's order, default ["shard.safetensors"]), theta0.safetensors and the
shards (uncompressed), and writes its delta to DIR/delta_python.safetensors. The test suite
compares it with the reference trainer's delta. A `fresh` unit without a `schedule` only.

Usage: dit_unit.py DIR
"""
import json
import math
import struct
import sys

import torch

MASK64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
BATCH_ORDER, TIMESTEP, NOISE, LABEL_DROP, CAPTION_DROP, PATCH_MASK = 1, 2, 3, 4, 6, 7
HEADS = {"dit-tiny": 2, "dit-s": 6, "dit-b": 12, "router": 2}  # the router: dit-tiny's trunk
MIXER_DEPTH = {"dit-tiny": 1, "dit-s": 2, "dit-b": 2, "router": 0}
LABEL_DROP_RATE = 0.1
CAPTION_DROP_DEFAULT = 0.1


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

    def normals(self, count):
        """normal(0 … count − 1), each computed in double and rounded to f32."""
        out = []
        for pair in range((count + 1) // 2):
            u1, u2 = self.uniform(2 * pair), self.uniform(2 * pair + 1)
            r = math.sqrt(-2.0 * math.log(1.0 - u1))
            out += [r * math.cos(2.0 * math.pi * u2), r * math.sin(2.0 * math.pi * u2)]
        return torch.tensor(out[:count], dtype=torch.float64).to(torch.float32)

    def permutation(self, n, first_word=0):
        order = list(range(n))
        for k in range(n - 1):
            i = n - 1 - k
            j = (self.word(first_word + k) * (i + 1)) >> 64
            order[i], order[j] = order[j], order[i]
        return order

    def kept_tokens(self, rows, tokens, kept):
        """Patch masking: sample r keeps the first `kept` of the permutation made with words
        r·(tokens − 1) + k, ascending; (rows, kept) int64."""
        return torch.tensor([sorted(self.permutation(tokens, r * (tokens - 1))[:kept]) for r in range(rows)],
                            dtype=torch.int64)


def kept_count(tokens, ratio):
    return max(1, math.floor((1.0 - ratio) * tokens + 0.5))


DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "I64": torch.int64,
          "I32": torch.int32, "I8": torch.int8, "U8": torch.uint8}


def read_safetensors(path):
    data = open(path, "rb").read()
    (header_size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + header_size])
    body = data[8 + header_size:]
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        raw = bytearray(body[begin:end])
        dtype = DTYPES[info["dtype"]]
        flat = torch.frombuffer(raw, dtype=dtype) if raw else torch.empty(0, dtype=dtype)
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


def captions_of(shard):
    """(embeddings (N, L, D) f32, lengths (N,)) of one shard in any of the caption layouts."""
    if "text_tokens" in shard:
        tokens, lengths = shard["text_tokens"].to(torch.float32), shard["text_len"].to(torch.int64)
        longest = int(lengths.max())
        padded = torch.zeros(lengths.shape[0], longest, tokens.shape[1])
        start = 0
        for n, length in enumerate(lengths.tolist()):
            padded[n, :length] = tokens[start:start + length]
            start += length
        if start != tokens.shape[0]:
            sys.exit("text_len does not sum to text_tokens' rows")
        return padded, lengths
    emb = shard["text_emb"].to(torch.float32)
    if "text_len" in shard:
        return emb, shard["text_len"].to(torch.int64)
    if "text_mask" in shard:
        return emb, shard["text_mask"].to(torch.int64).sum(1)
    return emb, torch.full((emb.shape[0],), emb.shape[1], dtype=torch.int64)


def pad_tokens(y, length):
    return torch.nn.functional.pad(y, (0, 0, 0, length - y.shape[1]))


def load_data(directory, files, text):
    shards = [read_safetensors(directory + "/" + name) for name in files]
    latents = torch.cat([s["latents"].to(torch.float32) for s in shards])
    labels = torch.cat([s["labels"] for s in shards])
    if not text:
        return latents, labels, None, None
    captions = [captions_of(s) for s in shards]
    longest = max(y.shape[1] for y, _ in captions)
    return (latents, labels, torch.cat([pad_tokens(y, longest) for y, _ in captions]),
            torch.cat([lengths for _, lengths in captions]))


def position_table(grid, hidden):
    q = hidden // 4
    omega = 10000.0 ** (-torch.arange(q, dtype=torch.float64) / q)
    coords = torch.arange(grid, dtype=torch.float64)
    gy, gx = torch.meshgrid(coords, coords, indexing="ij")
    gy, gx = gy.reshape(-1, 1) * omega, gx.reshape(-1, 1) * omega
    table = torch.cat([gy.sin(), gy.cos(), gx.sin(), gx.cos()], dim=1)
    return torch.nn.functional.pad(table, (0, hidden - 4 * q)).to(torch.float32)


def linear(w, name, v):
    return torch.nn.functional.linear(v, w[name + ".weight"], w[name + ".bias"])


def layer_norm(v):
    return torch.nn.functional.layer_norm(v, (v.shape[-1],), eps=1e-6)


def modulate(v, shift, scale):
    return v * (1 + scale.unsqueeze(1)) + shift.unsqueeze(1)


def attend(q, k, v, mask=None):
    """q (B, heads, Nq, d), k and v (B, heads, Nk, d); mask (B, Nk) additive."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores + mask[:, None, None, :]
    out = torch.softmax(scores, dim=-1) @ v
    return out.transpose(1, 2).reshape(q.shape[0], q.shape[2], -1)


def take(v, keep):
    """Rows `keep` (B, K) of v (B, N, W)."""
    return torch.gather(v, 1, keep.unsqueeze(-1).expand(-1, -1, v.shape[2]))


def trunk(w, x, t, heads, labels=None, caption=None, lengths=None, keep=None, mixer=0):
    """The blocks' output tokens h and the conditioning c: on t and the class (`labels`), the
    caption, or t alone (the router); with `keep` (B, K), the blocks from `mixer` on see the kept
    tokens alone."""
    batch, channels, side, _ = x.shape
    grid, hidden = side // 2, w["patch_embed.weight"].shape[0]
    tokens, d = grid * grid, hidden // heads
    patches = x.reshape(batch, channels, grid, 2, grid, 2).permute(0, 2, 4, 3, 5, 1)
    patches = patches.reshape(batch, tokens, 4 * channels)
    h = linear(w, "patch_embed", patches) + position_table(grid, hidden)

    freqs = torch.exp(-math.log(10000.0) * torch.arange(128, dtype=torch.float32) / 128)
    args = (t * 1000).unsqueeze(1) * freqs
    features = torch.cat([args.cos(), args.sin()], dim=1)
    c = linear(w, "t_fc2", torch.nn.functional.silu(linear(w, "t_fc1", features)))
    if labels is not None:
        c = c + w["class_embed.weight"][labels]
    t6 = linear(w, "t_block", torch.nn.functional.silu(c)).reshape(batch, 6, hidden)

    if caption is not None:
        y = linear(w, "caption_fc2", torch.nn.functional.gelu(linear(w, "caption_fc1", caption), approximate="tanh"))
        positions = torch.arange(caption.shape[1]).unsqueeze(0)
        mask = torch.zeros(batch, positions.shape[1]).masked_fill(positions >= lengths.unsqueeze(1), float("-inf"))
    depth = 1 + max(int(name.split(".")[1]) for name in w if name.startswith("blocks."))
    mixer = depth if keep is None else min(mixer, depth)
    for i in range(depth):
        if i == mixer:
            h = take(h, keep)
            tokens = keep.shape[1]
        b = "blocks.%d." % i
        shift1, scale1, gate1, shift2, scale2, gate2 = (w[b + "scale_shift_table"] + t6).unbind(1)
        qkv = linear(w, b + "qkv", modulate(layer_norm(h), shift1, scale1))
        q, k, v = qkv.reshape(batch, tokens, 3, heads, d).permute(2, 0, 3, 1, 4)
        h = h + gate1.unsqueeze(1) * linear(w, b + "proj", attend(q, k, v))
        if caption is not None:
            q = linear(w, b + "cross_q", h).reshape(batch, tokens, heads, d).transpose(1, 2)
            k, v = linear(w, b + "cross_kv", y).reshape(batch, y.shape[1], 2, heads, d).permute(2, 0, 3, 1, 4)
            h = h + linear(w, b + "cross_proj", attend(q, k, v, mask))
        m = linear(w, b + "fc1", modulate(layer_norm(h), shift2, scale2))
        width = m.shape[2]
        masked = i >= mixer
        if masked:  # kept tokens back in their places of a zero grid
            m = torch.zeros(batch, grid * grid, width).scatter(1, keep.unsqueeze(-1).expand(-1, -1, width), m)
        image = m.transpose(1, 2).reshape(batch, width, grid, grid)
        image = torch.nn.functional.conv2d(image, w[b + "dwconv.weight"], w[b + "dwconv.bias"], padding=1, groups=width)
        m = image.flatten(2).transpose(1, 2)
        if masked:
            m = take(m, keep)
        m = torch.nn.functional.gelu(m, approximate="tanh")
        h = h + gate2.unsqueeze(1) * linear(w, b + "fc2", m)
    if keep is not None and mixer == depth:
        h = take(h, keep)
    return h, c


def dit_forward(w, x, t, heads, labels=None, caption=None, lengths=None, keep=None, mixer=0):
    """The velocity (B, C, S, S); with `keep` (B, K), the kept patches' only, (B, K, P)."""
    batch, channels, side, _ = x.shape
    grid = side // 2
    h, c = trunk(w, x, t, heads, labels, caption, lengths, keep, mixer)
    shift, scale = (w["final_table"] + c.unsqueeze(1)).unbind(1)
    v = linear(w, "out", modulate(layer_norm(h), shift, scale))
    if keep is not None:
        return v
    return v.reshape(batch, grid, grid, 2, 2, channels).permute(0, 5, 1, 3, 2, 4).reshape(batch, channels, side, side)


def router_forward(w, x, t, heads):
    """The router's logits (B, E): the trunk on t alone, its tokens' mean, a LayerNorm with its
    own weight and bias, and the head."""
    h, _ = trunk(w, x, t, heads)
    pooled = torch.nn.functional.layer_norm(h.mean(1), (h.shape[-1],), w["norm.weight"], w["norm.bias"], eps=1e-6)
    return linear(w, "router_head", pooled)


def patches_of(v):
    batch, channels, side, _ = v.shape
    grid = side // 2
    return v.reshape(batch, channels, grid, 2, grid, 2).permute(0, 2, 4, 3, 5, 1).reshape(batch, grid * grid, -1)


def step_loss(w, hyper, heads, mixer, step, x, labels, caption, lengths):
    seed, batch = hyper["seed"], x.shape[0]
    ratio = hyper.get("patch_mask", 0)
    keep = None
    if ratio > 0:
        tokens = (x.shape[2] // 2) ** 2
        keep = Stream(seed, PATCH_MASK, step).kept_tokens(batch, tokens, kept_count(tokens, ratio))
    t = torch.sigmoid(Stream(seed, TIMESTEP, step).normals(batch))
    noise = Stream(seed, NOISE, step).normals(x.numel()).reshape(x.shape)
    tt = t.reshape(batch, 1, 1, 1)
    x_t = (1 - tt) * x + tt * noise
    if "router_head.weight" in w:  # the cluster of x_t, by cross-entropy; no label drop
        return torch.nn.functional.cross_entropy(router_forward(w, x_t, t, heads), labels)
    if caption is None:
        null_class = w["class_embed.weight"].shape[0] - 1
        stream = Stream(seed, LABEL_DROP, step)
        drop = torch.tensor([stream.uniform(i) < LABEL_DROP_RATE for i in range(batch)])
        out = dit_forward(w, x_t, t, heads, labels=torch.where(drop, torch.full_like(labels, null_class), labels),
                          keep=keep, mixer=mixer)
    else:
        null = w["null_caption"]
        rate = hyper.get("caption_drop", CAPTION_DROP_DEFAULT)
        stream = Stream(seed, CAPTION_DROP, step)
        drop = torch.tensor([stream.uniform(i) < rate for i in range(batch)])
        width = max(caption.shape[1], null.shape[0])
        y = torch.where(drop[:, None, None], pad_tokens(null.unsqueeze(0), width), pad_tokens(caption, width))
        ell = torch.where(drop, torch.full_like(lengths, null.shape[0]), lengths)
        out = dit_forward(w, x_t, t, heads, caption=y, lengths=ell, keep=keep, mixer=mixer)
    if keep is not None:
        return torch.mean((out - take(patches_of(noise - x), keep)) ** 2)
    return torch.mean((out - (noise - x)) ** 2)


def train(directory):
    theta0 = read_safetensors(directory + "/theta0.safetensors")
    hyper = json.load(open(directory + "/unit.json"))
    if hyper.get("optimizer", "fresh") != "fresh" or "schedule" in hyper:
        sys.exit("only a fresh unit without a schedule")
    text = "null_caption" in theta0
    heads = HEADS[hyper["model"].removesuffix("-text")]
    mixer = MIXER_DEPTH[hyper["model"].removesuffix("-text")]
    latents, labels, captions, lengths = load_data(directory, hyper.get("shard_files", ["shard.safetensors"]), text)
    n, seed = latents.shape[0], hyper["seed"]
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
        loss = step_loss(weights, hyper, heads, mixer, step, latents[rows], labels[rows],
                         captions[rows] if text else None, lengths[rows] if text else None)
        grads = dict(zip(weights.keys(), torch.autograd.grad(loss, list(weights.values()))))
        if hyper["grad_clip"] > 0:
            total = torch.stack([g.norm() for g in grads.values()]).norm().to(torch.float64)
            coefficient = torch.clamp(hyper["grad_clip"] / (total + 1e-6), max=1.0)
            grads = {name: g * coefficient for name, g in grads.items()}
        warm = min(1.0, (step + 1) / hyper["warmup_steps"]) if hyper["warmup_steps"] > 0 else 1.0
        lr, c = hyper["lr"] * warm, step + 1
        with torch.no_grad():
            for name, p in weights.items():
                g = grads[name]
                p.mul_(1 - lr * hyper["weight_decay"])
                exp_avg[name].mul_(0.9).add_(g, alpha=1 - 0.9)
                exp_avg_sq[name].mul_(0.999).addcmul_(g, g, value=1 - 0.999)
                denom = (exp_avg_sq[name].sqrt() / math.sqrt(1 - 0.999 ** c)).add_(1e-8)
                p.addcdiv_(exp_avg[name], denom, value=-lr / (1 - 0.9 ** c))
    delta = {name: (weights[name].detach() - theta0[name]) for name in theta0}
    write_safetensors(directory + "/delta_python.safetensors", delta)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    train(sys.argv[1])
