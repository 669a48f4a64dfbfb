"""Transformers (BERT, DistilBERT, GPT-2, Llama, CLIP's text encoder, ViT) in tiny configurations with random init from
a config (no hub access), and torch.nn's TransformerEncoder and LSTM. Importing this
module is cheap (the model list without torch); the builders import torch and transformers.

The transformers models are wrapped so that forward takes the graph inputs positionally and
returns a tuple of tensors (the exporters name outputs by position). Attention is the
"eager" implementation: the MatMul/Softmax graph every exporter emits the same way.
"""
from __future__ import annotations

import os

from .specs import InputSpec, ModelSpec

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # configs are built here; nothing is fetched

VOCAB = 1000
SEQ = 16
MAX_POSITIONS = 128
TINY = dict(hidden=64, layers=2, heads=2, inner=128)


def _transformers_ready() -> None:
    """torchvision importable (without its native parts) before transformers looks for it:
    see torchvision_loader.ensure_importable."""
    from .torchvision_loader import ensure_importable
    ensure_importable()


def _positional(model, names: tuple[str, ...], outputs: tuple[str, ...]):
    from .modules import Positional
    return Positional(model, names, outputs)


def _bert(_: int):
    _transformers_ready()
    from transformers import BertConfig, BertModel
    cfg = BertConfig(vocab_size=VOCAB, hidden_size=TINY["hidden"], num_hidden_layers=TINY["layers"],
                     num_attention_heads=TINY["heads"], intermediate_size=TINY["inner"],
                     max_position_embeddings=MAX_POSITIONS, attn_implementation="eager")
    return _positional(BertModel(cfg), ("input_ids", "attention_mask", "token_type_ids"),
                       ("last_hidden_state", "pooler_output"))


def _distilbert(_: int):
    _transformers_ready()
    from transformers import DistilBertConfig, DistilBertModel
    cfg = DistilBertConfig(vocab_size=VOCAB, dim=TINY["hidden"], n_layers=TINY["layers"], n_heads=TINY["heads"],
                           hidden_dim=TINY["inner"], max_position_embeddings=MAX_POSITIONS,
                           attn_implementation="eager")
    return _positional(DistilBertModel(cfg), ("input_ids", "attention_mask"), ("last_hidden_state",))


def _gpt2(_: int):
    _transformers_ready()
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = GPT2Config(vocab_size=VOCAB, n_embd=TINY["hidden"], n_layer=TINY["layers"], n_head=TINY["heads"],
                     n_inner=TINY["inner"], n_positions=MAX_POSITIONS, use_cache=False,
                     bos_token_id=VOCAB - 1, eos_token_id=VOCAB - 1,  # GPT-2's are 50256, outside VOCAB
                     attn_implementation="eager")
    # With the attention mask as an input, as GPT-2 is usually deployed (and without one
    # transformers probes position ids for packed sequences with aten::diff, which the
    # legacy exporter lacks).
    return _positional(GPT2LMHeadModel(cfg), ("input_ids", "attention_mask"), ("logits",))


def _llama(_: int):
    _transformers_ready()
    from transformers import LlamaConfig, LlamaForCausalLM
    # The decoder family most LLMs share (Mistral, Qwen2, Gemma differ in details): rotary
    # position embeddings (Cos and Sin of run-time positions), RMSNorm, a SiLU-gated MLP, and
    # grouped-query attention (fewer key/value heads, repeated to the query heads).
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=TINY["hidden"], num_hidden_layers=TINY["layers"],
                      num_attention_heads=4, num_key_value_heads=2, intermediate_size=TINY["inner"],
                      max_position_embeddings=MAX_POSITIONS, use_cache=False, attn_implementation="eager")
    return _positional(LlamaForCausalLM(cfg), ("input_ids", "attention_mask"), ("logits",))


