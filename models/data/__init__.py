"""Package data: Qwen3 tokenizer_config.json (reference copy of the spec file, used offline)."""
