"""A tiny causal LM and a tokenizer trained on the bundled corpus text, built locally.

The real-trainer tests (``tests/test_trainers_real.py``) run TRL's GRPO loop and verl's agent
loop on CPU without downloading anything: the tokenizer is a byte-level BPE trained here on the
opening transcripts of the bundled Bird records (what an asker reads) plus the tool-call syntax,
carrying the Qwen3 chat template that TRL ships (``trl/chat_templates/qwen3.jinja``, so TRL's
tool-call parser knows it); the model is a 2-layer ``Qwen3Config`` with hidden size 32,
initialized from a fixed seed.
"""

from __future__ import annotations

import functools
from importlib import resources

SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
    "<think>",
    "</think>",
]


@functools.lru_cache(maxsize=1)
def corpus_text() -> tuple[str, ...]:
    """The texts the tokenizer is trained on: every Bird record's opening transcript."""
    from ambitab_gym.integrations.common import ChatSession
    from ambitab_gym.integrations.trl import TOOL_PROMPT

    texts = []
    for prompt in (None, TOOL_PROMPT):
        session = ChatSession("AmbiTab-Bird-v0", env_kwargs={"split": "all"}, prompt=prompt)
        for record_id in session.record_ids:
            texts.extend(m["content"] for m in session.start(record_id=record_id))
        session.close()
    texts.append('{"name": "ask", "arguments": {"question": "What do you mean?"}}')
    texts.append('{"name": "stop", "arguments": {}}')
    return tuple(texts)


def qwen3_chat_template() -> str:
    """The Qwen3 chat template as TRL ships it."""
    return resources.files("trl").joinpath("chat_templates/qwen3.jinja").read_text()


def tiny_tokenizer(vocab_size: int = 600):
    """A ``PreTrainedTokenizerFast`` (byte-level BPE) trained on :func:`corpus_text`."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(corpus_text(), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        padding_side="left",
    )
    fast.chat_template = qwen3_chat_template()
    return fast


def tiny_model(tokenizer, *, seed: int = 0):
    """A 2-layer Qwen3 causal LM (hidden size 32) over ``tokenizer``'s vocabulary."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
    )
    torch.manual_seed(seed)
    return Qwen3ForCausalLM(config)
