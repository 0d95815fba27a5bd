"""Multi-agent legal debate (papers.md sec. 3; seed 002)."""
