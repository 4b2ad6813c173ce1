"""`python -m ipexconvert.examples.llama_folder FOLDER`: tiny-llama saved as a Hugging Face folder with a
tokenizer, the small decoder folder the README converts and generates text with."""
from __future__ import annotations

from .corpus import corpus_text
from .sentences import CALIBRATION_SENTENCES, SENTENCES
from .tiny_llama import VOCAB_SIZE, build_tiny_llama_lm


def save_tiny_llama_folder(folder) -> None:
    """Write tiny-llama as a Hugging Face folder (config, safetensors weights, generation config) with a
    word-level tokenizer.json over the built-in corpus's and sentences' words: a small decoder folder to convert and
    generate text with (random weights, so the text is random words)."""
    from pathlib import Path

    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers


    folder = Path(folder)
    lm = build_tiny_llama_lm()
    lm.generation_config.pad_token_id = 0
    lm.save_pretrained(folder, safe_serialization=True)
    # Every word of the built-in corpus (the teacher-forced accuracy check's text: none becomes <unk>), then the
    # built-in sentences' words until every id of the 1000-row vocabulary has one.
    split = pre_tokenizers.Whitespace()
    corpus_words = {w.lower() for w, _ in split.pre_tokenize_str(corpus_text())}
    words = {w.strip(".,?!;:\"'()").lower() for s in (*SENTENCES, *CALIBRATION_SENTENCES) for w in s.split()} - {""}
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for word in [*sorted(corpus_words), *sorted(words - corpus_words)][:VOCAB_SIZE - len(vocab)]:
        vocab[word] = len(vocab)
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tokenizer.normalizer = normalizers.Lowercase()  # the vocabulary's words are lower case
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([split])
    tokenizer.add_special_tokens(["<unk>", "<s>", "</s>"])
    tokenizer.decoder = decoders.WordPiece(prefix="##")  # joins words with spaces
    tokenizer.save(str(folder / "tokenizer.json"))


if __name__ == "__main__":  # python -m ipexconvert.examples.llama_folder FOLDER
    import logging
    import sys

    # As in the CLI (cli.py): torchao, which transformers imports when present, logs noise nobody can act on.
    for noisy in ("torchao", "torch.utils._pytree"):
        logging.getLogger(noisy).setLevel(logging.ERROR)
    target = sys.argv[1] if len(sys.argv) > 1 else "tiny-llama-hf"
    save_tiny_llama_folder(target)
    print(f"wrote {target}: config.json, model.safetensors, generation_config.json, tokenizer.json")
