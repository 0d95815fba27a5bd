"""GDPR deductive reasoning with role agents on MASLegalBench (Jing et al. 2025, "MASLegalBench:
Benchmarking Multi-Agent Systems in Deductive Legal Reasoning", arXiv:2509.24922)."""
