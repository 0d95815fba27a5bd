"""GDPR deductive reasoning with role agents on MASLegalBench (papers.md sec. 2; seed 000)."""
