"""Pure reward functions; each returns named components so the logs show what moved."""
