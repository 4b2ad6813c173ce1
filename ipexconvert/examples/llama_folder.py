"""`python -m ipexconvert.examples.llama_folder FOLDER`: tiny-llama saved as a Hugging Face folder with a
tokenizer, the small decoder folder the README converts and generates text with."""
from __future__ import annotations

from .sentences import CALIBRATION_SENTENCES, SENTENCES
from .tiny_llama import VOCAB_SIZE, build_tiny_llama_lm


def save_tiny_llama_folder(folder) -> None:
    """Write tiny-llama as a Hugging Face folder (config, safetensors weights, generation config) with a
    word-level tokenizer.json over built-in sentences' words: a small decoder folder to convert and
    generate text with (random weights, so the text is random words)."""
    from pathlib import Path

    from tokenizers import Tokenizer, decoders, models, pre_tokenizers


    folder = Path(folder)
    lm = build_tiny_llama_lm()
    lm.generation_config.pad_token_id = 0
    lm.save_pretrained(folder, safe_serialization=True)
    # The words of the built-in sentences, enough to give every id of the 1000-row vocabulary a word.
    words = sorted({w.strip(".,?!;:\"'()").lower() for s in (*SENTENCES, *CALIBRATION_SENTENCES) for w in s.split()} - {""})
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for word in words[:VOCAB_SIZE - len(vocab)]:
        vocab[word] = len(vocab)
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Whitespace()])
    tokenizer.add_special_tokens(["<unk>", "<s>", "</s>"])
    tokenizer.decoder = decoders.WordPiece(prefix="##")  # joins words with spaces
    tokenizer.save(str(folder / "tokenizer.json"))


if __name__ == "__main__":  # python -m ipexconvert.examples.llama_folder FOLDER
    import sys

    save_tiny_llama_folder(sys.argv[1] if len(sys.argv) > 1 else "tiny-llama-hf")
