"""Reflective 3-ply legal argument generation with abstention over the CATO factors (Zhang and
Ashley 2025, "Mitigating Manipulation and Enhancing Persuasion", arXiv:2506.02992)."""
