"""Reflective 3-ply legal argument generation with abstention over the CATO factors (seed 004)."""
