#!/usr/bin/env python3
"""Captioned shards written as an operator's precompute writes them, with numpy alone.

The stand-in for an operator's Python (docs/dataset_format.md, "Writing shards in Python"):
images and captions in, latents and caption features out, in the files `tessera-data import`
reads. The "VAE" is the encoder of a canvases dataset (`tessera-data prepare canvases`), run
here in numpy; the "text encoder" is its stand-in text encoder (word embedding + position
code per token, each token then mixed with its neighbours, D = 64). The images are canvases of two Fashion-MNIST items, drawn here
(docs/dataset_format.md, "prepare canvases": the same geometry, attributes and caption
grammar), so a task trained on these files draws what the captions say through that
dataset's decoder.

Writes into --out:
  part-0.safetensors  packed captions: text_tokens F16 [T, D] + text_len (the snippet's layout)
  part-1.safetensors  padded captions as a tokenizer returns them: text_emb F32 [N, L, D] +
                      text_mask I64 [N, L], the padding holding non-zero values
  part-2.tar          webdataset: KEY.latent.npy (f16), KEY.t5.npy (f32 [L, D]) with
                      KEY.mask.npy, KEY.txt, KEY.cls; every third sample one KEY.npz instead
  validation.tar      webdataset of the validation canvases; its first captions are those of
                      --captions (one a line), in order: the gallery's rows
and prints one JSON line: {"train": N, "validation": N, "captions": [...first validation...]}.

  write_captioned_shards.py --models CANVASES_DIR --out DIR [--train N] [--validation N]
                            [--captions FILE] [--seed S] [--source FASHION_MNIST_DIR]
Only the standard library and numpy (Debian's python3-numpy).
"""
import argparse
import gzip
import io
import json
import struct
import tarfile

import numpy as np

NOUNS = ["top", "trouser", "dress", "shoe", "bag", "boot"]
NOUN_CLASSES = [[0, 2, 4, 6], [1], [3], [5, 7], [8], [9]]  # the Fashion-MNIST classes each noun names
RELATIONS = ["left of", "above", "right of", "below"]  # A's place relative to B
ATTRIBUTES = ["", "dark", "light"]
CANVAS, QUADRANT, ITEM = 64, 32, 28


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (length,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + length])
    metadata = header.pop("__metadata__", {})
    body = raw[8 + length:]
    dtypes = {"F32": np.float32, "F16": np.float16, "I64": np.int64, "U8": np.uint8}
    tensors = {}
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        tensors[name] = np.frombuffer(body[begin:end], dtypes[entry["dtype"]]).reshape(entry["shape"])
    return tensors, metadata


