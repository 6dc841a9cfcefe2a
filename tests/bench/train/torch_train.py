"""`npm run bench:train`, PyTorch's half: training steps per second on the same shape, batch, data
and optimizer as `crate/examples/bench_train.rs` (nanoGPT's CPU "baby GPT": 4 layers, 4 heads,
width 128, context 64, batch 12, byte vocabulary; AdamW with nanoGPT's parameter groups, clipping).

PyTorch at its best plain setting on a CPU: transformers' GPT2LMHeadModel with SDPA attention
(``--attention eager`` for the other), float32, ``torch.set_num_threads(N)`` and one interop thread.
torch.compile is left out: it needs a compiler toolchain and minutes of compilation, and gptlens
does no ahead-of-time specialisation either. Prints one JSON line like the gptlens half.

    python tests/bench/train/torch_train.py --data assets/data/shakespeare.txt --threads 2
"""

import argparse
import json
import time

import numpy as np
import torch
from transformers import GPT2Config, GPT2LMHeadModel


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--data", required=True)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--width", type=int, default=128)
    p.add_argument("--context", type=int, default=64)
    p.add_argument("--batch", type=int, default=12)
    p.add_argument("--attention", default="sdpa", choices=["sdpa", "eager"])
    a = p.parse_args()

    torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(1)
    torch.manual_seed(1337)
    data = torch.from_numpy(np.fromfile(a.data, dtype=np.uint8).astype(np.int64))
    config = GPT2Config(
        vocab_size=256,
        n_positions=a.context,
        n_embd=a.width,
        n_layer=a.layers,
        n_head=a.heads,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        attn_implementation=a.attention,
        bos_token_id=None,
        eos_token_id=None,
    )
    model = GPT2LMHeadModel(config)
    model.train()
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and "wte" not in n and "wpe" not in n]
    rest = [p for n, p in model.named_parameters() if not (p.dim() >= 2 and "wte" not in n and "wpe" not in n)]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}], lr=1e-3, betas=(0.9, 0.99)
    )
    generator = torch.Generator().manual_seed(1337)

    def step() -> None:
        starts = torch.randint(len(data) - a.context - 1, (a.batch,), generator=generator)
        x = torch.stack([data[s : s + a.context] for s in starts])
        y = torch.stack([data[s + 1 : s + 1 + a.context] for s in starts])
        logits = model(input_ids=x).logits
        loss = torch.nn.functional.cross_entropy(logits.view(-1, 256), y.view(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()

    for _ in range(a.warmup):
        step()
    started = time.perf_counter()
    for _ in range(a.steps):
        step()
    seconds = time.perf_counter() - started
    print(
        json.dumps(
            {
                "engine": f"pytorch {torch.__version__} ({a.attention})",
                "threads": a.threads,
                "steps": a.steps,
                "seconds": round(seconds, 4),
                "tokensPerSecond": round(a.steps * a.batch * a.context / seconds, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
