"""A second, larger random-weight Llama for `logwatch compare`'s real test logs ("another model size"):
the tiny model's tokenizer, 4 layers of width 512 (about 14 M parameters, bf16).

    python tools/build_compare_model.py TINY_MODEL_DIR OUT_DIR   (with the e2e venv's python)

TINY_MODEL_DIR is the model tests/e2e/build_tiny_model.py builds (its tokenizer is reused, so both
models read the same prompts as the same tokens). Local only: nothing comes from a model hub.
"""

from __future__ import annotations

import os
import sys


def build(tiny: str, out: str) -> str:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast.from_pretrained(tiny)
    tok.save_pretrained(out)
    config = LlamaConfig(
        vocab_size=len(tok), hidden_size=512, intermediate_size=1024, num_hidden_layers=4,
        num_attention_heads=8, num_key_value_heads=8, head_dim=64, max_position_embeddings=2048,
        rms_norm_eps=1e-5, tie_word_embeddings=False, bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, torch_dtype="bfloat16",
    )
    torch.manual_seed(1)
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(out, safe_serialization=True)
    return f"{out}: {sum(p.numel() for p in model.parameters())} parameters"


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: build_compare_model.py TINY_MODEL_DIR OUT_DIR")
    print(build(sys.argv[1], sys.argv[2]))