def write_safetensors(path, tensors):
    """tensors: name -> (safetensors dtype, contiguous numpy array)."""
    header, blobs, offset = {}, [], 0
    for name, (dtype, array) in tensors.items():
        data = np.ascontiguousarray(array).tobytes()
        header[name] = {"dtype": dtype, "shape": list(array.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def read_idx(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    magic, count = struct.unpack(">II", raw[:8])
    if magic == 2049:
        return np.frombuffer(raw[8:8 + count], np.uint8)
    rows, cols = struct.unpack(">II", raw[8:16])
    return np.frombuffer(raw[16:16 + count * rows * cols], np.uint8).reshape(count, rows, cols)


def conv2d(x, weight, bias, stride, pad):
    """x [N, C, H, W], weight [O, C, k, k]: PyTorch's Conv2d (cross-correlation, zero padding)."""
    k = weight.shape[2]
    x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    windows = np.lib.stride_tricks.sliding_window_view(x, (k, k), axis=(2, 3))[:, :, ::stride, ::stride]
    return np.einsum("nchwij,ocij->nohw", windows, weight, optimize=True) + bias[None, :, None, None]


def silu(x):
    return x / (1.0 + np.exp(-x))


class Encoder:
    """common/torch/models/autoencoder.cpp's encoder: 64×64 pixels in [-1, 1] → 4×16×16."""

    def __init__(self, path):
        self.w, _ = read_safetensors(path)

    def __call__(self, x):
        w = self.w
        x = silu(conv2d(x, w["layers.0.weight"], w["layers.0.bias"], 1, 1))
        x = silu(conv2d(x, w["layers.2.weight"], w["layers.2.bias"], 2, 1))
        x = silu(conv2d(x, w["layers.4.weight"], w["layers.4.bias"], 2, 1))
        return conv2d(x, w["layers.6.weight"], w["layers.6.bias"], 1, 1)


class TextEncoder:
    """The stand-in text encoder: x_i = word_embeddings[word i] + position_codes[i], token
    i = x_i + x_{i-1} @ context_left + x_{i+1} @ context_right (missing neighbours zero)."""

    def __init__(self, path):
        w, metadata = read_safetensors(path)
        self.words = w["word_embeddings"]
        self.positions = w["position_codes"]
        self.left = w["context_left"]
        self.right = w["context_right"]
        self.vocabulary = {word: i for i, word in enumerate(metadata["vocabulary"].split())}

    def __call__(self, caption):
        ids = [self.vocabulary[word] for word in caption.lower().split()]
        x = self.words[ids] + self.positions[: len(ids)]
        tokens = x.copy()
        tokens[1:] += x[:-1] @ self.left
        tokens[:-1] += x[1:] @ self.right
        return tokens.astype(np.float32)  # [L, D]


def caption_of(scene):
    a, attr_a, b, attr_b, relation = scene
    name = lambda noun, attr: " ".join(w for w in ("a", ATTRIBUTES[attr], NOUNS[noun]) if w)
    return "%s %s %s" % (name(a, attr_a), RELATIONS[relation], name(b, attr_b))


def parse_caption(text):
    words = text.lower().split()
    relation = next(r for r in RELATIONS if " %s " % r in " ".join(words))
    first, second = " ".join(words).split(" %s " % relation)

    def item(part):
        rest = part.split()[1:]  # after "a"
        attr = ATTRIBUTES.index(rest[0]) if rest[0] in ("dark", "light") else 0
        return NOUNS.index(rest[-1]), attr

    (a, attr_a), (b, attr_b) = item(first), item(second)
    return a, attr_a, b, attr_b, RELATIONS.index(relation)


def with_attribute(image, attr):
    p = image.astype(np.float64)
    if attr == 1:
        p = p * 0.4
    elif attr == 2:
        p = 255.0 * (p / 255.0) ** 0.4
    return np.rint(p).astype(np.uint8)


def draw_canvas(scene, images_by_noun, rng):
    """A 64×64 uint8 canvas: A and B in the quadrants the relation puts them in."""
    a, attr_a, b, attr_b, relation = scene
    line = int(rng.integers(2))  # the row (left/right) or column (above/below)
    if relation in (0, 2):  # a row: quadrants 2·line and 2·line + 1
        left, right = 2 * line, 2 * line + 1
        quadrant_a, quadrant_b = (left, right) if relation == 0 else (right, left)
    else:  # a column: quadrants line and line + 2
        top, bottom = line, line + 2
        quadrant_a, quadrant_b = (top, bottom) if relation == 1 else (bottom, top)
    canvas = np.zeros((CANVAS, CANVAS), np.uint8)
    for noun, attr, quadrant in ((a, attr_a, quadrant_a), (b, attr_b, quadrant_b)):
        pool = images_by_noun[noun]
        image = with_attribute(pool[int(rng.integers(len(pool)))], attr)
        top, left = (quadrant // 2) * QUADRANT + 2, (quadrant % 2) * QUADRANT + 2
        canvas[top:top + ITEM, left:left + ITEM] = image
    return canvas


def random_scene(rng):
    a, b = rng.choice(len(NOUNS), size=2, replace=False)
    attrs = rng.choice(3, size=2, p=[0.5, 0.25, 0.25])
    return int(a), int(attrs[0]), int(b), int(attrs[1]), int(rng.integers(4))


class Samples:
    """Canvases encoded to latents (× the dataset's scale factor, f16) and their captions."""

    def __init__(self, scenes, images_by_noun, encoder, text_encoder, scale, rng):
        canvases = np.stack([draw_canvas(s, images_by_noun, rng) for s in scenes])
        x = canvases.astype(np.float32)[:, None] / 127.5 - 1.0
        latents = np.concatenate([encoder(x[i:i + 64]) for i in range(0, len(x), 64)])
        self.latents = (latents * scale).astype(np.float16)
        self.captions = [caption_of(s) for s in scenes]
        self.features = [text_encoder(c) for c in self.captions]
        self.labels = np.array([s[0] for s in scenes], np.int64)

    def __len__(self):
        return len(self.captions)

    def caption_bytes(self, rows):
        texts = [self.captions[i].encode("utf-8") for i in rows]
        out = np.zeros((len(texts), max(len(t) for t in texts)), np.uint8)
        for i, t in enumerate(texts):
            out[i, :len(t)] = np.frombuffer(t, np.uint8)
        return out


def write_packed(path, s, rows):
    write_safetensors(path, {
        "latents": ("F16", s.latents[rows]),
        "labels": ("I64", s.labels[rows]),
        "text_tokens": ("F16", np.concatenate([s.features[i] for i in rows]).astype(np.float16)),
        "text_len": ("I64", np.array([len(s.features[i]) for i in rows], np.int64)),
        "captions": ("U8", s.caption_bytes(rows)),
    })


def write_padded(path, s, rows, length, rng):
    width = s.features[0].shape[1]
    # A tokenizer pads to max_length; an encoder's outputs past the caption are not zero.
    emb = rng.standard_normal((len(rows), length, width)).astype(np.float32)
    mask = np.zeros((len(rows), length), np.int64)
    for j, i in enumerate(rows):
        n = len(s.features[i])
        emb[j, :n] = s.features[i]
        mask[j, :n] = 1
    write_safetensors(path, {
        "latents": ("F16", s.latents[rows]),
        "labels": ("I64", s.labels[rows]),
        "text_emb": ("F32", emb),
        "text_mask": ("I64", mask),
        "captions": ("U8", s.caption_bytes(rows)),
    })


def npy(array):
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def write_tar(path, s, rows, prefix, length, rng):
    with tarfile.open(path, "w") as tar:
        def add(name, data):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = 1700000000
            tar.addfile(info, io.BytesIO(data))

        for j, i in enumerate(rows):
            key = "%s/%06d" % (prefix, j)
            n, width = s.features[i].shape
            t5 = rng.standard_normal((length, width)).astype(np.float32)
            t5[:n] = s.features[i]
            mask = np.arange(length) < n
            if j % 3 == 2:
                buffer = io.BytesIO()
                np.savez_compressed(buffer, latent=s.latents[i], t5=t5, mask=mask)
                add(key + ".npz", buffer.getvalue())
            else:
                add(key + ".latent.npy", npy(s.latents[i]))
                add(key + ".t5.npy", npy(t5))
                add(key + ".mask.npy", npy(mask))
            add(key + ".txt", s.captions[i].encode("utf-8"))
            add(key + ".cls", str(int(s.labels[i])).encode())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", required=True, help="a canvases dataset: encoder, text encoder, scale")
    parser.add_argument("--out", required=True)
    parser.add_argument("--train", type=int, default=600, help="training samples, over three files")
    parser.add_argument("--validation", type=int, default=64)
    parser.add_argument("--captions", help="the first validation captions, one a line")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--source", default="/usr/share/datasets/fashion-mnist")
    args = parser.parse_args()

    rng = np.random.default_rng(args.seed)
    with open(args.models + "/dataset.json") as f:
        scale = json.load(f)["scale_factor"]
    encoder = Encoder(args.models + "/encoder.safetensors")
    text_encoder = TextEncoder(args.models + "/text_encoder.safetensors")

    def by_noun(split):
        images = read_idx("%s/%s-images-idx3-ubyte.gz" % (args.source, split))
        labels = read_idx("%s/%s-labels-idx1-ubyte.gz" % (args.source, split))
        return [np.concatenate([images[labels == c][:300] for c in classes]) for classes in NOUN_CLASSES]

    given = []
    if args.captions:
        with open(args.captions) as f:
            given = [line.strip() for line in f if line.strip()]
    train_scenes = [random_scene(rng) for _ in range(args.train)]
    validation_scenes = [parse_caption(c) for c in given][: args.validation]
    validation_scenes += [random_scene(rng) for _ in range(args.validation - len(validation_scenes))]

    train = Samples(train_scenes, by_noun("train"), encoder, text_encoder, scale, rng)
    validation = Samples(validation_scenes, by_noun("t10k"), encoder, text_encoder, scale, rng)
    third = args.train // 3
    parts = [list(range(0, third)), list(range(third, 2 * third)), list(range(2 * third, args.train))]
    write_packed(args.out + "/part-0.safetensors", train, parts[0])
    write_padded(args.out + "/part-1.safetensors", train, parts[1], 16, rng)
    write_tar(args.out + "/part-2.tar", train, parts[2], "part-2", 16, rng)
    write_tar(args.out + "/validation.tar", validation, list(range(len(validation))), "validation", 12, rng)
    print(json.dumps({"train": len(train), "validation": len(validation), "captions": validation.captions[:8]}))


if __name__ == "__main__":
    main()
