"""LEXam law-exam answering (Fan et al. 2025): options, prompts, loader, reward and the env."""