def _clip_text(_: int):
    _transformers_ready()
    from transformers import CLIPTextConfig, CLIPTextModel
    # Pools each sequence at the argmax of its ids (the end-of-text token has the largest id in
    # CLIP's vocabulary): an ArgMax, then a Gather from the hidden states flattened over the batch.
    cfg = CLIPTextConfig(vocab_size=VOCAB, hidden_size=TINY["hidden"], num_hidden_layers=TINY["layers"],
                         num_attention_heads=TINY["heads"], intermediate_size=TINY["inner"],
                         max_position_embeddings=MAX_POSITIONS, attn_implementation="eager")
    return _positional(CLIPTextModel(cfg), ("input_ids", "attention_mask"), ("last_hidden_state", "pooler_output"))


def _hf_vit(size: int):
    _transformers_ready()
    from transformers import ViTConfig, ViTModel
    cfg = ViTConfig(image_size=size, patch_size=16, hidden_size=TINY["hidden"], num_hidden_layers=TINY["layers"],
                    num_attention_heads=TINY["heads"], intermediate_size=TINY["inner"], attn_implementation="eager")
    return _positional(ViTModel(cfg, add_pooling_layer=True), ("pixel_values",), ("last_hidden_state", "pooler_output"))


D_MODEL = 64


def _encoder(norm_first: bool, batch_first: bool):
    def build(_: int):
        from torch import nn
        layer = nn.TransformerEncoderLayer(D_MODEL, nhead=4, dim_feedforward=128, dropout=0.0,
                                           norm_first=norm_first, batch_first=batch_first)
        # enable_nested_tensor would take the fast path, which no exporter traces
        return nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
    return build


def _lstm(_: int):
    from .modules import LSTMWithStates
    return LSTMWithStates()


def _ids(name: str) -> InputSpec:
    return InputSpec(name, ("batch", "seq"), "int64", "ids", VOCAB)


def _text(*names: str):
    fills = {"input_ids": None, "attention_mask": "ones", "token_type_ids": "zeros"}
    return lambda _size: tuple(_ids(n) if fills[n] is None else InputSpec(n, ("batch", "seq"), "int64", fills[n])
                               for n in names)


def specs() -> list[ModelSpec]:
    out = [
        ModelSpec("bert", "transformers", _bert, _text("input_ids", "attention_mask", "token_type_ids"),
                  ("last_hidden_state", "pooler_output"), seq=SEQ),
        ModelSpec("distilbert", "transformers", _distilbert, _text("input_ids", "attention_mask"),
                  ("last_hidden_state",), seq=SEQ),
        ModelSpec("gpt2", "transformers", _gpt2, _text("input_ids", "attention_mask"), ("logits",), seq=SEQ),
        ModelSpec("llama", "transformers", _llama, _text("input_ids", "attention_mask"), ("logits",), seq=SEQ),
        ModelSpec("clip_text", "transformers", _clip_text, _text("input_ids", "attention_mask"),
                  ("last_hidden_state", "pooler_output"), seq=SEQ),
        ModelSpec("hf_vit", "transformers", _hf_vit, lambda size: (InputSpec("pixel_values", ("batch", 3, size, size)),),
                  ("last_hidden_state", "pooler_output"), size=64, full_size=224),
    ]
    for norm_first in (False, True):
        for batch_first in (False, True):
            dims = ("batch", "seq", D_MODEL) if batch_first else ("seq", "batch", D_MODEL)
            name = f"transformer_encoder_{'prenorm' if norm_first else 'postnorm'}_{'bf' if batch_first else 'sf'}"
            out.append(ModelSpec(name, "torch.nn", _encoder(norm_first, batch_first),
                                 (lambda d: lambda _s: (InputSpec("src", d),))(dims), ("output",), seq=SEQ))
    out.append(ModelSpec("lstm", "torch.nn", _lstm, lambda _s: (InputSpec("x", ("batch", "seq", 32)),),
                         ("output", "h_n", "c_n"), seq=SEQ))
    return out
