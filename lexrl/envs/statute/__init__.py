"""LegalMALR statute retrieval: options, prompts, loaders, the env (`env.py`) and its demo world."""
